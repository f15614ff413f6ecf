//! The DMA procedure: for each mode (h2d, d2h, both) and size, warm up, then repeat transfers
//! until the median is stable or the time budget runs out; verify every transfer; keep every
//! sample; summarise, put the model's ceiling beside it, fit T(N) over the sweep.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::bench::clock::HostClock;
use crate::bench::interrupts::{self, Snapshot};
use crate::bench::predict;
use crate::bench::results::{Convergence, PointDrift, DirectionRates, Legs, LinkHealth, Mode, Point, Results, RunConditions, Sample, Stopped, Summary, VerificationSummary, SCHEMA};
use crate::bench::stalls;
use crate::bench::stats::{Drift, Stats, StopRule, Verdict};
use crate::bench::verify::{Check, Verifier, VerifyKind, VerifyTally};
use crate::bench::link_watch::{self, LinkPath};
use crate::bench::nvml::{self, NvmlRecord};
use crate::bench::{diagnose, host, numa};
use crate::engine::pattern::crc32;
use crate::engine::{AlignedBuf, DeviceCounters, Direction, Engine, EngineError, EngineInfo, Io};
use crate::error::InvalidInput;
use crate::units::{format_size, mbps};

/// Largest transfer the host will allocate buffers for.
pub const MAX_HOST_BUFFER_BYTES: u64 = 4 << 30;

/// What to measure and how.
#[derive(Debug, Clone, PartialEq)]
pub struct DmaOptions {
    /// `dma` or `run`, recorded in the conditions.
    pub command: String,
    pub modes: Vec<Mode>,
    pub sizes: Vec<u64>,
    /// Time budget per point on the engine's clock (virtual time for simulated engines, so a
    /// simulated run is deterministic).
    pub duration: Duration,
    /// Time budget per point on the host clock: bounds the wall time a simulation may take.
    pub wall_limit: Duration,
    pub stop: StopRule,
    /// Steps before measuring starts (verified, not timed).
    pub warmup: usize,
    pub verify: VerifyKind,
    /// Seed of the test pattern; must be the seed the engine was opened with.
    pub seed: u64,
    pub stall_threshold_ns: f64,
    pub copy_to_user: bool,
    /// Deadline per transfer.
    pub deadline: Duration,
    /// Where sysfs is: the device's path, AER counters and NUMA node are read there.
    pub sysfs_root: std::path::PathBuf,
    /// Time between samples of the link along the device's path while measuring.
    pub link_sample_interval: Duration,
    /// NUMA placement of the measuring thread and the DMA buffers (`--numa`).
    pub numa: crate::engine::numa::Request,
}

impl DmaOptions {
    /// Defaults of `pcieperf dma`: 10 s per point, 1 % target, 2 warm-up steps, LFSR, 50 µs.
    pub fn new(modes: Vec<Mode>, sizes: Vec<u64>) -> Self {
        DmaOptions {
            command: "dma".into(),
            modes,
            sizes,
            duration: Duration::from_secs(10),
            wall_limit: Duration::from_secs(10),
            stop: StopRule::default(),
            warmup: 2,
            verify: VerifyKind::Lfsr,
            seed: 1,
            stall_threshold_ns: stalls::DEFAULT_THRESHOLD_NS,
            copy_to_user: false,
            deadline: Duration::from_secs(10),
            sysfs_root: crate::pci::sysfs::default_root(),
            link_sample_interval: link_watch::DEFAULT_INTERVAL,
            numa: crate::engine::numa::Request::Auto,
        }
    }
}

/// Hooks for showing progress; every method has a silent default.
pub trait Progress {
    fn begin(&mut self, _points: usize) {}
    fn point_started(&mut self, _index: usize, _mode: Mode, _size_bytes: u64) {}
    fn point_done(&mut self, _index: usize, _point: &Point) {}
    /// A simulated point is still running after another stretch of wall-clock time.
    fn point_running(&mut self, _index: usize, _what: &str) {}
    fn end(&mut self) {}
}

/// No progress output.
pub struct Quiet;
impl Progress for Quiet {}

