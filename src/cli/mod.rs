//! The command line: argument parsing and wiring, nothing else.
//!
//! Exit codes: 0 success, 1 a failure (or warnings with `--strict`), 2 bad input,
//! 130 interrupted by SIGINT, SIGTERM or SIGHUP (partial results are still written).

mod engine_flags;
mod values;


use clap::{CommandFactory, Parser, Subcommand};

/// PCI Express performance: what a link should deliver, what it delivers, and why the gap.
///
/// Rates are in MB/s = 10^6 bytes/s unless a command says otherwise.
#[derive(Debug, Parser)]
#[command(name = "pcieperf", version, about, long_about = None, propagate_version = true, arg_required_else_help = true)]
#[command(after_help = "Examples:
  pcieperf run                                  measure this machine's device, or the simulator
  pcieperf inspect -F examples/gen3x8-nic-at-x4.lspci -v
  pcieperf model --link gen4x16 --sizes 64..4MiB:x4
  pcieperf --generate complete-bash > ~/.local/share/bash-completion/completions/pcieperf

Exit codes: 0 success, 1 a failure (engine error, verification failure, --strict warnings),
2 bad input, 130 interrupted (partial results are still written).
Documents 000-003 cited in output are named on docs/sources.md.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Print only results and errors: no notes, progress or "written to" lines on standard error.
    #[arg(short = 'q', long, global = true)]
    pub quiet: bool,
    /// Tables with every column even on a narrow terminal (a pipe or a file always gets all).
    #[arg(long, global = true)]
    pub wide: bool,
    /// Print shell completions or a man page to standard output and exit: complete-bash,
    /// complete-zsh, complete-fish, man (pcieperf(1)), or man-COMMAND for a subcommand's page
    /// (man-dma is pcieperf-dma(1), man-model-fit is pcieperf-model-fit(1)).
    #[arg(long, value_name = "WHAT", value_parser = parse_generate)]
    pub generate: Option<Generate>,
}

/// What `--generate` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Generate {
    Completions(clap_complete::Shell),
    /// The page of `pcieperf` (empty) or of `pcieperf-<this>`.
    Man(String),
}

fn parse_generate(text: &str) -> Result<Generate, String> {
    use clap_complete::Shell;
    match text {
        "complete-bash" => Ok(Generate::Completions(Shell::Bash)),
        "complete-zsh" => Ok(Generate::Completions(Shell::Zsh)),
        "complete-fish" => Ok(Generate::Completions(Shell::Fish)),
        "man" => Ok(Generate::Man(String::new())),
        _ => match text.strip_prefix("man-") {
            Some(page) if !page.is_empty() && man_page(page).is_some() => Ok(Generate::Man(page.to_string())),
            _ => Err(format!("one of complete-bash, complete-zsh, complete-fish, man, man-COMMAND (pages: {})", man_pages().join(", "))),
        },
    }
}

/// The whole command line as clap renders it, subcommands named `pcieperf-dma` and so on.
fn built_command() -> clap::Command {
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    command
}

/// The page names below `pcieperf` (`dma`, `model-fit`, …), as the pages refer to each other.
pub fn man_pages() -> Vec<String> {
    fn walk(command: &clap::Command, out: &mut Vec<String>) {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            out.push(sub.get_display_name().unwrap_or(sub.get_name()).trim_start_matches("pcieperf-").to_string());
            walk(sub, out);
        }
    }
    let mut pages = Vec::new();
    walk(&built_command(), &mut pages);
    pages
}

/// The command whose page is `pcieperf-<page>` (`pcieperf` itself for an empty name).
fn man_page(page: &str) -> Option<clap::Command> {
    fn find(command: &clap::Command, wanted: &str) -> Option<clap::Command> {
        if command.get_display_name().unwrap_or(command.get_name()) == wanted {
            return Some(command.clone());
        }
        command.get_subcommands().find_map(|sub| find(sub, wanted))
    }
    let wanted = if page.is_empty() { "pcieperf".to_string() } else { format!("pcieperf-{page}") };
    find(&built_command(), &wanted)
}

/// Whether `--quiet` was given.
pub fn quiet() -> bool {
    crate::report::output::quiet()
}

/// Print the notes a target asks every run to carry ([`crate::engine::Engine::notes`]), once
/// the run got that far (a refused one stays one line).
pub fn engine_notes(engine: &dyn crate::engine::Engine) {
    engine.notes().iter().for_each(note);
}

/// A note on standard error (`pcieperf: note: …`), unless `--quiet`.
pub fn note(text: impl std::fmt::Display) {
    if !quiet() {
        eprintln!("pcieperf: note: {}", crate::printable::one_line(&text.to_string()));
    }
}

/// Completions (clap_complete) of the whole command line, or one man page (clap_mangen).
fn generate(what: Generate) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match what {
        Generate::Completions(shell) => clap_complete::generate(shell, &mut Cli::command(), "pcieperf", &mut out),
        Generate::Man(page) => return clap_mangen::Man::new(man_page(&page).unwrap_or_else(built_command)).render(&mut out),
    }
    Ok(())
}

/// Every subcommand, one line each: its variant, its module (`cli/<module>.rs`: the flags and
/// a `run` that maps them to a procedure, its options and formats) and its help line. The enum
/// clap parses and the dispatch are generated from this list, so a new procedure is its bench
/// file, its views, its module here and one line below.
macro_rules! commands {
    ($($(#[doc = $doc:literal])* $variant:ident($module:ident::$args:ident),)*) => {
        $(mod $module;)*

        #[derive(Debug, Subcommand)]
        pub enum Command {
            $($(#[doc = $doc])* $variant($module::$args),)*
        }

        fn dispatch(command: Command) -> anyhow::Result<i32> {
            match command {
                $(Command::$variant(args) => $module::run(args),)*
            }
        }
    };
}

commands! {
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
    /// Prometheus exporter: link health per scrape and the last results of runs, on /metrics.
    Serve(serve::ServeArgs),
    /// The model against the link simulator over a grid: model, simulation, difference, cause.
    Crosscheck(crosscheck::CrosscheckArgs),
    /// Trace a simulated link: the first packets as text (document 000's layout), VCD or pcapng.
    Trace(trace::TraceArgs),
    /// Stream messages through ring buffers (document 003): per-message latency, occupancy, bubbles, drops.
    Stream(stream::StreamArgs),
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
    crate::report::output::set_quiet(cli.quiet);
    crate::report::output::set_wide(cli.wide);
    if let Some(what) = cli.generate {
        return match generate(what) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("pcieperf: {e}");
                1
            }
        };
    }
    let Some(command) = cli.command else {
        let _ = Cli::command().print_help();
        return 2;
    };
    let result = dispatch(command);
    match result {
        // A command that finished says how it ended (its results know whether a signal stopped
        // them); a signal that lands after the results were written does not change that.
        Ok(code) => code,
        Err(error) => {
            eprintln!("pcieperf: {}", crate::report::output::describe(&error));
            crate::report::output::exit_code_for(&error)
        }
    }
}

/// Writing to a closed pipe (`pcieperf model | head`) should end the process quietly, as it does
/// for other Unix tools, not panic inside `println!`.
fn restore_default_sigpipe() {
    // SAFETY: setting a signal disposition to its default has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
