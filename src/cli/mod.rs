//! The command line: argument parsing and wiring, nothing else.
//!
//! Exit codes: 0 success, 1 a failure (or warnings with `--strict`), 2 bad input,
//! 130 interrupted by SIGINT, SIGTERM or SIGHUP (partial results are still written).

mod demo;
mod dma;
mod inspect;
mod model;
mod pio;
mod report;
mod run;
mod values;

use clap::{Parser, Subcommand};

use crate::error::InvalidInput;

/// PCI Express performance: what a link should deliver, what it delivers, and why the gap.
///
/// Rates are in MB/s = 10^6 bytes/s unless a command says otherwise.
#[derive(Debug, Parser)]
#[command(name = "pcieperf", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Theoretical throughput of a link: tables, breakdown, fits, MMIO and status word.
    Model(model::ModelArgs),
    /// Every PCI device's link, limits and theoretical ceiling (sysfs or an lspci dump).
    Inspect(inspect::InspectArgs),
    /// Measure DMA throughput through a target, one direction or both, over transfer sizes.
    Dma(dma::DmaArgs),
    /// Run the performance-demo register flow of document 001 §4 against a target.
    Demo(demo::DemoArgs),
    /// CPU-initiated MMIO: document 000 §4's tests (single accesses, sequences, write combining,
    /// stopwatch) against a BAR (bar:BDF) or the simulator.
    Pio(pio::PioArgs),
    /// The main job: inspect, pick a target, measure both directions over a size sweep, summarise.
    Run(run::RunArgs),
    /// Show a saved results document again (text, CSV, HTML), or compare two runs.
    Report(report::ReportArgs),
}

/// Run the command line and return the process exit code.
pub fn main() -> i32 {
    // First thing: from here on a signal only sets the flag, so a run interrupted at any moment
    // still writes what it has (see `crate::cancel`).
    crate::cancel::install();
    restore_default_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() { 2 } else { 0 };
        }
    };
    let result = match cli.command {
        Command::Model(args) => model::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Dma(args) => dma::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Pio(args) => pio::run(args),
        Command::Run(args) => run::run(args),
        Command::Report(args) => report::run(args),
    };
    let code = match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("pcieperf: {}", describe(&error));
            exit_code_for(&error)
        }
    };
    // A signal that came while a command without results was running still ends it as one.
    if crate::cancel::requested() {
        return crate::cancel::EXIT_INTERRUPTED;
    }
    code
}

/// The error and its causes on one line, leaving out a cause whose text an outer message already
/// quotes (an I/O error that is both shown and chained as the source).
pub fn describe(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain().map(|c| c.to_string()) {
        if line.contains(&cause) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&cause);
    }
    line
}

/// 2 when the cause is the user's input, 1 otherwise.
pub fn exit_code_for(error: &anyhow::Error) -> i32 {
    let bad_input = error.chain().any(|cause| {
        cause.downcast_ref::<InvalidInput>().is_some()
            || matches!(
                cause.downcast_ref::<crate::engine::EngineError>(),
                Some(crate::engine::EngineError::InvalidInput(_) | crate::engine::EngineError::UnknownTarget(..))
            )
    });
    if bad_input { 2 } else { 1 }
}

/// Writing to a closed pipe (`pcieperf model | head`) should end the process quietly, as it does
/// for other Unix tools, not panic inside `println!`.
fn restore_default_sigpipe() {
    // SAFETY: setting a signal disposition to its default has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