/// Refuse sizes and modes the engine cannot take, naming the limit.
pub fn validate(info: &EngineInfo, options: &DmaOptions) -> Result<(), InvalidInput> {
    if options.modes.is_empty() || options.sizes.is_empty() {
        return Err(InvalidInput::new("nothing to measure: give at least one direction and one size"));
    }
    for &mode in &options.modes {
        if let Some(d) = mode.directions().iter().find(|d| !info.directions.contains(d)) {
            return Err(InvalidInput::new(format!("target {} cannot move data {} ({})", info.target, d.name(), info.description)));
        }
        if mode == Mode::Both && !info.concurrent {
            return Err(InvalidInput::new(format!("target {} cannot move data in both directions at once", info.target)));
        }
    }
    if !(options.stop.ci_target >= 0.0 && options.stop.ci_target.is_finite()) {
        return Err(InvalidInput::new("the confidence-interval target must be a percentage of 0 or more"));
    }
    // Host buffers per size: one per direction, a user buffer, and verification's expected
    // contents (up to two) and read-back or priming buffer.
    let buffers = options.modes.iter().map(|m| m.directions().len() as u64).max().unwrap_or(1)
        + options.copy_to_user as u64
        + if options.verify == VerifyKind::None { 0 } else { 3 };
    for &size in &options.sizes {
        let name = format_size(size);
        if size == 0 {
            return Err(InvalidInput::new("a size of 0 bytes moves nothing: sizes must be at least 1 byte"));
        }
        let align = info.alignment_bytes.max(1);
        if size % align != 0 {
            return Err(InvalidInput::new(format!(
                "size {name} ({size} bytes) is not a multiple of the {} alignment target {} requires",
                format_size(align),
                info.target
            )));
        }
        if size > info.max_transfer_bytes {
            return Err(InvalidInput::new(format!(
                "size {name} is larger than the largest transfer target {} takes ({})",
                info.target,
                format_size(info.max_transfer_bytes)
            )));
        }
        if let Some(capacity) = info.capacity_bytes.filter(|&c| size > c) {
            return Err(InvalidInput::new(format!(
                "size {name} is larger than the device space of target {} ({})",
                info.target,
                format_size(capacity)
            )));
        }
        if size > MAX_HOST_BUFFER_BYTES {
            return Err(InvalidInput::new(format!("size {name} is larger than the 4GiB host buffer limit")));
        }
        if let Some(available) = available_memory_bytes().filter(|&a| size * buffers > a / 2) {
            return Err(InvalidInput::new(format!(
                "size {name} needs {buffers} host buffers but only {} of memory is available",
                format_size(available)
            )));
        }
    }
    Ok(())
}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib * 1024)
}

