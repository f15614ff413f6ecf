//! `pcieperf report`: re-render a saved run, or compare two.

use std::path::PathBuf;

use clap::Args;

use crate::error::invalid;
use crate::report::{compare, csv, html, json, metrics, pio, text};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// One results document to show, or two to compare (A then B).
    #[arg(required = true, num_args = 1..=2)]
    pub files: Vec<PathBuf>,
    /// Print the run as CSV.
    #[arg(long)]
    pub csv: bool,
    /// Write the run as an HTML report to this file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Write a Prometheus text exposition of the run to this file.
    #[arg(long)]
    pub metrics: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let texts: Vec<String> = args.files.iter().map(|f| std::fs::read_to_string(f).unwrap_or_default()).collect();
    if texts.iter().any(|t| pio::is_pio(t)) {
        return run_pio(&args, &texts);
    }
    let runs = args.files.iter().map(|f| json::read(f)).collect::<anyhow::Result<Vec<_>>>()?;
    if let [a, b] = runs.as_slice() {
        if args.csv || args.html.is_some() || args.metrics.is_some() {
            return invalid("--csv, --html and --metrics take one results document, not two");
        }
        let name = |i: usize| args.files[i].display().to_string();
        print!("{}", compare::render(a, b, (&name(0), &name(1))));
        return Ok(0);
    }
    let results = &runs[0];
    if let Some(path) = &args.html {
        json::write_atomic(path, &html::render(results))?;
        eprintln!("HTML report ({}) written to {}", results.label(), path.display());
    }
    if let Some(path) = &args.metrics {
        json::write_atomic(path, &metrics::render(results))?;
    }
    if args.csv {
        print!("{}", csv::render(results));
    } else if args.html.is_none() && args.metrics.is_none() {
        print!("{}", text::render(results));
    }
    Ok(0)
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
        json::write_atomic(path, &pio::html(&runs[0]))?;
    } else if args.csv {
        print!("{}", pio::csv(&runs[0]));
    } else {
        print!("{}", pio::text(&runs[0]));
    }
    Ok(0)
}
