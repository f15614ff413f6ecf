//! Stalls: the longest interval in which no data moved, and how many exceeded a threshold
//! (document 001: "Maximum PCIe stall time duration", "Amount of deadlocks > 50 µs").
//!
//! From the device's counters when it has them (it sees every idle cycle). Otherwise from the
//! host: a transfer that took longer than the expected (median) time for its size spent the
//! excess without progress. Gaps between transfers are not counted: the host itself is busy
//! there (verification, bookkeeping), so they say nothing about the device.

use serde::{Deserialize, Serialize};

use crate::engine::DeviceCounters;

/// Default threshold: 50 µs, as the performance demo of document 001 (0x0C35 × 16 ns).
pub const DEFAULT_THRESHOLD_NS: f64 = 50_000.0;

/// Stalls seen at one point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StallSummary {
    /// `device` (from its counters), `host` (excess transfer time on the host clock) or `none`.
    pub source: StallSource,
    pub threshold_ns: f64,
    pub max_stall_ns: f64,
    pub over_threshold: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StallSource {
    Device,
    Host,
    None,
}

/// Stalls from the device's counters, when any transfer carried them. The count uses the
/// device's own threshold (the engine's), which the device applies as it counts.
pub fn from_device<'a>(counters: impl IntoIterator<Item = &'a DeviceCounters>, threshold_ns: f64) -> Option<StallSummary> {
    let mut seen = false;
    let (mut max_stall_ns, mut over) = (0.0f64, 0u64);
    for c in counters {
        if let Some(stall) = c.max_stall_ns {
            seen = true;
            max_stall_ns = max_stall_ns.max(stall);
            over += c.stalls_over_threshold.unwrap_or(u64::from(stall > threshold_ns));
        }
    }
    seen.then_some(StallSummary { source: StallSource::Device, threshold_ns, max_stall_ns, over_threshold: over })
}

/// Stalls inferred from transfer durations: each transfer's excess over the median.
pub fn from_durations(durations_ns: &[f64], threshold_ns: f64) -> StallSummary {
    let Some(stats) = crate::bench::stats::Stats::of(durations_ns) else {
        return StallSummary { source: StallSource::None, threshold_ns, max_stall_ns: 0.0, over_threshold: 0 };
    };
    let excess = durations_ns.iter().map(|d| (d - stats.median).max(0.0));
    let (max_stall_ns, over_threshold) = excess.fold((0.0f64, 0u64), |(m, n), e| (m.max(e), n + u64::from(e > threshold_ns)));
    StallSummary { source: StallSource::Host, threshold_ns, max_stall_ns, over_threshold }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_stalls_are_excess_over_the_median() {
        let durations = [100_000.0, 100_000.0, 100_000.0, 180_000.0, 120_000.0];
        let s = from_durations(&durations, 50_000.0);
        assert_eq!(s.source, StallSource::Host);
        assert_eq!(s.max_stall_ns, 80_000.0);
        assert_eq!(s.over_threshold, 1);
    }

    #[test]
    fn device_counters_win_when_present() {
        let c = DeviceCounters { max_stall_ns: Some(6352.0), stalls_over_threshold: Some(0), ..Default::default() };
        let s = from_device([&c, &DeviceCounters::default()], 50_000.0).unwrap();
        assert_eq!((s.source, s.max_stall_ns, s.over_threshold), (StallSource::Device, 6352.0, 0));
        assert!(from_device([&DeviceCounters::default()], 50_000.0).is_none());
    }
}
