//! Distributions of transfer times: min/median/p99/max, coefficient of variation, and the
//! stopping rule "the median is stable".

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
    /// Coefficient of variation of the values: standard deviation / mean.
    pub cov: f64,
    /// Coefficient of variation of the median itself: its standard error (1.2533·σ/√n, with σ
    /// estimated robustly as 1.4826 × the median absolute deviation, so a few stalls do not
    /// hide a stable median) divided by the median. This is what the stopping rule looks at.
    pub median_cov: f64,
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
        let mut deviations: Vec<f64> = sorted.iter().map(|v| (v - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        let robust_sd = 1.4826 * percentile(&deviations, 50.0);
        let median_cov = if median > 0.0 { 1.2533 * robust_sd / (count as f64).sqrt() / median } else { 0.0 };
        Some(Stats {
            count,
            min: sorted[0],
            median,
            p99: percentile(&sorted, 99.0),
            max: sorted[count - 1],
            mean,
            cov,
            median_cov,
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
    /// Stop when the median's coefficient of variation is below this (0.01 = 1 %).
    pub cov_target: f64,
    /// Never judge stability on fewer samples than this.
    pub min_samples: usize,
    /// Never keep more samples than this (bounds memory and the size of the results file).
    pub max_samples: usize,
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule { cov_target: 0.01, min_samples: 5, max_samples: 2000 }
    }
}

impl StopRule {
    /// True once `values` give a stable median.
    pub fn is_stable(&self, values: &[f64]) -> bool {
        values.len() >= self.min_samples && Stats::of(values).is_some_and(|s| s.median_cov < self.cov_target)
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
    fn stability_needs_enough_quiet_samples() {
        let rule = StopRule { cov_target: 0.01, min_samples: 5, max_samples: 100 };
        assert!(!rule.is_stable(&[1.0; 4]));
        assert!(rule.is_stable(&[1.0; 5]));
        let noisy = [1.0, 1.5, 0.7, 1.3, 0.9, 1.1];
        assert!(!rule.is_stable(&noisy));
        // One stall among quiet samples does not keep the median from being stable.
        let mut stalled = vec![1.0; 20];
        stalled[7] = 5.0;
        assert!(rule.is_stable(&stalled));
        assert!(Stats::of(&stalled).unwrap().cov > 0.5);
    }
}
