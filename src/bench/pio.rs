//! CPU-initiated MMIO: document 000 §4's sixteen tests, run through [`Mmio`] on any target with
//! registers (a real BAR through the `bar` engine, or the simulator).
//!
//! Every access is timed on its own: the stopwatch (the TSC, or the simulator's virtual clock) is
//! read after each access, the delay is the time since the previous reading less the
//! stopwatch's own cost (Test 16, measured first). Delays are kept as a trace, summarised
//! (min/median/p99/max), bucketed in an HDR histogram, and set beside `model mmio`'s prediction.
//! The first access of each case (a cold TLB or page walk, a link leaving a low-power state, 56–59
//! µs on some hosts) is timed alone before the timed ones and kept out of every figure
//! for the device's link. `pio` touches only the offsets the user named: Tests 3, 4, 5, 10, 11
//! and 14 walk `[offset, offset + span)`, every other test stays at `offset`.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::bench::clock::{ClockInfo, HostClock};
use crate::bench::pin::Pinning;
use crate::bench::stats::Stats;
use crate::engine::{EngineError, EngineInfo, Mmio, Width};
use crate::error::InvalidInput;
use crate::model::mmio::{read_record, single_access};
use crate::model::{write_combining, Conditions, LinkParams};

/// Schema of the results document `pio` writes.
pub const SCHEMA: &str = "pcieperf.pio/2";

/// The schema before values were written in snake_case: still read.
pub const PREVIOUS_SCHEMA: &str = "pcieperf.pio/1";
/// Delays kept per case in the trace; above it every k-th access is kept (and every access
/// marked as hit by an interrupt), with k stated in the trace.
pub const TRACE_LIMIT: usize = 4096;
/// Back-to-back stopwatch readings Test 16 takes (document 000 recommends about 100 000).
pub const STOPWATCH_SAMPLES: usize = 100_000;
/// Accesses per timed block in the CPU-time tests (8, 9, 12, 13).
pub const BLOCK: u64 = 64;
/// Write-combining sizes of Test 14.
pub const WC_SIZES: [u64; 13] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// What a test does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `count` single accesses, each timed (Tests 1–4, 6, 7, 10, 11).
    Trace { write: bool, walk: bool },
    /// Write then read back each location, checking the value (Test 5).
    ReadAfterWrite,
    /// `count` blocks of 64 accesses to one address, each block timed (Tests 8, 9, 12, 13).
    CpuTime { write: bool },
    /// Sequential byte writes of 1 B … 4 KiB through write combining, then `sfence` (Test 14).
    WriteCombining,
    /// Reads of 1, 2, 4 and 8 bytes (Test 15).
    ReadSizes,
    /// Back-to-back stopwatch readings (Test 16).
    Stopwatch,
}

/// One of document 000's tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestSpec {
    pub number: u8,
    pub name: &'static str,
    kind: Kind,
    /// Fixed width (Tests 10–13: 64-bit), else `--width` (default 4).
    fixed_width: Option<Width>,
    /// Tests 1 and 2 make exactly two accesses.
    two: bool,
}

const fn spec(number: u8, name: &'static str, kind: Kind, fixed_width: Option<Width>, two: bool) -> TestSpec {
    TestSpec { number, name, kind, fixed_width, two }
}

/// Document 000 §4.3's menu, test by test.
pub const TESTS: [TestSpec; 16] = [
    spec(1, "two writes", Kind::Trace { write: true, walk: true }, None, true),
    spec(2, "two reads", Kind::Trace { write: false, walk: true }, None, true),
    spec(3, "n writes, successive addresses", Kind::Trace { write: true, walk: true }, None, false),
    spec(4, "n reads, successive addresses", Kind::Trace { write: false, walk: true }, None, false),
    spec(5, "n write + read-back pairs", Kind::ReadAfterWrite, None, false),
    spec(6, "n writes to one address", Kind::Trace { write: true, walk: false }, None, false),
    spec(7, "n reads from one address", Kind::Trace { write: false, walk: false }, None, false),
    spec(8, "64 x n writes, CPU time", Kind::CpuTime { write: true }, None, false),
    spec(9, "64 x n reads, CPU time", Kind::CpuTime { write: false }, None, false),
    spec(10, "n 64-bit writes", Kind::Trace { write: true, walk: true }, Some(Width::B8), false),
    spec(11, "n 64-bit reads", Kind::Trace { write: false, walk: true }, Some(Width::B8), false),
    spec(12, "64 x n 64-bit writes, CPU time", Kind::CpuTime { write: true }, Some(Width::B8), false),
    spec(13, "64 x n 64-bit reads, CPU time", Kind::CpuTime { write: false }, Some(Width::B8), false),
    spec(14, "write combining, sequential writes of 1 B to 4 KiB", Kind::WriteCombining, None, false),
    spec(15, "reads of 1, 2, 4 and 8 bytes", Kind::ReadSizes, None, false),
    spec(16, "stopwatch cost and TSC calibration", Kind::Stopwatch, None, false),
];

