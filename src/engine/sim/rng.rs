//! The simulator's random numbers: seeded, reproducible on every platform, no dependency.
//!
//! splitmix64 (Steele, Lea, Flood 2014) passes BigCrush and needs one u64 of state, which is all
//! a deterministic simulator wants. Aggregate draws (Poisson counts, sums and maxima of many
//! uniform stalls) let the simulator skip simulating each event of a long stream.

/// A seeded generator; the same seed gives the same sequence everywhere.
#[derive(Debug, Clone)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        SimRng { state: seed ^ 0x5EED_0F_5100_u64 }
    }

    /// An independent stream for one purpose (direction, stall process): same seed, other salt.
    pub fn fork(&mut self, salt: u64) -> SimRng {
        SimRng { state: self.next_u64() ^ salt.wrapping_mul(0xD134_2543_DE82_EF95) }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [low, high).
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Poisson count with the given mean: exact (Knuth) for small means, normal beyond 30,
    /// where the approximation error is far below the spread of the count itself.
    pub fn poisson(&mut self, mean: f64) -> u64 {
        if mean <= 0.0 {
            return 0;
        }
        if mean < 30.0 {
            let limit = (-mean).exp();
            let (mut count, mut product) = (0u64, self.unit());
            while product > limit {
                count += 1;
                product *= self.unit();
            }
            return count;
        }
        (mean + mean.sqrt() * self.normal()).round().max(0.0) as u64
    }

    /// How many of `trials` events with probability `p` happen.
    pub fn binomial(&mut self, trials: u64, p: f64) -> u64 {
        if trials == 0 || p <= 0.0 {
            return 0;
        }
        if p >= 1.0 {
            return trials;
        }
        if trials <= 64 {
            return (0..trials).filter(|_| self.unit() < p).count() as u64;
        }
        let mean = trials as f64 * p;
        let sd = (mean * (1.0 - p)).sqrt();
        (mean + sd * self.normal()).round().clamp(0.0, trials as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_sane_means() {
        let (mut a, mut b) = (SimRng::new(3), SimRng::new(3));
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(SimRng::new(3).next_u64(), SimRng::new(4).next_u64());
        let mut rng = SimRng::new(9);
        let n = 20_000;
        let mean_small = (0..n).map(|_| rng.poisson(2.5)).sum::<u64>() as f64 / n as f64;
        assert!((mean_small - 2.5).abs() < 0.1, "{mean_small}");
        let mean_big = (0..n).map(|_| rng.poisson(1000.0)).sum::<u64>() as f64 / n as f64;
        assert!((mean_big - 1000.0).abs() < 2.0, "{mean_big}");
        let hits = (0..n).map(|_| rng.binomial(1000, 0.1)).sum::<u64>() as f64 / n as f64;
        assert!((hits - 100.0).abs() < 1.0, "{hits}");
    }
}
