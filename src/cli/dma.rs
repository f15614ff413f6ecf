//! `pcieperf dma`: measure DMA through a target, one direction or both, over transfer sizes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::bench::cancel;
use crate::bench::dma::{self, DmaOptions};
use crate::bench::results::Mode;
use crate::bench::stats::StopRule;
use crate::bench::verify::VerifyKind;
use crate::engine::{self, Engine, OpenOptions};
use crate::error::InvalidInput;
use crate::report::output::{emit, Outputs};
use crate::report::progress::TerminalProgress;
use crate::units;
use super::values::named;

#[derive(Debug, Args)]
#[command(after_help = engines_help())]
pub struct DmaArgs {
    /// Target, written ENGINE[:ARGUMENT] (default: a usable device found on this machine, else
    /// the simulated endpoint `sim`).
    #[arg(long)]
    pub target: Option<String>,
    /// Direction: h2d (host→device), d2h (device→host) or both at once.
    #[arg(long = "dir", value_parser = named::<Mode>(), default_value = "d2h")]
    pub dir: Mode,
    /// Transfer size or sweep: `1MiB`, `4KiB..64MiB` (doubling), `64,128,256` [default: 1MiB;
    /// co-simulated targets: 64KiB].
    #[arg(long)]
    pub sizes: Option<String>,
    /// Time budget per size on the engine's clock: `10s`, `500ms` [default: 10s; co-simulated
    /// targets: 200us of simulated time].
    #[arg(long, value_parser = units::parse_duration)]
    pub duration: Option<Duration>,
    /// Print the results document (JSON) on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Write the results document (JSON) to this file (a new path or a writable regular file;
    /// `-`: standard output), atomically.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Stop repeating once the median's 95 % confidence interval is within ± this many percent
    /// of it (after at least 10 transfers and a tenth of --duration), or once the rate drifts;
    /// 0: never stop early, run the whole --duration (up to 100,000 samples).
    #[arg(long, default_value_t = 1.0, alias = "cov-target")]
    pub ci_target: f64,
    /// Count stalls longer than this: `50us`.
    #[arg(long, default_value = "50us", value_parser = units::parse_duration)]
    pub stall_threshold: Duration,
    /// Print the summary as CSV on stdout.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Deadline per transfer: a device that does not answer in time ends the run.
    #[arg(long, default_value = "10s", value_parser = units::parse_duration)]
    pub deadline: Duration,
    /// nvbandwidth's defaults on a `cuda` target, to compare one to one: 512 MiB copies, the
    /// median of 3 samples, each of 4 warm-up and 16 timed copies (the engine's defaults);
    /// the point's time budget grows to 120 s so the three samples always complete.
    #[arg(long, conflicts_with = "sizes")]
    pub nvbandwidth: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
}

/// Flags `dma` and `run` share: data, extra report files, and how to open hardware targets.
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// Data verification: lfsr, counter, all (lfsr, and every h2d write to a file or memory
    /// device read back: the sustained write rate then pays a read-back per write) or none.
    #[arg(long, value_parser = named::<VerifyKind>(), default_value = "lfsr")]
    pub verify: VerifyKind,
    /// Seed of the test pattern (and of simulated behaviour).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Copy every d2h buffer into a user buffer (with a CRC32 when verifying) and count its time.
    #[arg(long)]
    pub copy_to_user: bool,
    /// Write an HTML report (inline SVG plots) to this file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Write a Prometheus text exposition of the summary to this file.
    #[arg(long)]
    pub metrics: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

impl MeasureArgs {
    /// Apply the shared flags to a procedure's options.
    pub fn apply(&self, options: &mut DmaOptions) {
        options.verify = self.verify;
        options.seed = self.seed;
        options.copy_to_user = self.copy_to_user;
        options.numa = self.engine.numa;
    }

    /// The target to measure: a scratch file (`--scratch DIR`, large enough for `largest_bytes`),
    /// else the one given, else the one `choose` picks. The scratch file lives as long as the
    /// returned guard.
    pub fn target(&self, given: Option<&str>, largest_bytes: u64) -> anyhow::Result<(engine::Choice, Option<tempfile::NamedTempFile>)> {
        let Some(dir) = &self.engine.scratch else {
            return Ok((engine::choose(given, &engine::detect()), None));
        };
        let (file, leftovers) = engine::scratch::create(dir, largest_bytes)?;
        leftovers.iter().for_each(super::note);
        let why = format!("a scratch file pcieperf created ({} bytes, removed at the end): writes touch nothing else", largest_bytes);
        eprintln!("pcieperf: measuring {}: {why}", file.path().display());
        Ok((engine::Choice { target: format!("block:{}", file.path().display()), why }, Some(file)))
    }

