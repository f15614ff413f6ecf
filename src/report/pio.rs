//! Views of a `pcieperf.pio/1` document: terminal tables, CSV, HTML (delay histogram on a log
//! axis and the trace over time, per case), and the comparison of two runs.

use std::fmt::Write;

use crate::bench::pio::{Case, PioRun, TestResult};
use crate::report::plot::escape;
use crate::table::{Align, Table};
use crate::units::format_ns;

fn sim(run: &PioRun) -> &'static str {
    if run.simulated { " (simulated)" } else { "" }
}

/// The header: target, link, stopwatch, pinning, warnings.
fn header(run: &PioRun) -> String {
    let mut out = format!("CPU-initiated MMIO, document 000 §4 tests{}\n", sim(run));
    let _ = writeln!(out, "Target: {} — {}", run.engine.target, run.engine.description);
    match &run.model_conditions {
        Some(c) => {
            let _ = writeln!(out, "Model: {} — from {}", c.summary(), c.source);
            for assumed in &c.assumed {
                let _ = writeln!(out, "  assumed: {assumed}");
            }
        }
        None => out.push_str("Model: the target names no device with a PCIe link, so no prediction is shown\n"),
    }
    let s = &run.stopwatch;
    let _ = writeln!(
        out,
        "Test 16, stopwatch ({}{}): min {}, median {}, max {} over {} readings; {} subtracted from every delay",
        s.source,
        s.tsc_hz.map_or(String::new(), |hz| format!(", TSC {:.3} GHz", hz / 1e9)),
        format_ns(s.min_ns),
        format_ns(s.median_ns),
        format_ns(s.max_ns),
        s.samples,
        format_ns(s.subtracted_ns)
    );
    match run.pinning.cpu {
        Some(cpu) => {
            let _ = writeln!(out, "Pinned to CPU {cpu}");
        }
        None if run.simulated => {}
        None => out.push_str("Not pinned to a CPU\n"),
    }
    for warning in run.pinning.warnings.iter().chain(&run.notes) {
        let _ = writeln!(out, "note: {warning}");
    }
    out
}

fn case_row(case: &Case) -> Vec<String> {
    let model = |f: &dyn Fn(&crate::bench::pio::Prediction) -> String| case.predicted.as_ref().map_or("—".into(), f);
    vec![
        case.label.clone(),
        case.samples.to_string(),
        format!("{:.0}", case.delay.min),
        format!("{:.0}", case.delay.median),
        format!("{:.0}", case.delay.p99),
        format!("{:.0}", case.delay.max),
        format!("{:.2}", case.mbps),
        model(&|p| format!("{:.0}", p.delay_ns)),
        model(&|p| format!("{:.2}", p.mbps)),
        case.ratio_to_model.map_or("—".into(), |r| format!("{r:.2}")),
        format!(
            "{}{}",
            case.cpu_interrupts.or(case.engine_interrupts).map_or("—".into(), |n| n.to_string()),
            if case.interrupted.is_empty() { String::new() } else { format!(" ({} hit)", case.interrupted.len()) }
        ),
    ]
}

fn test_block(run: &PioRun, test: &TestResult) -> String {
    let mut out = format!("\nTest {}: {}{}", test.number, test.name, sim(run));
    if test.span_bytes > 0 {
        let _ = write!(out, " — {} at BAR{}+{:#x}..{:#x}", test.access, test.bar, test.first_offset, test.first_offset + test.span_bytes);
    }
    out.push('\n');
    if test.cases.is_empty() {
        return out;
    }
    let mut table = Table::new(&[
        ("size", Align::Left),
        ("accesses", Align::Right),
        ("min ns", Align::Right),
        ("median ns", Align::Right),
        ("p99 ns", Align::Right),
        ("max ns", Align::Right),
        ("MB/s", Align::Right),
        ("model ns", Align::Right),
        ("model MB/s", Align::Right),
        ("x model", Align::Right),
        ("interrupts", Align::Right),
    ]);
    for case in &test.cases {
        table.row(case_row(case));
    }
    out += &table.render();
    for case in &test.cases {
        if let (Some(p), Some(gap)) = (&case.predicted, &case.gap) {
            let _ = writeln!(out, "  {}: model = {}; gap: {gap}", case.label, p.basis);
        }
        if let Some(first_ns) = case.first_access_ns {
            let _ = writeln!(out, "  {}: first access {} (timed alone, left out of the figures; {:.1}x the median)", case.label, format_ns(first_ns), first_ns / case.delay.median.max(1.0));
        }
        if let Some(bad) = case.mismatches {
            let _ = writeln!(out, "  {}: {bad} of {} read-backs differed from what was written", case.label, case.samples);
        }
    }
    out
}

