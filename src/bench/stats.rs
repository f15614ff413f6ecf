//! Distributions of transfer times: min/median/p99/max, coefficient of variation, a
//! distribution-free confidence interval of the median, and the stopping rule: "the median is
//! stable", or "the rate drifts" (a slope of rate against time beyond the noise).
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
    /// Stop when the median's 95 % interval is within ± this fraction of it (0.01 = ± 1 %);
    /// 0: never stop early (the point runs its whole budget, as a fixed-time peer does).
    pub ci_target: f64,
    /// Never judge stability on fewer samples than this — unless they are large
    /// ([`LARGE_SAMPLE_NS`]): then [`MIN_SAMPLES_FOR_INTERVAL`].
    pub min_samples: usize,
    /// Nor before this much time at the point, in ns on the engine's clock: a burst of quick
    /// transfers says nothing about the stalls that come every few milliseconds. Points whose
    /// samples are large ([`LARGE_SAMPLE_NS`]) need [`STALL_SPAN_NS`] at most.
    pub min_time_ns: f64,
    /// Never keep more samples than this (bounds memory and the size of the results file).
    pub max_samples: usize,
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule { ci_target: 0.01, min_samples: 10, min_time_ns: 0.0, max_samples: 2000 }
    }
}

/// A sample this long (median transfer time) is large: the periodic stalls the minimum time
/// waits for land inside samples, so a count of them, not a time, makes the median — the
/// fewest with an interval ([`MIN_SAMPLES_FOR_INTERVAL`]), over at least [`STALL_SPAN_NS`].
pub const LARGE_SAMPLE_NS: f64 = 500e3;

/// The longest period of the host's regular stalls (a 250 Hz timer tick): the time a point of
/// large samples must still cover, so at least one such stall had its chance.
pub const STALL_SPAN_NS: f64 = 4e6;

/// A slope is a drift when it is this many standard errors from zero: far beyond what noise
/// gives (5σ is already one in 1.7 million), and known to ± 10 % (two standard errors) when
/// reported.
pub const DRIFT_SIGMAS: f64 = 20.0;

/// Stability is judged again after this fraction more samples (at least one): judging sorts
/// every sample, which between transfers would grow with the run (about 60 µs at 2000 samples
/// on a 2.6 GHz core); this way it costs a few hundred ns per transfer.
const JUDGE_EVERY_FRACTION: usize = 20;

/// What the samples so far say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Not yet known: keep measuring.
    Continue,
    /// The median's interval is within the target.
    Stable,
    /// The rate moves with time beyond its noise: no median will settle, stop and say so.
    Drifting(Drift),
}

/// A least-squares slope of rate (1 / sample time) against the samples' start times.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// Change of the rate per second of elapsed time, as a fraction of the mean rate
    /// (0.02 = +2 % per second; negative: slowing down).
    pub fraction_per_s: f64,
    /// The slope in standard errors (|t| ≥ [`DRIFT_SIGMAS`] for a drift).
    pub sigmas: f64,
}

impl Drift {
    /// Fit rate against time over `(start_ns, time_ns)` samples; `None` below 3 samples or
    /// when they all start at once.
    pub fn fit(starts_ns: &[f64], times_ns: &[f64]) -> Option<Drift> {
        let n = starts_ns.len().min(times_ns.len());
        if n < 3 {
            return None;
        }
        let xs: Vec<f64> = starts_ns[..n].iter().map(|s| s / 1e9).collect();
        let ys: Vec<f64> = times_ns[..n].iter().map(|t| 1.0 / t).collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / n as f64;
        let (x_mean, y_mean) = (mean(&xs), mean(&ys));
        let sxx: f64 = xs.iter().map(|x| (x - x_mean).powi(2)).sum();
        let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - x_mean) * (y - y_mean)).sum();
        if sxx <= 0.0 || y_mean <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        let residual: f64 = xs.iter().zip(&ys).map(|(x, y)| (y - y_mean - slope * (x - x_mean)).powi(2)).sum();
        let standard_error = (residual / (n - 2) as f64 / sxx).sqrt();
        let sigmas = if standard_error > 0.0 { slope / standard_error } else { f64::INFINITY.copysign(slope) };
        Some(Drift { fraction_per_s: slope / y_mean, sigmas })
    }
}