impl TestSpec {
    pub fn by_number(number: u8) -> Option<TestSpec> {
        TESTS.iter().copied().find(|t| t.number == number)
    }

    /// Whether the test stores to the device.
    pub fn writes(&self) -> bool {
        matches!(self.kind, Kind::Trace { write: true, .. } | Kind::CpuTime { write: true } | Kind::ReadAfterWrite | Kind::WriteCombining)
    }

    fn width(&self, asked: Width) -> Width {
        self.fixed_width.unwrap_or(asked)
    }

    /// Bytes from the offset the test touches.
    pub fn span_bytes(&self, width: Width, count: u64) -> u64 {
        let width = self.width(width);
        match self.kind {
            Kind::Trace { walk: true, .. } | Kind::ReadAfterWrite => width.bytes() * self.accesses(count),
            Kind::Trace { walk: false, .. } | Kind::CpuTime { .. } => width.bytes(),
            Kind::WriteCombining => *WC_SIZES.last().expect("sizes"),
            Kind::ReadSizes => 8,
            Kind::Stopwatch => 0,
        }
    }

    fn accesses(&self, count: u64) -> u64 {
        if self.two { 2 } else { count }
    }
}

/// Document 000's read-only tests: what `pio` runs when `--tests` is not given.
pub fn read_only_tests() -> Vec<u8> {
    TESTS.iter().filter(|t| !t.writes()).map(|t| t.number).collect()
}

/// `1..16`, `14,15`, `2,4..7`: test numbers, in order, without repeats.
pub fn parse_tests(text: &str) -> Result<Vec<u8>, InvalidInput> {
    let mut numbers = Vec::new();
    let bad = |part: &str| InvalidInput::new(format!("--tests '{part}': document 000's tests are numbered 1 to 16 (e.g. 1..16 or 14,15)"));
    for part in text.split(',').map(str::trim) {
        let (from, to) = part.split_once("..").unwrap_or((part, part));
        let parse = |n: &str| n.trim().parse::<u8>().ok().filter(|n| (1..=16).contains(n));
        let (Some(from), Some(to)) = (parse(from), parse(to)) else { return Err(bad(part)) };
        if from > to {
            return Err(bad(part));
        }
        numbers.extend(from..=to);
    }
    let mut seen = std::collections::BTreeSet::new();
    numbers.retain(|n| seen.insert(*n));
    Ok(numbers)
}

/// How to run the tests.
#[derive(Debug, Clone, PartialEq)]
pub struct PioOptions {
    pub tests: Vec<u8>,
    pub bar: u8,
    pub offset: u64,
    /// Width of Tests 1–9 (document 000: 32-bit).
    pub width: Width,
    /// n: accesses per test (blocks of 64 for Tests 8, 9, 12, 13; repetitions per size for 14).
    pub count: u64,
    /// The user allows writes to offsets no device profile names as scratch.
    pub destructive: bool,
    pub stopwatch_samples: usize,
}

impl Default for PioOptions {
    fn default() -> Self {
        PioOptions { tests: read_only_tests(), bar: 0, offset: 0, width: Width::B4, count: 1000, destructive: false, stopwatch_samples: STOPWATCH_SAMPLES }
    }
}

/// Test 16: what reading the stopwatch costs, and the clock behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopwatch {
    /// `tsc`, `monotonic_raw`, or `virtual` (the simulator's clock).
    pub source: String,
    pub tsc_hz: Option<f64>,
    pub samples: usize,
    pub min_ns: f64,
    pub median_ns: f64,
    pub max_ns: f64,
    /// Subtracted from every delay (the minimum, as document 000 recommends).
    pub subtracted_ns: f64,
}

