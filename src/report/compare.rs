//! Compare two runs: the conditions that differ first (so a ratio is never read without them),
//! then the ratio of median rates per mode and size.

use std::fmt::Write;

use serde::Serialize;

use crate::bench::results::{Mode, Results};
use crate::table::{Align, Table};
use crate::units::format_size;

/// Flatten a JSON value into `dotted.path = value` pairs (arrays stay whole).
fn flatten(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(&path, v, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// Conditions that vary from run to run without changing what was measured (the start time, the
/// clock's calibration): listed apart.
fn incidental(condition: &str) -> bool {
    condition == "start_time_utc" || condition.starts_with("host_clock.")
}

/// Conditions (by dotted JSON path, e.g. `link.link.width`) whose values differ between the
/// runs, with both values; incidental ones (start time, TSC calibration) last.
pub fn differing_conditions(a: &Results, b: &Results) -> Vec<(String, String, String)> {
    let flat = |r: &Results| {
        let mut out = Vec::new();
        flatten("", &serde_json::to_value(&r.conditions).unwrap_or_default(), &mut out);
        out.into_iter().collect::<std::collections::BTreeMap<String, String>>()
    };
    let (fa, fb) = (flat(a), flat(b));
    let mut keys: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "-".into());
    let mut diffs: Vec<(String, String, String)> =
        keys.into_iter().filter(|k| fa.get(*k) != fb.get(*k)).map(|k| (k.clone(), show(fa.get(k)), show(fb.get(k)))).collect();
    diffs.sort_by_key(|d| incidental(&d.0));
    diffs
}

/// One (mode, size) both runs measured: their medians and B/A.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub mode: Mode,
    pub size_bytes: u64,
    #[serde(rename = "a_median_MBps")]
    pub a_median_mbps: f64,
    #[serde(rename = "b_median_MBps")]
    pub b_median_mbps: f64,
    /// B/A of the medians.
    pub ratio: f64,
    /// 95 % confidence interval of B/A, from each median's own interval (their log widths
    /// combined as independent errors); `None` when either run has fewer than 6 samples there.
    pub ratio_ci: Option<(f64, f64)>,
    /// Whether B differs from A beyond chance: the interval excludes 1; `None` without it.
    pub significant: Option<bool>,
}

/// z of a two-sided 95 % interval.
const Z95: f64 = 1.959_964;

/// B/A's interval from the medians' intervals: each rate's interval gives a standard error of
/// its logarithm (half its log width over z), the two add as independent errors.
fn ratio_interval(ratio: f64, a_ci: Option<(f64, f64)>, b_ci: Option<(f64, f64)>) -> Option<(f64, f64)> {
    let log_se = |(low, high): (f64, f64)| (low > 0.0 && high >= low).then(|| (high / low).ln() / (2.0 * Z95));
    let se = log_se(a_ci?)?.hypot(log_se(b_ci?)?);
    Some((ratio * (-Z95 * se).exp(), ratio * (Z95 * se).exp()))
}

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub file: String,
    pub target: String,
    pub simulated: bool,
    pub complete: bool,
}

/// A condition whose value differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub condition: String,
    pub a: String,
    pub b: String,
    /// Start time, clock calibration: differ in every pair of runs.
    pub incidental: bool,
}

/// Two runs compared: conditions that differ first, then B/A per mode and size
/// (`report A B --json`, schema `pcieperf.comparison/1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub a: Side,
    pub b: Side,
    pub differing_conditions: Vec<Difference>,
    pub rows: Vec<Row>,
}

pub const SCHEMA: &str = "pcieperf.comparison/1";

/// Compare `a` and `b`; `names` label them (usually their file names).
pub fn compare(a: &Results, b: &Results, names: (&str, &str)) -> Comparison {
    let side = |r: &Results, file: &str| Side { file: file.to_string(), target: r.conditions.target.clone(), simulated: r.simulated, complete: r.complete };
    let rows = a
        .points
        .iter()
        .filter_map(|pa| {
            let pb = b.point(pa.mode, pa.size_bytes)?;
            let (sa, sb) = (pa.summary.as_ref()?, pb.summary.as_ref()?);
            let ratio = sb.median_mbps / sa.median_mbps;
            let ratio_ci = ratio_interval(ratio, sa.median_ci_mbps, sb.median_ci_mbps);
            let significant = ratio_ci.map(|(low, high)| !(low <= 1.0 && 1.0 <= high));
            Some(Row { mode: pa.mode, size_bytes: pa.size_bytes, a_median_mbps: sa.median_mbps, b_median_mbps: sb.median_mbps, ratio, ratio_ci, significant })
        })
        .collect();
    let differing_conditions = differing_conditions(a, b)
        .into_iter()
        .map(|(condition, a, b)| Difference { incidental: incidental(&condition), condition, a, b })
        .collect();
    Comparison { schema: SCHEMA, a: side(a, names.0), b: side(b, names.1), differing_conditions, rows }
}

