//! A self-contained HTML report: conditions, the summary table, findings, and inline SVG plots
//! of rate against size, measured beside the model. No scripts, no external files.

use std::fmt::Write;

use crate::bench::results::{Mode, Results};
use crate::report::text;
use crate::units::format_size;

/// Escape text for HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn color(mode: Mode) -> &'static str {
    match mode {
        Mode::D2h => "#1f77b4",
        Mode::H2d => "#d62728",
        Mode::Both => "#2ca02c",
    }
}

/// One series of (size, MB/s) points.
struct Series {
    label: String,
    color: &'static str,
    dashed: bool,
    points: Vec<(u64, f64)>,
}

/// An SVG line plot of MB/s against size (log₂ axis).
fn plot(title: &str, series: &[Series]) -> String {
    let (w, h, left, right, top, bottom) = (720.0, 360.0, 70.0, 160.0, 30.0, 40.0);
    let all: Vec<(u64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    if all.is_empty() {
        return String::new();
    }
    let lx = |n: u64| (n.max(1) as f64).log2();
    let (x0, x1) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(lx(p.0)), b.max(lx(p.0))));
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let y1 = all.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.1;
    let sx = |n: u64| left + (lx(n) - x0) / (x1 - x0) * (w - left - right);
    let sy = |v: f64| top + (1.0 - v / y1) * (h - top - bottom);
    let mut svg = String::new();
    let _ = write!(svg, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">"#);
    let _ = write!(svg, r#"<title>{}</title>"#, escape(title));
    let _ = write!(svg, r#"<text x="{left}" y="18" font-size="14">{}</text>"#, escape(title));
    // Axes, ticks at each measured size and five rate levels.
    let _ = write!(svg, r#"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#, h - bottom, w - right, h - bottom);
    let _ = write!(svg, r#"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="black"/>"#, h - bottom);
    let mut sizes: Vec<u64> = all.iter().map(|p| p.0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let step = sizes.len().div_ceil(8).max(1);
    for &n in sizes.iter().step_by(step) {
        let _ = write!(svg, r#"<text x="{:.1}" y="{}" font-size="10" text-anchor="middle">{}</text>"#, sx(n), h - bottom + 14.0, format_size(n));
    }
    for i in 0..=5 {
        let v = y1 * i as f64 / 5.0;
        let _ = write!(svg, r##"<line x1="{left}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end">{v:.0}</text>"##, w - right, left - 4.0, sy(v) + 3.0, y = sy(v));
    }
    let _ = write!(svg, r#"<text x="14" y="{}" font-size="11" transform="rotate(-90 14 {})">MB/s (10^6 B/s)</text>"#, h / 2.0, h / 2.0);
    for (i, s) in series.iter().enumerate() {
        let pts: Vec<String> = s.points.iter().map(|&(n, v)| format!("{:.1},{:.1}", sx(n), sy(v))).collect();
        let dash = if s.dashed { r#" stroke-dasharray="6 4""# } else { "" };
        let _ = write!(svg, r#"<polyline fill="none" stroke="{}" stroke-width="2"{dash} points="{}"/>"#, s.color, pts.join(" "));
        if !s.dashed {
            for &(n, v) in &s.points {
                let _ = write!(svg, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#, sx(n), sy(v), s.color);
            }
        }
        let ly = top + 16.0 * i as f64;
        let _ = write!(svg, r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}" font-size="11">{}</text>"#, w - right + 8.0, w - right + 30.0, s.color, w - right + 34.0, ly + 4.0, escape(&s.label));
    }
    svg.push_str("</svg>");
    svg
}

/// The plot of every mode, measured (solid) and model (dashed).
pub fn rate_plot(results: &Results) -> String {
    let mut modes: Vec<Mode> = results.points.iter().map(|p| p.mode).collect();
    modes.dedup();
    let mut series = Vec::new();
    for mode in modes {
        let points = results.points.iter().filter(|p| p.mode == mode);
        let measured: Vec<(u64, f64)> = points.clone().filter_map(|p| Some((p.size_bytes, p.summary.as_ref()?.median_mbps))).collect();
        let model: Vec<(u64, f64)> = points.filter_map(|p| Some((p.size_bytes, p.ceiling.as_ref()?.mbps))).collect();
        series.push(Series { label: format!("{} {}", mode.name(), results.label()), color: color(mode), dashed: false, points: measured });
        if !model.is_empty() {
            series.push(Series { label: format!("{} model", mode.name()), color: color(mode), dashed: true, points: model });
        }
    }
    plot(&format!("Rate against transfer size ({}; dashed: model ceiling)", results.label()), &series)
}

/// The share of the model's ceiling reached, per mode, against size.
pub fn percent_plot(results: &Results) -> String {
    let mut modes: Vec<Mode> = results.points.iter().map(|p| p.mode).collect();
    modes.dedup();
    let series: Vec<Series> = modes
        .into_iter()
        .map(|mode| Series {
            label: format!("{} {}", mode.name(), results.label()),
            color: color(mode),
            dashed: false,
            points: results
                .points
                .iter()
                .filter(|p| p.mode == mode)
                .filter_map(|p| Some((p.size_bytes, p.ceiling.as_ref()?.percent_reached?)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    plot(&format!("Percentage of the model's ceiling reached ({})", results.label()), &series).replace("MB/s (10^6 B/s)", "% of model")
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or(String::new(), |first| first.to_uppercase().collect::<String>() + chars.as_str())
}

/// The whole report as one HTML page.
pub fn render(results: &Results) -> String {
    let title = format!(
        "pcieperf results{} — {}",
        if results.simulated { format!(" ({})", results.label()) } else { String::new() },
        results.conditions.target
    );
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>body{{font-family:sans-serif;margin:2em}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}.sim{{color:#a00;font-weight:bold}}</style></head><body>\n",
        escape(&title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    if results.simulated {
        let _ = writeln!(out, "<p class=\"sim\">{}: no hardware was involved; every figure below comes from a simulated engine.</p>", capitalised(results.label()));
    }
    if !results.complete {
        out.push_str("<p class=\"sim\">Incomplete run: results are partial.</p>\n");
    }
    let _ = writeln!(out, "<h2>Conditions</h2><pre>{}</pre>", escape(&text::conditions(results)));
    let _ = writeln!(out, "<h2>Rate against size</h2>\n{}", rate_plot(results));
    let percent = percent_plot(results);
    if !percent.is_empty() {
        let _ = writeln!(out, "<h2>Measured against the model</h2>\n{percent}");
    }
    let _ = writeln!(out, "<h2>Summary</h2><pre>{}</pre>", escape(&text::render(results)));
    out.push_str("</body></html>\n");
    out
}
