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
    "sustained_MBps",
    "median_ns",
    "p99_ns",
    "max_ns",
    "h2d_median_MBps",
    "d2h_median_MBps",
    "sum_MBps",
];

fn field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Numbers to what they mean, not to the last bit of a double: rates to 0.01 MB/s (10 kB/s),
/// percentages to 0.01, the coefficient of variation to 4 places, times to whole nanoseconds.
#[derive(Clone, Copy)]
enum Unit {
    MBps,
    Percent,
    Ratio,
    Ns,
}

fn num(unit: Unit, value: f64) -> String {
    match unit {
        Unit::MBps | Unit::Percent => format!("{value:.2}"),
        Unit::Ratio => format!("{value:.4}"),
        Unit::Ns => format!("{value:.0}"),
    }
}

fn opt(unit: Unit, value: Option<f64>) -> String {
    value.map_or(String::new(), |v| num(unit, v))
}

/// The summary of every point as CSV (rates in MB/s = 10^6 B/s, times in ns).
pub fn render(results: &Results) -> String {
    use Unit::*;
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
            opt(MBps, s.map(|s| s.median_mbps)),
            opt(MBps, s.and_then(|s| s.median_ci_mbps).map(|c| c.0)),
            opt(MBps, s.and_then(|s| s.median_ci_mbps).map(|c| c.1)),
            opt(MBps, s.map(|s| s.min_mbps)),
            opt(MBps, s.map(|s| s.p99_mbps)),
            opt(MBps, s.map(|s| s.max_mbps)),
            opt(Ratio, s.map(|s| s.time_ns.cov)),
            opt(MBps, c.map(|c| c.mbps)),
            opt(Percent, c.and_then(|c| c.percent_reached)),
            c.map_or(String::new(), |c| crate::report::text::limit_name(c.limit)),
            p.convergence.converged.to_string(),
            p.convergence.stop_reason.clone(),
            num(Ns, p.convergence.engine_ns),
            num(Ns, p.convergence.wall_ns),
            format!("{:?}", p.stalls.source).to_lowercase(),
            p.stalls.over_threshold.to_string(),
            num(Ns, p.stalls.max_stall_ns),
            opt(Ns, s.and_then(|s| s.device_median_ns)),
            opt(Ns, s.and_then(|s| s.host_minus_device_ns)),
            opt(Ns, s.and_then(|s| s.copy_median_ns)),
            p.verification.passed.to_string(),
            p.verification.failed.to_string(),
            opt(MBps, s.map(|s| s.sustained_mbps)),
            opt(Ns, s.map(|s| s.time_ns.median)),
            opt(Ns, s.map(|s| s.time_ns.p99)),
            opt(Ns, s.map(|s| s.time_ns.max)),
            opt(MBps, p.directions.map(|d| d.h2d_median_mbps)),
            opt(MBps, p.directions.map(|d| d.d2h_median_mbps)),
            opt(MBps, p.directions.map(|d| d.sum_mbps)),
        ];
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}
