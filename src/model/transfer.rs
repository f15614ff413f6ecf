//! The transfer model of document 002: T(N) = N / (B·f) + m.
//!
//! B is the raw bus rate (MB/s), f the fraction of it that carries data in steady state and m a
//! fixed per-transfer cost (setup, doorbell, interrupt, software). Fitting f and m from measured
//! (size, rate) points separates "the link is slow" from "each transfer costs too much".

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;

/// A fitted or assumed transfer model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TransferModel {
    /// Bus rate B in MB/s (10^6 B/s).
    pub bus_mbps: f64,
    /// Efficiency f: the steady-state rate is B·f.
    pub f: f64,
    /// Fixed cost per transfer in µs.
    pub m_us: f64,
}

impl TransferModel {
    /// Time for one transfer of `size_bytes`, in µs.
    pub fn time_us(&self, size_bytes: f64) -> f64 {
        size_bytes / (self.bus_mbps * self.f) + self.m_us
    }

    /// Rate reached by transfers of `size_bytes`, in MB/s.
    pub fn rate_mbps(&self, size_bytes: f64) -> f64 {
        size_bytes / self.time_us(size_bytes)
    }

    /// Asymptotic rate B·f in MB/s.
    pub fn asymptotic_mbps(&self) -> f64 {
        self.bus_mbps * self.f
    }

    /// N½: the transfer size that reaches half the asymptotic rate (where N/(B·f) = m).
    pub fn n_half_bytes(&self) -> f64 {
        self.m_us * self.bus_mbps * self.f
    }
}

/// Least-squares fit of T(N) = a·N + m to measured (size in bytes, rate in MB/s) points, in the
/// time domain, where the model is linear. Needs two or more distinct sizes.
pub fn fit(bus_mbps: f64, points: &[(f64, f64)]) -> Result<TransferModel, InvalidInput> {
    if !(bus_mbps > 0.0 && bus_mbps.is_finite()) {
        return Err(InvalidInput::new(format!("bus rate must be a positive number of MB/s, got {bus_mbps}")));
    }
    if points.iter().any(|&(n, r)| !(n > 0.0 && r > 0.0 && n.is_finite() && r.is_finite())) {
        return Err(InvalidInput::new("every point needs a positive size and a positive rate"));
    }
    let samples: Vec<(f64, f64)> = points.iter().map(|&(n, rate)| (n, n / rate)).collect();
    let count = samples.len() as f64;
    let mean_n = samples.iter().map(|s| s.0).sum::<f64>() / count;
    let mean_t = samples.iter().map(|s| s.1).sum::<f64>() / count;
    let sxx: f64 = samples.iter().map(|s| (s.0 - mean_n).powi(2)).sum();
    if samples.len() < 2 || sxx <= 0.0 {
        return Err(InvalidInput::new("fitting f and m needs points at two or more different sizes"));
    }
    let sxy: f64 = samples.iter().map(|s| (s.0 - mean_n) * (s.1 - mean_t)).sum();
    let slope_us_per_byte = sxy / sxx;
    if slope_us_per_byte <= 0.0 {
        return Err(InvalidInput::new("the points do not fit T(N) = N/(B·f) + m: time does not grow with size"));
    }
    Ok(TransferModel {
        bus_mbps,
        f: 1.0 / (slope_us_per_byte * bus_mbps),
        m_us: mean_t - slope_us_per_byte * mean_n,
    })
}

/// Relative residuals (measured/predicted − 1) of each point under a model.
pub fn residuals(model: &TransferModel, points: &[(f64, f64)]) -> Vec<f64> {
    points.iter().map(|&(n, rate)| rate / model.rate_mbps(n) - 1.0).collect()
}

/// Upper bound on f from the packet format (document 002): payload / (payload + header) per
/// packet, times `busy_cycles / (busy_cycles + 1)` for one idle cycle every `busy_cycles`.
/// 128-byte payloads, 16-byte headers, one idle cycle per 18: 0.842 (the document writes "80 %").
pub fn f_upper_bound(payload_bytes: f64, header_bytes: f64, busy_cycles: f64) -> f64 {
    payload_bytes / (payload_bytes + header_bytes) * busy_cycles / (busy_cycles + 1.0)
}
