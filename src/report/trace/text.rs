//! Text trace in document 000's analyser layout (§3.5, §4.6, §4.7): one row per symbol time,
//! the TX (downstream) symbols with their decoded fields on the left, the RX (upstream) symbols
//! and fields on the right. A symbol is `K name` (8b/10b control), `T xx` (128b/130b token or
//! ordered-set byte) or `D xx` (data), one per lane, lane 0 first; at 128b/130b a block's
//! first row shows its sync header (10 data, 01 ordered set) before the lanes.

use std::collections::VecDeque;
use std::fmt::Write;

use super::{fields, Trace};
use crate::link::symbols::{gap_rows, RowSide, Timeline};
use crate::link::wire::{k, Symbol};
use crate::link::phy::Phy;
use crate::link::{Direction, LeftOut};
use crate::model::Encoding;

/// Width of the decoded-fields column.
const FIELDS_WIDTH: usize = 26;

/// The whole text trace.
pub fn render(trace: &Trace) -> String {
    let phy = trace.phy();
    let mut timeline = trace.timeline();
    let lanes_width = phy.width as usize * 6 + if phy.encoding == Encoding::B8b10b { 0 } else { 3 };
    let mut out = String::new();
    let _ = writeln!(out, "# simulated link {}; symbol time {:.4} ns; TX = downstream (host to device), RX = upstream", trace.config.link, phy.ns(phy.width));
    let _ = writeln!(out, "{:>6} {:>12}  {:<FIELDS_WIDTH$} {:<lanes_width$}| {:<lanes_width$} RX fields", "cycle", "ns", "TX fields", "TX", "RX");
    let mut pending: [VecDeque<String>; 2] = Default::default();
    let mut gaps = trace.left_out.iter().peekable();
    for shown in trace.shown_rows() {
        while let Some(gap) = gaps.next_if(|gap| phy.ticks(gap.start_ns) / phy.width < shown.start) {
            out.push_str(&marker(gap, &phy));
        }
        render_rows(&mut out, trace, &mut timeline, &mut pending, shown, lanes_width);
    }
    for gap in gaps {
        out.push_str(&marker(gap, &phy));
    }
    out
}

/// The row that stands for a gap of the fast-forward: `~~~~~~  START  ~~~ N periods of X ns
/// left out (fast-forward): … downstream; … upstream; D ns, symbol times A–B not shown ~~~`.
pub fn marker(gap: &LeftOut, phy: &Phy) -> String {
    let hidden = gap_rows(gap, phy);
    let rows = if hidden.is_empty() { String::new() } else { format!(", symbol times {}–{} not shown", hidden.start, hidden.end - 1) };
    format!("{:>6} {:>12.3}  ~~~ {gap}; {:.3} ns{rows} ~~~\n", "~~~~~~", gap.start_ns, gap.duration_ns)
}

/// The rows `rows`, in order.
fn render_rows(out: &mut String, trace: &Trace, timeline: &mut Timeline, pending: &mut [VecDeque<String>; 2], rows: std::ops::Range<u64>, lanes_width: usize) {
    let phy = trace.phy();
    for row in rows {
        let sides = Direction::BOTH.map(|d| timeline.row(row, d));
        let decoded: Vec<String> = Direction::BOTH
            .iter()
            .map(|d| {
                let queue = &mut pending[d.index()];
                lay_out(queue, &sides[d.index()], row, trace);
                queue.pop_front().unwrap_or_default()
            })
            .collect();
        let [tx, rx] = sides.map(|side| symbols(&side, phy.encoding));
        let _ = writeln!(
            out,
            "{row:06} {:>12.3}  {:<FIELDS_WIDTH$} {tx:<lanes_width$}| {rx:<lanes_width$} {}",
            timeline.row_ns(row),
            decoded[0],
            decoded[1]
        );
    }
}

/// Queue the fields of the packets starting in this row, one per row while the packet lasts
/// (several to a row when it is shorter than its fields); what is left of the previous
/// packet's fields shares the first row.
fn lay_out(queue: &mut VecDeque<String>, side: &RowSide, row: u64, trace: &Trace) {
    if side.starts.is_empty() {
        return;
    }
    let mut lines: Vec<String> = Vec::new();
    if !queue.is_empty() {
        lines.push(queue.drain(..).collect::<Vec<_>>().join(", "));
    }
    for &index in &side.starts {
        lines.extend(fields(&trace.record[index].packet));
    }
    let rows = (side.last_row.unwrap_or(row) - row + 1) as usize;
    let per_row = lines.len().div_ceil(rows);
    queue.extend(lines.chunks(per_row).map(|chunk| chunk.join(", ")));
}

/// One direction's lanes as text.
fn symbols(side: &RowSide, encoding: Encoding) -> String {
    let mut text = match side.sync {
        Some(sync) => format!("{sync:02b} "),
        None if encoding != Encoding::B8b10b => "   ".to_string(),
        None => String::new(),
    };
    for symbol in &side.lanes {
        let _ = write!(text, "{} ", symbol_text(*symbol, encoding));
    }
    text
}

/// `K STP`, `T F0` or `D 0F`.
pub fn symbol_text(symbol: Symbol, encoding: Encoding) -> String {
    if !symbol.control {
        return format!("D {:02X}", symbol.byte);
    }
    if encoding != Encoding::B8b10b {
        return format!("T {:02X}", symbol.byte);
    }
    let name = match symbol.byte {
        k::STP => "STP",
        k::SDP => "SDP",
        k::END => "END",
        k::COM => "COM",
        k::SKP => "SKP",
        _ => return format!("K {:02X}", symbol.byte),
    };
    format!("K {name}")
}