/// Run the procedure. Only bad input is an error; engine failures and Ctrl-C (`cancel`) end
/// the run early and are recorded in [`Results::stopped`], with every result so far kept.
pub fn measure(
    engine: &mut dyn Engine,
    options: &DmaOptions,
    cancel: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Results, InvalidInput> {
    let info = engine.info().clone();
    validate(&info, options)?;
    let sys = options.sysfs_root.clone();
    // Placed before the first buffer is allocated, so the buffers are bound from their first page.
    let mut placer = numa::Placer::start(options.numa, &sys, info.pci_address.as_deref(), &info.kind)?;
    let mut link = crate::bench::conditions::resolve_in(engine, &sys);
    let clock = HostClock::new();
    let mut verifier = Verifier::new(options.verify, options.seed, info.data_model);
    // A simulated run's host interrupts say nothing about the simulated device: none counted.
    let irq_before = if info.simulated { None } else { Snapshot::read() };
    let aer_before = info.pci_address.as_deref().and_then(|a| crate::pci::health::snapshot(&sys, a));
    let mut results = Results {
        schema: SCHEMA.into(),
        simulated: info.simulated,
        complete: false,
        stopped: None,
        conditions: RunConditions { host_memory: engine.host_memory(), ..conditions(&info, &link, options, &clock) },
        points: Vec::new(),
        fits: Vec::new(),
        interrupts: None,
        verification: VerificationSummary { method: verifier.method(), passed: 0, failed: 0, unchecked: 0, first_failure: None },
        findings: Vec::new(),
        link_health: None,
    };
    let plan: Vec<(Mode, u64)> = options.modes.iter().flat_map(|&m| options.sizes.iter().map(move |&s| (m, s))).collect();
    progress.begin(plan.len());
    let (watch, nvml_unavailable) = match info.pci_address.as_deref() {
        Some(address) => {
            let (gpu, why_not) = match is_gpu(&info, &sys, address).then(|| nvml::open(address)) {
                Some(Ok(gpu)) => (Some(std::sync::Arc::new(gpu)), None),
                Some(Err(why)) => (None, Some(why)),
                None => (None, None),
            };
            (Some(link_watch::start(&sys, address, options.link_sample_interval, gpu)), why_not)
        }
        None => (None, None),
    };
    let gpu_name = watch.as_ref().and_then(|w| w.gpu()).and_then(nvml::Gpu::name);
    let mut held_by_kernel = false;
    for (index, &(mode, size)) in plan.iter().enumerate() {
        progress.point_started(index, mode, size);
        let mut runner = PointRunner::new(engine, &clock, &mut verifier, options, mode, size, &mut placer);
        let stopped = runner.run(cancel, &mut |what: &str| progress.point_running(index, what));
        held_by_kernel |= runner.held_by_kernel;
        runner.check_placement(&mut placer);
        let mut point = runner.finish(link.as_ref().ok(), stopped.as_ref());
        if point.samples.is_empty() && stopped.is_none() {
            point.error = Some(no_sample(&point, options));
        }
        add_tally(&mut results.verification, &point.verification);
        progress.point_done(index, &point);
        results.points.push(point);
        if stopped.is_some() {
            results.stopped = stopped;
            break;
        }
    }
    let path = watch.map(link_watch::Watch::finish);
    record_path(&mut results, &mut link, path, nvml_unavailable, gpu_name);
    results.conditions.numa = Some(placer.finish(&sys));
    if let (Some(before), Some(after)) = (irq_before, Snapshot::read()) {
        let keys: Vec<String> = info.pci_address.iter().cloned().chain([info.kind.clone()]).collect();
        let vectors = info.pci_address.as_deref().map_or_else(Vec::new, |a| interrupts::device_vectors(&sys.join("bus/pci/devices").join(a)));
        results.interrupts = Some(interrupts::delta(&before, &after, &vectors, &keys));
    }
    results.link_health = aer_before.map(|before| {
        let after = crate::pci::health::snapshot(&sys, info.pci_address.as_deref().unwrap_or_default());
        let changes = after.as_ref().map(|a| before.changes(a)).unwrap_or_default();
        LinkHealth { before, after, changes }
    });
    results.conditions.host_clock = clock.finish();
    results.verification.method = verifier.method();
    results.complete = results.stopped.is_none();
    results.fits = predict::fits(&results.points, link.as_ref().ok());
    if results.conditions.emulated_by.is_some() {
        predict::without_comparison(&mut results.points, &mut results.fits);
    }
    results.findings = diagnose::findings(&results);
    progress.end();
    if held_by_kernel {
        // Its read-back and priming buffers may be what the kernel still holds.
        std::mem::forget(verifier);
    }
    Ok(results)
}

/// Whether the device at `address` is a GPU NVML may know: the `cuda` engine's, or one with
/// NVIDIA's vendor ID.
fn is_gpu(info: &EngineInfo, sys: &std::path::Path, address: &str) -> bool {
    let vendor = std::fs::read_to_string(sys.join("bus/pci/devices").join(address).join("vendor")).unwrap_or_default();
    info.kind == "cuda" || vendor.trim().eq_ignore_ascii_case("0x10de")
}

/// Put the sampled path (or why there is none) and NVML's record into the results, and
/// recompute every ceiling for the link seen during the run.
fn record_path(results: &mut Results, link: &mut Result<crate::model::Conditions, String>, path: Option<LinkPath>, nvml_unavailable: Option<String>, gpu_name: Option<String>) {
    let c = &mut results.conditions;
    c.nvml = match (&nvml_unavailable, &path) {
        (Some(why), _) => Some(NvmlRecord::unavailable(why.clone())),
        (None, Some(p)) if gpu_name.is_some() || p.before.as_ref().is_some_and(|s| s.gpu.is_some()) => Some(NvmlRecord {
            available: true,
            reason: None,
            name: gpu_name,
            before: p.before.as_ref().and_then(|s| s.gpu.clone()),
            after: p.after.as_ref().and_then(|s| s.gpu.clone()),
        }),
        _ => None,
    };
    let Some(path) = path.filter(|p| p.before.is_some() || !p.during.is_empty()) else {
        c.link_path_unknown = Some(match &c.engine.pci_address {
            Some(a) => format!("PCI {a} has no link attributes in sysfs (current_link_speed): its path could not be sampled"),
            None => format!("target {} names no PCI device: no path to sample", c.target),
        });
        return;
    };
    if let Ok(conditions) = link.as_ref() {
        let applied = path.apply(conditions.clone());
        for point in &mut results.points {
            point.ceiling = Some(point_ceiling(&applied, point.mode, point.size_bytes, point.summary.as_ref()));
        }
        c.link = Some(applied.clone());
        *link = Ok(applied);
    }
    c.link_path = Some(path);
}

/// The model's ceiling for one point, with how much of it the point reached.
fn point_ceiling(link: &crate::model::Conditions, mode: Mode, size: u64, summary: Option<&Summary>) -> crate::bench::results::PointCeiling {
    let c = predict::ceiling(link, mode, size);
    match summary {
        Some(s) => predict::with_measured(c, s.median_mbps),
        None => c,
    }
}

/// Why a point has no result: its budget ran out before a timed transfer completed.
fn no_sample(point: &Point, options: &DmaOptions) -> String {
    format!(
        "{} {}: no timed transfer completed within the {} s budget (--duration; {} warm-up transfer(s) took {:.3} s of it): \
         give more time or a smaller size",
        point.mode.name(),
        format_size(point.size_bytes),
        options.duration.as_secs_f64(),
        point.warmup,
        point.convergence.engine_ns / 1e9
    )
}

fn add_tally(total: &mut VerificationSummary, tally: &VerifyTally) {
    total.passed += tally.passed;
    total.failed += tally.failed;
    total.unchecked += tally.unchecked;
    if total.first_failure.is_none() {
        total.first_failure = tally.first_failure.clone();
    }
}

fn conditions(info: &EngineInfo, link: &Result<crate::model::Conditions, String>, options: &DmaOptions, clock: &HostClock) -> RunConditions {
    RunConditions {
        command: options.command.clone(),
        target: info.target.clone(),
        simulated: info.simulated,
        engine: info.clone(),
        link: link.as_ref().ok().cloned(),
        link_unknown: link.as_ref().err().cloned(),
        modes: options.modes.clone(),
        sizes_bytes: options.sizes.clone(),
        host: host::hostname(),
        kernel: host::kernel(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        seed: options.seed,
        start_time_utc: host::now_utc_iso(),
        verify: options.verify,
        ci_target: options.stop.ci_target,
        duration_s: options.duration.as_secs_f64(),
        wall_limit_s: options.wall_limit.as_secs_f64(),
        deadline_s: options.deadline.as_secs_f64(),
        stall_threshold_ns: options.stall_threshold_ns,
        copy_to_user: options.copy_to_user,
        host_clock: clock.info(),
        device_clock_hz: info.device_clock_hz,
        emulated_by: info.pci_address.as_deref().and_then(|a| crate::pci::emulated::emulator_of(&options.sysfs_root, a)),
        virtual_machine: if info.simulated { None } else { crate::pci::emulated::virtual_machine(&options.sysfs_root) },
        machine: None,
        link_path: None,
        link_path_unknown: None,
        nvml: None,
        numa: None,
        iommu: info.pci_address.as_deref().and_then(|a| crate::pci::iommu::read(&options.sysfs_root, a)),
        host_memory: None,
    }
}

/// Host buffers for one point. The DMA buffers are page-aligned (huge pages from 2 MiB on), as
/// fio's are, so engines that need alignment (O_DIRECT) move them without a bounce copy. The
/// user buffer is page-aligned too, as an application's large buffers are: the copy to it then
/// costs what the system's memcpy costs, not what a misaligned destination costs.
struct Buffers {
    h2d: AlignedBuf,
    d2h: AlignedBuf,
    user: AlignedBuf,
}

/// One point being measured.
struct PointRunner<'a> {
    engine: &'a mut dyn Engine,
    clock: &'a HostClock,
    verifier: &'a mut Verifier,
    options: &'a DmaOptions,
    mode: Mode,
    size: u64,
    buffers: Buffers,
    steps: usize,
    samples: Vec<Sample>,
    counters: Vec<DeviceCounters>,
    tally: VerifyTally,
    stop_reason: &'static str,
    /// The rate's drift when the point stopped for it.
    drift: Option<Drift>,
    engine_ns: f64,
    wall_ns: f64,
    /// The engine abandoned a transfer whose I/Os the kernel still holds
    /// ([`EngineError::Held`]): the buffers are never freed.
    held_by_kernel: bool,
}

impl<'a> PointRunner<'a> {
    fn new(
        engine: &'a mut dyn Engine,
        clock: &'a HostClock,
        verifier: &'a mut Verifier,
        options: &'a DmaOptions,
        mode: Mode,
        size: u64,
        placer: &mut numa::Placer,
    ) -> Self {
        let len = size as usize;
        let mut dma_buffer = |needed: bool| {
            let len = if needed { len } else { 0 };
            AlignedBuf::on_node(len, placer.node()).unwrap_or_else(|why| {
                placer.bind_failed(why);
                AlignedBuf::new(len)
            })
        };
        let buffers = Buffers {
            h2d: dma_buffer(mode.moves(Direction::H2d)),
            d2h: dma_buffer(mode.moves(Direction::D2h)),
            user: dma_buffer(options.copy_to_user),
        };
        verifier.buffers_changed();
        PointRunner {
            engine,
            clock,
            verifier,
            options,
            mode,
            size,
            buffers,
            steps: 0,
            samples: Vec::new(),
            counters: Vec::new(),
            tally: VerifyTally::default(),
            stop_reason: "",
            drift: None,
            engine_ns: 0.0,
            wall_ns: 0.0,
            held_by_kernel: false,
        }
    }

    /// Repeat steps until a stop condition; `Some` when the whole run must stop.
    fn run(&mut self, cancel: &AtomicBool, running: &mut dyn FnMut(&str)) -> Option<Stopped> {
        let (engine0, wall0) = (self.engine.now_ns(), self.clock.now_ns());
        let budget_ns = self.options.duration.as_secs_f64() * 1e9;
        // Simulated points are budgeted in virtual time only (reproducible for a seed): the wall
        // clock never ends them. On a loaded machine a co-simulation takes longer, not less
        // data: every `sim_wall_cap` of wall-clock time the point reports how far it got.
        let simulated = self.engine.info().simulated;
        let wall_budget_ns = if simulated { f64::INFINITY } else { self.options.wall_limit.as_secs_f64() * 1e9 };
        let report_every_ns = sim_wall_cap(self.options).as_secs_f64() * 1e9;
        let mut next_report_ns = report_every_ns;
        let (mut starts, mut times): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
        let stopped = loop {
            if cancel.load(Ordering::SeqCst) {
                self.stop_reason = "interrupted";
                break Some(Stopped::Interrupted);
            }
            match self.step() {
                Err(EngineError::Interrupted) => {
                    self.stop_reason = "interrupted";
                    break Some(Stopped::Interrupted);
                }
                Err(EngineError::Held { message, interrupted: true }) => {
                    // The interrupted document has no room for a message: say it here, once.
                    eprintln!("pcieperf: {message}");
                    self.held_by_kernel = true;
                    self.stop_reason = "interrupted";
                    break Some(Stopped::Interrupted);
                }
                Err(error) => {
                    self.held_by_kernel |= matches!(error, EngineError::Held { .. });
                    self.stop_reason = "error";
                    break Some(self.stopped_by(error));
                }
                Ok(Some(sample)) => {
                    starts.push(sample.start_ns);
                    times.push(sample.time_ns());
                }
                Ok(None) => {}
            }
            self.engine_ns = self.engine.now_ns() - engine0;
            self.wall_ns = self.clock.now_ns() - wall0;
            if self.samples.len() >= self.options.stop.max_samples {
                self.stop_reason = "max_samples";
                break None;
            }
            if self.options.stop.judges_at(times.len()) {
                match self.options.stop.judge(&starts, &times, self.engine_ns) {
                    Verdict::Continue => {}
                    Verdict::Stable => {
                        self.stop_reason = "stable";
                        break None;
                    }
                    Verdict::Drifting(drift) => {
                        self.stop_reason = "drifting";
                        self.drift = Some(drift);
                        break None;
                    }
                }
            }
            if self.engine_ns >= budget_ns {
                self.stop_reason = "duration";
                break None;
            }
            if self.wall_ns >= wall_budget_ns {
                self.stop_reason = "wall_limit";
                break None;
            }
            if simulated && self.wall_ns >= next_report_ns {
                next_report_ns += report_every_ns;
                running(&format!(
                    "{:.0} s of wall-clock time, {} transfers, {} of {} {} time: still running (the budget is {} time; Ctrl-C ends it with the results so far)",
                    self.wall_ns / 1e9,
                    self.steps,
                    crate::units::format_ns(self.engine_ns),
                    crate::units::format_ns(budget_ns),
                    self.engine.info().label(),
                    self.engine.info().label(),
                ));
            }
        };
        let stopped = stopped.or_else(|| self.check_last_write());
        self.engine_ns = self.engine.now_ns() - engine0;
        self.wall_ns = self.clock.now_ns() - wall0;
        stopped
    }

    /// The error that ends the run; a loopback that lost bytes first says where its data went
    /// wrong (a verification failure), not only that the rest never came.
    fn stopped_by(&mut self, error: EngineError) -> Stopped {
        let what = format!("{} {} transfer", self.mode.name(), format_size(self.size));
        let Some(failure) = self.verifier.take_lost_in_loop() else {
            return Stopped::Error { message: format!("{what}: {error}") };
        };
        let message = format!(
            "{what}: {} loopback: data differs from byte {} on (bytes lost or altered in the loop); then {error}",
            failure.direction.name(),
            failure.offset.unwrap_or_default()
        );
        self.tally.add(Check::Failed(failure));
        Stopped::Error { message }
    }

    /// After the point's last step: read its last h2d write back when the sampling did not, so
    /// damage a late write left is found however short the point (verify.rs).
    fn check_last_write(&mut self) -> Option<Stopped> {
        match self.verifier.check_last_write(&mut *self.engine, self.options.deadline) {
            Ok(Some(check)) => self.tally.last_write_read_back(check),
            Ok(None) => {}
            Err(EngineError::Interrupted) => {
                self.stop_reason = "interrupted";
                return Some(Stopped::Interrupted);
            }
            Err(error) => {
                self.stop_reason = "error";
                let what = format!("{} {} read-back of the last write", self.mode.name(), format_size(self.size));
                return Some(Stopped::Error { message: format!("{what}: {error}") });
            }
        }
        None
    }

    /// One timed step; `Ok(None)` during warm-up.
    fn step(&mut self) -> Result<Option<Sample>, EngineError> {
        let deadline = self.options.deadline;
        let copy = self.options.copy_to_user;
        let crc_too = self.verifier.enabled();
        let warming_up = self.warming_up();
        let (clock, engine, verifier) = (self.clock, &mut *self.engine, &mut *self.verifier);
        let Buffers { h2d, d2h, user } = &mut self.buffers;
        let mut copy_ns = None;
        let mut checks = Vec::with_capacity(2);
        let (legs, wall_ns) = match self.mode {
            Mode::H2d => {
                if copy {
                    verifier.before_h2d(user, false);
                    copy_ns = Some(timed_copy(clock, user, h2d, crc_too));
                } else {
                    verifier.before_h2d(h2d, false);
                }
                let wall0 = clock.now_ns();
                let t = engine.transfer(Io::H2d(h2d), 0, deadline)?;
                let wall_ns = clock.since_ns(wall0);
                checks.push(verifier.after_h2d(engine, &t, h2d, false, deadline)?);
                (vec![t], wall_ns)
            }
            Mode::D2h => {
                verifier.before_d2h(engine, d2h, deadline)?;
                let wall0 = clock.now_ns();
                let t = match engine.transfer(Io::D2h(d2h), 0, deadline) {
                    Ok(t) => t,
                    Err(error) => return Err(verifier.read_failed(Direction::D2h, d2h, error)),
                };
                let wall_ns = clock.since_ns(wall0);
                checks.push(copy_and_check_d2h(clock, verifier, d2h, user, copy, crc_too, &mut copy_ns));
                (vec![t], wall_ns)
            }
            Mode::Both => {
                // Loopback priming moves the stream: prepare d2h before filling h2d.
                verifier.before_d2h(engine, d2h, deadline)?;
                verifier.before_h2d(h2d, true);
                let wall0 = clock.now_ns();
                let (th, td) = match engine.transfer_both(h2d, d2h, 0, deadline) {
                    Ok(legs) => legs,
                    Err(error) => return Err(verifier.read_failed(Direction::D2h, d2h, error)),
                };
                let wall_ns = clock.since_ns(wall0);
                checks.push(verifier.after_h2d(engine, &th, h2d, true, deadline)?);
                checks.push(copy_and_check_d2h(clock, verifier, d2h, user, copy, crc_too, &mut copy_ns));
                (vec![th, td], wall_ns)
            }
        };
        for check in checks {
            self.tally.add(check);
        }
        self.steps += 1;
        if warming_up {
            return Ok(None);
        }
        let start_ns = legs.iter().map(|t| t.start_ns).fold(f64::INFINITY, f64::min);
        // The transfer ends before any copy the engine modelled on its own clock.
        let end_ns = legs.iter().map(|t| t.end_ns - t.copy_ns.unwrap_or(0.0)).fold(f64::NEG_INFINITY, f64::max);
        let device_ns = legs.iter().filter_map(|t| t.device.device_ns).reduce(f64::max);
        let modelled_copy_ns = legs.iter().filter_map(|t| t.copy_ns).reduce(|a, b| a + b);
        // One clock per sample: a simulated engine's copy is its own (or none), never the host's.
        if modelled_copy_ns.is_some() || engine.info().simulated {
            copy_ns = modelled_copy_ns;
        }
        let leg_ns = |t: &crate::engine::Transfer| t.host_ns() - t.copy_ns.unwrap_or(0.0);
        let legs_ns = (self.mode == Mode::Both).then(|| Legs { h2d_ns: leg_ns(&legs[0]), d2h_ns: leg_ns(&legs[1]) });
        let sample = Sample { start_ns, engine_ns: end_ns - start_ns, wall_ns, device_ns, copy_ns, legs_ns };
        self.counters.extend(legs.into_iter().map(|t| t.device));
        self.samples.push(sample.clone());
        Ok(Some(sample))
    }

    /// Locate sampled pages of every buffer the point moved data through: the engine's own
    /// where it has them, else the point's DMA and user buffers.
    fn check_placement(&self, placer: &mut numa::Placer) {
        if self.steps == 0 {
            return;
        }
        match self.engine.own_host_buffers() {
            Some(buffers) => buffers.into_iter().for_each(|(pointer, len)| placer.check(pointer, len)),
            None => [&self.buffers.h2d, &self.buffers.d2h, &self.buffers.user].into_iter().filter(|b| !b.is_empty()).for_each(|b| placer.check(b.as_ptr(), b.len())),
        }
    }

    /// Whether the next step is a warm-up step: the first `warmup` steps, cut short when they
    /// have used a tenth of either budget (a 512 MiB transfer can take seconds).
    fn warming_up(&self) -> bool {
        let tenth = |budget: Duration| budget.as_secs_f64() * 1e9 / 10.0;
        self.samples.is_empty()
            && self.steps < self.options.warmup
            && self.engine_ns < tenth(self.options.duration)
            && self.wall_ns < tenth(self.options.wall_limit)
    }

    /// The point as measured so far.
    fn finish(self, link: Option<&crate::model::Conditions>, stopped: Option<&Stopped>) -> Point {
        if self.held_by_kernel {
            // Left allocated on purpose: the kernel may still DMA into them.
            std::mem::forget(self.buffers);
        }
        let bytes_per_step = self.size * self.mode.directions().len() as u64;
        let summary = summarise(&self.samples, bytes_per_step, self.engine.info().copies_per_transfer);
        let engine_times: Vec<f64> = self.samples.iter().map(|s| s.engine_ns).collect();
        let stalls = stalls::from_device(&self.counters, self.options.stall_threshold_ns)
            .unwrap_or_else(|| stalls::from_durations(&engine_times, self.options.stall_threshold_ns));
        let directions = DirectionRates::of(&self.samples, self.size);
        let ceiling = link.map(|l| point_ceiling(l, self.mode, self.size, summary.as_ref()));
        Point {
            mode: self.mode,
            size_bytes: self.size,
            bytes_per_step,
            warmup: self.steps - self.samples.len(),
            convergence: Convergence {
                converged: self.stop_reason == "stable",
                stop_reason: if stopped.is_some() && self.stop_reason.is_empty() { "error" } else { self.stop_reason }.into(),
                samples: self.samples.len(),
                engine_ns: self.engine_ns,
                wall_ns: self.wall_ns,
                drift: self.drift.zip(summary.as_ref()).map(|(d, s)| PointDrift::of(d, s.sustained_mbps)),
            },
            samples: self.samples,
            summary,
            stalls,
            verification: VerifyTally { last_write_checked: self.verifier.last_write_checked(), ..self.tally },
            ceiling,
            error: None,
            directions,
        }
    }
}

/// Copy `from` into `to` on the host clock, with a CRC32 of the copy when `crc_too` (the user
/// side's own check, document 002); returns the time in ns.
fn timed_copy(clock: &HostClock, from: &[u8], to: &mut [u8], crc_too: bool) -> f64 {
    let t0 = clock.now_ns();
    to.copy_from_slice(from);
    if crc_too {
        black_box(crc32(black_box(to)));
    }
    clock.since_ns(t0)
}

/// How often a simulated point that is still running says so, in wall-clock time: far above
/// what a simulation on `sim` needs, reached by co-simulations on a loaded machine.
pub fn sim_wall_cap(options: &DmaOptions) -> Duration {
    (options.wall_limit * 10).max(Duration::from_secs(60))
}

/// After a d2h transfer: the optional copy to user space, then the check (of the user copy
/// when there is one, so a bad copy is caught too), which poisons what it checked.
fn copy_and_check_d2h(
    clock: &HostClock,
    verifier: &mut Verifier,
    d2h: &mut [u8],
    user: &mut [u8],
    copy: bool,
    crc_too: bool,
    copy_ns: &mut Option<f64>,
) -> Check {
    if copy {
        *copy_ns = Some(copy_ns.unwrap_or(0.0) + timed_copy(clock, d2h, user, crc_too));
        verifier.after_d2h(user)
    } else {
        verifier.after_d2h(d2h)
    }
}

/// Distribution of a point's samples, each standing for `copies` timed copies of its bytes
/// (one, except where an engine times several per sample and reports one's time); `None`
/// without samples.
pub fn summarise(samples: &[Sample], bytes_per_step: u64, copies: u32) -> Option<Summary> {
    let times: Vec<f64> = samples.iter().map(Sample::time_ns).collect();
    let time_ns = Stats::of(&times)?;
    let median_of = |values: Vec<f64>| Stats::of(&values).map(|s| s.median);
    let bytes = bytes_per_step as f64;
    let engine_median = median_of(samples.iter().map(|s| s.engine_ns).collect()).unwrap_or(time_ns.median);
    let device_median_ns = median_of(samples.iter().filter_map(|s| s.device_ns).collect());
    let first_start_ns = samples.iter().map(|s| s.start_ns).fold(f64::INFINITY, f64::min);
    let copies = f64::from(copies.max(1));
    let last_end_ns = samples.iter().map(|s| s.start_ns + s.engine_ns * copies).fold(f64::NEG_INFINITY, f64::max);
    Some(Summary {
        median_mbps: mbps(bytes, time_ns.median),
        median_ci_mbps: time_ns.median_ci.map(|(fast, slow)| (mbps(bytes, slow), mbps(bytes, fast))),
        sustained_mbps: mbps(bytes * copies * samples.len() as f64, last_end_ns - first_start_ns),
        max_mbps: mbps(bytes, time_ns.min),
        p99_mbps: mbps(bytes, time_ns.p99),
        min_mbps: mbps(bytes, time_ns.max),
        wall_median_ns: median_of(samples.iter().map(|s| s.wall_ns).collect()).unwrap_or(0.0),
        device_median_ns,
        host_minus_device_ns: device_median_ns.map(|d| engine_median - d),
        copy_median_ns: median_of(samples.iter().filter_map(|s| s.copy_ns).collect()),
        transfer_only_median_mbps: mbps(bytes, engine_median),
        time_ns,
    })
}
