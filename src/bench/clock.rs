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
    /// TSC ticks per second when `source` is `tsc`.
    pub tsc_hz: Option<f64>,
}

/// A calibrated host clock.
#[derive(Debug, Clone, Copy)]
pub struct HostClock {
    info: ClockInfo,
    origin_ticks: u64,
    ns_per_tick: f64,
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

/// Calibrate the TSC over about 20 ms of CLOCK_MONOTONIC_RAW; `None` when not usable.
#[cfg(target_arch = "x86_64")]
fn calibrate_tsc() -> Option<f64> {
    if !tsc_is_invariant() {
        return None;
    }
    let (t0, c0) = (monotonic_raw_ns(), read_tsc());
    while monotonic_raw_ns() - t0 < 20_000_000 {
        std::hint::spin_loop();
    }
    let (t1, c1) = (monotonic_raw_ns(), read_tsc());
    let hz = (c1.wrapping_sub(c0)) as f64 / ((t1 - t0) as f64 / 1e9);
    (hz.is_finite() && hz > 1e6).then_some(hz)
}

#[cfg(not(target_arch = "x86_64"))]
fn calibrate_tsc() -> Option<f64> {
    None
}

impl HostClock {
    /// Calibrate once per run (about 20 ms on x86_64).
    pub fn new() -> Self {
        match calibrate_tsc() {
            #[cfg(target_arch = "x86_64")]
            Some(hz) => HostClock {
                info: ClockInfo { source: ClockSource::Tsc, tsc_hz: Some(hz) },
                origin_ticks: read_tsc(),
                ns_per_tick: 1e9 / hz,
            },
            _ => Self::monotonic(),
        }
    }

    /// The portable clock, without calibration.
    pub fn monotonic() -> Self {
        HostClock {
            info: ClockInfo { source: ClockSource::MonotonicRaw, tsc_hz: None },
            origin_ticks: monotonic_raw_ns(),
            ns_per_tick: 1.0,
        }
    }

    pub fn info(&self) -> ClockInfo {
        self.info
    }

    fn ticks(&self) -> u64 {
        match self.info.source {
            #[cfg(target_arch = "x86_64")]
            ClockSource::Tsc => read_tsc(),
            _ => monotonic_raw_ns(),
        }
    }

    /// Nanoseconds since this clock was made.
    pub fn now_ns(&self) -> f64 {
        self.ticks().wrapping_sub(self.origin_ticks) as f64 * self.ns_per_tick
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

    #[test]
    fn host_clock_agrees_with_monotonic_raw() {
        let clock = HostClock::new();
        let (h0, m0) = (clock.now_ns(), monotonic_raw_ns());
        std::thread::sleep(std::time::Duration::from_millis(30));
        let (h1, m1) = (clock.now_ns(), monotonic_raw_ns());
        let (host, mono) = (h1 - h0, (m1 - m0) as f64);
        assert!(host > 0.0);
        // Calibration over 20 ms is good to well under 1 %; allow 5 % for a loaded machine.
        assert!((host / mono - 1.0).abs() < 0.05, "host {host} ns vs monotonic {mono} ns");
    }
}
