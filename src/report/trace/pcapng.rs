//! pcapng trace for Wireshark: one Enhanced Packet Block per TLP, DLLP and SKP ordered set, on
//! one interface of link type [`LINKTYPE`] (LINKTYPE_USER0, 147: there is no standard PCIe link
//! type) with nanosecond timestamps (`if_tsresol` = 9). Each packet is a [`HEADER_BYTES`]-byte
//! header followed by the packet's bytes as on the wire; `tools/wireshark/pcieperf.lua` decodes
//! both. Layout (docs/trace.md), multi-byte fields big-endian:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 1 | version (1) |
//! | 1 | 1 | header length (20) |
//! | 2 | 1 | direction: 0 downstream, 1 upstream |
//! | 3 | 1 | generation (1–5) |
//! | 4 | 1 | width (lanes) |
//! | 5 | 1 | encoding: 0 8b/10b, 1 128b/130b |
//! | 6 | 1 | kind: 1 TLP, 2 DLLP, 3 SKP ordered set, 5 time the fast-forward left out |
//! | 7 | 1 | reserved (0) |
//! | 8 | 8 | start in picoseconds (rounded; the timestamp is the start in whole ns) |
//! | 16 | 4 | duration on the lanes in picoseconds (rounded) |
//!
//! Wire bytes: a TLP with its framing (8b/10b: STP, sequence number, header, data, ECRC, LCRC,
//! END; 128b/130b: the 4-byte STP token, header, data, ECRC, LCRC), a DLLP likewise (SDP … END,
//! or the SDP token and six bytes), a SKP ordered set as lane 0 carries it (COM SKP SKP SKP, or
//! the EDS token and the 16-symbol SKP block).
//!
//! A gap of the fast-forward (kind 5; direction 2, both; duration saturated at 2^32 − 1 ps) is
//! followed, instead of wire bytes, by [`GAP_BYTES`] bytes: the gap's duration in ps (8 bytes),
//! the periods left out (8), one period in ps (8), then for downstream and for upstream the TLPs,
//! payload bytes, Acks, UpdateFCs and SKP ordered sets left out (8 each). Its block also carries
//! the same in words as a comment (`opt_comment`).

use super::Trace;
use crate::link::packet::Direction;
use crate::link::{Crossing, LeftOut, Packet};
use crate::model::Encoding;

/// LINKTYPE_USER0.
pub const LINKTYPE: u16 = 147;
/// The header before each packet's wire bytes.
pub const HEADER_BYTES: usize = 20;
pub const VERSION: u8 = 1;
/// The kind of a gap's record.
pub const KIND_GAP: u8 = 5;
/// The body of a gap's record after the header.
pub const GAP_BYTES: usize = 24 + 2 * 40;

const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION: u32 = 1;
const ENHANCED_PACKET: u32 = 6;

/// A block: type, total length, body padded to 4 bytes, total length again.
fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let padded = body.len().next_multiple_of(4);
    let total = (padded + 12) as u32;
    out.extend(kind.to_le_bytes());
    out.extend(total.to_le_bytes());
    out.extend(body);
    out.resize(out.len() + padded - body.len(), 0);
    out.extend(total.to_le_bytes());
}

/// An option: code, length, value padded to 4 bytes.
fn option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend(code.to_le_bytes());
    body.extend((value.len() as u16).to_le_bytes());
    body.extend(value);
    body.resize(body.len().next_multiple_of(4), 0);
}

fn end_of_options(body: &mut Vec<u8>) {
    body.extend([0; 4]);
}

/// Section header and the one interface.
fn preamble(out: &mut Vec<u8>, trace: &Trace) {
    let mut shb = Vec::new();
    shb.extend(0x1A2B_3C4Du32.to_le_bytes());
    shb.extend(1u16.to_le_bytes());
    shb.extend(0u16.to_le_bytes());
    shb.extend((-1i64).to_le_bytes());
    option(&mut shb, 4, format!("pcieperf {} (simulated link)", env!("CARGO_PKG_VERSION")).as_bytes());
    end_of_options(&mut shb);
    block(out, SECTION_HEADER, &shb);
    let mut idb = Vec::new();
    idb.extend(LINKTYPE.to_le_bytes());
    idb.extend(0u16.to_le_bytes());
    idb.extend(0u32.to_le_bytes());
    option(&mut idb, 2, format!("pcie {} (simulated)", trace.config.link).as_bytes());
    option(&mut idb, 9, &[9]);
    end_of_options(&mut idb);
    block(out, INTERFACE_DESCRIPTION, &idb);
}