/// The comparison as text; `names` label the two runs (usually their file names).
pub fn render(a: &Results, b: &Results, names: (&str, &str)) -> String {
    let c = compare(a, b, names);
    let mut out = String::new();
    let label = |s: &Side| if s.simulated { "simulated" } else { "measured" };
    let _ = writeln!(out, "A: {} — {} ({}){}", c.a.file, c.a.target, label(&c.a), if c.a.complete { "" } else { ", INCOMPLETE" });
    let _ = writeln!(out, "B: {} — {} ({}){}", c.b.file, c.b.target, label(&c.b), if c.b.complete { "" } else { ", INCOMPLETE" });
    let clip = |s: &str| if s.chars().count() > 60 { format!("{}…", s.chars().take(60).collect::<String>()) } else { s.to_string() };
    let (incidental, real): (Vec<&Difference>, Vec<&Difference>) = c.differing_conditions.iter().partition(|d| d.incidental);
    let _ = writeln!(out, "\nConditions that differ (they can change the results):");
    if real.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for d in real {
        let _ = writeln!(out, "  {}: A {} | B {}", d.condition, clip(&d.a), clip(&d.b));
    }
    if !incidental.is_empty() {
        let names: Vec<&str> = incidental.iter().map(|d| d.condition.as_str()).collect();
        let _ = writeln!(out, "Incidental (differ between any two runs, change nothing measured): {}", names.join(", "));
    }
    let mut table = Table::new(&[
        ("mode", Align::Left),
        ("size", Align::Right),
        ("A MB/s", Align::Right),
        ("B MB/s", Align::Right),
        ("B/A", Align::Right),
        ("95% CI", Align::Right),
        ("difference", Align::Left),
    ]);
    for row in &c.rows {
        table.row(vec![
            row.mode.name().into(),
            format_size(row.size_bytes),
            format!("{:.1}", row.a_median_mbps),
            format!("{:.1}", row.b_median_mbps),
            format!("{:.3}", row.ratio),
            row.ratio_ci.map_or_else(|| "-".into(), |(low, high)| format!("{low:.3}–{high:.3}")),
            match row.significant {
                Some(true) if row.ratio > 1.0 => "significant: B faster".into(),
                Some(true) => "significant: B slower".into(),
                Some(false) => "within noise".into(),
                None => "unknown (< 6 samples)".into(),
            },
        ]);
    }
    if table.is_empty() {
        let _ = writeln!(out, "\nNo (mode, size) measured in both runs.");
    } else {
        let _ = writeln!(
            out,
            "\nMedian rates (MB/s = 10^6 B/s) where both runs measured the same mode and size; B/A with its 95 % interval \
             (from each median's own interval), significant when the interval excludes 1:"
        );
        out.push_str(&table.render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_interval_combines_both_medians_errors() {
        // Each side ±2 % → log se of each ≈ 0.0102; combined ≈ 0.0144, so B/A = 1.05 ± ≈ 2.9 %.
        let (low, high) = ratio_interval(1.05, Some((98.0, 102.0)), Some((102.9, 107.1))).unwrap();
        assert!((low - 1.05 * (-Z95 * 0.0144_f64).exp()).abs() < 1e-3 && (high - 1.05 * (Z95 * 0.0144_f64).exp()).abs() < 1e-3, "{low} {high}");
        assert!(low > 1.0, "5 % apart with ±2 % each is significant");
        let (low, high) = ratio_interval(1.01, Some((98.0, 102.0)), Some((99.0, 103.0))).unwrap();
        assert!(low < 1.0 && high > 1.0, "1 % apart with ±2 % each is not");
        assert_eq!(ratio_interval(1.0, None, Some((1.0, 1.0))), None);
        assert_eq!(ratio_interval(1.2, Some((5.0, 5.0)), Some((6.0, 6.0))), Some((1.2, 1.2)), "exact medians: a zero-width interval");
    }

    #[test]
    fn incidental_conditions_are_the_start_time_and_the_clock_calibration() {
        assert!(incidental("start_time_utc") && incidental("host_clock.tsc_hz") && incidental("host_clock.timestamp_overhead_ns"));
        assert!(!incidental("seed") && !incidental("link.link.width") && !incidental("engine.description"));
    }
}
