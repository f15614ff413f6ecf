//! The performance-demo register flow of document 001 §4, driven through [`Mmio`] only, so the
//! same procedure runs against the simulator and against a real board mapped through its BARs.
//!
//! Per measurement (write, read or both) it performs steps 0–11 of the document's table in order:
//! 0 version/endianness, 1–2 buffer addresses, 3 fixed parameter, 4 block amount from the link
//! multiplier, 5 stall threshold, 6 start, 7 wait, 8 poll the result register(s), 9 max stall,
//! 10–11 bit errors; then it reads the two registers the GUI shows that the table does not
//! locate (stall count, PCI status; see `crate::device::regmap`). Directions in the document's words:
//! "Write" = device→host (d2h, TX result), "Read" = host→device (h2d, RX result). A measurement
//! is a [`Mode`]; the document's words are only how it is displayed ([`document_word`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::device::regmap as reg;
use crate::engine::{Direction, EngineError, Mmio};
use crate::model::status::{decode_status, StatusWord};
use crate::bench::diagnose;
use crate::bench::results::Stopped;
use crate::model::{self, Conditions, Link, Mode};

/// The GUI's three buttons in its order: "Start Write" (d2h, TX result), "Start Read" (h2d, RX
/// result) and "Start Read/Write" (both at once, both results).
pub const MODES: [Mode; 3] = [Mode::D2h, Mode::H2d, Mode::Both];

/// Document 001's word for a mode, as the demo's JSON spells it: `write` (d2h), `read` (h2d),
/// `read_write` (both).
pub fn document_word(mode: Mode) -> &'static str {
    match mode {
        Mode::D2h => "write",
        Mode::H2d => "read",
        Mode::Both => "read_write",
    }
}

/// The document's word beside pcieperf's: "write (d2h)", "read/write (both)".
pub fn label(mode: Mode) -> String {
    format!("{} ({})", document_word(mode).replace('_', "/"), mode.name())
}

/// Value written to BAR0+0x10 (step 6).
pub fn start_code(mode: Mode) -> u32 {
    match mode {
        Mode::H2d => reg::START_READ,
        Mode::D2h => reg::START_WRITE,
        Mode::Both => reg::START_READ_WRITE,
    }
}

/// The pcieperf core's cycle counter of a mode: (low word, high word).
fn cycles_registers(mode: Mode) -> ((u8, u64), (u8, u64)) {
    match mode {
        Mode::D2h => (reg::WRITE_CYCLES, reg::WRITE_CYCLES_HIGH),
        Mode::H2d => (reg::READ_CYCLES, reg::READ_CYCLES_HIGH),
        Mode::Both => (reg::READ_WRITE_CYCLES, reg::READ_WRITE_CYCLES_HIGH),
    }
}

/// A [`Mode`] in the demo's JSON as [`document_word`] spells it.
mod document_words {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    use super::{document_word, Mode, MODES};

    pub fn serialize<S: Serializer>(mode: &Mode, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(document_word(*mode))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Mode, D::Error> {
        let word = String::deserialize(deserializer)?;
        let unknown = || D::Error::custom(format!("unknown demo mode `{word}`, expected one of {}", MODES.map(document_word).join(", ")));
        MODES.into_iter().find(|&m| document_word(m) == word).ok_or_else(unknown)
    }
}

/// How to run the flow.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoOptions {
    pub modes: Vec<Mode>,
    /// Physical addresses of the two 8 KiB host buffers (below 4 GiB, steps 1–2).
    pub buffers: [u32; 2],
    /// Step 7: wait before the first poll (the document says 30 s).
    pub wait: Duration,
    pub poll_interval: Duration,
    /// Give up when the results are still 0 after this long (a device that stopped answering).
    pub timeout: Duration,
    /// Step 4's value; None = the document's 0xA343C × link multiplier.
    pub block_amount: Option<u32>,
    /// Frequency of the device's clock, when known: the run time then comes from the per-mode
    /// cycle counters (where the device has them) instead of the 0.1 s result registers.
    pub device_clock_hz: Option<f64>,
    /// Who, when the target's link sends no SKP ordered sets or DLLPs (the engine says so):
    /// a result above the model's ceiling by up to their share is named for it.
    pub link_omits_skp_and_dllps: Option<&'static str>,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            modes: MODES.to_vec(),
            buffers: [0x1000_0000, 0x1000_2000],
            wait: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            timeout: Duration::from_secs(600),
            block_amount: None,
            device_clock_hz: None,
            link_omits_skp_and_dllps: None,
        }
    }
}