/// The per-packet header.
pub fn header(trace: &Trace, crossing: &Crossing) -> [u8; HEADER_BYTES] {
    let link = trace.config.link;
    let kind = match crossing.packet {
        Packet::Tlp(_) => 1,
        Packet::Dllp(_) => 2,
        Packet::Skp => 3,
        Packet::Flit(_) => 4,
    };
    let encoding = if trace.phy().encoding == Encoding::B8b10b { 0 } else { 1 };
    let direction = (crossing.direction == Direction::Upstream) as u8;
    let generation = link.generation as u8 + 1;
    let mut bytes = [0u8; HEADER_BYTES];
    bytes[..8].copy_from_slice(&[VERSION, HEADER_BYTES as u8, direction, generation, link.width as u8, encoding, kind, 0]);
    bytes[8..16].copy_from_slice(&((crossing.start_ns * 1e3).round() as u64).to_be_bytes());
    bytes[16..].copy_from_slice(&(((crossing.end_ns - crossing.start_ns) * 1e3).round() as u32).to_be_bytes());
    bytes
}

/// A gap's header and body.
pub fn gap_record(trace: &Trace, gap: &LeftOut) -> Vec<u8> {
    let link = trace.config.link;
    let encoding = if trace.phy().encoding == Encoding::B8b10b { 0 } else { 1 };
    let ps = |ns: f64| (ns * 1e3).round() as u64;
    let mut bytes = vec![VERSION, HEADER_BYTES as u8, 2, link.generation as u8 + 1, link.width as u8, encoding, KIND_GAP, 0];
    bytes.extend(ps(gap.start_ns).to_be_bytes());
    bytes.extend((ps(gap.duration_ns).min(u32::MAX as u64) as u32).to_be_bytes());
    for value in [ps(gap.duration_ns), gap.periods, ps(gap.period_ns)] {
        bytes.extend(value.to_be_bytes());
    }
    for c in Direction::BOTH.map(|d| gap.counts[d.index()]) {
        for value in [c.tlps, c.payload_bytes, c.acks, c.update_fcs, c.skps] {
            bytes.extend(value.to_be_bytes());
        }
    }
    bytes
}

/// One Enhanced Packet Block of `data` at `start_ns`, with a comment if given.
fn packet_block(out: &mut Vec<u8>, epb: &mut Vec<u8>, start_ns: f64, data: &[u8], comment: Option<&str>) {
    let timestamp_ns = start_ns.floor() as u64;
    let length = data.len() as u32;
    epb.clear();
    epb.extend(0u32.to_le_bytes());
    epb.extend(((timestamp_ns >> 32) as u32).to_le_bytes());
    epb.extend((timestamp_ns as u32).to_le_bytes());
    epb.extend(length.to_le_bytes());
    epb.extend(length.to_le_bytes());
    epb.extend(data);
    epb.resize(epb.len().next_multiple_of(4), 0);
    if let Some(comment) = comment {
        option(epb, 1, comment.as_bytes());
        end_of_options(epb);
    }
    block(out, ENHANCED_PACKET, epb);
}

/// The whole pcapng file: every packet of the trace's record, and its gaps where they start.
pub fn render(trace: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    preamble(&mut out, trace);
    let mut encoder = trace.encoder();
    let mut epb = Vec::new();
    let mut data = Vec::new();
    let mut gaps = trace.left_out.iter().peekable();
    for crossing in trace.record {
        while let Some(gap) = gaps.next_if(|gap| gap.start_ns <= crossing.start_ns) {
            packet_block(&mut out, &mut epb, gap.start_ns, &gap_record(trace, gap), Some(&format!("{gap}; {:.3} ns", gap.duration_ns)));
        }
        data.clear();
        data.extend(header(trace, crossing));
        data.extend(encoder.framed(&crossing.packet, crossing.direction).iter().map(|s| s.byte));
        packet_block(&mut out, &mut epb, crossing.start_ns, &data, None);
    }
    for gap in gaps {
        packet_block(&mut out, &mut epb, gap.start_ns, &gap_record(trace, gap), Some(&format!("{gap}; {:.3} ns", gap.duration_ns)));
    }
    out
}
