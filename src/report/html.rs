//! A self-contained HTML report (inline SVG, no scripts, no external files), read in a browser
//! and tested in headless Chromium (`tests/html_chromium.rs`):
//! - per point, the median with its 95 % confidence interval (error bars) and the spread of the
//!   samples as a band from the slowest to the fastest transfer, with the p99 line, so a run
//!   with a wide spread never looks clean;
//! - the model's ceiling only when there is one, labelled with the conditions it assumes;
//! - per size, the distribution of transfer times (histogram, log axis) and the samples over
//!   time (stalls show as spikes);
//! - `report A B --html`: the comparison page, conditions that differ first, then B/A per size.

use std::fmt::Write;

use crate::bench::results::{Mode, Point, Results};
use crate::report::compare::{self, Comparison};
use crate::report::plot::{escape, Axis, Mark, Plot, Scale};
use crate::report::text;
use crate::units::format_size;

fn color(mode: Mode) -> &'static str {
    match mode {
        Mode::D2h => "#1f77b4",
        Mode::H2d => "#d62728",
        Mode::Both => "#2ca02c",
    }
}

fn modes(results: &Results) -> Vec<Mode> {
    let mut modes: Vec<Mode> = results.points.iter().map(|p| p.mode).collect();
    modes.sort();
    modes.dedup();
    modes
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:70em}pre{background:#f6f6f6;padding:1em;overflow-x:auto}\
.sim{color:#a00;font-weight:bold}table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd}\
td:first-child,th:first-child{text-align:left}.sizes{display:flex;flex-wrap:wrap;gap:8px}";

fn page(title: &str, body: &str) -> String {
    format!("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>{STYLE}</style></head><body>\n<h1>{}</h1>\n{body}</body></html>\n", escape(title), escape(title))
}

/// Rate against size: per mode the median with its interval, the min–max band with the p99
/// line, and the model's ceiling when there is one.
pub fn rate_plot(results: &Results) -> String {
    let points: Vec<&Point> = results.points.iter().filter(|p| p.summary.is_some()).collect();
    if points.is_empty() {
        return String::new();
    }
    let rates = points.iter().flat_map(|p| {
        let s = p.summary.as_ref().expect("filtered");
        [s.max_mbps, s.min_mbps, p.ceiling.as_ref().map_or(0.0, |c| c.mbps)]
    });
    let x = Axis::new("transfer size (log scale)", Scale::Log2Size, points.iter().map(|p| p.size_bytes as f64));
    let y = Axis::new(format!("MB/s (10^6 B/s), {}", results.label()), Scale::Linear, rates).from_zero();
    let mut plot = Plot::new(format!("Rate against transfer size ({})", results.label()), x, y);
    let conditions = results.conditions.link.as_ref().map(|l| l.summary());
    for mode in modes(results) {
        let of_mode: Vec<&&Point> = points.iter().filter(|p| p.mode == mode).collect();
        let at = |f: &dyn Fn(&crate::bench::results::Summary) -> f64| -> Vec<(f64, f64)> {
            of_mode.iter().map(|p| (p.size_bytes as f64, f(p.summary.as_ref().expect("filtered")))).collect()
        };
        let name = mode.name();
        plot.add(Mark::Band { lower: at(&|s| s.min_mbps), upper: at(&|s| s.max_mbps) }, color(mode), format!("{name}: spread of the samples, slowest to fastest transfer"));
        plot.add(Mark::Line { points: at(&|s| s.p99_mbps), dashed: false, width: 0.8 }, color(mode), format!("{name}: p99 (99 % of transfers at least this fast)"));
        let median = at(&|s| s.median_mbps);
        plot.add(Mark::Line { points: median.clone(), dashed: false, width: 2.0 }, color(mode), format!("{name}: median, with its 95 % confidence interval"));
        plot.add(Mark::Dots { points: median }, color(mode), "");
        let bars = of_mode.iter().filter_map(|p| {
            let (lo, hi) = p.summary.as_ref()?.median_ci_mbps?;
            Some((p.size_bytes as f64, lo, hi))
        });
        plot.add(Mark::ErrorBars { bars: bars.collect() }, color(mode), "");
        let model: Vec<(f64, f64)> = of_mode.iter().filter_map(|p| Some((p.size_bytes as f64, p.ceiling.as_ref()?.mbps))).collect();
        if !model.is_empty() {
            let label = format!("{name}: model ceiling ({})", conditions.as_deref().unwrap_or("conditions in the table above"));
            plot.add(Mark::Line { points: model, dashed: true, width: 1.5 }, color(mode), label);
        }
    }
    plot.render()
}

/// One point's transfer times: a histogram on a log time axis and the samples in order.
fn point_plots(results: &Results, point: &Point) -> String {
    let times_us: Vec<f64> = point.samples.iter().map(|s| (s.engine_ns + s.copy_ns.unwrap_or(0.0)) / 1e3).filter(|t| *t > 0.0).collect();
    if times_us.is_empty() {
        return String::new();
    }
    let label = format!("{} {}", point.mode.name(), format_size(point.size_bytes));
    let (lo, hi) = times_us.iter().fold((f64::MAX, f64::MIN), |(a, b), t| (a.min(*t), b.max(*t)));
    let bins = 24;
    let (llo, lhi) = (lo.log10(), if hi > lo { hi.log10() } else { lo.log10() + 0.01 });
    let width = (lhi - llo) / bins as f64;
    let mut counts = vec![0usize; bins];
    for t in &times_us {
        counts[(((t.log10() - llo) / width) as usize).min(bins - 1)] += 1;
    }
    let edges = |i: usize| 10f64.powf(llo + width * i as f64);
    let bars: Vec<(f64, f64, f64)> = counts.iter().enumerate().map(|(i, c)| (edges(i), edges(i + 1), *c as f64)).collect();
    let x = Axis::new(format!("time per transfer, µs (log scale; {})", results.label()), Scale::Log10, [lo, hi]);
    let y = Axis::new("transfers", Scale::Linear, counts.iter().map(|c| *c as f64)).from_zero();
    let mut histogram = Plot::new(format!("{label}: distribution of transfer times"), x, y).small();
    histogram.add(Mark::Bars { bars }, color(point.mode), "");
    let start = point.samples.first().map_or(0.0, |s| s.start_ns);
    let over_time: Vec<(f64, f64)> = point.samples.iter().map(|s| ((s.start_ns - start) / 1e6, (s.engine_ns + s.copy_ns.unwrap_or(0.0)) / 1e3)).collect();
    let x = Axis::new("start of the transfer, ms into the point (engine clock)", Scale::Linear, over_time.iter().map(|p| p.0));
    let y = Axis::new("µs per transfer", Scale::Linear, over_time.iter().map(|p| p.1)).from_zero();
    let mut series = Plot::new(format!("{label}: samples over time"), x, y).small();
    series.add(Mark::Line { points: over_time.clone(), dashed: false, width: 0.6 }, color(point.mode), "");
    series.add(Mark::Dots { points: over_time }, color(point.mode), "");
    format!("<div class=\"sizes\">{}{}</div>\n", histogram.render(), series.render())
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or(String::new(), |first| first.to_uppercase().collect::<String>() + chars.as_str())
}

/// The whole report as one HTML page.
pub fn render(results: &Results) -> String {
    let title = format!("pcieperf results{} — {}", if results.simulated { format!(" ({})", results.label()) } else { String::new() }, results.conditions.target);
    let mut body = String::new();
    if results.simulated {
        let _ = writeln!(body, "<p class=\"sim\">{}: no hardware was involved; every figure below comes from a simulated engine.</p>", capitalised(results.label()));
    }
    if !results.complete {
        body.push_str("<p class=\"sim\">Incomplete run: results are partial.</p>\n");
    }
    let _ = writeln!(body, "<h2>Conditions</h2><pre>{}</pre>", escape(&text::conditions(results)));
    let _ = writeln!(body, "<h2>Rate against size</h2>\n{}", rate_plot(results));
    let _ = writeln!(body, "<h2>Summary</h2><pre>{}</pre>", escape(&text::render(results)));
    body.push_str("<h2>Transfer times per size</h2>\n");
    for point in &results.points {
        body += &point_plots(results, point);
    }
    page(&title, &body)
}

/// `report A B --html`: conditions that differ first, then B/A per size as a plot and a table.
pub fn render_comparison(comparison: &Comparison) -> String {
    let (a, b) = (&comparison.a, &comparison.b);
    let label = |s: &compare::Side| format!("{} — {}{}{}", s.file, s.target, if s.simulated { " (simulated)" } else { "" }, if s.complete { "" } else { ", incomplete" });
    let mut body = format!("<p>A: {}<br>B: {}</p>\n<h2>Conditions that differ</h2>\n", escape(&label(a)), escape(&label(b)));
    if comparison.differing_conditions.iter().all(|d| d.incidental) {
        body.push_str("<p>None besides the start time and clock calibration.</p>\n");
    }
    body.push_str("<table><tr><th>condition</th><th>A</th><th>B</th></tr>\n");
    for d in &comparison.differing_conditions {
        let _ = writeln!(body, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", escape(&d.condition), escape(&d.a), escape(&d.b));
    }
    body.push_str("</table>\n<h2>B/A per size</h2>\n");
    if comparison.rows.is_empty() {
        body.push_str("<p>No (mode, size) measured in both runs.</p>\n");
    } else {
        let x = Axis::new("transfer size (log scale)", Scale::Log2Size, comparison.rows.iter().map(|r| r.size_bytes as f64));
        let y = Axis::new("B/A of the median rates", Scale::Linear, comparison.rows.iter().map(|r| r.ratio).chain([1.0])).from_zero();
        let mut plot = Plot::new("Median rate of B divided by A", x, y);
        let mut modes: Vec<Mode> = comparison.rows.iter().map(|r| r.mode).collect();
        modes.sort();
        modes.dedup();
        for mode in modes {
            let points: Vec<(f64, f64)> = comparison.rows.iter().filter(|r| r.mode == mode).map(|r| (r.size_bytes as f64, r.ratio)).collect();
            plot.add(Mark::Line { points: points.clone(), dashed: false, width: 2.0 }, color(mode), format!("{}: B/A", mode.name()));
            plot.add(Mark::Dots { points }, color(mode), "");
        }
        let sizes = comparison.rows.iter().map(|r| r.size_bytes as f64);
        let (first, last) = sizes.fold((f64::MAX, f64::MIN), |(a, b), s| (a.min(s), b.max(s)));
        plot.add(Mark::Line { points: vec![(first, 1.0), (last, 1.0)], dashed: true, width: 1.0 }, "#555555", "1.0: no difference");
        body += &plot.render();
        body.push_str("\n<table><tr><th>mode</th><th>size</th><th>A MB/s</th><th>B MB/s</th><th>B/A</th></tr>\n");
        for r in &comparison.rows {
            let _ = writeln!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.3}</td></tr>",
                r.mode.name(),
                format_size(r.size_bytes),
                r.a_median_mbps,
                r.b_median_mbps,
                r.ratio
            );
        }
        body.push_str("</table>\n<p>MB/s = 10^6 B/s; medians of each run.</p>\n");
    }
    page("pcieperf comparison: B against A", &body)
}
