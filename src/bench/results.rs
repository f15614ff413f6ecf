//! The results document: one versioned schema (`pcieperf.results/3`, see
//! `docs/results-schema.md`) holding the conditions, every sample, the summaries and the model's
//! prediction. Tables, CSV, HTML and comparisons in [`crate::report`] are views of it.

use serde::{Deserialize, Serialize};

use crate::bench::clock::ClockInfo;
use crate::bench::interrupts::InterruptDelta;
use crate::bench::stalls::StallSummary;
use crate::bench::stats::Stats;
use crate::bench::verify::{VerifyFailure, VerifyKind, VerifyTally};
use crate::engine::EngineInfo;
use crate::model::Limit;
use crate::pci::health::{AerChange, AerSnapshot};

/// Schema name and version written into every document.
pub const SCHEMA: &str = "pcieperf.results/3";

/// The schema before values were written in snake_case (`"Gen3"`, `"Dw3"`, `"WireAccurate"`):
/// still read, as the types accept both spellings.
pub const PREVIOUS_SCHEMA: &str = "pcieperf.results/2";

/// What a measurement point moves: one direction, or both at once (the model's type).
pub use crate::model::Mode;

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// True when no hardware was involved: every figure is simulated.
    pub simulated: bool,
    /// False when the run stopped early (Ctrl-C, a device that stopped answering).
    pub complete: bool,
    /// Why the run stopped early.
    pub stopped: Option<Stopped>,
    pub conditions: RunConditions,
    /// One per (mode, size), in the order measured.
    pub points: Vec<Point>,
    /// T(N) = N/(B·f) + m per mode, when two or more sizes were measured.
    pub fits: Vec<Fit>,
    /// Interrupts seen while measuring.
    pub interrupts: Option<InterruptDelta>,
    pub verification: VerificationSummary,
    /// What limits the result, most important first.
    pub findings: Vec<Finding>,
    /// The AER counters of the device and its path before and after measuring (real devices
    /// the kernel keeps counters for).
    #[serde(default)]
    pub link_health: Option<LinkHealth>,
}

/// Link health around a run: every AER counter of the device and each port on its path to the
/// root port, before and after, and the counters that moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkHealth {
    pub before: AerSnapshot,
    /// `None` when the device had left sysfs by the end (removed).
    pub after: Option<AerSnapshot>,
    pub changes: Vec<AerChange>,
}

/// Why a run stopped before the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Stopped {
    /// Ctrl-C.
    Interrupted,
    /// An engine error (time-out, short transfer, I/O error).
    Error { message: String },
}

impl Stopped {
    /// 130 after a signal (whichever came), 1 after an engine error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Stopped::Interrupted => crate::bench::cancel::EXIT_INTERRUPTED,
            Stopped::Error { .. } => 1,
        }
    }
}

/// The conditions a run was measured under — command, target, engine, the link's
/// [`crate::model::Conditions`] and the run's settings — enough to compare two runs honestly.
/// The document's `conditions` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConditions {
    /// `dma` or `run`.
    pub command: String,
    pub target: String,
    pub simulated: bool,
    pub engine: EngineInfo,
    /// The link and every other input of the model's ceilings, stated once for the whole run
    /// (`bench::conditions::resolve`); `None` when the target names no device with a link.
    pub link: Option<crate::model::Conditions>,
    /// Why there are no link conditions, when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_unknown: Option<String>,
    pub modes: Vec<Mode>,
    pub sizes_bytes: Vec<u64>,
    pub host: String,
    pub kernel: String,
    pub tool_version: String,
    pub seed: u64,
    /// ISO 8601, UTC, e.g. `2026-11-22T02:10:51Z`.
    pub start_time_utc: String,
    pub verify: VerifyKind,
    /// Stop when the median's 95 % interval is within ± this fraction of it (0.01 = ± 1 %).
    #[serde(alias = "cov_target")]
    pub ci_target: f64,
    /// Time budget per point on the engine's clock, in s.
    pub duration_s: f64,
    /// Time budget per point on the host clock, in s.
    pub wall_limit_s: f64,
    /// Deadline per transfer, in s.
    pub deadline_s: f64,
    pub stall_threshold_ns: f64,
    pub copy_to_user: bool,
    pub host_clock: ClockInfo,
    pub device_clock_hz: Option<f64>,
    /// Who emulates the device ("virtio (Red Hat): vendor ID 0x1af4"), when its IDs say a
    /// hypervisor does: its link is nominal and the rates are the emulator's, not PCIe's.
    #[serde(default)]
    pub emulated_by: Option<String>,
    /// The machine is a virtual machine (DMI, /sys/hypervisor): the device may be emulated too.
    #[serde(default)]
    pub virtual_machine: Option<String>,
    /// The machine as inspected before measuring (`run` only).
    #[serde(default)]
    pub machine: Option<crate::bench::machine::MachineContext>,
    /// The link of every hop on the device's path to the root port, sampled before, during and
    /// after the run; `None` when the target names no PCI device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_path: Option<crate::bench::link_watch::LinkPath>,
    /// Why there is no `link_path`, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_path_unknown: Option<String>,
    /// NVML's view of a GPU target before and after the run, or why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml: Option<crate::bench::nvml::NvmlRecord>,
    /// Where the measuring thread and buffers were relative to the device's NUMA node, when the
    /// device has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<crate::bench::numa::NumaPlacement>,
    /// The device's IOMMU group and domain type, for an engine with a PCI device sysfs lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu: Option<crate::pci::iommu::Iommu>,
    /// The kind of host memory the engine copied from and to, when the engine says
    /// (`Engine::host_memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory: Option<crate::engine::HostMemory>,
}

