//! Link timing in virtual time: the model's steady-state rate plus the stalls hardware adds.
//!
//! A steady stream's duration follows from the model ([`crate::model::write_throughput`],
//! [`crate::model::read_throughput`]), so the simulator never steps through TLPs. Stalls are two
//! Poisson processes over the time data moves, each stall lasting uniformly between a minimum
//! and a maximum; their count, total, maximum and the number above a threshold are drawn as
//! aggregates (exact distributions for the maximum and the count above the threshold, a normal
//! approximation for large totals), so a 30-second stream costs a handful of random draws.

use crate::engine::Direction;
use crate::model::{read_throughput, write_throughput, LinkParams, Throughput};

use super::config::SimConfig;
use super::rng::SimRng;

/// Rate of one direction alone, from the model.
pub fn one_way(params: &LinkParams, direction: Direction, bytes: u64) -> Throughput {
    match direction {
        Direction::D2h => write_throughput(params, bytes),
        Direction::H2d => read_throughput(params, bytes),
    }
}

/// Both directions at once as the simulated device sees them: the link's bidirectional figures,
/// which charge each read request's wait behind the write TLP already on the device→host lanes
/// (the device has one transmit queue) as completion latency (`model::bidir`).
pub fn both_directions(config: &SimConfig, bytes: u64) -> (Throughput, Throughput) {
    crate::model::bidirectional_throughput(&config.params, bytes)
}

/// Nanoseconds to move `bytes` at `mbps` (10^6 B/s).
pub fn ns_for(bytes: u64, mbps: f64) -> f64 {
    bytes as f64 * 1e3 / mbps
}

/// What happened while one stream of data moved.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamOutcome {
    /// Data time plus every stall: what the device's counter sees.
    pub busy_ns: f64,
    pub stalls: u64,
    pub max_stall_ns: f64,
    pub stalls_over_threshold: u64,
    /// Link bit errors (retries) while the stream moved.
    pub errors: u64,
}

/// Simulate the stalls of a stream whose data alone takes `data_ns`.
pub fn stream(config: &SimConfig, rng: &mut SimRng, data_ns: f64, bytes: u64, threshold_ns: f64) -> StreamOutcome {
    let seconds = data_ns / 1e9;
    let short = StallProcess { per_s: config.stalls_per_s, min_ns: config.stall_min_ns, max_ns: config.stall_max_ns };
    let long = StallProcess { per_s: config.long_stalls_per_s, min_ns: config.long_stall_min_ns, max_ns: config.long_stall_max_ns };
    let a = short.draw(rng, seconds, threshold_ns);
    let b = long.draw(rng, seconds, threshold_ns);
    StreamOutcome {
        busy_ns: data_ns + a.total_ns + b.total_ns,
        stalls: a.count.saturating_add(b.count),
        max_stall_ns: a.max_ns.max(b.max_ns),
        stalls_over_threshold: a.over.saturating_add(b.over),
        errors: rng.poisson(bytes as f64 * config.errors_per_tb / 1e12),
    }
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
    fn bidirectional_is_slower_than_one_way_and_stalls_stay_in_range() {
        let config = SimConfig::preset("doc001").unwrap();
        let bytes = 1 << 30;
        let (w, r) = crate::model::bidirectional_throughput(&config.params, bytes);
        assert!(w.mbps < one_way(&config.params, Direction::D2h, bytes).mbps);
        assert!(r.mbps <= one_way(&config.params, Direction::H2d, bytes).mbps);
        // Queueing read requests behind write TLPs can only slow reads down.
        let (_, queued) = both_directions(&config, bytes);
        assert!(queued.mbps <= r.mbps * 1.001, "queued {queued:?} vs {r:?}");
        let mut rng = SimRng::new(1);
        let out = stream(&config, &mut rng, 26e9, bytes, 50_000.0);
        assert!(out.max_stall_ns <= config.stall_max_ns && out.max_stall_ns >= config.stall_min_ns);
        assert_eq!(out.stalls_over_threshold, 0);
        let expected = 26.0 * config.stalls_per_s;
        assert!((out.stalls as f64 - expected).abs() < 5.0 * expected.sqrt());
        assert!(out.busy_ns > 26e9);
    }
}