    /// Open a target with these flags (the same seed drives the pattern and the simulator); a
    /// scratch file is ours to write.
    pub fn open(&self, target: &str, scratch: bool) -> anyhow::Result<Box<dyn Engine>> {
        let mut options = self.engine.open_options(self.seed);
        options.destructive |= scratch;
        options.data_unread = self.verify == VerifyKind::None;
        Ok(engine::open(&resolve_target(target), &options)?)
    }

    /// Where a finished run goes besides the terminal.
    pub fn outputs<'a>(&'a self, json_stdout: bool, csv_stdout: bool, out: Option<&'a Path>, notes: Vec<String>) -> Outputs<'a> {
        Outputs { json_stdout, csv_stdout, out, html: self.html.as_deref(), metrics: self.metrics.as_deref(), notes }
    }
}

/// A bare path to a block device (`/dev/nvme0n1`) means the `block:` engine on it, as a user
/// coming from fio writes it; said in a note so the spelling is learnt.
pub fn resolve_target(target: &str) -> String {
    use std::os::unix::fs::FileTypeExt;
    let is_block_device = std::fs::metadata(target).is_ok_and(|m| m.file_type().is_block_device());
    if target.starts_with('/') && (is_block_device || target.starts_with("/dev/nvme") || target.starts_with("/dev/sd")) {
        super::note(format!("--target {target} is read as block:{target} (the block-device engine)"));
        return format!("block:{target}");
    }
    target.to_string()
}

/// `dma --help`: the engine table (name, argument, what it is, the flags it reads), examples
/// and exit codes.
fn engines_help() -> String {
    let engines = engine::registry::engines_help();
    format!(
        "Targets (--target ENGINE:ARGUMENT):\n{}\n  /dev/nvme0n1 (a path to a block device) is read as block:/dev/nvme0n1\n\n\
Simulator presets and their documents (each prediction's distance: docs/simulator.md):\n{}\n\n\
Examples:
  pcieperf dma --target sim:gen3x8 --dir both --sizes 4KiB..64MiB --out run.json
  pcieperf dma --target /dev/nvme0n1 --dir d2h --sizes 1MiB      # reads only, O_DIRECT
  pcieperf dma --target xdma:/dev/xdma0 --dir h2d --channels 2
  pcieperf dma --target block:/tmp/file --dir both --json > run.json

Exit codes: 0 success, 1 engine error or verification failure, 2 bad input, 130 interrupted
(the results file is still written, marked \"complete\": false).",
        engines,
        engine::sim::published::help()
    )
}

/// How to open hardware targets; shared by `dma` and `run`. Zero means the engine's default.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Allow writes that destroy data on a block device or file (h2d and both on `block:`).
    /// Without it `block:` only reads, and checks that repeated reads agree.
    #[arg(long)]
    pub destructive: bool,
    /// Measure a scratch file pcieperf creates in DIR (on the disk to measure) and removes at
    /// the end: reads and writes, nothing else touched.
    #[arg(long, value_name = "DIR", conflicts_with = "target")]
    pub scratch: Option<PathBuf>,
    /// I/Os kept in flight on `block:` targets [default: 8].
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub queue_depth: usize,
    /// Bytes per I/O a transfer is split into on `block:` targets [default: 128KiB].
    #[arg(long, value_parser = super::values::size)]
    pub io_size: Option<u64>,
    /// NUMA node of the measuring thread and the DMA buffers: auto (the device's node, where
    /// the kernel gives one, as nvbandwidth places a GPU's), off, or a node number; the
    /// placement is checked page by page and reported.
    #[arg(long, value_name = "NODE", value_parser = crate::engine::numa::Request::parse, default_value = "auto")]
    pub numa: crate::engine::numa::Request,
    /// Flags the engines declare for themselves (`xdma`: --card-addr, --channels, --device-clock).
    #[command(flatten)]
    pub flags: super::engine_flags::EngineFlags,
}

impl EngineArgs {
    pub fn open_options(&self, seed: u64) -> OpenOptions {
        OpenOptions {
            seed,
            destructive: self.destructive,
            queue_depth: self.queue_depth,
            io_bytes: self.io_size.unwrap_or(0),
            flags: self.flags.0.clone(),
            data_unread: false,
            sysfs_root: None,
            numa: self.numa,
        }
    }
}

/// Percent on the command line, fraction in the options.
pub fn ci_fraction(percent: f64) -> Result<f64, InvalidInput> {
    if (0.0..=100.0).contains(&percent) {
        Ok(percent / 100.0)
    } else {
        Err(InvalidInput::new(format!("invalid --ci-target {percent}: give a percentage from 0 (never stop early) to 100")))
    }
}