impl StopRule {
    /// Whether stability is judged after `count` samples: after every sample below 40, then after
    /// every 1/20 more, so stopping is at most 5 % later than judging after each one.
    pub fn judges_at(&self, count: usize) -> bool {
        count.is_multiple_of((count / JUDGE_EVERY_FRACTION).max(1))
    }

    /// True once `values`, gathered over `elapsed_ns`, give a stable median.
    pub fn is_stable(&self, values: &[f64], elapsed_ns: f64) -> bool {
        self.ci_target > 0.0 && self.enough(values, elapsed_ns) && self.within_target(values)
    }

    fn within_target(&self, values: &[f64]) -> bool {
        Stats::of(values).and_then(|s| s.ci_half_width()).is_some_and(|w| w <= self.ci_target)
    }

    /// Judge samples given as start times and durations (ns, engine clock) after `elapsed_ns`:
    /// drifting (a slope beyond [`DRIFT_SIGMAS`] that moved the rate by more than the target
    /// over the time measured: its median says when it was taken, not what the device does),
    /// stable, or neither yet. With `ci_target` 0 it never stops.
    pub fn judge(&self, starts_ns: &[f64], times_ns: &[f64], elapsed_ns: f64) -> Verdict {
        if self.ci_target <= 0.0 || !self.enough(times_ns, elapsed_ns) {
            return Verdict::Continue;
        }
        let span_s = match (starts_ns.first(), starts_ns.last()) {
            (Some(first), Some(last)) => (last - first) / 1e9,
            _ => 0.0,
        };
        match Drift::fit(starts_ns, times_ns) {
            Some(drift) if drift.sigmas.abs() >= DRIFT_SIGMAS && drift.fraction_per_s.abs() * span_s > self.ci_target => Verdict::Drifting(drift),
            _ if self.within_target(times_ns) => Verdict::Stable,
            _ => Verdict::Continue,
        }
    }

