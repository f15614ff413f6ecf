//! `pcieperf report`: re-render a saved run, or compare two.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::invalid;
use crate::report::{compare, csv, html, json, metrics, output, pio, text};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf report run.json                          the summary again
  pcieperf report run.json --csv > run.csv
  pcieperf report run.json --html run.html --metrics run.prom
  pcieperf report before.json after.json            differing conditions first, then B/A per size
  pcieperf report before.json after.json --html cmp.html --json   the comparison as a page and JSON

Exit codes: 0 success, 2 a file that is not a results document.")]
pub struct ReportArgs {
    /// One results document to show, or two to compare (A then B); `-` reads standard input.
    #[arg(required = true, num_args = 1..=2)]
    pub files: Vec<PathBuf>,
    /// Print the run as CSV.
    #[arg(long)]
    pub csv: bool,
    /// Write the run as an HTML report to this file (`-`: standard output).
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Write a Prometheus text exposition of the run to this file (`-`: standard output).
    #[arg(long)]
    pub metrics: Option<PathBuf>,
    /// Print JSON: the results document, or for two files the comparison
    /// (schema pcieperf.comparison/1).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
}

pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let outputs: Vec<&Path> = [args.html.as_deref(), args.metrics.as_deref()].into_iter().flatten().collect();
    output::check_all(&outputs, &args.files)?;
    // Bounded like every input: a device node or a FIFO is refused, not read forever.
    let texts: Vec<String> = args.files.iter().map(|f| json::read_text(f)).collect::<Result<_, _>>()?;
    if texts.iter().any(|t| pio::is_pio(t)) {
        return run_pio(&args, &texts);
    }
    // Each text is dropped once parsed: memory holds one text and the typed documents.
    let runs = args
        .files
        .iter()
        .zip(texts)
        .map(|(f, text)| anyhow::Context::with_context(json::from_str(&text), || f.display().to_string()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let [a, b] = runs.as_slice() {
        if args.csv || args.metrics.is_some() {
            return invalid("--csv and --metrics take one results document, not two");
        }
        let name = |i: usize| args.files[i].display().to_string();
        let comparison = compare::compare(a, b, (&name(0), &name(1)));
        if let Some(path) = &args.html {
            output::write_or_keep(path, &html::render_comparison(&comparison), "comparison page").map_err(crate::error::InvalidInput::new)?;
            if !super::quiet() {
                eprintln!("comparison page written to {}", path.display());
            }
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&comparison)?);
        } else if args.html.is_none() {
            print!("{}", compare::render(a, b, (&name(0), &name(1))));
        }
        return Ok(0);
    }
    let results = &runs[0];
    let mut failed = false;
    // The run's time is when its results were written: the file's modification time.
    let written = std::fs::metadata(&args.files[0]).and_then(|m| m.modified()).unwrap_or_else(|_| std::time::SystemTime::now());
    for (path, what, text) in [(&args.html, "HTML report", html::render(results)), (&args.metrics, "metrics", metrics::render(results, written))] {
        let Some(path) = path else { continue };
        match output::write_or_keep(path, &text, what) {
            Ok(()) if !output::is_stdout(path) => eprintln!("{what} ({}) written to {}", results.label(), path.display()),
            Ok(()) => {}
            Err(message) => {
                eprintln!("pcieperf: {message}");
                failed = true;
            }
        }
    }
    if args.json {
        print!("{}", json::to_string(results)?);
    } else if args.csv {
        print!("{}", csv::render(results));
    } else if outputs.is_empty() {
        print!("{}", text::render(results));
    }
    Ok(failed as i32)
}

/// A `pcieperf.pio/1` document (or two to compare).
fn run_pio(args: &ReportArgs, texts: &[String]) -> anyhow::Result<i32> {
    let runs = texts
        .iter()
        .zip(&args.files)
        .map(|(text, file)| pio::from_str(text).map_err(|e| crate::error::InvalidInput::new(format!("{}: {e}", file.display()))))
        .collect::<Result<Vec<_>, _>>()?;
    if let [a, b] = runs.as_slice() {
        if args.csv || args.html.is_some() || args.metrics.is_some() {
            return invalid("--csv, --html and --metrics take one results document, not two");
        }
        print!("{}", pio::compare(a, b, (&args.files[0].display().to_string(), &args.files[1].display().to_string())));
        return Ok(0);
    }
    if args.metrics.is_some() {
        return invalid("--metrics is for DMA results documents (pcieperf.results); pio documents render as text, CSV or HTML");
    }
    if let Some(path) = &args.html {
        output::write(path, &pio::html(&runs[0]))?;
    } else if args.csv {
        print!("{}", pio::csv(&runs[0]));
    } else {
        print!("{}", pio::text(&runs[0]));
    }
    Ok(0)
}
