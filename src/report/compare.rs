//! Compare two runs: the conditions that differ first (so a ratio is never read without them),
//! then the ratio of median rates per mode and size.

use std::fmt::Write;

use crate::bench::results::Results;
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
const INCIDENTAL: &[&str] = &["start_time_utc", "host_clock.tsc_hz"];

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

/// The comparison as text; `names` label the two runs (usually their file names).
pub fn render(a: &Results, b: &Results, names: (&str, &str)) -> String {
    let mut out = String::new();
    let label = |r: &Results| if r.simulated { "simulated" } else { "measured" };
    let _ = writeln!(out, "A: {} — {} ({}){}", names.0, a.conditions.target, label(a), if a.complete { "" } else { ", INCOMPLETE" });
    let _ = writeln!(out, "B: {} — {} ({}){}", names.1, b.conditions.target, label(b), if b.complete { "" } else { ", INCOMPLETE" });
    let diffs = differing_conditions(a, b);
    let _ = writeln!(out, "\nConditions that differ:");
    if diffs.iter().all(|d| INCIDENTAL.contains(&d.0.as_str())) {
        let _ = writeln!(out, "  none besides the start time and clock calibration");
    }
    for (key, va, vb) in &diffs {
        let clip = |s: &str| if s.chars().count() > 60 { format!("{}…", s.chars().take(60).collect::<String>()) } else { s.to_string() };
        let _ = writeln!(out, "  {key}: A {} | B {}", clip(va), clip(vb));
    }
    let mut table = Table::new(&[
        ("mode", Align::Left),
        ("size", Align::Right),
        ("A MB/s", Align::Right),
        ("B MB/s", Align::Right),
        ("B/A", Align::Right),
    ]);
    for pa in &a.points {
        let Some(pb) = b.point(pa.mode, pa.size_bytes) else { continue };
        let (Some(sa), Some(sb)) = (&pa.summary, &pb.summary) else { continue };
        table.row(vec![
            pa.mode.name().into(),
            format_size(pa.size_bytes),
            format!("{:.1}", sa.median_mbps),
            format!("{:.1}", sb.median_mbps),
            format!("{:.3}", sb.median_mbps / sa.median_mbps),
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
