//! `pcieperf run`: the main job. Choose a target, measure d2h, h2d and both over a size sweep,
//! write the results document, and print one summary that says what limits the result.

use std::path::PathBuf;

use clap::Args;

use super::dma::MeasureArgs;
use crate::bench::cancel;
use crate::bench::host;
use crate::bench::run as plan;
use crate::engine;
use crate::report::output::emit;
use crate::report::progress::TerminalProgress;

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf run                          a usable device of this machine, else the simulator (labelled)
  pcieperf run --quick                  a first look in seconds
  pcieperf run --target /dev/nvme0n1    an NVMe drive, reads only
  pcieperf run --target xdma:/dev/xdma0 --out run.json

Exit codes: 0 success, 1 engine error or verification failure, 2 bad input, 130 interrupted
(the results file is still written, marked \"complete\": false).")]
pub struct RunArgs {
    /// Target, written ENGINE[:ARGUMENT] (default: a usable device found on this machine, else
    /// the simulated endpoint `sim`).
    #[arg(long)]
    pub target: Option<String>,
    /// Results document (JSON); default `pcieperf-<host>-<UTC time>.json` here; `-`: standard
    /// output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Fewer sizes and a shorter budget per size (for a first look, or tests).
    #[arg(long)]
    pub quick: bool,
    /// Print the results document on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
}

/// The default results file name, e.g. `pcieperf-lab1-20261122T021051Z.json`.
pub fn default_out() -> PathBuf {
    let host: String = host::hostname().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    PathBuf::from(format!("pcieperf-{host}-{}.json", host::now_utc_compact()))
}

pub fn run(args: RunArgs) -> anyhow::Result<i32> {
    let candidates = engine::detect();
    let mut options = plan::options(args.quick);
    args.measure.apply(&mut options);
    let largest = options.sizes.iter().copied().max().unwrap_or(0);
    let (choice, scratch) = match &args.measure.engine.scratch {
        Some(_) => args.measure.target(None, largest)?,
        None => (engine::choose(args.target.as_deref(), &candidates), None),
    };
    let out = args.out.clone().unwrap_or_else(default_out);
    args.measure.outputs(args.json, false, Some(&out), Vec::new()).check(&choice.target)?;
    let mut engine = args.measure.open(&choice.target, scratch.is_some())?;
    let info = engine.info().clone();
    if !args.json && !super::quiet() {
        let simulated = if info.simulated { format!(" ({})", info.label()) } else { String::new() };
        eprintln!("pcieperf run: {} on {}{simulated}", info.description, choice.target);
    }
    let mut progress = TerminalProgress::new(args.json || super::quiet(), info.label());
    let job = plan::measure(engine.as_mut(), &choice, options, candidates, cancel::on_ctrl_c(), &mut progress)?;
    super::engine_notes(engine.as_ref());
    emit(job.results, &args.measure.outputs(args.json, false, Some(&out), job.notes))
}