/// Block amount register value for a link (step 4): 0xA343C × link multiplier.
pub fn block_amount(link: Link) -> u32 {
    reg::BLOCK_AMOUNT_PER_MULTIPLIER * link.demo_link_multiplier()
}

/// Bytes one direction moves: 0x2000 × block amount.
pub fn demo_bytes(block_amount: u32) -> u64 {
    reg::FIXED_VALUE as u64 * block_amount as u64
}

/// A result register (0.1 s units) in seconds.
pub fn result_seconds(tenths: u32) -> f64 {
    tenths as f64 / 10.0
}

/// Usable bandwidth in MB/s (10^6 B/s), as the GUI computes it: bytes / time.
pub fn demo_mbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e6
}

/// The max-stall register (16 ns units) in µs: raw / 62.5.
pub fn stall_us(raw: u32) -> f64 {
    raw as f64 * crate::device::STALL_UNIT_NS / 1e3
}

/// The threshold register in µs: the same 16 ns unit as the max-stall register.
pub fn threshold_us(raw: u32) -> f64 {
    stall_us(raw)
}

/// One measurement's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemoResult {
    /// In the document's words (`write`, `read`, `read_write`).
    #[serde(with = "document_words")]
    pub mode: Mode,
    pub start_code: u32,
    pub bytes: u64,
    /// Result registers as read (0.1 s units); None when the mode does not use the direction.
    pub tx_tenths: Option<u32>,
    pub rx_tenths: Option<u32>,
    /// Device clock cycles of the run, from the pcieperf core's per-mode counter (None where the
    /// device has none or its clock is unknown); `time_s` then comes from it.
    pub device_cycles: Option<u64>,
    /// The longer of the two directions, as the GUI shows one time per button.
    pub time_s: f64,
    #[serde(rename = "MBps")]
    pub mbps: f64,
    /// The model's ceiling for this link and the same bytes, and the share of it reached.
    #[serde(rename = "theory_MBps")]
    pub theory_mbps: f64,
    pub percent_of_theory: f64,
    pub max_stall_raw: u32,
    pub max_stall_us: f64,
    pub stalls_over_threshold: u32,
    pub rx_bit_errors: u32,
    pub tx_bit_errors: u32,
    /// Engine clock from start to the last poll, in s (virtual for the simulator).
    pub elapsed_s: f64,
}

/// Everything the flow found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemoReport {
    pub version: u32,
    /// The version register read byte-swapped: every value was swapped on the way.
    pub byte_swapped: bool,
    pub link: Link,
    /// The conditions the model's ceilings are computed for (`bench::conditions::resolve`).
    pub conditions: Conditions,
    pub block_amount: u32,
    pub bytes: u64,
    pub threshold_raw: u32,
    pub threshold_us: f64,
    pub status: StatusWord,
    pub results: Vec<DemoResult>,
    /// What the figures say beyond the table: results above the ceiling, a status word that
    /// disagrees with the conditions.
    pub findings: Vec<String>,
    /// Why the flow ended before its last measurement (a signal, a device that stopped
    /// answering); the measurements that finished before are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

/// Register access with the endianness found at step 0 applied.
struct Bus<'a> {
    mmio: &'a mut dyn Mmio,
    swapped: bool,
}

impl Bus<'_> {
    fn read(&mut self, (bar, offset): (u8, u64)) -> Result<u32, EngineError> {
        let value = self.mmio.read32(bar, offset)?;
        Ok(if self.swapped { value.swap_bytes() } else { value })
    }

    fn write(&mut self, (bar, offset): (u8, u64), value: u32) -> Result<(), EngineError> {
        self.mmio.write32(bar, offset, if self.swapped { value.swap_bytes() } else { value })
    }
}

