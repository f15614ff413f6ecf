//! The model beside the measurement: the ceiling for each point's link and size, and the fit of
//! T(N) = N/(B·f) + m over a sweep (document 002).

use crate::bench::results::{Ceiling, Fit, Mode, Point};
use crate::engine::LinkState;
use crate::model::{self, transfer, LinkParams, Throughput};

/// Model parameters for the link an engine reported: typical values (see
/// [`LinkParams::typical`]) with the engine's MPS and MRRS.
pub fn link_params(state: &LinkState) -> LinkParams {
    LinkParams { mps_bytes: state.mps_bytes, mrrs_bytes: state.mrrs_bytes, ..LinkParams::typical(state.link) }
}

/// The model's ceiling for `mode` at `size_bytes` per direction: posted writes for d2h,
/// reads (latency × tags) for h2d.
pub fn ceiling(state: &LinkState, mode: Mode, size_bytes: u64) -> Ceiling {
    let params = link_params(state);
    let one_way = |m: Mode| -> Throughput {
        match m {
            Mode::D2h => model::write_throughput(&params, size_bytes),
            _ => model::read_throughput(&params, size_bytes),
        }
    };
    match mode {
        Mode::Both => {
            // Each direction carries one stream's data and the other's requests and DLLPs.
            let (write, read) = model::bidirectional_throughput(&params, size_bytes);
            let limit = if read.efficiency < write.efficiency { read.limit } else { write.limit };
            Ceiling {
                mbps: write.mbps + read.mbps,
                limit,
                percent_reached: None,
                note: Some(format!("writes {:.2} + reads {:.2} MB/s at once", write.mbps, read.mbps)),
            }
        }
        one => {
            let t = one_way(one);
            Ceiling { mbps: t.mbps, limit: t.limit, percent_reached: None, note: None }
        }
    }
}

/// Fill in the percentage of the ceiling a measured median reached.
pub fn with_measured(mut ceiling: Ceiling, median_mbps: f64) -> Ceiling {
    if ceiling.mbps > 0.0 {
        ceiling.percent_reached = Some(median_mbps / ceiling.mbps * 100.0);
    }
    ceiling
}

/// Fit T(N) = N/(B·f) + m to every mode with two or more measured sizes. B is the link's rate
/// after encoding (twice it for `both`); without a link, only B·f, m and N½ are meaningful.
pub fn fits(points: &[Point], link: Option<&LinkState>) -> Vec<Fit> {
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
            let bus_mbps = link.map(|l| l.link.encoded_mbps() * mode.directions().len() as f64);
            let fitted = transfer::fit(bus_mbps.unwrap_or(1.0), &data).ok()?;
            let residuals = transfer::residuals(&fitted, &data);
            Some(Fit {
                mode,
                bus_mbps,
                f: bus_mbps.map(|_| fitted.f),
                m_us: fitted.m_us,
                asymptotic_mbps: fitted.asymptotic_mbps(),
                n_half_bytes: fitted.n_half_bytes(),
                residuals: data.iter().map(|d| d.0 as u64).zip(residuals).collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_follow_the_model_per_direction() {
        let state = LinkState { link: "gen1x4".parse().unwrap(), capable: None, mps_bytes: 128, mrrs_bytes: 512 };
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
