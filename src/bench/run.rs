//! The main job (`pcieperf run`): choose a target, measure d2h, h2d and both over a size sweep,
//! and say what limits the result. The procedure is [`crate::bench::dma::measure`]; this module
//! decides what to measure and states the machine around the target in the results.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::bench::dma::{self, DmaOptions, Progress};
use crate::bench::machine;
use crate::bench::results::{Mode, Results};
use crate::bench::stats::StopRule;
use crate::engine::{Candidate, Choice, Engine, EngineInfo};
use crate::error::InvalidInput;
use crate::pci::InspectOptions;

/// A finished main job: the results document, and the notes its summary starts with.
pub struct MainJob {
    pub results: Results,
    pub notes: Vec<String>,
}

/// Measure `engine`, opened from `choice`, with `options` fitted to what it can do; the
/// machine around it (from `candidates`, the targets detected) goes into the results.
pub fn measure(
    engine: &mut dyn Engine,
    choice: &Choice,
    mut options: DmaOptions,
    candidates: Vec<Candidate>,
    cancel: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<MainJob, InvalidInput> {
    let info = engine.info().clone();
    let simulated = if info.simulated { format!(" — {}", info.label()) } else { String::new() };
    let mut notes = vec![format!("target {} ({}){simulated}", choice.target, choice.why)];
    let machine = machine::inspect_for(&info, &InspectOptions::default(), candidates);
    notes.extend(machine.lines());
    notes.extend(fit_to_engine(&mut options, &info));
    let mut results = dma::measure(engine, &options, cancel, progress)?;
    results.conditions.machine = Some(machine);
    Ok(MainJob { results, notes })
}

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