/// Significant decimal digits of the delay histogram: 2 gives log-linear buckets at most 1/128
/// (0.8 %) of their value wide, fine enough to tell 520 from 530 ns and to show document 000's
/// Figures 5–12 structure (the access time, the timer interrupts' tens of µs).
pub const HISTOGRAM_DIGITS: u8 = 2;

/// One HDR histogram bucket: delays up to `upper_ns` (above the previous bucket's bound).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    pub upper_ns: u64,
    pub count: u64,
}

/// Delays as a trace: every `every`-th access (1 = all) and every access an interrupt hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub every: u64,
    pub limit: usize,
    /// Index of each kept access, its end on the stopwatch (ns since the test began) and its delay.
    pub index: Vec<u64>,
    pub at_ns: Vec<f64>,
    pub delay_ns: Vec<f64>,
}

/// The model's figure for one case on the device's link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub delay_ns: f64,
    #[serde(rename = "MBps")]
    pub mbps: f64,
    /// What the model counts.
    pub basis: String,
}

/// One row of a test: one width or size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    pub label: String,
    /// Bytes each timed sample moves (the access width, 64 accesses' worth per CPU-time block
    /// are reported per access, the whole write for Test 14).
    pub bytes: u64,
    pub samples: u64,
    /// Per access (per write for Test 14), stopwatch cost subtracted.
    pub delay: Stats,
    /// bytes / mean delay: document 000's "average throughput".
    #[serde(rename = "MBps")]
    pub mbps: f64,
    pub predicted: Option<Prediction>,
    /// measured mean delay / predicted delay.
    pub ratio_to_model: Option<f64>,
    pub gap: Option<String>,
    pub histogram: Vec<Bucket>,
    pub trace: Trace,
    /// Interrupts the engine counted itself during the case: the simulator's host timer, the
    /// device's own (UIO, VFIO).
    pub engine_interrupts: Option<u64>,
    /// Interrupts on the pinned CPU (`/proc/interrupts`) during the case.
    pub cpu_interrupts: Option<u64>,
    /// Accesses attributed to those interrupts: the slowest ones, as many as were counted, among
    /// those well above the median.
    pub interrupted: Vec<u64>,
    /// Test 5: read-backs that did not return what was written.
    pub mismatches: Option<u64>,
    /// The case's first access, timed alone before the timed ones (stopwatch cost subtracted)
    /// and left out of every figure above; None where a case has no single first access
    /// (Tests 8, 9, 12–14).
    #[serde(default)]
    pub first_access_ns: Option<f64>,
}

/// One test's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub number: u8,
    pub name: String,
    pub access: String,
    pub bar: u8,
    pub first_offset: u64,
    pub span_bytes: u64,
    pub cases: Vec<Case>,
}

/// The whole run: the `pcieperf.pio/1` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PioRun {
    pub schema: String,
    pub tool: String,
    pub version: String,
    pub simulated: bool,
    pub engine: EngineInfo,
    /// Conditions the model's predictions assume (where each came from, what is assumed); None
    /// when the target names no device with a PCIe link.
    pub model_conditions: Option<Conditions>,
    pub clock: Option<ClockInfo>,
    pub stopwatch: Stopwatch,
    pub pinning: Pinning,
    pub trace_limit: usize,
    pub count: u64,
    pub notes: Vec<String>,
    pub tests: Vec<TestResult>,
}

/// The stopwatch: the simulator's virtual clock, or the host's (TSC when invariant).
struct Watch {
    host: Option<HostClock>,
    subtract_ns: f64,
}

impl Watch {
    fn now(&self, mmio: &mut dyn Mmio) -> f64 {
        match mmio.virtual_clock_ns() {
            Some(ns) => ns,
            None => self.host.as_ref().map_or(0.0, HostClock::now_ns),
        }
    }
}

/// Delays of one case as they were measured.
struct Samples {
    first_ns: Option<f64>,
    at_ns: Vec<f64>,
    delay_ns: Vec<f64>,
    mismatches: Option<u64>,
}