/// Step 0: the version register, straight or byte-swapped; anything else is not the demo endpoint.
fn check_version(mmio: &mut dyn Mmio) -> Result<(u32, bool), EngineError> {
    let value = mmio.read32(reg::VERSION.0, reg::VERSION.1)?;
    if value == reg::VERSION_RESET {
        Ok((value, false))
    } else if value == reg::VERSION_RESET.swap_bytes() {
        Ok((value.swap_bytes(), true))
    } else {
        Err(EngineError::Unsupported(format!(
            "BAR0+0x0 reads {value:#010x}: not the performance-demo endpoint (expected {:#010x}, or byte-swapped {:#010x})",
            reg::VERSION_RESET,
            reg::VERSION_RESET.swap_bytes()
        )))
    }
}

/// Run the flow for every mode in `options`. `cancel` set (a signal) or an engine error after
/// the first measurement ends the flow with the finished measurements kept (`stopped` says
/// why); during the first, it is the error ([`EngineError::Interrupted`] for `cancel`).
pub fn run_demo(mmio: &mut dyn Mmio, conditions: &Conditions, options: &DemoOptions, cancel: &AtomicBool) -> Result<DemoReport, EngineError> {
    let mut report = None::<DemoReport>;
    let mut stopped = None;
    for &mode in &options.modes {
        match run_one(mmio, conditions, mode, options, cancel) {
            Ok((result, header)) => report.get_or_insert(header).results.push(result),
            Err(error) if report.is_some() => {
                stopped = Some(match error {
                    EngineError::Interrupted => Stopped::Interrupted,
                    error => Stopped::Error { message: format!("{}: {error}", label(mode)) },
                });
                break;
            }
            Err(error) => return Err(error),
        }
    }
    let mut report = report.ok_or_else(|| EngineError::InvalidInput(crate::error::InvalidInput::new("no demo measurement chosen")))?;
    report.findings = findings(&report, options.link_omits_skp_and_dllps);
    report.stopped = stopped;
    Ok(report)
}

/// Results above the model's ceiling, and a status word that disagrees with the conditions.
fn findings(report: &DemoReport, link_omits_skp_and_dllps: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = report.results.iter().filter_map(|r| above_ceiling(report, r, link_omits_skp_and_dllps)).collect();
    let p = &report.conditions.params;
    let status = &report.status;
    if let Some(said) = status.link().filter(|l| *l != p.link) {
        out.push(format!("the status word reports link {said} but the conditions say {} ({})", p.link, report.conditions.source));
    }
    for (said, expected, what) in [(status.max_payload_bytes, p.mps_bytes, "MaxPayload"), (status.max_read_request_bytes, p.mrrs_bytes, "MaxReadRequest")] {
        if said.is_some_and(|s| s != expected) {
            out.push(format!(
                "the status word reports {what} {} bytes but the conditions say {expected} bytes ({}): the ceiling uses the conditions",
                said.unwrap_or(0),
                report.conditions.source
            ));
        }
    }
    out
}

/// A result above the model's ceiling, judged against the resolution of the timer its time came
/// from; on a link that sends no SKP ordered sets or DLLPs, an excess the model's ceiling
/// without them covers is named for that link.
fn above_ceiling(report: &DemoReport, r: &DemoResult, link_omits_skp_and_dllps: Option<&str>) -> Option<String> {
    let (resolution, timer) = match r.device_cycles {
        // Counted in whole cycles: the time is known to ± 1 cycle.
        Some(cycles) => (1.0 / cycles as f64, format!("the device's cycle counter ({cycles} cycles)")),
        // The result registers count 0.1 s: the time is known to ± 0.05 s.
        None => (0.05 / r.time_s, "the device's timer (0.1 s units)".to_string()),
    };
    let what = label(r.mode);
    let general = diagnose::above_ceiling(&what, r.mbps, r.theory_mbps, resolution, &timer)?;
    let Some(who) = link_omits_skp_and_dllps else { return Some(general) };
    let mut bare = report.conditions.clone();
    (bare.params.include_skp, bare.params.include_dllp) = (false, false);
    let without_mbps = theory_mbps(&bare, r.mode, r.bytes);
    let (measured, ceiling) = (r.mbps, r.theory_mbps);
    let excess = (measured / ceiling - 1.0) * 100.0;
    let above = format!("{what}: {measured:.2} MB/s is {excess:.2} % above the model's ceiling of {ceiling:.2} MB/s");
    if measured <= without_mbps * (1.0 + resolution) {
        return Some(format!(
            "{above}, within the {without_mbps:.2} MB/s it gives without SKP ordered sets and DLLPs: \
             {who} sends none, so its link carries data in time a real link spends on them"
        ));
    }
    // Only part of the excess is theirs: name that part, and call the rest unexplained.
    let share = (without_mbps / ceiling - 1.0) * 100.0;
    let rest = (measured / without_mbps - 1.0) * 100.0;
    Some(format!(
        "{above}; {who} sends no SKP ordered sets or DLLPs, which account for {share:.2} % (the model gives {without_mbps:.2} MB/s without them); \
         the remaining {rest:.2} % is more than the resolution of {timer} (± {:.2} %) allows: unexplained",
        resolution * 100.0
    ))
}

