//! The per-message overhead from a message-size sweep.
//!
//! Time per message steps up each time the message needs one more TLP (the sawtooth of the
//! rate at multiples of MPS). With the link's byte time known, a least-squares line through
//! `time per message − size × byte time` against the TLP count separates the two overheads:
//! its slope is the cost of one more TLP (framing, header, its share of DLLPs and SKPs), its
//! intercept the per-message overhead (metadata, flag, dwell, doorbell, whatever the ring adds).

use serde::{Deserialize, Serialize};

use super::summary::Point;
use crate::model::LinkParams;

/// Fewest message sizes a fit needs (two unknowns, and one to spare).
pub const MIN_SIZES: usize = 3;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverheadFit {
    /// Per message, whatever its size, ns.
    pub per_message_ns: f64,
    /// The same as link bytes (at the link's byte time ÷ width).
    pub per_message_bytes: f64,
    pub per_tlp_ns: f64,
    pub per_tlp_bytes: f64,
    /// Largest difference of the fit from a measured time per message, relative.
    pub worst_residual: f64,
    pub sizes: usize,
}

/// Fit the sweep's points; `None` with fewer than [`MIN_SIZES`] sizes or one TLP count only.
pub fn fit(points: &[Point], params: &LinkParams) -> Option<OverheadFit> {
    let byte_ns = params.link.byte_time_ns() / params.link.width as f64;
    let rows: Vec<(f64, f64, f64)> = points
        .iter()
        .filter(|p| p.messages > 0 && p.duration_ns > 0.0)
        .map(|p| {
            let size = u64::from(p.message_bytes);
            let per_message = p.duration_ns / p.messages as f64;
            (size.div_ceil(params.mps_bytes) as f64, per_message - size as f64 * byte_ns, per_message)
        })
        .collect();
    if rows.len() < MIN_SIZES {
        return None;
    }
    let (intercept, slope) = line(&rows.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>())?;
    let worst_residual = rows.iter().map(|(x, y, total)| (intercept + slope * x - y).abs() / total).fold(0.0, f64::max);
    Some(OverheadFit {
        per_message_ns: intercept,
        per_message_bytes: intercept / byte_ns,
        per_tlp_ns: slope,
        per_tlp_bytes: slope / byte_ns,
        worst_residual,
        sizes: rows.len(),
    })
}

/// Least-squares line (intercept, slope); `None` when every x is the same.
fn line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    Some((my - slope * mx, slope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_known_line_and_refuses_one_size() {
        let points: Vec<(f64, f64)> = [1.0, 2.0, 8.0, 32.0].iter().map(|&x| (x, 500.0 + 24.0 * x)).collect();
        let (a, b) = line(&points).unwrap();
        assert!((a - 500.0).abs() < 1e-9 && (b - 24.0).abs() < 1e-9, "{a} {b}");
        assert!(line(&[(2.0, 1.0), (2.0, 3.0)]).is_none());
    }
}
