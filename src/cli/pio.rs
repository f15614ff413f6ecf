//! `pcieperf pio`: document 000 §4's CPU-initiated MMIO tests against a BAR or the simulator.

use std::path::PathBuf;

use clap::Args;

use crate::bench::pio::{parse_tests, read_only_tests, PioOptions};
use crate::bench::pio_run;
use crate::engine::{OpenOptions, Width};
use crate::report::output;
use crate::report::view::{self, Document, Format, ViewOptions};

/// Document 000 §4.3's tests, as `--help` lists them (checked against `bench::pio::TESTS`).
pub const TESTS_HELP: &str = "Tests (document 000 §4; read-only ones run by default: 2, 4, 7, 9, 11, 13, 15, 16):
   1  two writes                         9  64 x n reads, CPU time
   2  two reads                         10  n 64-bit writes
   3  n writes, successive addresses    11  n 64-bit reads
   4  n reads, successive addresses     12  64 x n 64-bit writes, CPU time
   5  n write + read-back pairs         13  64 x n 64-bit reads, CPU time
   6  n writes to one address           14  write combining, sequential writes of 1 B to 4 KiB
   7  n reads from one address          15  reads of 1, 2, 4 and 8 bytes
   8  64 x n writes, CPU time           16  stopwatch cost and TSC calibration
Tests 3, 4, 5, 10, 11 walk [offset, offset + n x width); 14 writes [offset, offset + 4 KiB); the others stay at the offset.
Writes need --destructive unless a device profile names the range scratch (QEMU edu BAR0+0x4, ivshmem-plain BAR2).";

#[derive(Debug, Args)]
#[command(after_help = TESTS_HELP)]
pub struct PioArgs {
    /// bar:BDF[,bar=N][,via=sysfs|uio|vfio][,wc], or sim:doc000 (the simulator's RAM BAR).
    #[arg(long, default_value = "sim:doc000")]
    pub target: String,
    /// Offset in the BAR where the tests start (hex with 0x).
    #[arg(long, default_value = "0", value_parser = parse_offset)]
    pub offset: u64,
    /// Document 000 test numbers: 1..16, 14,15, 2,4..7. Default: the read-only ones.
    #[arg(long)]
    pub tests: Option<String>,
    /// Access width in bytes for Tests 1–9 (10–13 are 64-bit, 14 and 15 sweep sizes).
    #[arg(long, default_value_t = 4, value_parser = parse_width)]
    pub width: u8,
    /// n: accesses per test (blocks of 64 for Tests 8, 9, 12, 13; repetitions per size for 14).
    #[arg(long, default_value_t = 1000)]
    pub count: u64,
    /// Allow writes to offsets no device profile names as scratch.
    #[arg(long)]
    pub destructive: bool,
    /// Print the pcieperf.pio/2 JSON document on stdout.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print one CSV row per test and size.
    #[arg(long)]
    pub csv: bool,
    /// Write the JSON document to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write an HTML report (delay histograms and traces) to this file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Seed for simulated behaviour.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where sysfs is mounted (for tests and chroots).
    #[arg(long, default_value = "/sys")]
    pub sysfs_root: PathBuf,
}

fn parse_width(text: &str) -> Result<u8, String> {
    text.parse::<u8>().ok().filter(|w| [1, 2, 4, 8].contains(w)).ok_or_else(|| format!("width '{text}': 1, 2, 4 or 8 bytes"))
}

fn parse_offset(text: &str) -> Result<u64, String> {
    crate::units::parse_number(text).ok_or_else(|| format!("offset '{text}': a byte offset, decimal or 0x-hex"))
}

pub fn run(args: PioArgs) -> anyhow::Result<i32> {
    let outputs: Vec<&std::path::Path> = [args.out.as_deref(), args.html.as_deref()].into_iter().flatten().collect();
    output::check_all(&outputs, &[])?;
    let tests = match &args.tests {
        Some(list) => parse_tests(list)?,
        None => read_only_tests(),
    };
    let options = OpenOptions { seed: args.seed, destructive: args.destructive, sysfs_root: Some(args.sysfs_root.clone()), ..OpenOptions::default() };
    let mut engine = crate::engine::open(&args.target, &options)?;
    let width = Width::from_bytes(args.width.into()).expect("clap allows 1, 2, 4, 8 only");
    let pio = PioOptions { tests, offset: args.offset, width, count: args.count, destructive: args.destructive, ..PioOptions::default() };
    let outcome = pio_run::run(engine.as_mut(), &args.target, &args.sysfs_root, pio)?;
    super::engine_notes(engine.as_ref());
    if let Some(why) = &outcome.no_prediction {
        eprintln!("pcieperf: note: no model prediction: {why}");
    }
    for warning in &outcome.run.pinning.warnings {
        eprintln!("pcieperf: warning: {warning}");
    }
    let mismatches = outcome.run.mismatches();
    let document = Document::Pio(outcome.run);
    let options = ViewOptions::default();
    if let Some(path) = &args.out {
        output::write(path, &view::render(&document, Format::Json, &options)?)?;
    }
    if let Some(path) = &args.html {
        output::write(path, &view::render(&document, Format::Html, &options)?)?;
        output::written("HTML report", path);
    }
    let format = if args.json { Format::Json } else if args.csv { Format::Csv } else { Format::Text };
    view::print(&document, format, &options)?;
    if mismatches > 0 {
        eprintln!("pcieperf: {mismatches} read-backs differed from what was written (Test 5)");
        return Ok(1);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn help_lists_every_test_by_its_name() {
        for test in crate::bench::pio::TESTS {
            assert!(super::TESTS_HELP.contains(&format!("{:>2}  {}", test.number, test.name)), "Test {} missing from help", test.number);
        }
    }
}
