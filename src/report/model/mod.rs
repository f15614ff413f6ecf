//! Views of a `pcieperf.model` document ([`crate::model::document`]): terminal tables ([`text`])
//! and CSV ([`csv`]) in the unit asked for; JSON in MB/s ([`json`]).

pub mod csv;
pub mod text;

use crate::model::document::ModelDocument;
use crate::model::{Accounting, HeaderFormat, LinkParams};
use crate::units::RateUnit;

/// The document as pretty JSON with its members in name order, ending in a newline.
pub fn json(document: &ModelDocument) -> String {
    // Through a JSON value: members come out sorted, whatever the structs' field order.
    let value = serde_json::to_value(document).expect("model documents serialise: plain data");
    serde_json::to_string_pretty(&value).expect("a JSON value serialises") + "\n"
}

/// A rate in `unit`: two decimals in MB/s, four in the larger units.
fn rate(unit: RateUnit, mbps: f64) -> String {
    match unit {
        RateUnit::MBps => format!("{:.2}", mbps),
        _ => format!("{:.4}", unit.from_mbps(mbps)),
    }
}

fn percent(fraction: f64) -> String {
    format!("{:.2}", fraction * 100.0)
}

/// The unit as a CSV column suffix.
fn unit_suffix(unit: RateUnit) -> &'static str {
    match unit {
        RateUnit::MBps => "MBps",
        RateUnit::GBps => "GBps",
        RateUnit::Gbps => "Gbps",
    }
}

/// Two lines naming every condition of the figures below them.
fn describe(params: &LinkParams, is_default: bool, unit: RateUnit) -> String {
    let link = params.link;
    let default = if is_default { " (default link; choose with --link)" } else { "" };
    let overhead = match (params.include_skp, params.include_dllp) {
        (true, true) => "SKP and DLLPs charged",
        (true, false) => "SKP charged, DLLPs excluded",
        (false, true) => "DLLPs charged, SKP excluded",
        (false, false) => "SKP and DLLPs excluded",
    };
    let dllp = match params.dllp_every_tlps {
        Some(n) if params.include_dllp => format!(" (one ACK + one UpdateFC per {n} TLP)"),
        _ => String::new(),
    };
    format!(
        "{link}{default}: {} GT/s, {}, {:.2} {} after encoding; MPS {}, MRRS {}, RCB {}{}, {} headers{}, {}, \
         read latency {} ns, {} tags, {overhead}{dllp}{}.\nRates in {} ({}).",
        link.generation.gts(),
        link.generation.encoding().name(),
        unit.from_mbps(link.encoded_mbps()),
        unit.label(),
        params.mps_bytes,
        params.mrrs_bytes,
        params.rcb_bytes,
        match params.completion_bytes {
            Some(bytes) => format!(", completions of {bytes} B"),
            None => String::new(),
        },
        match params.header {
            HeaderFormat::Dw3 => "3DW",
            HeaderFormat::Dw4 => "4DW",
        },
        if params.ecrc { " + ECRC" } else { "" },
        match params.accounting {
            Accounting::WireAccurate => "wire-accurate (whole DWs, 4 KiB boundaries)",
            Accounting::ByteExact => "byte-exact (the documents' convention)",
        },
        params.read_latency_ns,
        params.tags,
        [
            (!params.start_addr.is_multiple_of(4096)).then(|| format!(", start offset {} in its 4 KiB page", params.start_addr % 4096)),
            (params.in_flight > 1).then(|| format!(", {} transfers in flight (steady state of back-to-back DMAs)", params.in_flight)),
        ]
        .into_iter()
        .flatten()
        .collect::<String>(),
        unit.label(),
        unit.definition(),
    )
}

/// The TLPs a write-combined write leaves as: `2 × 64 B + 1 × 8 B`.
fn tlp_text(row: &crate::model::write_combining::WcRow) -> String {
    row.tlps.iter().map(|(len, n)| format!("{n} × {len} B")).collect::<Vec<_>>().join(" + ")
}
