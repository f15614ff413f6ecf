//! `pcieperf demo`: the performance-demo register flow of document 001 §4 against a target.

use clap::Args;

use crate::bench::demo::{self, DemoOptions};
use crate::bench::demo_run;
use crate::engine::OpenOptions;
use crate::model::Mode;
use crate::report::view::{self, Document, Format, ViewOptions};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf demo                                  document 001's demo on its simulated board
  pcieperf demo --target sim:gen5x16 --write
  pcieperf demo --target sim:doc001 --json

Document 001 is named on docs/sources.md. Exit codes: 0 success, 1 engine error, 2 bad input,
130 interrupted (Ctrl-C, SIGTERM, SIGHUP: the finished measurements are printed).")]
pub struct DemoArgs {
    /// Target with the performance-demo endpoint's registers (see `pcieperf dma --help` for syntax).
    #[arg(long, default_value = "sim:doc001")]
    pub target: String,
    /// Run "Start Write" (device→host, d2h). Without --write/--read/--read-write all three run.
    #[arg(long)]
    pub write: bool,
    /// Run "Start Read" (host→device, h2d).
    #[arg(long)]
    pub read: bool,
    /// Run "Start Read/Write" (both at once).
    #[arg(long)]
    pub read_write: bool,
    /// Block amount (step 4): bytes per direction = 0x2000 × N. Default: the document's
    /// 0xA343C × link multiplier; co-simulated targets default to 8 (64 KiB), as simulating
    /// the document's gigabytes of RTL activity would take days. At least 1; at most 2^27
    /// (1 TiB per direction, pcieperf's largest transfer).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_BLOCK_AMOUNT))]
    pub block_amount: Option<u32>,
    /// Seed for simulated behaviour.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The largest block amount: 0x2000 bytes × 2^27 = 1 TiB per direction.
const MAX_BLOCK_AMOUNT: i64 = (crate::units::MAX_SIZE_BYTES / 0x2000) as i64;

pub fn run(args: DemoArgs) -> anyhow::Result<i32> {
    let chosen: Vec<Mode> = [(args.write, Mode::D2h), (args.read, Mode::H2d), (args.read_write, Mode::Both)]
        .into_iter()
        .filter_map(|(on, mode)| on.then_some(mode))
        .collect();
    let modes = if chosen.is_empty() { demo::MODES.to_vec() } else { chosen };
    let options = DemoOptions { modes, block_amount: args.block_amount, ..DemoOptions::default() };
    let mut engine = crate::engine::open(&args.target, &OpenOptions { seed: args.seed, ..OpenOptions::default() })?;
    let document = demo_run::run(engine.as_mut(), &args.target, args.seed, options, crate::bench::cancel::on_ctrl_c())?;
    super::engine_notes(engine.as_ref());
    let format = if args.json { Format::Json } else { Format::Text };
    let stopped = document.demo.stopped.clone();
    view::print(&Document::Demo(document), format, &ViewOptions::default())?;
    Ok(stopped.map_or(0, |s| s.exit_code()))
}
