//! `pcieperf report`: re-render a saved run, or compare two.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::invalid;
use crate::report::view::{self, Document, Format, ViewOptions};
use crate::report::output;
use crate::report::saved::{self, Accept};

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
    // Streamed: memory holds the typed documents, never a file's text. A device node or a FIFO
    // is refused, not read forever; a pipe on standard input has a size limit.
    let documents = args
        .files
        .iter()
        .map(|f| anyhow::Context::with_context(saved::read_file(f, Accept::Saved), || f.display().to_string()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let names: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
    if let [a, b] = documents.as_slice() {
        return compare(&args, a, b, (&names[0], &names[1]));
    }
    // The run's time is when its results were written: the file's modification time.
    let written = std::fs::metadata(&args.files[0]).and_then(|m| m.modified()).unwrap_or_else(|_| std::time::SystemTime::now());
    let (document, options) = (&documents[0], ViewOptions { written, ..ViewOptions::default() });
    let files = [(&args.html, Format::Html, "HTML report"), (&args.metrics, Format::Metrics, "metrics")];
    // Every view is rendered before anything is written: a format the document lacks writes nothing.
    let files: Vec<(&PathBuf, &str, String)> = files
        .into_iter()
        .filter_map(|(path, format, what)| Some((path.as_ref()?, what, view::render(document, format, &options))))
        .map(|(path, what, text)| text.map(|text| (path, what, text)))
        .collect::<Result<_, _>>()?;
    let mut failed = false;
    for (path, what, text) in files {
        match output::write_or_keep(path, &text, what) {
            Ok(()) => output::written(&document.label().map_or(what.to_string(), |label| format!("{what} ({label})")), path),
            Err(message) => {
                eprintln!("pcieperf: {message}");
                failed = true;
            }
        }
    }
    if args.json || args.csv || outputs.is_empty() {
        view::print(document, if args.json { Format::Json } else if args.csv { Format::Csv } else { Format::Text }, &options)?;
    }
    Ok(failed as i32)
}

/// Two documents side by side: a page (`--html`), JSON (`--json`) or text.
fn compare(args: &ReportArgs, a: &Document, b: &Document, names: (&str, &str)) -> anyhow::Result<i32> {
    if args.csv || args.metrics.is_some() {
        return invalid("--csv and --metrics take one results document, not two");
    }
    if let Some(path) = &args.html {
        output::write_or_keep(path, &view::compare(a, b, Format::Html, names)?, "comparison page").map_err(crate::error::InvalidInput::new)?;
        output::written("comparison page", path);
    }
    if args.json || args.html.is_none() {
        let text = view::compare(a, b, if args.json { Format::Json } else { Format::Text }, names)?;
        output::write(Path::new("-"), &text)?;
    }
    Ok(0)
}