/// Run the chosen tests. `conditions` feed the model's predictions; `pinning` says where the thread runs.
pub fn run_pio(mmio: &mut dyn Mmio, info: &EngineInfo, conditions: Option<&Conditions>, pinning: Pinning, options: &PioOptions) -> Result<PioRun, EngineError> {
    let params = conditions.map(|c| &c.params);
    let specs = check(mmio, options)?;
    let host = (!info.simulated).then(HostClock::new);
    let mut watch = Watch { host, subtract_ns: 0.0 };
    let stopwatch = calibrate(mmio, &mut watch, options.stopwatch_samples.max(2));
    let mut tests = Vec::new();
    for spec in specs {
        let width = spec.width(options.width);
        let cases = match spec.kind {
            Kind::Stopwatch => Vec::new(),
            Kind::ReadSizes => Width::ALL.iter().map(|&w| case(mmio, &watch, spec, w, options, params, pinning.cpu)).collect::<Result<_, _>>()?,
            Kind::WriteCombining => WC_SIZES.iter().map(|&size| wc_case(mmio, &watch, size, options, params, pinning.cpu)).collect::<Result<_, _>>()?,
            _ => vec![case(mmio, &watch, spec, width, options, params, pinning.cpu)?],
        };
        tests.push(TestResult {
            number: spec.number,
            name: spec.name.into(),
            access: access_name(spec).into(),
            bar: options.bar,
            first_offset: options.offset,
            span_bytes: spec.span_bytes(options.width, options.count),
            cases,
        });
    }
    let mut notes = Vec::new();
    if info.simulated {
        notes.push("simulated: delays are the simulator's virtual time, not a measurement".into());
    }
    Ok(PioRun {
        schema: SCHEMA.into(),
        tool: "pcieperf pio".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        simulated: info.simulated,
        engine: info.clone(),
        model_conditions: conditions.cloned(),
        clock: watch.host.as_ref().map(HostClock::info),
        stopwatch,
        pinning,
        trace_limit: TRACE_LIMIT,
        count: options.count,
        notes,
        tests,
    })
}

fn access_name(spec: TestSpec) -> &'static str {
    match spec.kind {
        Kind::ReadAfterWrite => "write+read",
        Kind::WriteCombining => "write-combined",
        Kind::Stopwatch => "none",
        _ if spec.writes() => "write",
        _ => "read",
    }
}

