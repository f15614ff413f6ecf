//! CSV: one row per (mode, size), with a `simulated` column so no row can lose its label.

use crate::bench::results::Results;

/// Column names, in order.
pub const COLUMNS: &[&str] = &[
    "simulated",
    "target",
    "mode",
    "size_bytes",
    "samples",
    "median_MBps",
    "median_ci_low_MBps",
    "median_ci_high_MBps",
    "min_MBps",
    "p99_MBps",
    "max_MBps",
    "cov",
    "ceiling_MBps",
    "percent_of_ceiling",
    "limit",
    "converged",
    "stop_reason",
    "engine_ns_spent",
    "wall_ns_spent",
    "stall_source",
    "stalls_over_threshold",
    "max_stall_ns",
    "device_median_ns",
    "host_minus_device_ns",
    "copy_median_ns",
    "verify_passed",
    "verify_failed",
];

fn field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn opt(value: Option<f64>) -> String {
    value.map_or(String::new(), |v| format!("{v}"))
}

/// The summary of every point as CSV (rates in MB/s = 10^6 B/s, times in ns).
pub fn render(results: &Results) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for p in &results.points {
        let s = p.summary.as_ref();
        let c = p.ceiling.as_ref();
        let row = [
            results.simulated.to_string(),
            field(&results.conditions.target),
            p.mode.name().to_string(),
            p.size_bytes.to_string(),
            p.samples.len().to_string(),
            opt(s.map(|s| s.median_mbps)),
            opt(s.and_then(|s| s.median_ci_mbps).map(|c| c.0)),
            opt(s.and_then(|s| s.median_ci_mbps).map(|c| c.1)),
            opt(s.map(|s| s.min_mbps)),
            opt(s.map(|s| s.p99_mbps)),
            opt(s.map(|s| s.max_mbps)),
            opt(s.map(|s| s.time_ns.cov)),
            opt(c.map(|c| c.mbps)),
            opt(c.and_then(|c| c.percent_reached)),
            c.map_or(String::new(), |c| crate::report::text::limit_name(c.limit)),
            p.convergence.converged.to_string(),
            p.convergence.stop_reason.clone(),
            format!("{}", p.convergence.engine_ns),
            format!("{}", p.convergence.wall_ns),
            format!("{:?}", p.stalls.source).to_lowercase(),
            p.stalls.over_threshold.to_string(),
            format!("{}", p.stalls.max_stall_ns),
            opt(s.and_then(|s| s.device_median_ns)),
            opt(s.and_then(|s| s.host_minus_device_ns)),
            opt(s.and_then(|s| s.copy_median_ns)),
            p.verification.passed.to_string(),
            p.verification.failed.to_string(),
        ];
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}
