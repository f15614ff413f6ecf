//! CSV views of the model's tables: one header line, one line per row, rates in the unit asked
//! for.

use std::fmt::Write;

use super::{tlp_text, unit_suffix};
use crate::model::document::{ExplainTable, MessageTable, MmioTable, SizesTable, WcTable};
use crate::units::RateUnit;

pub fn sizes(table: &SizesTable, unit: RateUnit) -> String {
    let u = unit_suffix(unit);
    let mut out = format!("size_bytes,write_{u},write_efficiency,write_limit,read_{u},read_efficiency,read_limit,bidir_write_{u},bidir_read_{u},bidir_total_{u},write_opposite_direction_{u},read_request_direction_{u}\n");
    for r in &table.rows {
        let _ = writeln!(
            out,
            "{},{},{:.6},{},{},{:.6},{},{},{},{},{},{}",
            r.size_bytes,
            unit.from_mbps(r.rates.write_mbps),
            r.rates.write_efficiency,
            r.limit.write.name(),
            unit.from_mbps(r.rates.read_mbps),
            r.rates.read_efficiency,
            r.limit.read.name(),
            unit.from_mbps(r.bidir_write_mbps),
            unit.from_mbps(r.bidir_read_mbps),
            unit.from_mbps(r.bidir_total_mbps),
            unit.from_mbps(r.write_opposite_mbps),
            unit.from_mbps(r.read_opposite_mbps),
        );
    }
    out
}

pub fn explain(table: &ExplainTable, unit: RateUnit) -> String {
    let mut out = format!("kind,size_bytes,step,bytes,{},percent_of_raw\n", unit_suffix(unit));
    for w in &table.waterfalls {
        for s in &w.steps {
            let _ = writeln!(out, "{},{},\"{}\",{},{},{}", w.kind, w.size_bytes, s.name, s.bytes, unit.from_mbps(s.mbps), s.percent_of_raw);
        }
    }
    out
}

pub fn mmio(table: &MmioTable, unit: RateUnit) -> String {
    let u = unit_suffix(unit);
    let mut out = format!("size_bytes,write_{u},write_efficiency,read_{u},read_efficiency,read_limit\n");
    for r in &table.rows {
        let (write, read) = (unit.from_mbps(r.rates.write_mbps), unit.from_mbps(r.rates.read_mbps));
        let _ = writeln!(out, "{},{},{:.6},{},{:.6},{}", r.size_bytes, write, r.rates.write_efficiency, read, r.rates.read_efficiency, r.limit.read.name());
    }
    out
}

pub fn write_combining(table: &WcTable, unit: RateUnit) -> String {
    let u = unit_suffix(unit);
    let mut out = format!("size_bytes,one_tlp_{u},tlps,write_combining_{u}\n");
    for r in &table.rows {
        let _ = writeln!(out, "{},{},\"{}\",{}", r.size_bytes, unit.from_mbps(r.one_tlp_mbps), tlp_text(r), unit.from_mbps(r.wc_mbps));
    }
    out
}

pub fn message(table: &MessageTable, unit: RateUnit) -> String {
    let u = unit_suffix(unit);
    let r = &table.result;
    format!(
        "message_bytes,overhead_bytes,encoded_{u},link_{u},message_efficiency,{u}\n{},{},{},{},{:.6},{}\n",
        r.message_bytes,
        r.overhead_bytes,
        unit.from_mbps(table.encoded_mbps),
        unit.from_mbps(r.link_mbps),
        r.message_efficiency,
        unit.from_mbps(r.mbps)
    )
}
