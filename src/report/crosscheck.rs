//! Views of a `pcieperf.crosscheck/1` document (model against link simulation): a terminal
//! table with a summary, and CSV. JSON is the document itself.

use std::fmt::Write;

use crate::bench::crosscheck::{Crosscheck, Kind, Point};
use crate::named::Named;
use crate::table::{Align, Table};
use crate::units::format_size;

/// The summary lines: points, agreement, worst case per kind, what was skipped.
pub fn summary(document: &Crosscheck) -> String {
    let mut out = String::new();
    for line in &document.skipped {
        let _ = writeln!(out, "skipped {line}");
    }
    let agreeing = document.points.iter().filter(|p| p.agrees()).count();
    let _ = writeln!(
        out,
        "{} points: {agreeing} within {} % of the model, {} outside with the cause shown, {} outside unexplained",
        document.points.len(),
        document.tolerance_percent,
        document.explained(),
        document.unexplained()
    );
    for kind in Kind::ALL {
        let worst = document.points.iter().filter(|p| p.kind == *kind).max_by(|a, b| a.difference_percent.abs().total_cmp(&b.difference_percent.abs()));
        if let Some(p) = worst {
            let _ = writeln!(out, "worst {}: {:+.3} % ({})", kind.name(), p.difference_percent, case(p));
        }
    }
    if document.sizes_lowered > 0 {
        let _ = writeln!(
            out,
            "{} points took a smaller size to stay within {} TLPs per point",
            document.sizes_lowered, document.grid.max_tlps_per_point
        );
    }
    out
}

/// "write", "read", or "both:write" / "both:read" for a stream of both at once.
fn kind_name(p: &Point) -> String {
    match p.stream {
        Some(stream) => format!("{}:{}", p.kind.name(), stream.name()),
        None => p.kind.name().into(),
    }
}

/// One line naming a point's conditions.
fn case(p: &Point) -> String {
    let read = if p.kind != Kind::Write { format!(" MRRS {} tags {} latency {} ns", p.mrrs_bytes, p.tags, p.latency_ns) } else { String::new() };
    format!("{} {} MPS {} {}{read} {}", kind_name(p), p.link, p.mps_bytes, p.header, format_size(p.size_bytes))
}

/// Every point (or only those outside the tolerance), then the summary.
pub fn text(document: &Crosscheck, outside_only: bool) -> String {
    let mut table = Table::new(&[
        ("kind", Align::Left),
        ("link", Align::Left),
        ("MPS", Align::Right),
        ("MRRS", Align::Right),
        ("hdr", Align::Left),
        ("tags", Align::Right),
        ("latency_ns", Align::Right),
        ("size", Align::Right),
        ("model_ns", Align::Right),
        ("sim_ns", Align::Right),
        ("diff_%", Align::Right),
        ("explanation", Align::Left),
    ]);
    for p in document.points.iter().filter(|p| !outside_only || !p.agrees()) {
        let read = p.kind != Kind::Write;
        let explanation = match (&p.explanation, p.agrees()) {
            (_, true) => String::new(),
            (Some(why), false) => why.clone(),
            (None, false) => "UNEXPLAINED".into(),
        };
        table.row(vec![
            kind_name(p),
            p.link.clone(),
            p.mps_bytes.to_string(),
            if read { p.mrrs_bytes.to_string() } else { "-".into() },
            p.header.clone(),
            if read { p.tags.to_string() } else { "-".into() },
            if read { format!("{}", p.latency_ns) } else { "-".into() },
            format_size(p.size_bytes),
            format!("{:.1}", p.model_ns),
            format!("{:.1}", p.sim_ns),
            format!("{:+.3}", p.difference_percent),
            explanation,
        ]);
    }
    let mut out = String::from("Model against the link simulator (one transfer per point; immediate rules of docs/link-simulator.md)\n");
    if !table.is_empty() {
        out.push_str(&table.render());
    }
    out.push_str(&summary(document));
    out
}

/// One CSV row per point.
pub fn csv(document: &Crosscheck) -> String {
    let mut out = String::from("kind,link,mps_bytes,mrrs_bytes,header,tags,latency_ns,size_bytes,model_ns,sim_ns,difference_percent,explanation\n");
    for p in &document.points {
        let explanation = p.explanation.as_deref().unwrap_or("").replace('"', "\"\"");
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{:.3},{:.3},{:.4},\"{explanation}\"",
            kind_name(p),
            p.link,
            p.mps_bytes,
            p.mrrs_bytes,
            p.header,
            p.tags,
            p.latency_ns,
            p.size_bytes,
            p.model_ns,
            p.sim_ns,
            p.difference_percent
        );
    }
    out
}
