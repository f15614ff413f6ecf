//! The host clock (document 000 §5.2 measures with the TSC) and how it relates to the others.
//!
//! Three clocks can time a transfer:
//! - the engine's clock ([`crate::engine::Engine::now_ns`], [`crate::engine::Transfer`]): the
//!   host's monotonic clock for real engines, virtual time for simulated ones;
//! - the device's own counter ([`crate::engine::DeviceCounters::device_ns`]), when it has one;
//! - this module's host clock, read around every call: wall time as this process sees it.
//!
//! The host clock is the TSC calibrated against `CLOCK_MONOTONIC_RAW` on x86_64 when the CPU
//! says the TSC is invariant (`constant_tsc` and `nonstop_tsc`), else `CLOCK_MONOTONIC_RAW`.
//! Both are immune to NTP slewing; the TSC is cheaper to read (tens of ns).
//!
//! Calibration costs no fixed wait. At start, the clock times itself (document 000 Test 16):
//! [`TIMESTAMP_PAIRS`] back-to-back reads give the cost of one timestamp pair, and the same
//! loop is the first calibration window (TSC ticks against CLOCK_MONOTONIC_RAW). At the end of
//! the run, [`HostClock::finish`] calibrates again over the whole run; the two rates and their
//! difference are reported, so a drifting or mis-calibrated TSC shows in the results.

use serde::{Deserialize, Serialize};

/// Which source the host clock reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// Time-stamp counter, calibrated against CLOCK_MONOTONIC_RAW.
    Tsc,
    /// CLOCK_MONOTONIC_RAW.
    MonotonicRaw,
}

/// What a results document records about the host clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    pub source: ClockSource,
    /// TSC ticks per second when `source` is `tsc`: the rate host-clock figures were converted
    /// with (calibrated at start).
    pub tsc_hz: Option<f64>,
    /// The same rate calibrated over the whole run (start to end), when the run finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_hz_run: Option<f64>,
    /// Cost of one timestamp pair (two back-to-back reads of this clock), median of
    /// [`TIMESTAMP_PAIRS`], in ns; subtracted from every host-clock interval.
    #[serde(default)]
    pub timestamp_overhead_ns: f64,
}

/// Back-to-back timestamp pairs timed at start.
pub const TIMESTAMP_PAIRS: usize = 4001;

/// A calibrated host clock.
#[derive(Debug, Clone, Copy)]
pub struct HostClock {
    info: ClockInfo,
    origin_ticks: u64,
    ns_per_tick: f64,
    /// CLOCK_MONOTONIC_RAW at the origin, for the end-of-run calibration.
    origin_raw_ns: u64,
}

