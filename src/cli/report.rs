//! `pcieperf report`: re-render a saved run, or compare two.

use std::path::PathBuf;

use clap::Args;

use crate::error::invalid;
use crate::report::{compare, csv, html, json, metrics, text};

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