/// Refuse before touching anything: unknown tests, ranges outside the BAR, unconsented writes.
fn check(mmio: &mut dyn Mmio, options: &PioOptions) -> Result<Vec<TestSpec>, EngineError> {
    if options.count == 0 {
        return Err(InvalidInput::new("--count must be at least 1").into());
    }
    let size = mmio.bar_bytes(options.bar);
    let mut specs = Vec::new();
    for &number in &options.tests {
        let spec = TestSpec::by_number(number).ok_or_else(|| InvalidInput::new(format!("there is no Test {number} (1–16)")))?;
        let span = spec.span_bytes(options.width, options.count);
        let (bar, offset) = (options.bar, options.offset);
        if let (Some(size), true) = (size, span > 0) {
            if offset.checked_add(span).is_none_or(|end| end > size) {
                return Err(InvalidInput::new(format!(
                    "Test {number} ({}) touches BAR{bar}+{offset:#x}..{:#x}, beyond the BAR's {size:#x} bytes (lower --offset or --count)",
                    spec.name,
                    offset.saturating_add(span)
                ))
                .into());
            }
        }
        let alignment = spec.width(options.width).bytes();
        if span > 0 && offset % alignment != 0 {
            return Err(InvalidInput::new(format!("Test {number}: offset {offset:#x} is not {alignment}-byte aligned")).into());
        }
        if spec.writes() && !options.destructive && !mmio.is_scratch(bar, offset, span) {
            return Err(InvalidInput::new(format!(
                "Test {number} ({}) writes BAR{bar}+{offset:#x}..{:#x}, which no device profile names as scratch; writes to a device can change its state: pass --destructive if that range holds nothing you need",
                spec.name,
                offset + span
            ))
            .into());
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// Test 16: back-to-back stopwatch readings; the minimum becomes the cost every delay loses.
fn calibrate(mmio: &mut dyn Mmio, watch: &mut Watch, samples: usize) -> Stopwatch {
    let mut gaps = Vec::with_capacity(samples);
    let mut previous = watch.now(mmio);
    for _ in 0..samples {
        let now = watch.now(mmio);
        gaps.push(now - previous);
        previous = now;
    }
    let stats = Stats::of(&gaps).expect("at least two samples");
    watch.subtract_ns = stats.min.max(0.0);
    let (source, tsc_hz) = match &watch.host {
        None => ("virtual".to_string(), None),
        Some(host) => {
            let info = host.info();
            (serde_json::to_value(info.source).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(), info.tsc_hz)
        }
    };
    Stopwatch { source, tsc_hz, samples, min_ns: stats.min, median_ns: stats.median, max_ns: stats.max, subtracted_ns: watch.subtract_ns }
}

/// Interrupt counters before a case, to subtract after it.
struct Counters {
    engine: Option<u64>,
    cpu: Option<u64>,
}

impl Counters {
    fn read(mmio: &mut dyn Mmio, cpu: Option<usize>) -> Counters {
        Counters { engine: mmio.interrupts(), cpu: cpu.and_then(crate::bench::interrupts::cpu_total_now) }
    }

    fn since(&self, mmio: &mut dyn Mmio, cpu: Option<usize>) -> Counters {
        let now = Counters::read(mmio, cpu);
        Counters { engine: delta(self.engine, now.engine), cpu: delta(self.cpu, now.cpu) }
    }
}

fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

/// The test pattern value of access `i` (distinct per access, so Test 5 can check read-backs).
fn value(i: u64, width: Width) -> u64 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5) & width.mask()
}

fn one_case(mmio: &mut dyn Mmio, watch: &Watch, spec: TestSpec, width: Width, options: &PioOptions) -> Result<Samples, EngineError> {
    let n = spec.accesses(options.count);
    let mut at_ns = Vec::with_capacity(n as usize);
    let mut delay_ns = Vec::with_capacity(n as usize);
    let mut mismatches = None;
    let per_sample = if matches!(spec.kind, Kind::CpuTime { .. }) { BLOCK } else { 1 };
    // Warm-up: the first access (access 0's) is timed alone and kept out of the figures.
    let first_ns = if per_sample == 1 {
        let before = watch.now(mmio);
        access(mmio, spec, width, options, 0, &mut None)?;
        Some((watch.now(mmio) - before - watch.subtract_ns).max(0.0))
    } else {
        None
    };
    let start = watch.now(mmio);
    let mut previous = start;
    for i in 0..n {
        access(mmio, spec, width, options, i, &mut mismatches)?;
        let now = watch.now(mmio);
        at_ns.push(now - start);
        delay_ns.push(((now - previous - watch.subtract_ns) / per_sample as f64).max(0.0));
        previous = now;
    }
    Ok(Samples { first_ns, at_ns, delay_ns, mismatches })
}

/// Access `i` of a case (a block of 64 for the CPU-time tests); Test 5 counts wrong read-backs.
fn access(mmio: &mut dyn Mmio, spec: TestSpec, width: Width, options: &PioOptions, i: u64, mismatches: &mut Option<u64>) -> Result<(), EngineError> {
    let (bar, base, w) = (options.bar, options.offset, width.bytes());
    {
        match spec.kind {
            Kind::Trace { write, walk } => {
                let offset = if walk { base + i * w } else { base };
                if write {
                    mmio.write(bar, offset, width, value(i, width))?;
                } else {
                    mmio.read(bar, offset, width)?;
                }
            }
            Kind::ReadAfterWrite => {
                let offset = base + i * w;
                mmio.write(bar, offset, width, value(i, width))?;
                let back = mmio.read(bar, offset, width)?;
                *mismatches.get_or_insert(0) += u64::from(back != value(i, width));
            }
            Kind::CpuTime { write } => {
                for _ in 0..BLOCK {
                    if write {
                        mmio.write(bar, base, width, value(i, width))?;
                    } else {
                        mmio.read(bar, base, width)?;
                    }
                }
            }
            Kind::ReadSizes => {
                mmio.read(bar, base, width)?;
            }
            Kind::WriteCombining | Kind::Stopwatch => unreachable!("handled by their own cases"),
        }
    }
    Ok(())
}

fn case(mmio: &mut dyn Mmio, watch: &Watch, spec: TestSpec, width: Width, options: &PioOptions, params: Option<&LinkParams>, cpu: Option<usize>) -> Result<Case, EngineError> {
    let before = Counters::read(mmio, cpu);
    let samples = one_case(mmio, watch, spec, width, options)?;
    let counted = before.since(mmio, cpu);
    let write = spec.writes() && spec.kind != Kind::ReadAfterWrite;
    let prediction = params.and_then(|params| match spec.kind {
        Kind::ReadAfterWrite => {
            let (w, r) = (predict_write(params, width), predict_read(params, width));
            Some(Prediction { delay_ns: w.delay_ns + r.delay_ns, mbps: 0.0, basis: format!("one write ({}) then one read ({})", w.basis, r.basis) })
                .map(|mut p| {
                    p.mbps = crate::units::mbps(width.bytes() as f64, p.delay_ns);
                    p
                })
        }
        _ if write => Some(predict_write(params, width)),
        _ => Some(predict_read(params, width)),
    });
    let label = format!("{} B", width.bytes());
    Ok(summarise(label, width.bytes(), samples, prediction, counted, write))
}

/// Test 14 at one size: `count` writes of `size` bytes, each timed.
fn wc_case(mmio: &mut dyn Mmio, watch: &Watch, size: u64, options: &PioOptions, params: Option<&LinkParams>, cpu: Option<usize>) -> Result<Case, EngineError> {
    let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let before = Counters::read(mmio, cpu);
    let (mut at_ns, mut delay_ns) = (Vec::new(), Vec::new());
    let start = watch.now(mmio);
    let mut previous = start;
    for _ in 0..options.count {
        mmio.write_combined(options.bar, options.offset, &data)?;
        let now = watch.now(mmio);
        at_ns.push(now - start);
        delay_ns.push((now - previous - watch.subtract_ns).max(0.0));
        previous = now;
    }
    let counted = before.since(mmio, cpu);
    let prediction = params.map(|params| predict_wc(params, options.offset, size));
    Ok(summarise(format!("{size} B"), size, Samples { first_ns: None, at_ns, delay_ns, mismatches: None }, prediction, counted, true))
}

/// `model wc`: the TLPs 64-byte write-combining buffers turn a sequential write into.
fn predict_wc(params: &LinkParams, offset: u64, size: u64) -> Prediction {
    let row = write_combining::row(&LinkParams { start_addr: offset, ..params.clone() }, size);
    let tlps: Vec<String> = row.tlps.iter().map(|(bytes, count)| format!("{count} x {bytes} B")).collect();
    Prediction {
        delay_ns: size as f64 * 1e3 / row.wc_mbps,
        mbps: row.wc_mbps,
        basis: format!("write combining leaves {} TLPs (one {size}-byte TLP would give {:.2} MB/s)", tlps.join(" + "), row.one_tlp_mbps),
    }
}

fn predict_write(params: &LinkParams, width: Width) -> Prediction {
    let mbps = single_access(params, width.bytes()).write.mbps;
    Prediction { delay_ns: width.bytes() as f64 * 1e3 / mbps, mbps, basis: format!("back-to-back posted {}-byte write TLPs on the link", width.bytes()) }
}

fn predict_read(params: &LinkParams, width: Width) -> Prediction {
    let record = read_record(params, width.bytes(), 1);
    Prediction {
        delay_ns: record.per_read_ns,
        mbps: record.payload_mbps,
        basis: format!("request + {:.0} ns completion latency + completion, one read at a time", params.read_latency_ns),
    }
}

/// Why measured and model differ, in one sentence.
fn explain(write: bool, measured_ns: f64, predicted_ns: f64) -> String {
    let gap = measured_ns - predicted_ns;
    let ratio = measured_ns / predicted_ns;
    match (write, ratio) {
        (_, r) if (0.95..=1.05).contains(&r) => "within 5 % of the model: the link sets the pace".into(),
        (true, r) if r < 0.95 => format!(
            "{:.0} ns faster than the link allows: posted writes queue in the CPU and root complex, so the CPU sees them leave before the link carries them",
            -gap
        ),
        (true, _) => format!("{gap:.0} ns per write above the link's time: the CPU and root complex issue stores slower than the link carries them (document 000 Test 1: 110 ns vs 96 ns)"),
        (false, r) if r < 0.95 => format!("{:.0} ns below the model: the completion latency is shorter than the model assumes", -gap),
        (false, _) => format!("{gap:.0} ns per read above request + latency + completion: the host's own part (root complex, CPU uncore), or a longer completion latency than assumed"),
    }
}

fn summarise(label: String, bytes: u64, samples: Samples, predicted: Option<Prediction>, counted: Counters, write: bool) -> Case {
    let delay = Stats::of(&samples.delay_ns).unwrap_or(Stats { count: 0, min: 0.0, median: 0.0, p99: 0.0, max: 0.0, mean: 0.0, cov: 0.0, median_ci: None });
    let mbps = if delay.mean > 0.0 { crate::units::mbps(bytes as f64, delay.mean) } else { 0.0 };
    let interrupts = counted.cpu.or(counted.engine).unwrap_or(0);
    let interrupted = attribute(&samples.delay_ns, delay.median, interrupts);
    let ratio_to_model = predicted.as_ref().map(|p| delay.mean / p.delay_ns);
    let gap = predicted.as_ref().map(|p| explain(write, delay.mean, p.delay_ns));
    Case {
        label,
        bytes,
        samples: samples.delay_ns.len() as u64,
        delay,
        mbps,
        predicted,
        ratio_to_model,
        gap,
        histogram: histogram(&samples.delay_ns),
        trace: trace(&samples, &interrupted),
        engine_interrupts: counted.engine,
        cpu_interrupts: counted.cpu,
        interrupted,
        mismatches: samples.mismatches,
        first_access_ns: samples.first_ns,
    }
}

/// The `count` slowest accesses that stand well above the median (3x, and 2 µs more): an
/// interrupt that lands during an access holds the CPU for microseconds (document 000 §4.9).
fn attribute(delays: &[f64], median: f64, count: u64) -> Vec<u64> {
    let threshold = (3.0 * median).max(median + 2000.0);
    let mut slow: Vec<(usize, f64)> = delays.iter().copied().enumerate().filter(|&(_, d)| d > threshold).collect();
    slow.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut chosen: Vec<u64> = slow.into_iter().take(count as usize).map(|(i, _)| i as u64).collect();
    chosen.sort_unstable();
    chosen
}

/// Log-linear counts: every non-empty bucket of an HDR histogram of [`HISTOGRAM_DIGITS`]
/// significant digits.
fn histogram(delays: &[f64]) -> Vec<Bucket> {
    let Ok(mut hist) = Histogram::<u64>::new_with_bounds(1, 1 << 40, HISTOGRAM_DIGITS) else { return Vec::new() };
    for &d in delays {
        let _ = hist.record(d.round().clamp(1.0, (1u64 << 40) as f64) as u64);
    }
    if hist.is_empty() {
        return Vec::new();
    }
    hist.iter_recorded().map(|v| Bucket { upper_ns: v.value_iterated_to(), count: v.count_since_last_iteration() }).collect()
}

/// Keep every access up to the limit; above it every k-th, plus the interrupted ones.
fn trace(samples: &Samples, interrupted: &[u64]) -> Trace {
    let n = samples.delay_ns.len();
    let every = n.div_ceil(TRACE_LIMIT).max(1) as u64;
    let keep: Vec<u64> = (0..n as u64).filter(|i| i % every == 0 || interrupted.binary_search(i).is_ok()).collect();
    Trace {
        every,
        limit: TRACE_LIMIT,
        at_ns: keep.iter().map(|&i| samples.at_ns[i as usize]).collect(),
        delay_ns: keep.iter().map(|&i| samples.delay_ns[i as usize]).collect(),
        index: keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_lists_parse() {
        assert_eq!(parse_tests("1..16").unwrap(), (1..=16).collect::<Vec<u8>>());
        assert_eq!(parse_tests("14,15").unwrap(), vec![14, 15]);
        assert_eq!(parse_tests("2, 4..5,4").unwrap(), vec![2, 4, 5]);
        for bad in ["0", "17", "3..1", "x", ""] {
            assert!(parse_tests(bad).is_err(), "{bad}");
        }
        assert_eq!(read_only_tests(), vec![2, 4, 7, 9, 11, 13, 15, 16]);
    }

    #[test]
    fn traces_decimate_above_the_limit_and_keep_interrupted_accesses() {
        let n = TRACE_LIMIT * 3 + 1;
        let samples = Samples { first_ns: None, at_ns: (0..n).map(|i| i as f64).collect(), delay_ns: vec![100.0; n], mismatches: None };
        let t = trace(&samples, &[5]);
        assert_eq!(t.every, 4);
        assert!(t.index.contains(&5) && t.index.contains(&4) && !t.index.contains(&6));
        assert!(t.index.len() <= TRACE_LIMIT + 1);
    }

    #[test]
    fn interrupts_are_attributed_to_the_slowest_outliers_only() {
        let mut delays = vec![110.0; 100];
        delays[10] = 9000.0;
        delays[50] = 20000.0;
        delays[70] = 400.0;
        assert_eq!(attribute(&delays, 110.0, 1), vec![50]);
        assert_eq!(attribute(&delays, 110.0, 5), vec![10, 50], "a 400 ns access is not an interrupt");
        assert!(attribute(&delays, 110.0, 0).is_empty());
    }

    /// 520 and 530 ns land in different buckets, each bound within 1 % of its delays.
    #[test]
    fn histogram_tells_520_from_530_ns() {
        let buckets = histogram(&[520.0, 520.0, 530.0]);
        assert_eq!(buckets.len(), 2, "{buckets:?}");
        assert_eq!((buckets[0].count, buckets[1].count), (2, 1));
        assert!((buckets[0].upper_ns as f64 / 520.0 - 1.0).abs() < 0.01 && (buckets[1].upper_ns as f64 / 530.0 - 1.0).abs() < 0.01, "{buckets:?}");
    }

    /// A host whose first access takes 56 µs (then 110 ns per write, 1520 ns per read).
    struct ColdStart {
        now_ns: f64,
        accesses: u64,
    }

    impl ColdStart {
        fn tick(&mut self, ns: f64) {
            self.now_ns += if self.accesses == 0 { 56_000.0 } else { ns };
            self.accesses += 1;
        }
    }

    impl Mmio for ColdStart {
        fn read32(&mut self, _bar: u8, _offset: u64) -> Result<u32, EngineError> {
            self.tick(1520.0);
            Ok(0)
        }
        fn write32(&mut self, _bar: u8, _offset: u64, _value: u32) -> Result<(), EngineError> {
            self.tick(110.0);
            Ok(())
        }
        fn virtual_clock_ns(&mut self) -> Option<f64> {
            Some(self.now_ns)
        }
        fn is_scratch(&self, _bar: u8, _offset: u64, _bytes: u64) -> bool {
            true
        }
    }

    /// Tests 1 and 2 report a 56 µs first access on its own, and their figures without it.
    #[test]
    fn a_slow_first_access_is_reported_alone_and_not_in_the_figures() {
        for (test, delay_ns) in [(1u8, 110.0), (2, 1520.0)] {
            let mut mmio = ColdStart { now_ns: 0.0, accesses: 0 };
            let info = crate::engine::Engine::info(&crate::engine::sim::SimEngine::open("sim", &Default::default()).unwrap()).clone();
            let options = PioOptions { tests: vec![test], stopwatch_samples: 2, ..PioOptions::default() };
            // The stopwatch's calibration reads no register: the first access is the test's.
            let run = run_pio(&mut mmio, &info, None, Pinning { cpu: None, warnings: Vec::new() }, &options).unwrap();
            let case = &run.tests[0].cases[0];
            assert_eq!(case.first_access_ns, Some(56_000.0), "Test {test}");
            assert_eq!((case.samples, case.delay.max), (2, delay_ns), "Test {test}");
            assert!((case.mbps - 4e3 / delay_ns).abs() < 1e-9, "Test {test}: {} MB/s", case.mbps);
        }
    }

    #[test]
    fn histogram_counts_every_delay() {
        let delays: Vec<f64> = (0..1000).map(|i| 100.0 + (i % 7) as f64).chain([15_000.0]).collect();
        let buckets = histogram(&delays);
        assert_eq!(buckets.iter().map(|b| b.count).sum::<u64>(), 1001);
        assert!(buckets.last().unwrap().upper_ns >= 15_000);
    }
}
