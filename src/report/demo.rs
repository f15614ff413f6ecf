//! Views of a `pcieperf.demo/2` document: what document 001's GUI shows beside the model's
//! ceiling (text), and the document itself (JSON).

use crate::bench::demo::{self, DemoReport, DemoResult};
use crate::bench::demo_run::DemoDocument;
use crate::engine::EngineInfo;
use crate::table::{Align, Table};

/// The GUI's view, then the run's notes.
pub fn text(document: &DemoDocument) -> String {
    let notes: String = document.notes.iter().map(|note| format!("{note}\n")).collect();
    gui(&document.engine, &document.demo) + &notes
}

/// The document as pretty JSON, ending in a newline.
pub fn json(document: &DemoDocument) -> String {
    serde_json::to_string_pretty(document).expect("demo documents serialise: plain data") + "\n"
}

/// What the document's GUI prints, beside the model's ceiling.
fn gui(info: &EngineInfo, report: &DemoReport) -> String {
    let sim = if info.simulated { format!(" ({})", info.label()) } else { String::new() };
    let status = &report.status;
    let mut out = format!("Performance-demo endpoint, document 001 §4 register flow{sim}\n");
    out += &format!("Target: {} — {}\n\n", info.target, info.description);
    out += "Card information\n";
    out += &format!(
        "  FPGA version:  {:02x}.{:02x}.{:02x}, REV={:02x} ({:08x}){}\n",
        report.version >> 24,
        report.version >> 16 & 0xFF,
        report.version >> 8 & 0xFF,
        report.version & 0xFF,
        report.version,
        if report.byte_swapped { ", registers read byte-swapped: values swapped" } else { "" }
    );
    out += &format!("  Link speed:    {}\n", status.link_speed_gts.map_or(format!("code {}", status.link_speed_code), |g| format!("{g} GT/s")));
    out += &format!("  Link width:    x{}\n", status.link_width);
    out += &format!("  Payload size:  {} (MaxReadRequest {})\n\n", size(status.max_payload_bytes), size(status.max_read_request_bytes));

    let mut columns: Vec<(String, Align)> = vec![(format!("result{sim}"), Align::Left)];
    columns.extend(report.results.iter().map(|r| (demo::label(r.mode), Align::Right)));
    let refs: Vec<(&str, Align)> = columns.iter().map(|(h, a)| (h.as_str(), *a)).collect();
    let mut table = Table::new(&refs);
    let mut row = |label: &str, cell: &dyn Fn(&DemoResult) -> String| {
        let mut cells = vec![label.to_string()];
        cells.extend(report.results.iter().map(cell));
        table.row(cells);
    };
    row(&format!("usable bandwidth MB/s{sim}"), &|r| format!("{:.6}", r.mbps));
    row("model ceiling MB/s", &|r| format!("{:.2}", r.theory_mbps));
    row("reached", &|r| format!("{:.1} %", r.percent_of_theory));
    row("measurement time s", &|r| match r.device_cycles {
        Some(cycles) => format!("{:.9} ({cycles} device cycles)", r.time_s),
        None => format!("{:.3}", r.time_s),
    });
    row("bytes", &|r| r.bytes.to_string());
    row("maximum stall µs", &|r| format!("{:.3}", r.max_stall_us));
    row(&format!("stalls > {:.1} µs", report.threshold_us), &|r| r.stalls_over_threshold.to_string());
    row("max deadlock (raw)", &|r| format!("{} ({:08x})", r.max_stall_raw, r.max_stall_raw));
    row("num deadlock (raw)", &|r| format!("{} ({:08x})", r.stalls_over_threshold, r.stalls_over_threshold));
    row("retries/bit errors RX/TX", &|r| format!("{} / {}", r.rx_bit_errors, r.tx_bit_errors));
    out += &table.render();
    out += &format!(
        "\nPCI-Status {} ({:08x}): MaxPayload {}, MaxReadRequest {}, {}, x{}, extended tag {}, MSI {}, relaxed ordering {}, no snoop {}, error reporting {}\n",
        status.raw,
        status.raw,
        size(status.max_payload_bytes),
        size(status.max_read_request_bytes),
        status.link_speed_gts.map_or(format!("speed code {}", status.link_speed_code), |g| format!("{g} GT/s")),
        status.link_width,
        on_off(status.extended_tag),
        on_off(status.msi_enabled),
        on_off(status.relaxed_ordering),
        on_off(status.no_snoop),
        on_off(status.correctable_error_reporting || status.non_fatal_error_reporting || status.fatal_error_reporting || status.unsupported_request_reporting),
    );
    for finding in &report.findings {
        out += &format!("finding: {finding}\n");
    }
    out += &format!("model ceiling for: {}\n  from {}\n", report.conditions.summary(), report.conditions.source);
    for assumption in &report.conditions.assumed {
        out += &format!("  assumed: {assumption}\n");
    }
    out += "(1 MB = 10^6 bytes)\n";
    out + &super::text::incomplete(report.stopped.as_ref())
}

fn size(bytes: Option<u64>) -> String {
    bytes.map_or("reserved code".to_string(), |b| format!("{b} bytes"))
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}