/// Steps 0–11 for one mode, then the stall count and status word.
fn run_one(mmio: &mut dyn Mmio, conditions: &Conditions, mode: Mode, options: &DemoOptions, cancel: &AtomicBool) -> Result<(DemoResult, DemoReport), EngineError> {
    interrupted(cancel)?;
    let link = conditions.params.link;
    let (version, swapped) = check_version(mmio)?;
    let mut bus = Bus { mmio, swapped };
    let blocks = options.block_amount.unwrap_or_else(|| block_amount(link));
    bus.write(reg::BUFFER1, options.buffers[0])?;
    bus.write(reg::BUFFER2, options.buffers[1])?;
    bus.write(reg::FIXED, reg::FIXED_VALUE)?;
    bus.write(reg::BLOCK_AMOUNT, blocks)?;
    bus.write(reg::THRESHOLD, reg::THRESHOLD_RESET)?;
    bus.write(reg::START, start_code(mode))?;
    bus.mmio.sleep(options.wait);
    let mut waited = options.wait;
    let (tx, rx) = loop {
        // The waits end early on a signal (`Mmio::sleep`); the device may still be running
        // this measurement, and nothing the flow can write stops it.
        interrupted(cancel)?;
        let tx = if mode.moves(Direction::D2h) { Some(bus.read(reg::TX_RESULT)?) } else { None };
        let rx = if mode.moves(Direction::H2d) { Some(bus.read(reg::RX_RESULT)?) } else { None };
        if tx != Some(0) && rx != Some(0) {
            break (tx, rx);
        }
        if waited >= options.timeout {
            return Err(EngineError::Timeout {
                what: format!("demo {} result register still 0 (test not started or still running)", label(mode)),
                after: waited,
            });
        }
        bus.mmio.sleep(options.poll_interval);
        waited += options.poll_interval;
    };
    let max_stall_raw = bus.read(reg::MAX_STALL)?;
    let rx_bit_errors = bus.read(reg::RX_BIT_ERRORS)?;
    let tx_bit_errors = bus.read(reg::TX_BIT_ERRORS)?;
    let stalls_over_threshold = bus.read(reg::STALL_COUNT)?;
    let status = decode_status(bus.read(reg::PCI_STATUS)?);
    let device_cycles = match options.device_clock_hz {
        Some(_) => {
            let (low, high) = cycles_registers(mode);
            let cycles = bus.read(low)? as u64 | (bus.read(high)? as u64) << 32;
            (cycles > 0).then_some(cycles)
        }
        None => None,
    };

    let bytes = demo_bytes(blocks);
    let time_s = match (device_cycles, options.device_clock_hz) {
        (Some(cycles), Some(hz)) => cycles as f64 / hz,
        _ => result_seconds(tx.unwrap_or(0).max(rx.unwrap_or(0))),
    };
    let mbps = demo_mbps(bytes, time_s);
    let theory_mbps = theory_mbps(conditions, mode, bytes);
    let result = DemoResult {
        mode,
        start_code: start_code(mode),
        bytes,
        tx_tenths: tx,
        rx_tenths: rx,
        device_cycles,
        time_s,
        mbps,
        theory_mbps,
        percent_of_theory: 100.0 * mbps / theory_mbps,
        max_stall_raw,
        max_stall_us: stall_us(max_stall_raw),
        stalls_over_threshold,
        rx_bit_errors,
        tx_bit_errors,
        elapsed_s: waited.as_secs_f64(),
    };
    let header = DemoReport {
        version,
        byte_swapped: swapped,
        link,
        conditions: conditions.clone(),
        block_amount: blocks,
        bytes,
        threshold_raw: reg::THRESHOLD_RESET,
        threshold_us: threshold_us(reg::THRESHOLD_RESET),
        status,
        results: Vec::new(),
        findings: Vec::new(),
        stopped: None,
    };
    Ok((result, header))
}

