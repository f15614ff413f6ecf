//! Compare two runs: the conditions that differ first (so a ratio is never read without them),
//! then the ratio of median rates per mode and size.

use std::fmt::Write;

use crate::bench::results::Results;
use crate::report::table::{Align, Table};
use crate::units::format_size;

/// Conditions (by JSON field) whose values differ between the runs, with both values.
/// The start time always differs and is listed last.
pub fn differing_conditions(a: &Results, b: &Results) -> Vec<(String, String, String)> {
    let to_map = |r: &Results| match serde_json::to_value(&r.conditions) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (ma, mb) = (to_map(a), to_map(b));
    let show = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "-".into(),
    };
    let mut diffs: Vec<(String, String, String)> = ma
        .keys()
        .chain(mb.keys().filter(|k| !ma.contains_key(*k)))
        .filter(|k| ma.get(*k) != mb.get(*k))
        .map(|k| (k.clone(), show(ma.get(k)), show(mb.get(k))))
        .collect();
    diffs.sort_by_key(|d| d.0 == "start_time_utc");
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
    if diffs.iter().all(|d| d.0 == "start_time_utc") {
        let _ = writeln!(out, "  none besides the start time");
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
