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

/// Conditions that vary from run to run without changing what was measured: listed last.
const INCIDENTAL: &[&str] = &["start_time_utc", "host_clock.tsc_hz", "host_clock.tsc_hz_run", "host_clock.timestamp_overhead_ns"];

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
    diffs.sort_by_key(|d| INCIDENTAL.contains(&d.0.as_str()));
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
            Some(Row { mode: pa.mode, size_bytes: pa.size_bytes, a_median_mbps: sa.median_mbps, b_median_mbps: sb.median_mbps, ratio: sb.median_mbps / sa.median_mbps })
        })
        .collect();
    let differing_conditions = differing_conditions(a, b)
        .into_iter()
        .map(|(condition, a, b)| Difference { incidental: INCIDENTAL.contains(&condition.as_str()), condition, a, b })
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
    let _ = writeln!(out, "\nConditions that differ:");
    if c.differing_conditions.iter().all(|d| d.incidental) {
        let _ = writeln!(out, "  none besides the start time and clock calibration");
    }
    for d in &c.differing_conditions {
        let clip = |s: &str| if s.chars().count() > 60 { format!("{}…", s.chars().take(60).collect::<String>()) } else { s.to_string() };
        let _ = writeln!(out, "  {}: A {} | B {}", d.condition, clip(&d.a), clip(&d.b));
    }
    let mut table = Table::new(&[
        ("mode", Align::Left),
        ("size", Align::Right),
        ("A MB/s", Align::Right),
        ("B MB/s", Align::Right),
        ("B/A", Align::Right),
    ]);
    for row in &c.rows {
        table.row(vec![
            row.mode.name().into(),
            format_size(row.size_bytes),
            format!("{:.1}", row.a_median_mbps),
            format!("{:.1}", row.b_median_mbps),
            format!("{:.3}", row.ratio),
        ]);
    }
    if table.is_empty() {
        let _ = writeln!(out, "\nNo (mode, size) measured in both runs.");
    } else {
        let _ = writeln!(out, "\nMedian rates (MB/s = 10^6 B/s) where both runs measured the same mode and size:");
        out.push_str(&table.render());
    }
    out
}