    /// Enough samples, over enough time, to judge: `min_samples` over the minimum time, or for
    /// large samples the fewest with an interval over the host's stall period.
    fn enough(&self, values: &[f64], elapsed_ns: f64) -> bool {
        if values.len() < MIN_SAMPLES_FOR_INTERVAL {
            return false;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        if percentile(&sorted, 50.0) >= LARGE_SAMPLE_NS {
            elapsed_ns >= self.min_time_ns.min(STALL_SPAN_NS)
        } else {
            values.len() >= self.min_samples && elapsed_ns >= self.min_time_ns
        }
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

    /// Uniform noise in [−1, 1] from a fixed seed (xorshift64).
    fn noise(seed: u64) -> impl FnMut() -> f64 {
        let mut x = seed.max(1);
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        }
    }

    /// Transfers of `bytes` back to back at `rate(t)` bytes/s (t in s) with a relative `jitter`,
    /// judged as `dma` judges them until a verdict or `budget_s`: (verdict, elapsed s, times).
    fn run_until_verdict(rule: &StopRule, bytes: f64, rate: impl Fn(f64) -> f64, jitter: f64, seed: u64, budget_s: f64) -> (Verdict, f64, Vec<f64>) {
        let mut next = noise(seed);
        let (mut starts, mut times, mut now_ns) = (Vec::new(), Vec::new(), 0.0);
        while now_ns < budget_s * 1e9 {
            let time_ns = bytes / (rate(now_ns / 1e9) * (1.0 + jitter * next())) * 1e9;
            starts.push(now_ns);
            times.push(time_ns);
            now_ns += time_ns;
            if rule.judges_at(times.len()) {
                let verdict = rule.judge(&starts, &times, now_ns);
                if verdict != Verdict::Continue {
                    return (verdict, now_ns / 1e9, times);
                }
            }
        }
        (Verdict::Continue, now_ns / 1e9, times)
    }

    /// `dma`'s rule for a 10 s budget: a tenth of it before a small-sample point may stop.
    fn ten_second_rule() -> StopRule {
        StopRule { min_time_ns: 1e9, ..StopRule::default() }
    }

    #[test]
    fn steady_large_transfers_stop_early_with_the_right_median() {
        let mib = 1024.0 * 1024.0;
        for (bytes, rate) in [(64.0 * mib, 1.7e9), (512.0 * mib, 1.7e9), (4.0 * mib, 7.2e9)] {
            let (verdict, elapsed_s, times) = run_until_verdict(&ten_second_rule(), bytes, |_| rate, 0.005, 7, 10.0);
            assert_eq!(verdict, Verdict::Stable, "{bytes} B");
            assert!(elapsed_s <= 3.0, "{bytes} B: stable only after {elapsed_s} s");
            let median_rate = bytes / Stats::of(&times).unwrap().median * 1e9;
            assert!((median_rate / rate - 1.0).abs() < 0.01, "{bytes} B: median {median_rate} for {rate}");
        }
        // Small samples (65 µs) still wait for the minimum time.
        let (verdict, elapsed_s, _) = run_until_verdict(&ten_second_rule(), 65536.0, |_| 1e9, 0.005, 7, 10.0);
        assert_eq!(verdict, Verdict::Stable);
        assert!(elapsed_s >= 1.0, "64 KiB samples stopped after {elapsed_s} s");
    }

    #[test]
    fn a_drifting_rate_is_called_drifting_with_its_slope() {
        let bytes = 64.0 * 1024.0 * 1024.0;
        // Noise wide enough that the median is not pinned before the drift is known.
        for (seed, per_s, jitter) in [(3, 0.05, 0.05), (4, -0.05, 0.05), (5, 0.2, 0.02)] {
            let rate = |t: f64| 1.5e9 * (1.0 + per_s * t);
            let (verdict, elapsed_s, _) = run_until_verdict(&ten_second_rule(), bytes, rate, jitter, seed, 10.0);
            let Verdict::Drifting(drift) = verdict else { panic!("{per_s}/s: {verdict:?} after {elapsed_s} s") };
            assert!(elapsed_s < 10.0);
            // The slope in bytes/s per s, against the mean rate over the time measured.
            let mean_rate = (0..100).map(|i| rate(elapsed_s * i as f64 / 100.0)).sum::<f64>() / 100.0;
            let fitted = drift.fraction_per_s * mean_rate;
            let truth = 1.5e9 * per_s;
            assert!((fitted / truth - 1.0).abs() < 0.10, "{per_s}/s: fitted {fitted} B/s², truth {truth}");
        }
    }

    #[test]
    fn a_noisy_steady_rate_is_not_called_drifting() {
        let bytes = 64.0 * 1024.0 * 1024.0;
        for seed in 1..=20 {
            let (verdict, _, times) = run_until_verdict(&ten_second_rule(), bytes, |_| 1.7e9, 0.15, seed, 10.0);
            assert!(!matches!(verdict, Verdict::Drifting(_)), "seed {seed}: {verdict:?} after {} samples", times.len());
        }
    }

    #[test]
    fn a_zero_target_never_stops_early() {
        let rule = StopRule { ci_target: 0.0, ..ten_second_rule() };
        let (verdict, elapsed_s, _) = run_until_verdict(&rule, 1e6, |_| 1e9, 0.0, 1, 2.0);
        assert_eq!(verdict, Verdict::Continue);
        assert!(elapsed_s >= 2.0);
        assert!(!rule.is_stable(&[1.0; 100], 1e12));
    }
}
