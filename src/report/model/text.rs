//! Terminal views of the model's tables: the conditions, then the table, rates in the unit asked
//! for.

use std::fmt::Write;

use super::{describe, percent, rate, tlp_text};
use crate::model::document::{ExplainTable, FitTable, LinkHeader, MessageTable, MmioTable, SizesTable, StatusTable, WcTable};
use crate::model::mmio::{ReadRecord, WriteRecord};
use crate::table::{Align, Table};
use crate::units::{format_size, RateUnit};

/// The conditions' two lines, each ended.
fn conditions(header: &LinkHeader, unit: RateUnit) -> String {
    describe(&header.params, header.default_link, unit) + "\n"
}

pub fn sizes(table: &SizesTable, unit: RateUnit) -> String {
    let label = unit.label();
    let headers = [
        ("size".to_string(), Align::Right),
        (format!("write {label}"), Align::Right),
        ("write %".to_string(), Align::Right),
        ("write limit".to_string(), Align::Left),
        ("back %".to_string(), Align::Right),
        (format!("read {label}"), Align::Right),
        ("read %".to_string(), Align::Right),
        ("read limit".to_string(), Align::Left),
        (format!("both: write {label}"), Align::Right),
        (format!("both: read {label}"), Align::Right),
    ];
    let columns: Vec<(&str, Align)> = headers.iter().map(|(h, a)| (h.as_str(), *a)).collect();
    let mut rendered = Table::new(&columns);
    for r in &table.rows {
        rendered.row(vec![
            format_size(r.size_bytes),
            rate(unit, r.rates.write_mbps),
            percent(r.rates.write_efficiency),
            r.limit.write.name().to_string(),
            percent(r.write_opposite_mbps / table.encoded_mbps),
            rate(unit, r.rates.read_mbps),
            percent(r.rates.read_efficiency),
            r.limit.read.name().to_string(),
            rate(unit, r.bidir_write_mbps),
            rate(unit, r.bidir_read_mbps),
        ]);
    }
    conditions(&table.header, unit)
        + "% = payload rate / rate after encoding. both: writes and reads at the same time.\n"
        + "back %: share of the opposite direction the writes' ACK/UpdateFC DLLPs take.\n\n"
        + &rendered.render()
}

pub fn explain(table: &ExplainTable, unit: RateUnit) -> String {
    let mut out = conditions(&table.header, unit);
    let encoded_mbps = table.header.params.link.encoded_mbps();
    for w in &table.waterfalls {
        let direction = if w.kind == "write" { "posted writes, write direction" } else { "reads, completion direction" };
        let _ = writeln!(
            out,
            "\n{} of {} ({direction}), {:.1} ns on the link; bytes = what is left within that time:",
            w.kind,
            format_size(w.size_bytes),
            w.duration_ns
        );
        let label = unit.label();
        let mut steps = Table::new(&[("step", Align::Left), ("bytes", Align::Right), (label, Align::Right), ("% of raw", Align::Right)]);
        for s in &w.steps {
            steps.row(vec![s.name.clone(), format!("{:.1}", s.bytes), rate(unit, s.mbps), format!("{:.2}", s.percent_of_raw)]);
        }
        out += &steps.render();
        let o = &w.opposite;
        let _ = writeln!(
            out,
            "opposite direction: {:.1} request TLPs + {:.1} DLLPs + {:.1} SKPs = {:.1} B = {} {} ({:.2} % of it after encoding)",
            o.tlps,
            o.dllps,
            o.skps,
            o.total_bytes(),
            rate(unit, w.opposite_mbps),
            unit.label(),
            100.0 * w.opposite_mbps / encoded_mbps
        );
    }
    out
}

pub fn fit(table: &FitTable) -> String {
    let mut out = format!("T(N) = N/(B·f) + m with B = {} MB/s (1 MB/s = 10^6 bytes/s)\n", table.bus_mbps);
    let _ = writeln!(
        out,
        "f = {:.10}   m = {:.6} µs   B·f = {:.4} MB/s   N½ = {:.0} bytes",
        table.f, table.m_us, table.asymptotic_mbps, table.n_half_bytes
    );
    let mut rows = Table::new(&[("size", Align::Right), ("MB/s", Align::Right), ("", Align::Left)]);
    for p in &table.points {
        rows.row(vec![format_size(p.size_bytes), format!("{:.4}", p.mbps), format!("measured, residual {:+.3} %", p.residual * 100.0)]);
    }
    for p in &table.predictions {
        rows.row(vec![format_size(p.size_bytes), format!("{:.4}", p.mbps), "predicted".to_string()]);
    }
    out + "\n" + &rows.render()
}