/// One timed step: a transfer, or a pair of concurrent transfers for `both`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Start on the engine's clock, in ns (virtual time for simulated engines).
    pub start_ns: f64,
    /// Duration on the engine's clock (first start to last end), in ns.
    pub engine_ns: f64,
    /// Duration on this host's clock around the engine call, in ns (for a simulated engine:
    /// what the simulation cost, not a transfer time).
    pub wall_ns: f64,
    /// Duration by the device's own clock, when it reports one (longest leg).
    pub device_ns: Option<f64>,
    /// Copy (and CRC) into a user buffer on the host clock, in ns (`--copy-to-user`).
    pub copy_ns: Option<f64>,
    /// For `both`: each direction's own time, its start to its end on the engine clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legs_ns: Option<Legs>,
}

/// The two directions of a `both` step, each timed on its own, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Legs {
    pub h2d_ns: f64,
    pub d2h_ns: f64,
}

/// A `both` point direction by direction, as nvbandwidth reports a bidirectional copy: each
/// direction's size over its own median time, and the sum of the two rates. The point's
/// headline rate is both directions' bytes over the time until both ended, which is at most this
/// sum (equal when the two directions take the same time).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DirectionRates {
    #[serde(rename = "h2d_median_MBps")]
    pub h2d_median_mbps: f64,
    #[serde(rename = "d2h_median_MBps")]
    pub d2h_median_mbps: f64,
    #[serde(rename = "sum_MBps")]
    pub sum_mbps: f64,
}

impl DirectionRates {
    /// From the samples' legs; `None` when no sample timed its legs.
    pub fn of(samples: &[Sample], size_bytes: u64) -> Option<DirectionRates> {
        let median = |leg: fn(&Legs) -> f64| {
            let times: Vec<f64> = samples.iter().filter_map(|s| s.legs_ns.as_ref().map(leg)).collect();
            Stats::of(&times).map(|s| size_bytes as f64 * 1e3 / s.median)
        };
        let (h2d, d2h) = (median(|l| l.h2d_ns)?, median(|l| l.d2h_ns)?);
        Some(DirectionRates { h2d_median_mbps: h2d, d2h_median_mbps: d2h, sum_mbps: h2d + d2h })
    }
}

impl Sample {
    /// The time a user of the data waits: the transfer plus the copy to user space.
    pub fn time_ns(&self) -> f64 {
        self.engine_ns + self.copy_ns.unwrap_or(0.0)
    }
}

/// Everything measured at one (mode, size).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub mode: Mode,
    /// Transfer size per direction.
    pub size_bytes: u64,
    /// Bytes moved per step: the size, or twice it for `both`.
    pub bytes_per_step: u64,
    /// Steps run before measuring (verified, not timed).
    pub warmup: usize,
    #[serde(deserialize_with = "without_slack")]
    pub samples: Vec<Sample>,
    pub summary: Option<Summary>,
    pub convergence: Convergence,
    pub stalls: StallSummary,
    pub verification: VerifyTally,
    /// The model's prediction for the same link and size; `None` when the link is unknown.
    pub ceiling: Option<PointCeiling>,
    /// Why the point has no result, when no timed transfer completed (an error: exit code 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `both`: each direction on its own and their sum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directions: Option<DirectionRates>,
}

/// A vector read without the spare capacity its growth left: a run's samples are most of the
/// memory a saved document takes when read back.
fn without_slack<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Vec<T>, D::Error> {
    let mut items = Vec::<T>::deserialize(deserializer)?;
    items.shrink_to_fit();
    Ok(items)
}