/// The document as pretty JSON, ending in a newline (`--json`, `--out`).
pub fn json(run: &PioRun) -> String {
    serde_json::to_string_pretty(run).expect("pio documents serialise: plain data") + "\n"
}

/// The terminal view.
pub fn text(run: &PioRun) -> String {
    let mut out = header(run);
    for test in &run.tests {
        out += &test_block(run, test);
    }
    out += "\n(delays per access, stopwatch cost subtracted; Tests 8, 9, 12, 13: per access over blocks of 64; MB/s = 10^6 B/s from the mean delay)\n";
    out
}

/// One CSV row per case.
pub fn csv(run: &PioRun) -> String {
    let mut out = String::from("test,name,simulated,size_bytes,accesses,min_ns,median_ns,p99_ns,max_ns,mean_ns,MBps,model_ns,model_MBps,interrupts,interrupted,mismatches\n");
    for test in &run.tests {
        for c in &test.cases {
            let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
            let _ = writeln!(
                out,
                "{},\"{}\",{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.4},{},{},{},{},{}",
                test.number,
                test.name,
                run.simulated,
                c.bytes,
                c.samples,
                c.delay.min,
                c.delay.median,
                c.delay.p99,
                c.delay.max,
                c.delay.mean,
                c.mbps,
                opt(c.predicted.as_ref().map(|p| p.delay_ns)),
                opt(c.predicted.as_ref().map(|p| p.mbps)),
                c.cpu_interrupts.or(c.engine_interrupts).map_or(String::new(), |n| n.to_string()),
                c.interrupted.len(),
                c.mismatches.map_or(String::new(), |n| n.to_string()),
            );
        }
    }
    out
}

const W: f64 = 640.0;
const H: f64 = 220.0;
const LEFT: f64 = 60.0;
const BOTTOM: f64 = 30.0;
const TOP: f64 = 20.0;

fn svg_open(title: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img"><title>{t}</title><text x="{LEFT}" y="14" font-size="12">{t}</text><line x1="{LEFT}" y1="{y}" x2="{x}" y2="{y}" stroke="black"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{y}" stroke="black"/>"#,
        t = escape(title),
        y = H - BOTTOM,
        x = W - 10.0
    )
}