pub fn mmio(table: &MmioTable, unit: RateUnit) -> String {
    let (w, r) = (format!("write {}", unit.label()), format!("read {}", unit.label()));
    let mut rows = Table::new(&[
        ("access", Align::Right),
        (w.as_str(), Align::Right),
        ("write %", Align::Right),
        (r.as_str(), Align::Right),
        ("read %", Align::Right),
        ("read limit", Align::Left),
    ]);
    for row in &table.rows {
        rows.row(vec![
            format!("{} B", row.size_bytes),
            rate(unit, row.rates.write_mbps),
            percent(row.rates.write_efficiency),
            rate(unit, row.rates.read_mbps),
            percent(row.rates.read_efficiency),
            row.limit.read.name().to_string(),
        ]);
    }
    let mut out = conditions(&table.header, unit);
    out += "Single CPU accesses: back-to-back posted writes; reads one at a time (the CPU waits for each).\n\n";
    out += &rows.render();
    if let (Some(writes), Some(reads)) = (&table.record, &table.read_record) {
        out += &records(unit, writes, reads);
    }
    out
}

/// The `--record` streams: N writes with the load on both directions, N reads one at a time.
fn records(unit: RateUnit, rec: &WriteRecord, reads: &ReadRecord) -> String {
    let label = unit.label();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nRecord of {} writes of {} B: {:.0} ns ({} TLPs, {} SKPs); payload {} {label}",
        rec.count,
        rec.access_bytes,
        rec.duration_ns,
        rec.data.tlps,
        rec.data.skps,
        rate(unit, rec.payload_mbps)
    );
    let _ = writeln!(
        out,
        "  write direction allocated: {:.0} B = {} {label} ({:.1} %)",
        rec.data.total_bytes(),
        rate(unit, rec.data_allocated_mbps),
        rec.data_allocated_fraction * 100.0
    );
    let _ = writeln!(
        out,
        "  opposite direction allocated by {} DLLPs: {:.0} B = {} {label} ({:.1} %)",
        rec.opposite.dllps,
        rec.opposite.dllp_bytes,
        rate(unit, rec.opposite_allocated_mbps),
        rec.opposite_allocated_fraction * 100.0
    );
    let _ = writeln!(
        out,
        "Record of {} reads of {} B, one at a time: {:.0} ns each, {:.0} ns; payload {} {label}",
        reads.count,
        reads.access_bytes,
        reads.per_read_ns,
        reads.duration_ns,
        rate(unit, reads.payload_mbps)
    );
    out
}

pub fn write_combining(table: &WcTable, unit: RateUnit) -> String {
    let mut out = conditions(&table.header, unit);
    out += "Sequential writes through 64-byte write-combining buffers: a full buffer leaves as one 64-byte TLP,\n";
    out += "a partial one in 8-byte chunks. 'one TLP' is the whole write as a single TLP (document 000's column).\n\n";
    let (one, wc) = (format!("one TLP {}", unit.label()), format!("write combining {}", unit.label()));
    let mut rows = Table::new(&[("size", Align::Right), (one.as_str(), Align::Right), ("TLPs", Align::Left), (wc.as_str(), Align::Right)]);
    for r in &table.rows {
        rows.row(vec![format!("{} B", r.size_bytes), rate(unit, r.one_tlp_mbps), tlp_text(r), rate(unit, r.wc_mbps)]);
    }
    out + &rows.render()
}

pub fn status(table: &StatusTable) -> String {
    table.status.to_string()
}

pub fn message(table: &MessageTable, unit: RateUnit) -> String {
    let (r, label) = (&table.result, unit.label());
    let mut out = conditions(&table.header, unit);
    let _ = writeln!(out, "\nlink after encoding:            {} {label}", rate(unit, table.encoded_mbps));
    let _ = writeln!(out, "after TLP/link overhead:        {} {label} (overhead {:.2} %)", rate(unit, r.link_mbps), table.link_overhead * 100.0);
    let _ = writeln!(
        out,
        "after message overhead:         {} {label} ({} B per {} B message: {:.3} %) = {:.3} Gb/s",
        rate(unit, r.mbps),
        r.overhead_bytes,
        r.message_bytes,
        (1.0 - r.message_efficiency) * 100.0,
        table.gbps
    );
    out
}
