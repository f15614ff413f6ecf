//! What the device's counters see of one stream of data.
//!
//! The stream's time comes from the link simulator ([`super::link_time`]), and with it what the
//! link simulated of the target's flow-control stall keys (`stalls_per_s`, `stall_min_ns`,
//! `stall_max_ns`: the host's receiver pausing, [`crate::link::Injection`]) and of its bit
//! errors: the device's stalls are the pauses in its payload the link simulated
//! ([`crate::link::PayloadGaps`]), its errors the corrupted TLPs. Long system stalls
//! (`long_stalls_per_s`: power management, SMIs — nothing the link does) are still a seeded
//! Poisson process over the time data moves, each lasting uniformly between a minimum and a
//! maximum, drawn as aggregates (exact distributions for the maximum and the count above the
//! threshold, a normal approximation for large totals).

use super::config::SimConfig;
#[allow(unused_imports)] // named in the documentation
use super::link_time::DmaRun;
use super::rng::SimRng;
use crate::link::PayloadGaps;

/// Nanoseconds to move `bytes` at `mbps` (10^6 B/s).
pub fn ns_for(bytes: u64, mbps: f64) -> f64 {
    bytes as f64 * 1e3 / mbps
}

/// What happened while one stream of data moved.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamOutcome {
    /// Data time plus every system stall: what the device's counter sees.
    pub busy_ns: f64,
    pub max_stall_ns: f64,
    pub stalls_over_threshold: u64,
    /// Drawn long system stalls.
    pub system_stalls: u64,
    /// TLPs of the stream that the link's injected bit errors corrupted (each replayed).
    pub errors: u64,
}

/// One stream: `data_ns` on the simulated link with the pauses of its payload (`gaps`) and
/// `errors` (both simulated), plus the drawn long system stalls.
pub fn stream(config: &SimConfig, rng: &mut SimRng, data_ns: f64, gaps: &PayloadGaps, errors: u64, threshold_ns: f64) -> StreamOutcome {
    let long = StallProcess { per_s: config.long_stalls_per_s, min_ns: config.long_stall_min_ns, max_ns: config.long_stall_max_ns };
    let drawn = long.draw(rng, data_ns / 1e9, threshold_ns);
    StreamOutcome {
        busy_ns: data_ns + drawn.total_ns,
        max_stall_ns: gaps.longest_ns.max(drawn.max_ns),
        stalls_over_threshold: gaps.over_threshold.saturating_add(drawn.over),
        system_stalls: drawn.count,
        errors,
    }
}

/// Where a stream's payload travels, as [`crate::link::Direction::index`]: d2h upstream, h2d
/// downstream (a [`DmaRun`]'s per-direction fields).
pub fn payload_index(d2h: bool) -> usize {
    if d2h { crate::link::Direction::Upstream } else { crate::link::Direction::Downstream }.index()
}

struct StallProcess {
    per_s: f64,
    min_ns: f64,
    max_ns: f64,
}

#[derive(Default)]
struct StallDraw {
    count: u64,
    total_ns: f64,
    max_ns: f64,
    over: u64,
}

impl StallProcess {
    fn draw(&self, rng: &mut SimRng, seconds: f64, threshold_ns: f64) -> StallDraw {
        let count = rng.poisson(self.per_s * seconds);
        if count == 0 {
            return StallDraw::default();
        }
        let (low, high) = (self.min_ns, self.max_ns);
        if count <= 64 {
            let stalls: Vec<f64> = (0..count).map(|_| rng.uniform(low, high)).collect();
            return StallDraw {
                count,
                total_ns: stalls.iter().sum(),
                max_ns: stalls.iter().cloned().fold(0.0, f64::max),
                over: stalls.iter().filter(|s| **s > threshold_ns).count() as u64,
            };
        }
        let width = high - low;
        let total_ns = count as f64 * (low + high) / 2.0 + (count as f64).sqrt() * width / 12f64.sqrt() * rng.normal();
        let p_over = if width > 0.0 { ((high - threshold_ns) / width).clamp(0.0, 1.0) } else { (low > threshold_ns) as u8 as f64 };
        let over = rng.binomial(count, p_over);
        // The maximum of n uniforms on [a, b] is a + (b − a)·U^(1/n); draw it on the part of the
        // range the over/under split says it lies in.
        let max_ns = if over > 0 {
            let from = threshold_ns.max(low);
            from + (high - from) * rng.unit().powf(1.0 / over as f64)
        } else {
            let to = threshold_ns.min(high);
            low + (to - low) * rng.unit().powf(1.0 / count as f64)
        };
        StallDraw { count, total_ns: total_ns.max(count as f64 * low), max_ns, over }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_stalls_stay_in_range_and_follow_their_rate() {
        let mut config = SimConfig::preset("doc001").unwrap();
        config.long_stalls_per_s = 100.0;
        let mut rng = SimRng::new(1);
        let gaps = PayloadGaps { longest_ns: 4_000.0, over_threshold: 0 };
        let out = stream(&config, &mut rng, 26e9, &gaps, 2, 50_000.0);
        assert!(out.max_stall_ns <= config.long_stall_max_ns && out.max_stall_ns >= config.long_stall_min_ns);
        assert_eq!(out.stalls_over_threshold, out.system_stalls, "every long stall is over 50 µs, no payload gap is");
        let expected = 26.0 * config.long_stalls_per_s;
        assert!((out.system_stalls as f64 - expected).abs() < 5.0 * expected.sqrt());
        assert!(out.busy_ns > 26e9 && out.errors == 2);
        config.long_stalls_per_s = 0.0;
        let quiet = stream(&config, &mut rng, 1e6, &gaps, 0, 50_000.0);
        assert_eq!((quiet.busy_ns, quiet.max_stall_ns, quiet.system_stalls), (1e6, 4_000.0, 0), "the link's pauses are already in its time");
    }
}