/// [`EngineError::Interrupted`] once `cancel` is set.
fn interrupted(cancel: &AtomicBool) -> Result<(), EngineError> {
    if cancel.load(Ordering::SeqCst) { Err(EngineError::Interrupted) } else { Ok(()) }
}

/// The model's ceiling for a mode under the run's conditions. Read/write reports one
/// direction's bytes over the time, so its ceiling is the slower direction's share when both run.
pub fn theory_mbps(conditions: &Conditions, mode: Mode, bytes: u64) -> f64 {
    let c = model::ceiling(conditions, mode, bytes);
    c.write_mbps.unwrap_or(c.mbps).min(c.read_mbps.unwrap_or(c.mbps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_case_6_conversions() {
        let gen1x4: Link = "gen1x4".parse().unwrap();
        assert_eq!(block_amount(gen1x4), 0xA343C * 4);
        let bytes = demo_bytes(block_amount(gen1x4));
        assert_eq!(bytes, 21_913_010_176);
        assert_eq!(format!("{:.6}", demo_mbps(bytes, result_seconds(261))), "839.578934");
        assert_eq!(format!("{:.6}", demo_mbps(bytes, result_seconds(268))), "817.649633");
        assert_eq!(format!("{:.6}", demo_mbps(bytes, result_seconds(276))), "793.949644");
        assert_eq!(stall_us(397), 6.352);
        assert_eq!(stall_us(0x18d), 6.352);
        // 0x0C35 = 3125 units of 16 ns = 50 000 ns: the GUI's "50.0 µs".
        assert_eq!(threshold_us(0x0C35), 50.0);
    }

    #[test]
    fn status_word_of_document_001() {
        let s = decode_status(0x9041_2100);
        assert_eq!((s.max_payload_bytes, s.max_read_request_bytes, s.link_speed_code, s.link_width), (Some(128), Some(512), 1, 4));
        assert_eq!(s.link_speed_gts, Some(2.5));
        assert!(s.extended_tag && s.msi_enabled);
        assert!(!(s.relaxed_ordering || s.no_snoop || s.correctable_error_reporting || s.non_fatal_error_reporting));
        assert!(!(s.fatal_error_reporting || s.unsupported_request_reporting || s.phantom_functions || s.aux_power_pm));
        assert_eq!(s.link(), Some("gen1x4".parse().unwrap()));
        let big = decode_status(0x0000_5060);
        assert_eq!((big.max_payload_bytes, big.max_read_request_bytes), (Some(1024), Some(4096)));
        assert_eq!(decode_status(0x0000_60E0).max_payload_bytes, None, "codes 6 and 7 are reserved");
    }

    #[test]
    fn modes_keep_the_documents_words() {
        let words: Vec<String> = MODES.iter().map(|&m| label(m)).collect();
        assert_eq!(words, ["write (d2h)", "read (h2d)", "read/write (both)"]);
        assert_eq!(MODES.map(start_code), [reg::START_WRITE, reg::START_READ, reg::START_READ_WRITE]);
        #[derive(Serialize, Deserialize)]
        struct Holder(#[serde(with = "document_words")] Mode);
        for mode in MODES {
            let json = serde_json::to_string(&Holder(mode)).unwrap();
            assert_eq!(json, format!("\"{}\"", document_word(mode)));
            assert_eq!(serde_json::from_str::<Holder>(&json).unwrap().0, mode);
        }
        let refused = serde_json::from_str::<Holder>("\"h2d\"").map(|h| h.0).unwrap_err().to_string();
        assert!(refused.contains("expected one of write, read, read_write"), "the demo's JSON speaks the document's words only: {refused}");
    }

    /// Document 001's flow on the simulated endpoint, d2h only.
    fn doc001_demo() -> DemoReport {
        let mut engine = crate::engine::sim::SimEngine::open("sim:doc001", &crate::engine::OpenOptions { seed: 1, ..Default::default() }).unwrap();
        let conditions = crate::engine::Engine::conditions(&engine).unwrap();
        run_demo(&mut engine, &conditions, &DemoOptions { modes: vec![Mode::D2h], ..DemoOptions::default() }, &AtomicBool::new(false)).unwrap()
    }

    /// The report with its d2h result `factor` × its ceiling, timed by `cycles` when given.
    fn above(factor: f64, cycles: Option<u64>) -> DemoReport {
        let mut report = doc001_demo();
        let r = &mut report.results[0];
        r.mbps = r.theory_mbps * factor;
        r.device_cycles = cycles;
        report
    }

    const COCOTB: Option<&str> = Some("the co-simulation's link model (cocotbext-pcie)");

    #[test]
    fn a_demo_result_above_the_ceiling_is_judged_on_the_timer_it_came_from() {
        assert!(findings(&doc001_demo(), None).is_empty(), "below its ceiling, status agreeing: nothing to say");
        let registers = findings(&above(1.0083, None), None);
        assert_eq!(registers.len(), 1, "{registers:?}");
        assert!(registers[0].contains("0.83 % above") && registers[0].contains("the device's timer (0.1 s units)"), "{}", registers[0]);
        let cycles = findings(&above(1.0083, Some(8789)), None);
        assert!(cycles[0].contains("the device's cycle counter (8789 cycles) (± 0.01 %)"), "{}", cycles[0]);
        assert!(!cycles[0].contains("0.1 s units"), "the time came from cycles: {}", cycles[0]);
    }

    /// How far above the ceiling the model's ceiling without SKP ordered sets and DLLPs lies, as
    /// a factor, for the report's d2h result.
    fn bare_factor(report: &DemoReport) -> f64 {
        let mut bare = report.conditions.clone();
        (bare.params.include_skp, bare.params.include_dllp) = (false, false);
        let r = &report.results[0];
        theory_mbps(&bare, r.mode, r.bytes) / r.theory_mbps
    }

    #[test]
    fn a_co_simulated_result_above_the_ceiling_names_the_skp_and_dllps_its_link_omits() {
        let bare = bare_factor(&doc001_demo());
        assert!(bare > 1.002, "SKPs and DLLPs take a share of the link: {bare}");
        // Above the ceiling, within what SKPs and DLLPs take: the link model that omits them.
        let within = 1.0 + (bare - 1.0) / 2.0;
        let found = findings(&above(within, Some(8789)), COCOTB);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("without SKP ordered sets and DLLPs") && found[0].contains("(cocotbext-pcie) sends none"), "{}", found[0]);
        assert!(!found[0].contains("0.1 s units") && !found[0].contains("must be wrong"), "{}", found[0]);
        // Beyond what SKPs and DLLPs take, the link model explains nothing.
        let far = findings(&above(bare * 1.05, Some(8789)), COCOTB);
        assert!(far[0].contains("sends no SKP ordered sets or DLLPs, which account for") && far[0].ends_with("allows: unexplained"), "{}", far[0]);
        assert!(far[0].contains("the remaining 5.00 %"), "{}", far[0]);
        // A link that sends them gets the general finding.
        assert!(findings(&above(within, Some(8789)), None)[0].contains("must be wrong"));
    }

    #[test]
    fn a_status_word_that_disagrees_with_the_conditions_is_named() {
        let mut report = doc001_demo();
        assert!(findings(&report, None).is_empty());
        report.status.max_payload_bytes = Some(256);
        let found = findings(&report, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("the status word reports MaxPayload 256 bytes but the conditions say 128 bytes"), "{}", found[0]);
    }

    #[test]
    fn theory_for_document_001_link() {
        let mut params = crate::model::LinkParams::typical("gen1x4".parse().unwrap());
        (params.mps_bytes, params.mrrs_bytes) = (128, 512);
        let conditions = Conditions { params, capable: None, source: "test".into(), assumed: vec![], credits: None };
        let write = theory_mbps(&conditions, Mode::D2h, 21_913_010_176);
        // 864.86 MB/s after TLP overhead (reference case 6), less when the model charges SKPs/DLLPs.
        assert!(write <= 864.87 && write > 850.0, "{write}");
    }
}
