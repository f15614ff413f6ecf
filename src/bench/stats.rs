//! Distributions of transfer times: min/median/p99/max, coefficient of variation, a
//! distribution-free confidence interval of the median, and the stopping rule "the median is
//! stable".
//!
//! Transfer times are not normal (a few stalls make a long tail, timers quantise), so the
//! interval comes from order statistics: with n samples, the k-th smallest and k-th largest
//! bound the median with probability 1 − 2·P(Binomial(n, ½) < k), whatever the distribution.

use serde::{Deserialize, Serialize};

/// Summary of a set of durations (or any positive values), in the values' unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub count: usize,
    pub min: f64,
    pub median: f64,
    /// 99th percentile (nearest rank): the slow tail of transfer times.
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    /// Coefficient of variation of the values: standard deviation / mean (the spread).
    pub cov: f64,
    /// 95 % confidence interval of the median from order statistics; `None` below
    /// [`MIN_SAMPLES_FOR_INTERVAL`] samples, where no such interval exists.
    #[serde(default)]
    pub median_ci: Option<(f64, f64)>,
}

/// Confidence of the median's interval.
pub const CONFIDENCE: f64 = 0.95;

/// Fewest samples with a 95 % order-statistics interval of the median (the extremes of 6
/// samples cover it with 96.9 %).
pub const MIN_SAMPLES_FOR_INTERVAL: usize = 6;

/// 1-based rank k of the interval (x(k), x(n+1−k)): the largest k with
/// P(Binomial(n, ½) ≤ k−1) ≤ (1 − confidence)/2. `None` when even k = 1 is not enough.
pub fn median_interval_rank(n: usize, confidence: f64) -> Option<usize> {
    let tail = (1.0 - confidence) / 2.0;
    // ln P(X = j) built up from ln P(X = 0) = −n ln 2, so large n does not underflow early.
    let mut ln_pmf = -(n as f64) * std::f64::consts::LN_2;
    let mut cdf = 0.0;
    let mut rank = None;
    for j in 0..n / 2 {
        cdf += ln_pmf.exp();
        if cdf > tail {
            break;
        }
        rank = Some(j + 1);
        ln_pmf += ((n - j) as f64 / (j + 1) as f64).ln();
    }
    rank
}

impl Stats {
    /// Half the width of the median's interval relative to the median; `None` without one.
    pub fn ci_half_width(&self) -> Option<f64> {
        let (low, high) = self.median_ci?;
        (self.median > 0.0).then(|| (high - low) / 2.0 / self.median)
    }
}

impl Stats {
    /// Summarise `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Stats> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let count = sorted.len();
        let mean = sorted.iter().sum::<f64>() / count as f64;
        let variance = if count > 1 {
            sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (count - 1) as f64
        } else {
            0.0
        };
        let sd = variance.sqrt();
        let median = percentile(&sorted, 50.0);
        let cov = if mean > 0.0 { sd / mean } else { 0.0 };
        let median_ci = median_interval_rank(count, CONFIDENCE).map(|k| (sorted[k - 1], sorted[count - k]));
        Some(Stats {
            count,
            min: sorted[0],
            median,
            p99: percentile(&sorted, 99.0),
            max: sorted[count - 1],
            mean,
            cov,
            median_ci,
        })
    }
}

