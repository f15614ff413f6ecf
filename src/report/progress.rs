//! Progress of a measurement on the terminal: a bar with ETA when stderr is a terminal
//! (indicatif), one plain line per point otherwise (logs, CI). `NO_COLOR` turns colour off.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::bench::dma::Progress;
use crate::bench::results::{Mode, Point};
use crate::units::format_size;

/// Progress on stderr.
pub struct TerminalProgress {
    bar: Option<ProgressBar>,
    quiet: bool,
    total: usize,
    label: &'static str,
}

impl TerminalProgress {
    /// `quiet`: print nothing (machine-readable output on stdout). `label` ("measured",
    /// "simulated", "co-simulated": `EngineInfo::label`) is on every line.
    pub fn new(quiet: bool, label: &'static str) -> Self {
        TerminalProgress { bar: None, quiet, total: 0, label }
    }
}

fn color_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

impl Progress for TerminalProgress {
    fn begin(&mut self, points: usize) {
        self.total = points;
        if self.quiet || !std::io::stderr().is_terminal() {
            return;
        }
        let template = if color_allowed() {
            "{bar:30.cyan/blue} {pos}/{len} points  ETA {eta}  {msg}"
        } else {
            "{bar:30} {pos}/{len} points  ETA {eta}  {msg}"
        };
        let bar = ProgressBar::new(points as u64);
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        self.bar = Some(bar);
    }

    fn point_started(&mut self, _index: usize, mode: Mode, size_bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} {} ({})", mode.name(), format_size(size_bytes), self.label));
        }
    }

    fn point_running(&mut self, index: usize, what: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(bar) => bar.println(format!("[{}/{}] {what}", index + 1, self.total)),
            None => eprintln!("[{}/{}] {what}", index + 1, self.total),
        }
    }

    fn point_done(&mut self, index: usize, point: &Point) {
        if self.quiet {
            return;
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
            return;
        }
        let rate = point.summary.as_ref().map_or("no samples".to_string(), |s| format!("{:.1} MB/s {}", s.median_mbps, self.label));
        eprintln!(
            "[{}/{}] {} {}: {rate}, {} after {} samples",
            index + 1,
            self.total,
            point.mode.name(),
            format_size(point.size_bytes),
            point.convergence.stop_reason,
            point.samples.len()
        );
    }

    fn end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