/// CLOCK_MONOTONIC_RAW in ns.
pub fn monotonic_raw_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write into; CLOCK_MONOTONIC_RAW exists on Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(target_arch = "x86_64")]
fn read_tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "x86_64")]
fn tsc_is_invariant() -> bool {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |flag: &str| flags.split_whitespace().any(|f| f == flag);
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(not(target_arch = "x86_64"))]
fn read_tsc() -> u64 {
    monotonic_raw_ns()
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_is_invariant() -> bool {
    false
}

/// Median of `pairs` back-to-back differences of `read`.
fn pair_cost<T: PartialOrd + Copy>(read: impl Fn() -> T, difference: impl Fn(T, T) -> T, pairs: usize) -> T {
    let mut costs: Vec<T> = (0..pairs)
        .map(|_| {
            let t0 = read();
            difference(read(), t0)
        })
        .collect();
    costs.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    costs[costs.len() / 2]
}

impl HostClock {
    /// Time the clock's own reads and calibrate over that loop (about 0.1–0.3 ms, no fixed wait).
    pub fn new() -> Self {
        if !tsc_is_invariant() {
            return Self::monotonic();
        }
        let (raw0, ticks0) = (monotonic_raw_ns(), read_tsc());
        // The calibration window: back-to-back TSC reads, as long as the overhead loop below.
        pair_cost(read_tsc, u64::wrapping_sub, TIMESTAMP_PAIRS);
        let (raw1, ticks1) = (monotonic_raw_ns(), read_tsc());
        let hz = ticks1.wrapping_sub(ticks0) as f64 / ((raw1 - raw0) as f64 / 1e9);
        if !(hz.is_finite() && hz > 1e6) {
            return Self::monotonic();
        }
        let info = ClockInfo { source: ClockSource::Tsc, tsc_hz: Some(hz), tsc_hz_run: None, timestamp_overhead_ns: 0.0 };
        HostClock { info, origin_ticks: ticks0, ns_per_tick: 1e9 / hz, origin_raw_ns: raw0 }.timed()
    }

    /// This clock with its own cost measured: two back-to-back [`Self::now_ns`], as every
    /// interval the procedure takes is.
    fn timed(mut self) -> Self {
        self.info.timestamp_overhead_ns = pair_cost(|| self.now_ns(), |t1, t0| t1 - t0, TIMESTAMP_PAIRS);
        self
    }

    /// The portable clock: no calibration, its own cost still measured.
    pub fn monotonic() -> Self {
        let origin = monotonic_raw_ns();
        let info = ClockInfo { source: ClockSource::MonotonicRaw, tsc_hz: None, tsc_hz_run: None, timestamp_overhead_ns: 0.0 };
        HostClock { info, origin_ticks: origin, ns_per_tick: 1.0, origin_raw_ns: origin }.timed()
    }

    pub fn info(&self) -> ClockInfo {
        self.info
    }

    /// The clock's description with the TSC calibrated over the whole run so far (start to now).
    pub fn finish(&self) -> ClockInfo {
        let mut info = self.info;
        if info.source == ClockSource::Tsc {
            let (raw, ticks) = (monotonic_raw_ns(), read_tsc());
            let seconds = (raw - self.origin_raw_ns) as f64 / 1e9;
            info.tsc_hz_run = Some(ticks.wrapping_sub(self.origin_ticks) as f64 / seconds).filter(|hz| hz.is_finite() && *hz > 1e6);
        }
        info
    }

    fn ticks(&self) -> u64 {
        match self.info.source {
            ClockSource::Tsc => read_tsc(),
            ClockSource::MonotonicRaw => monotonic_raw_ns(),
        }
    }

    /// Nanoseconds since this clock was made.
    pub fn now_ns(&self) -> f64 {
        self.ticks().wrapping_sub(self.origin_ticks) as f64 * self.ns_per_tick
    }

    /// The time from `start_ns` (an earlier [`Self::now_ns`]) to now, less the cost of the
    /// timestamp pair itself (never below 0).
    pub fn since_ns(&self, start_ns: f64) -> f64 {
        (self.now_ns() - start_ns - self.info.timestamp_overhead_ns).max(0.0)
    }
}

impl Default for HostClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agrees_with_monotonic_raw(clock: HostClock) {
        let (h0, m0) = (clock.now_ns(), monotonic_raw_ns());
        std::thread::sleep(std::time::Duration::from_millis(30));
        let (h1, m1) = (clock.now_ns(), monotonic_raw_ns());
        let (host, mono) = (h1 - h0, (m1 - m0) as f64);
        assert!(host > 0.0);
        // The start window is short; allow 5 % for a loaded machine.
        assert!((host / mono - 1.0).abs() < 0.05, "host {host} ns vs monotonic {mono} ns");
    }

    #[test]
    fn host_clock_agrees_with_monotonic_raw() {
        agrees_with_monotonic_raw(HostClock::new());
        agrees_with_monotonic_raw(HostClock::monotonic());
    }

    #[test]
    fn run_calibration_agrees_with_the_start_calibration() {
        let clock = HostClock::new();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let info = clock.finish();
        if let (Some(start), Some(run)) = (info.tsc_hz, info.tsc_hz_run) {
            assert!((run / start - 1.0).abs() < 0.05, "start {start} Hz, run {run} Hz");
        } else {
            assert_eq!(info.source, ClockSource::MonotonicRaw);
            println!("skipped: no invariant TSC here, the clock is CLOCK_MONOTONIC_RAW");
        }
    }

    #[test]
    fn timestamp_overhead_is_measured_and_subtracted() {
        let clock = HostClock::new();
        let overhead = clock.info().timestamp_overhead_ns;
        assert!(overhead > 0.0 && overhead < 10_000.0, "{overhead} ns");
        let t0 = clock.now_ns();
        assert!(clock.since_ns(t0) >= 0.0);
    }
}
