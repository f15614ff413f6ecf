//! The model beside the measurement: the ceiling for each point's link and size, and the fit of
//! T(N) = N/(B·f) + m over a sweep (document 002).

use crate::bench::results::{Fit, Mode, Point, PointCeiling};
use crate::model::{self, transfer, Conditions};

/// The model's ceiling for `mode` at `size_bytes` per direction under the run's conditions.
pub fn ceiling(conditions: &Conditions, mode: Mode, size_bytes: u64) -> PointCeiling {
    let c = model::ceiling(conditions, mode, size_bytes);
    let note = match (c.write_mbps, c.read_mbps) {
        (Some(w), Some(r)) => Some(format!("writes {w:.2} + reads {r:.2} MB/s at once")),
        _ => None,
    };
    PointCeiling { mbps: c.mbps, limit: c.limit, percent_reached: None, note }
}

/// Fill in the percentage of the ceiling a measured median reached.
pub fn with_measured(mut ceiling: PointCeiling, median_mbps: f64) -> PointCeiling {
    if ceiling.mbps > 0.0 {
        ceiling.percent_reached = Some(median_mbps / ceiling.mbps * 100.0);
    }
    ceiling
}

/// An emulated device's link is nominal and its rates are the emulator's: no output may state
/// them as a share of a ceiling or of the link, so the percentages and the fits' f go empty.
pub fn without_comparison(points: &mut [Point], fits: &mut [Fit]) {
    for ceiling in points.iter_mut().filter_map(|p| p.ceiling.as_mut()) {
        ceiling.percent_reached = None;
    }
    for fit in fits {
        fit.f = None;
    }
}

/// Fit T(N) = N/(B·f) + m to every mode with two or more measured sizes. B is the link's rate
/// after encoding (twice it for `both`); without a link, only B·f, m and N½ are meaningful.
pub fn fits(points: &[Point], conditions: Option<&Conditions>) -> Vec<Fit> {
    let mut modes: Vec<Mode> = points.iter().map(|p| p.mode).collect();
    modes.dedup();
    modes
        .into_iter()
        .filter_map(|mode| {
            let data: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.mode == mode)
                .filter_map(|p| p.summary.as_ref().map(|s| (p.bytes_per_step as f64, s.median_mbps)))
                .collect();
            let bus_mbps = conditions.map(|c| c.params.link.encoded_mbps() * mode.directions().len() as f64);
            let fitted = transfer::fit(bus_mbps.unwrap_or(1.0), &data).ok()?;
            let residuals = transfer::residuals(&fitted, &data);
            let rejected = rejection(fitted.m_us, bus_mbps.map(|_| fitted.f), &residuals);
            Some(Fit {
                mode,
                bus_mbps,
                f: bus_mbps.map(|_| fitted.f),
                m_us: fitted.m_us,
                asymptotic_mbps: fitted.asymptotic_mbps(),
                n_half_bytes: fitted.n_half_bytes(),
                residuals: data.iter().map(|d| d.0 as u64).zip(residuals).collect(),
                rejected,
            })
        })
        .collect()
}

/// Largest |measured/fitted − 1| a fit may leave and still describe the measurements.
pub const MAX_RESIDUAL: f64 = 0.10;

/// Why a fit of T(N) = N/(B·f) + m does not describe the measurements, if it does not: a
/// negative per-transfer cost or a rate above the bus are not physical, and large residuals
/// mean the time is not linear in N (a copy to user space that grows faster than the transfer,
/// caches, a device that changes mode).
pub fn rejection(m_us: f64, f: Option<f64>, residuals: &[f64]) -> Option<String> {
    let worst = residuals.iter().fold(0.0f64, |w, r| w.max(r.abs()));
    if m_us < 0.0 {
        Some(format!("m = {m_us:.2} µs is negative: the time grows faster than linearly in N, so no constant per-transfer cost describes it"))
    } else if f.is_some_and(|f| f > 1.0) {
        Some(format!("f = {:.3} is above 1: the fit claims more than the bus rate B", f.unwrap_or(0.0)))
    } else if worst > MAX_RESIDUAL {
        Some(format!("residuals up to {:.0} % (limit {:.0} %): T(N) is not linear in N over these sizes", worst * 100.0, MAX_RESIDUAL * 100.0))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_follow_the_model_per_direction() {
        let mut params = model::LinkParams::typical("gen1x4".parse().unwrap());
        (params.mps_bytes, params.mrrs_bytes) = (128, 512);
        let state = Conditions { params, capable: None, source: "test".into(), assumed: vec![], credits: None };
        let d2h = ceiling(&state, Mode::D2h, 1 << 20);
        // Reference case 6: Gen1 x4, MPS 128, 3DW → 864.86 MB/s from TLP overhead alone; a model
        // that also charges DLLPs or SKPs may only go lower.
        assert!(d2h.mbps < 864.87 && d2h.mbps > 800.0, "{}", d2h.mbps);
        let both = ceiling(&state, Mode::Both, 1 << 20);
        // At once, each direction also carries the other stream's requests and DLLPs.
        assert!(both.mbps <= d2h.mbps + ceiling(&state, Mode::H2d, 1 << 20).mbps);
        assert!(both.mbps > d2h.mbps);
        let half = d2h.mbps / 2.0;
        assert_eq!(with_measured(d2h, half).percent_reached, Some(50.0));
    }
}