/// The sample cap with `--ci-target 0`: 50× the usual, so the budget, not the cap, ends a
/// point of 1 MiB block transfers (~1,000 a second here); bounds the results file (~10 MB).
const WHOLE_BUDGET_MAX_SAMPLES: usize = 100_000;

/// Defaults of `--sizes` and `--duration`.
const SIZES: &str = "1MiB";
const DURATION: Duration = Duration::from_secs(10);
/// Their defaults on a co-simulated target, which moves ~50 KB per wall-clock second: a few
/// 64 KiB transfers (each seconds of wall time) instead of hours for 10 s of 1 MiB ones.
const COSIM_SIZES: &str = "64KiB";
const COSIM_DURATION: Duration = Duration::from_micros(200);

/// Budget a point by `duration` on the engine's clock (a tenth of it before a point may stop).
fn set_duration(options: &mut DmaOptions, duration: Duration) {
    options.duration = duration;
    options.wall_limit = duration;
    options.stop.min_time_ns = duration.as_secs_f64() * 1e9 / 10.0;
}

pub fn run(args: DmaArgs) -> anyhow::Result<i32> {
    let sizes = units::parse_size_list(args.sizes.as_deref().unwrap_or(SIZES))?;
    let mut options = DmaOptions::new(vec![args.dir], sizes);
    options.stop = StopRule { ci_target: ci_fraction(args.ci_target)?, ..StopRule::default() };
    if options.stop.ci_target == 0.0 {
        // The whole budget, as asked: the usual cap would end a fast point early.
        options.stop.max_samples = WHOLE_BUDGET_MAX_SAMPLES;
    }
    set_duration(&mut options, args.duration.unwrap_or(DURATION));
    options.stall_threshold_ns = args.stall_threshold.as_secs_f64() * 1e9;
    options.deadline = args.deadline;
    args.measure.apply(&mut options);
    if args.nvbandwidth {
        nvbandwidth_preset(args.target.as_deref(), &mut options)?;
    }
    let largest = options.sizes.iter().copied().max().unwrap_or(0);
    let (choice, scratch) = args.measure.target(args.target.as_deref(), largest)?;
    let outputs = args.measure.outputs(args.json, args.csv, args.out.as_deref(), Vec::new());
    outputs.check(&choice.target)?;
    let mut engine = args.measure.open(&choice.target, scratch.is_some())?;
    if engine.info().co_simulated {
        if args.sizes.is_none() {
            options.sizes = units::parse_size_list(COSIM_SIZES)?;
        }
        if args.duration.is_none() {
            set_duration(&mut options, COSIM_DURATION);
        }
        if args.sizes.is_none() || args.duration.is_none() {
            super::note(format!("co-simulation: {} per point of simulated time at {} (defaults for co-simulated targets: each byte costs wall-clock time)", units::format_ns(options.duration.as_secs_f64() * 1e9), options.sizes.iter().map(|&s| units::format_size(s)).collect::<Vec<_>>().join(", ")));
        }
    }
    let quiet = args.json || args.csv;
    let mut progress = TerminalProgress::new(quiet || super::quiet(), engine.info().label());
    let results = dma::measure(engine.as_mut(), &options, cancel::on_ctrl_c(), &mut progress)?;
    super::engine_notes(engine.as_ref());
    emit(results, &outputs)
}

/// `--nvbandwidth`: nvbandwidth's buffer size and sample count (the engine's own defaults are
/// its warm-up and loop counts); every sample is one of its measurements, so no warm-up steps.
fn nvbandwidth_preset(target: Option<&str>, options: &mut DmaOptions) -> Result<(), crate::error::InvalidInput> {
    use crate::engine::cuda;
    if !target.is_some_and(|t| t == "cuda" || t.starts_with("cuda:")) {
        return Err(crate::error::InvalidInput::new("--nvbandwidth reproduces nvbandwidth's copies: give a cuda target (--target cuda:0)"));
    }
    options.sizes = vec![cuda::NVBANDWIDTH_BUFFER_BYTES];
    options.warmup = 0;
    options.stop.max_samples = cuda::NVBANDWIDTH_SAMPLES;
    // Three samples end the point; the budget only has to let them (20 copies of 512 MiB each).
    let budget = std::time::Duration::from_secs(120);
    options.duration = options.duration.max(budget);
    options.wall_limit = options.wall_limit.max(budget);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_targets_are_percentages() {
        assert!(ci_fraction(-1.0).is_err());
        assert!(ci_fraction(100.5).is_err());
        assert_eq!(ci_fraction(0.0).unwrap(), 0.0);
        assert_eq!(ci_fraction(1.0).unwrap(), 0.01);
    }
}