/// Distribution of one point's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Step time (engine clock, plus the copy with `--copy-to-user`), in ns.
    pub time_ns: Stats,
    /// Rate at the median time, in MB/s (10^6 B/s): the headline figure, per transfer.
    #[serde(rename = "median_MBps", alias = "median_mbps")]
    pub median_mbps: f64,
    /// 95 % confidence interval of that rate (order statistics of the times), low to high;
    /// `None` below 6 samples.
    #[serde(default, rename = "median_ci_MBps")]
    pub median_ci_mbps: Option<(f64, f64)>,
    /// Bytes of every timed step over the engine-clock time from the first timed step's start
    /// to the last one's end, everything between included (the untimed verification work
    /// too), in MB/s: the rate fio reports.
    #[serde(default, rename = "sustained_MBps", alias = "sustained_mbps")]
    pub sustained_mbps: f64,
    /// Rate at the fastest step.
    #[serde(rename = "max_MBps", alias = "max_mbps")]
    pub max_mbps: f64,
    /// Rate at the p99 step time: 99 % of steps were at least this fast.
    #[serde(rename = "p99_MBps", alias = "p99_mbps")]
    pub p99_mbps: f64,
    /// Rate at the slowest step.
    #[serde(rename = "min_MBps", alias = "min_mbps")]
    pub min_mbps: f64,
    /// Median of the host clock around the engine calls, in ns.
    pub wall_median_ns: f64,
    /// Median of the device's own durations, in ns.
    pub device_median_ns: Option<f64>,
    /// Engine-clock median minus device median, in ns: the host sees slightly more than the
    /// device (buffering, interrupt latency; document 000 §5.2).
    pub host_minus_device_ns: Option<f64>,
    /// Median copy time, in ns (`--copy-to-user`).
    pub copy_median_ns: Option<f64>,
    /// Rate at the median engine time, without the copy, in MB/s.
    #[serde(rename = "transfer_only_median_MBps", alias = "transfer_only_median_mbps")]
    pub transfer_only_median_mbps: f64,
}

/// How the repetition at one point ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Convergence {
    /// True when the median became stable (its interval fell within the target).
    pub converged: bool,
    /// `stable`, `drifting` (the rate moved with time beyond its noise: see `drift`),
    /// `duration` (engine clock), `wall_limit` (host clock), `max_samples`, `interrupted` or
    /// `error`.
    pub stop_reason: String,
    pub samples: usize,
    /// Time spent at this point on the engine's clock (virtual for simulated engines), in ns.
    pub engine_ns: f64,
    /// Time spent at this point on the host clock, in ns.
    pub wall_ns: f64,
    /// How the rate drifted, when the point stopped for it (`stop_reason` `drifting`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<PointDrift>,
}

/// A point's drift: the slope of its rate against time (least squares over its samples).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PointDrift {
    /// Change of the rate per second of elapsed time, in MB/s per s (10^6 B/s per s).
    #[serde(rename = "MBps_per_s")]
    pub mbps_per_s: f64,
    /// The same as a percentage of the point's sustained rate, per second.
    pub percent_per_s: f64,
    /// The slope in standard errors of the fit (at least 5 in magnitude for a drift).
    pub sigmas: f64,
}

impl PointDrift {
    /// The fitted drift, scaled by the point's mean (sustained) rate.
    pub fn of(drift: crate::bench::stats::Drift, sustained_mbps: f64) -> PointDrift {
        PointDrift { mbps_per_s: drift.fraction_per_s * sustained_mbps, percent_per_s: drift.fraction_per_s * 100.0, sigmas: drift.sigmas }
    }
}

/// The model's ceiling for one point ([`crate::model::Ceiling`] with how much of it the point
/// reached). The point's `ceiling` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointCeiling {
    /// In MB/s; for `both` the sum of the two directions.
    #[serde(rename = "MBps", alias = "mbps")]
    pub mbps: f64,
    pub limit: Limit,
    /// Measured median as a percentage of the ceiling.
    pub percent_reached: Option<f64>,
    /// How the ceiling was computed, when it is an approximation.
    pub note: Option<String>,
}

/// Fit of T(N) = N/(B·f) + m over one mode's sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub mode: Mode,
    /// B: the link's rate after encoding (×2 for `both`), when the link is known.
    #[serde(rename = "bus_MBps", alias = "bus_mbps")]
    pub bus_mbps: Option<f64>,
    /// f: fraction of B reached by large transfers; `None` without a known B.
    pub f: Option<f64>,
    /// m: fixed cost per transfer, in µs.
    pub m_us: f64,
    /// B·f: the asymptotic rate, in MB/s.
    #[serde(rename = "asymptotic_MBps", alias = "asymptotic_mbps")]
    pub asymptotic_mbps: f64,
    /// N½: the size reaching half the asymptotic rate, in bytes.
    pub n_half_bytes: f64,
    /// (bytes per step, measured/predicted − 1) per size.
    pub residuals: Vec<(u64, f64)>,
    /// Why the fit does not describe the measurements (m < 0, f > 1, large residuals), when it
    /// does not; such a fit is shown only with this reason, never as a result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