/// Counts per histogram bucket, the delay axis logarithmic.
fn histogram_svg(case: &Case, title: &str) -> String {
    let Some(max_count) = case.histogram.iter().map(|b| b.count).max() else { return String::new() };
    let lx = |ns: u64| (ns.max(1) as f64).log10();
    let (x0, x1) = (lx(case.histogram[0].upper_ns / 2), lx(case.histogram.last().expect("non-empty").upper_ns).max(lx(case.histogram[0].upper_ns) + 1.0));
    let sx = |ns: u64| LEFT + (lx(ns) - x0) / (x1 - x0) * (W - LEFT - 10.0);
    let sy = |count: u64| H - BOTTOM - (count as f64).max(0.0) / max_count as f64 * (H - BOTTOM - TOP);
    let mut svg = svg_open(title);
    for b in &case.histogram {
        // Buckets double: each covers (upper / 2, upper].
        let (a, z) = (sx((b.upper_ns / 2).max(1)), sx(b.upper_ns));
        let _ = write!(svg, r##"<rect x="{a:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#1f77b4"><title>≤ {} ns: {}</title></rect>"##, sy(b.count), (z - a).max(1.0), H - BOTTOM - sy(b.count), b.upper_ns, b.count);
    }
    let mut decade = 10f64.powf(x0.ceil());
    while decade.log10() <= x1 {
        let x = sx(decade as u64);
        let _ = write!(svg, r#"<text x="{x:.1}" y="{}" font-size="10" text-anchor="middle">{}</text>"#, H - BOTTOM + 14.0, escape(&format_ns(decade)));
        decade *= 10.0;
    }
    let _ = write!(svg, r#"<text x="4" y="{TOP}" font-size="10">{max_count}</text></svg>"#);
    svg
}

/// Delay of each kept access against its time in the test; interrupted accesses in red.
fn trace_svg(case: &Case, title: &str) -> String {
    let t = &case.trace;
    let (Some(&end), Some(max)) = (t.at_ns.last(), t.delay_ns.iter().copied().reduce(f64::max)) else { return String::new() };
    let (end, max) = (end.max(1.0), max.max(1.0) * 1.05);
    let sx = |at: f64| LEFT + at / end * (W - LEFT - 10.0);
    let sy = |d: f64| H - BOTTOM - d / max * (H - BOTTOM - TOP);
    let mut svg = svg_open(title);
    for (i, (&at, &d)) in t.index.iter().zip(t.at_ns.iter().zip(&t.delay_ns)) {
        let hit = case.interrupted.binary_search(i).is_ok();
        let _ = write!(svg, r##"<circle cx="{:.1}" cy="{:.1}" r="{}" fill="{}"/>"##, sx(at), sy(d), if hit { 3 } else { 1 }, if hit { "#d62728" } else { "#1f77b4" });
    }
    let _ = write!(
        svg,
        r#"<text x="4" y="{TOP}" font-size="10">{}</text><text x="{}" y="{}" font-size="10" text-anchor="end">{}{}</text></svg>"#,
        escape(&format_ns(max)),
        W - 10.0,
        H - BOTTOM + 14.0,
        escape(&format_ns(end)),
        if t.every > 1 { format!(" (every {}th access kept)", t.every) } else { String::new() }
    );
    svg
}

/// The HTML page.
pub fn html(run: &PioRun) -> String {
    let title = format!("pcieperf pio{} — {}", sim(run), run.engine.target);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:sans-serif;margin:2em}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}.sim{{color:#a00;font-weight:bold}}</style></head><body>\n<h1>{t}</h1>\n",
        t = escape(&title)
    );
    if run.simulated {
        out.push_str("<p class=\"sim\">Simulated: no hardware was involved; every delay below is the simulator's virtual time.</p>\n");
    }
    let _ = writeln!(out, "<pre>{}</pre>", escape(&header(run)));
    for test in &run.tests {
        let _ = writeln!(out, "<h2>Test {}: {}</h2><pre>{}</pre>", test.number, escape(&test.name), escape(&test_block(run, test)));
        for case in &test.cases {
            let _ = writeln!(
                out,
                "<div>{}{}</div>",
                histogram_svg(case, &format!("Test {} {}: delay histogram (log axis)", test.number, case.label)),
                trace_svg(case, &format!("Test {} {}: delay over time", test.number, case.label))
            );
        }
    }
    out.push_str("</body></html>\n");
    out
}

/// Two runs side by side: median delay and MB/s per test and size.
pub fn compare(a: &PioRun, b: &PioRun, names: (&str, &str)) -> String {
    let label = |r: &PioRun| if r.simulated { "simulated" } else { "measured" };
    let mut out = format!("A: {} — {} ({})\nB: {} — {} ({})\n", names.0, a.engine.target, label(a), names.1, b.engine.target, label(b));
    let _ = writeln!(out, "stopwatch: A {} | B {}", format_ns(a.stopwatch.min_ns), format_ns(b.stopwatch.min_ns));
    let mut table = Table::new(&[
        ("test", Align::Left),
        ("size", Align::Left),
        ("A median ns", Align::Right),
        ("B median ns", Align::Right),
        ("A MB/s", Align::Right),
        ("B MB/s", Align::Right),
        ("B/A MB/s", Align::Right),
    ]);
    for ta in &a.tests {
        let Some(tb) = b.tests.iter().find(|t| t.number == ta.number) else { continue };
        for ca in &ta.cases {
            let Some(cb) = tb.cases.iter().find(|c| c.label == ca.label) else { continue };
            table.row(vec![
                format!("{} {}", ta.number, ta.name),
                ca.label.clone(),
                format!("{:.0}", ca.delay.median),
                format!("{:.0}", cb.delay.median),
                format!("{:.2}", ca.mbps),
                format!("{:.2}", cb.mbps),
                format!("{:.3}", cb.mbps / ca.mbps),
            ]);
        }
    }
    if table.is_empty() {
        out += "\nNo test and size ran in both.\n";
    } else {
        out += "\n";
        out += &table.render();
    }
    out
}