/// Percentile of sorted values: the median interpolates between the two middle values, other
/// percentiles use the nearest rank (p99 of 10 samples is the largest).
pub fn percentile(sorted: &[f64], pct: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if pct == 50.0 {
        return if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
    }
    let rank = ((pct / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// When to stop repeating a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopRule {
    /// Stop when the median's 95 % interval is within ± this fraction of it (0.01 = ± 1 %).
    pub ci_target: f64,
    /// Never judge stability on fewer samples than this.
    pub min_samples: usize,
    /// Nor before this much time at the point, in ns on the engine's clock: a burst of quick
    /// transfers says nothing about the stalls that come every few milliseconds.
    pub min_time_ns: f64,
    /// Never keep more samples than this (bounds memory and the size of the results file).
    pub max_samples: usize,
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule { ci_target: 0.01, min_samples: 10, min_time_ns: 0.0, max_samples: 2000 }
    }
}

/// Stability is judged again after this fraction more samples (at least one): judging sorts
/// every sample, which between transfers would grow with the run (about 60 µs at 2000 samples
/// on a 2.6 GHz core); this way it costs a few hundred ns per transfer.
const JUDGE_EVERY_FRACTION: usize = 20;

impl StopRule {
    /// Whether stability is judged after `count` samples: after every sample below 40, then after
    /// every 1/20 more, so stopping is at most 5 % later than judging after each one.
    pub fn judges_at(&self, count: usize) -> bool {
        count.is_multiple_of((count / JUDGE_EVERY_FRACTION).max(1))
    }

    /// True once `values`, gathered over `elapsed_ns`, give a stable median.
    pub fn is_stable(&self, values: &[f64], elapsed_ns: f64) -> bool {
        values.len() >= self.min_samples.max(MIN_SAMPLES_FOR_INTERVAL)
            && elapsed_ns >= self.min_time_ns
            && Stats::of(values).and_then(|s| s.ci_half_width()).is_some_and(|w| w <= self.ci_target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_known_values() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Stats::of(&values).unwrap();
        assert_eq!((s.min, s.median, s.p99, s.max), (1.0, 50.5, 99.0, 100.0));
        assert!((s.mean - 50.5).abs() < 1e-12);
        assert!((s.cov - 29.011 / 50.5).abs() < 1e-3);
        assert!(Stats::of(&[]).is_none());
        let one = Stats::of(&[7.0]).unwrap();
        assert_eq!((one.median, one.p99, one.cov), (7.0, 7.0, 0.0));
    }

    #[test]
    fn median_interval_ranks_match_binomial_tables() {
        // Standard tables for a 95 % two-sided interval of the median (e.g. Conover): n = 6 → the
        // extremes; n = 10 → 2nd; n = 20 → 6th; n = 100 → 40th.
        assert_eq!(median_interval_rank(5, 0.95), None);
        assert_eq!(median_interval_rank(6, 0.95), Some(1));
        assert_eq!(median_interval_rank(10, 0.95), Some(2));
        assert_eq!(median_interval_rank(20, 0.95), Some(6));
        assert_eq!(median_interval_rank(100, 0.95), Some(40));
        // Large n follows the normal approximation n/2 − 0.98·√n.
        let k = median_interval_rank(2000, 0.95).unwrap() as f64;
        assert!((k - (1000.0 - 0.98 * 2000f64.sqrt())).abs() <= 2.0, "{k}");
    }

    #[test]
    fn stability_needs_enough_quiet_samples_and_time() {
        let rule = StopRule { ci_target: 0.01, min_samples: 10, min_time_ns: 1000.0, max_samples: 100 };
        assert!(!rule.is_stable(&[1.0; 9], 5000.0), "too few samples");
        let judged: Vec<usize> = (1..=130).filter(|&n| rule.judges_at(n)).collect();
        assert_eq!(judged[..39], (1..=39).collect::<Vec<_>>()[..], "every sample while few");
        assert_eq!(judged[39..], [40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 63, 66, 69, 72, 75, 78, 80, 84, 88, 92, 96, 100, 105, 110, 115, 120, 126]);
        assert!(rule.is_stable(&[1.0; 10], 5000.0));
        assert!(!rule.is_stable(&[1.0; 10], 500.0), "too little time");
        let noisy = [1.0, 1.5, 0.7, 1.3, 0.9, 1.1, 1.2, 0.8, 1.4, 0.6];
        assert!(!rule.is_stable(&noisy, 5000.0));
        // One stall in five, quantised times: the old MAD-based rule called 5 such samples stable
        // (the MAD is 0). With 10 samples the interval reaches the stalls; it takes enough quiet
        // samples to pin the median.
        let mut one_in_five: Vec<f64> = (0..10).map(|i| if i % 5 == 4 { 3.0 } else { 1.0 }).collect();
        assert!(!rule.is_stable(&one_in_five, 5000.0));
        one_in_five = (0..40).map(|i| if i % 5 == 4 { 3.0 } else { 1.0 }).collect();
        assert!(rule.is_stable(&one_in_five, 5000.0), "the median is 1.0 with room to spare");
        assert!(Stats::of(&one_in_five).unwrap().cov > 0.5, "while the spread stays wide");
    }
}