/// Verification over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationSummary {
    /// What the check can tell for this engine's data model.
    pub method: String,
    pub passed: u64,
    pub failed: u64,
    pub unchecked: u64,
    pub first_failure: Option<VerifyFailure>,
}

/// A cause limiting the result, named for the reader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The link trained below what both ends can do.
    LinkBelowCapability,
    /// Small transfers spend most of their time in the per-transfer cost m.
    PerTransferOverhead,
    /// Reads are bounded by completion latency × outstanding requests.
    ReadLatency,
    /// The copy to user space costs more than the transfer.
    CopyToUser,
    /// Stalls above the threshold were seen.
    Stall,
    /// Data did not verify.
    VerificationFailed,
    /// Large transfers reach most of the ceiling: the link itself is the limit.
    Link,
    /// Below the ceiling, for causes named in other findings.
    BelowCeiling,
    /// Well below the ceiling with no cause the tool can name.
    Unexplained,
    /// The engine did not say which link it drives: no ceiling.
    NoLinkInfo,
    /// The run stopped early.
    Incomplete,
    /// A point has no result: no timed transfer completed within its budget.
    NoSample,
    /// Transfer times spread widely: some transfers were much slower than the median.
    Spread,
    /// A result above the model's ceiling: one of its assumptions must be wrong.
    AboveCeiling,
    /// The T(N) fit does not describe the measurements.
    FitRejected,
    /// AER counters of the device or its path moved while measuring.
    LinkErrors,
    /// The device is emulated by a hypervisor: its link is nominal, the rates the emulator's.
    Emulated,
    /// Both at once: the reads' share is held down by the writes beside them (requests wait
    /// behind write TLPs, completions behind the writes' DLLPs), not by the link's bytes.
    ReadsBehindWrites,
    /// The receiver's flow-control credits cover less than the credit loop: the rate is set by
    /// credits returning, not by the link's bytes.
    CreditLimited,
    /// The link was slower before or after the run than during it (a GPU idles at 2.5 GT/s): a
    /// sample taken only before the run would have put the ceiling too low.
    IdleDownshift,
    /// The link was slower during the run than before and after it (it trained down under load).
    DownshiftDuringRun,
    /// A hop above the device (a switch uplink, the root port) is narrower or slower than the
    /// device's own link: the ceiling follows that hop.
    NarrowUplink,
    /// The measuring thread or the buffers are on another NUMA node than the device.
    RemoteNuma,
    /// PCIe replays during the run (NVML's replay counter, AER correctable errors).
    Replays,
    /// The engine copies from and to pageable host memory: the driver stages every copy.
    PageableStaging,
    /// NVML reported the GPU below its maximum-performance state (P0) while it copied.
    GpuPowerState,
}

impl Cause {
    /// Every cause, in declaration order: the findings audit (docs/findings.md) enumerates it
    /// and fails when a cause has no scenario where it fires and one where it stays silent.
    pub const ALL: [Cause; 26] = [
        Cause::LinkBelowCapability,
        Cause::PerTransferOverhead,
        Cause::ReadLatency,
        Cause::CopyToUser,
        Cause::Stall,
        Cause::VerificationFailed,
        Cause::Link,
        Cause::BelowCeiling,
        Cause::Unexplained,
        Cause::NoLinkInfo,
        Cause::Incomplete,
        Cause::NoSample,
        Cause::Spread,
        Cause::AboveCeiling,
        Cause::FitRejected,
        Cause::LinkErrors,
        Cause::Emulated,
        Cause::ReadsBehindWrites,
        Cause::CreditLimited,
        Cause::IdleDownshift,
        Cause::DownshiftDuringRun,
        Cause::NarrowUplink,
        Cause::RemoteNuma,
        Cause::Replays,
        Cause::PageableStaging,
        Cause::GpuPowerState,
    ];

    /// The cause's name as the results document writes it (`link_below_capability`).
    pub fn name(&self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub cause: Cause,
    pub message: String,
}

impl Results {
    /// The point for (mode, size), if measured.
    pub fn point(&self, mode: Mode, size_bytes: u64) -> Option<&Point> {
        self.points.iter().find(|p| p.mode == mode && p.size_bytes == size_bytes)
    }

    /// True when any data failed to verify.
    pub fn verification_failed(&self) -> bool {
        self.verification.failed > 0
    }

    /// Process exit code for this run: 130 after Ctrl-C, 1 after an engine error, a
    /// verification failure or a point without a result, else 0.
    pub fn exit_code(&self) -> i32 {
        match &self.stopped {
            Some(stopped) => stopped.exit_code(),
            None if self.verification_failed() || self.points.iter().any(|p| p.error.is_some()) => 1,
            None => 0,
        }
    }

    /// "co-simulated", "simulated" or "measured": the word every human output carries.
    pub fn label(&self) -> &'static str {
        self.conditions.engine.label()
    }
}
