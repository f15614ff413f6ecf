//! The main job (`pcieperf run`): choose a target, measure d2h, h2d and both over a size sweep,
//! and say what limits the result. The procedure is [`crate::bench::dma::measure`]; this module
//! only decides what to measure.

use std::time::Duration;

use crate::bench::dma::DmaOptions;
use crate::bench::results::Mode;
use crate::bench::stats::StopRule;
use crate::engine::EngineInfo;

/// What `pcieperf run` measures: d2h, h2d, both over 4 KiB … 16 MiB (quick: 4 KiB … 1 MiB,
/// every fourth power), with a short budget per point so the whole job stays well under 30 s.
pub fn options(quick: bool) -> DmaOptions {
    let sizes: Vec<u64> = if quick {
        (12..=20).step_by(2).map(|s| 1u64 << s).collect()
    } else {
        (12..=24).map(|s| 1u64 << s).collect()
    };
    let mut options = DmaOptions::new(vec![Mode::D2h, Mode::H2d, Mode::Both], sizes);
    options.command = "run".into();
    options.duration = Duration::from_millis(if quick { 50 } else { 250 });
    options.wall_limit = Duration::from_millis(if quick { 100 } else { 300 });
    options.warmup = 1;
    options.stop = StopRule { ci_target: 0.01, min_time_ns: options.duration.as_secs_f64() * 1e9 / 10.0, max_samples: 500, ..StopRule::default() };
    options
}

/// Drop what the engine cannot do (directions it lacks, concurrency, sizes beyond its limits),
/// returning one note per omission so the summary can say so.
pub fn fit_to_engine(options: &mut DmaOptions, info: &EngineInfo) -> Vec<String> {
    let mut notes = Vec::new();
    options.modes.retain(|&mode| {
        let directions_ok = mode.directions().iter().all(|d| info.directions.contains(d));
        let ok = directions_ok && (mode != Mode::Both || info.concurrent);
        if !ok {
            notes.push(format!("{} skipped: target {} cannot do it", mode.name(), info.target));
        }
        ok
    });
    let limit = info.max_transfer_bytes.min(info.capacity_bytes.unwrap_or(u64::MAX));
    let align = info.alignment_bytes.max(1);
    let before = options.sizes.len();
    options.sizes.retain(|&s| s <= limit && s % align == 0);
    if options.sizes.len() < before {
        notes.push(format!("{} size(s) skipped: beyond the target's limits or alignment", before - options.sizes.len()));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_sweeps_three_modes() {
        let o = options(false);
        assert_eq!(o.modes, vec![Mode::D2h, Mode::H2d, Mode::Both]);
        assert_eq!((o.sizes[0], *o.sizes.last().unwrap()), (4096, 16 << 20));
        assert!(options(true).sizes.len() < o.sizes.len());
    }
}
