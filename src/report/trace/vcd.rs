//! VCD trace for GTKWave. Per direction (scopes `pcie.down` and `pcie.up`): for each lane a
//! byte `laneN` and its control flag `laneN_k` (K code at 8b/10b, token or ordered-set byte at
//! 128b/130b), changing every symbol time; at 128b/130b `sync`, the sync header of the block in
//! progress; and the decoded packet, changing at the packet's first tick: `kind` (four ASCII
//! characters: `MWr `, `MRd `, `CplD`, `Ack `, `FC-P`, `FCNP`, `FCCp`, `SKP `; 0 while the lanes
//! idle — show it in GTKWave with Data Format → ASCII), `seq` (TLP or Ack sequence number),
//! `tag`, `addr`, `len` (bytes), `hdr_fc` and `data_fc` (UpdateFC, as on the wire).
//! Times are in femtoseconds (`$timescale 1 fs`), rounded.
//!
//! Where the fast-forward left time out, `pcie.fast_forward` is 1 over the gap, every lane is
//! `x` (unknown: GTKWave draws it red), each direction's `left_out_tlps` and `left_out_bytes`
//! hold what that direction sent in the gap (0 elsewhere), and a `$comment` at the gap's start
//! says it in words.

use std::fmt::Write;

use super::{wire_credits, Trace};
use crate::link::{Crossing, Direction, Dllp, FcClass, LeftOut, Packet};
use crate::model::Encoding;

/// The decoded-packet signals: (name, width in bits).
pub const PACKET_SIGNALS: [(&str, u32); 7] = [("kind", 32), ("seq", 12), ("tag", 10), ("addr", 64), ("len", 13), ("hdr_fc", 8), ("data_fc", 12)];

/// The four characters of `kind`.
pub fn kind_code(packet: &Packet) -> &'static [u8; 4] {
    match packet {
        Packet::Tlp(tlp) => match tlp.kind {
            crate::link::TlpKind::MemWrite => b"MWr ",
            crate::link::TlpKind::MemRead => b"MRd ",
            crate::link::TlpKind::CompletionData => b"CplD",
        },
        Packet::Dllp(Dllp::Ack { .. }) => b"Ack ",
        Packet::Dllp(Dllp::Nak { .. }) => b"Nak ",
        Packet::Dllp(Dllp::UpdateFc { class, .. }) => match class {
            FcClass::Posted => b"FC-P",
            FcClass::NonPosted => b"FCNP",
            FcClass::Completion => b"FCCp",
        },
        Packet::Skp => b"SKP ",
        Packet::Flit(_) => b"Flit",
    }
}

/// Values of [`PACKET_SIGNALS`] for a packet (None: the lanes idle, all 0).
pub fn packet_values(packet: Option<&Packet>) -> [u64; 7] {
    let Some(packet) = packet else { return [0; 7] };
    let kind = u32::from_be_bytes(*kind_code(packet)) as u64;
    match *packet {
        Packet::Tlp(t) => [kind, t.seq as u64, t.tag as u64, t.addr, t.len_bytes, 0, 0],
        Packet::Dllp(Dllp::Ack { seq } | Dllp::Nak { seq }) => [kind, seq as u64, 0, 0, 0, 0, 0],
        Packet::Dllp(Dllp::UpdateFc { header, data, .. }) => {
            let (header, data) = wire_credits(header, data);
            [kind, 0, 0, 0, 0, header, data]
        }
        Packet::Skp | Packet::Flit(_) => [kind, 0, 0, 0, 0, 0, 0],
    }
}

fn fs(ns: f64) -> u64 {
    (ns * 1e6).round() as u64
}

/// Identifier codes: printable ASCII from '!'.
fn id(mut n: usize) -> String {
    let mut code = String::new();
    loop {
        code.push((b'!' + (n % 94) as u8) as char);
        n /= 94;
        if n == 0 {
            return code;
        }
    }
}

/// Signal identifiers of one direction.
struct Ids {
    lanes: Vec<(String, String)>,
    sync: String,
    packet: Vec<String>,
    /// `left_out_tlps`, `left_out_bytes`.
    left_out: [String; 2],
}

fn declare(out: &mut String, trace: &Trace, next: &mut usize) -> [Ids; 2] {
    let width = trace.phy().width;
    let mut take = || {
        *next += 1;
        id(*next - 1)
    };
    Direction::BOTH.map(|direction| {
        let _ = writeln!(out, "$scope module {} $end", direction.name());
        let lanes: Vec<(String, String)> = (0..width).map(|_| (take(), take())).collect();
        for (lane, (byte, flag)) in lanes.iter().enumerate() {
            let _ = writeln!(out, "$var wire 8 {byte} lane{lane} $end\n$var wire 1 {flag} lane{lane}_k $end");
        }
        let sync = take();
        if trace.phy().encoding != Encoding::B8b10b {
            let _ = writeln!(out, "$var wire 2 {sync} sync $end");
        }
        let packet: Vec<String> = PACKET_SIGNALS.iter().map(|_| take()).collect();
        for ((name, bits), code) in PACKET_SIGNALS.iter().zip(&packet) {
            let _ = writeln!(out, "$var wire {bits} {code} {name} $end");
        }
        let left_out = [take(), take()];
        let _ = writeln!(out, "$var wire 64 {} left_out_tlps $end\n$var wire 64 {} left_out_bytes $end", left_out[0], left_out[1]);
        let _ = writeln!(out, "$upscope $end");
        Ids { lanes, sync, packet, left_out }
    })
}

/// A change of the decoded signals.
#[derive(Clone, Copy)]
enum Change<'a> {
    /// A packet starts in a direction, or (None) its lanes fall idle.
    Packet(Direction, Option<&'a Packet>),
    GapStarts(&'a LeftOut),
    GapEnds,
}

/// When the decoded signals change, in time order (fs). A packet straddling a gap ends as long
/// after its recorded end as the gap lasts (its last symbols show after the gap).
fn changes<'a>(record: &'a [Crossing], left_out: &'a [LeftOut], until_fs: u64) -> Vec<(u64, Change<'a>)> {
    let mut changes = Vec::new();
    for gap in left_out {
        changes.push((fs(gap.start_ns), Change::GapStarts(gap)));
        changes.push((fs(gap.end_ns()), Change::GapEnds));
    }
    let shown_end_fs = |c: &Crossing| {
        let gap = left_out.iter().find(|gap| c.start_ns < gap.start_ns && gap.start_ns < c.end_ns);
        fs(c.end_ns + gap.map_or(0.0, |gap| gap.duration_ns))
    };
    for direction in Direction::BOTH {
        let mine: Vec<&Crossing> = record.iter().filter(|c| c.direction == direction && fs(c.start_ns) < until_fs).collect();
        for (i, crossing) in mine.iter().enumerate() {
            changes.push((fs(crossing.start_ns), Change::Packet(direction, Some(&crossing.packet))));
            let next_start = mine.get(i + 1).map(|c| fs(c.start_ns));
            let end_fs = shown_end_fs(crossing);
            if next_start.is_none_or(|next| next > end_fs) && end_fs < until_fs {
                changes.push((end_fs, Change::Packet(direction, None)));
            }
        }
    }
    changes.retain(|change| change.0 < until_fs);
    changes.sort_by_key(|change| change.0);
    changes
}

/// The whole VCD file.
pub fn render(trace: &Trace) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "$version pcieperf trace $end\n$comment {} simulated, {} symbol times $end", trace.config.link, trace.rows);
    let _ = writeln!(out, "$timescale 1 fs $end\n$scope module pcie $end");
    let mut next = 0;
    let fast_forward = id(next);
    next += 1;
    let _ = writeln!(out, "$var wire 1 {fast_forward} fast_forward $end");
    let ids = declare(&mut out, trace, &mut next);
    let _ = writeln!(out, "$upscope $end\n$enddefinitions $end");
    let mut timeline = trace.timeline();
    let until_fs = fs(timeline.row_ns(trace.rows));
    let changes = changes(trace.record, trace.left_out, until_fs);
    let mut changes = changes.iter().peekable();
    let mut last_lanes: [Vec<Option<(u8, bool)>>; 2] = Default::default();
    let mut last_time = None;
    let mut stamp = |out: &mut String, time: u64| {
        if last_time != Some(time) {
            let _ = writeln!(out, "#{time}");
            last_time = Some(time);
        }
    };
    let apply = |out: &mut String, change: &Change, last_lanes: &mut [Vec<Option<(u8, bool)>>; 2]| match *change {
        Change::Packet(direction, packet) => write_packet(out, &ids[direction.index()], packet),
        Change::GapStarts(gap) => {
            let _ = writeln!(out, "$comment {gap}; {:.3} ns $end\n1{fast_forward}", gap.duration_ns);
            for (side, (ids, last)) in ids.iter().zip(last_lanes.iter_mut()).enumerate() {
                let counts = &gap.counts[side];
                let _ = writeln!(out, "b{:b} {}\nb{:b} {}", counts.tlps, ids.left_out[0], counts.payload_bytes, ids.left_out[1]);
                for (byte_id, flag_id) in &ids.lanes {
                    let _ = writeln!(out, "bxxxxxxxx {byte_id}\nx{flag_id}");
                }
                last.iter_mut().for_each(|lane| *lane = None);
            }
        }
        Change::GapEnds => {
            let _ = writeln!(out, "0{fast_forward}");
            for ids in &ids {
                let _ = writeln!(out, "b0 {}\nb0 {}", ids.left_out[0], ids.left_out[1]);
            }
        }
    };
    for row in trace.shown_rows().into_iter().flatten() {
        let row_fs = fs(timeline.row_ns(row));
        while let Some((time, change)) = changes.next_if(|c| c.0 < row_fs) {
            stamp(&mut out, *time);
            apply(&mut out, change, &mut last_lanes);
        }
        stamp(&mut out, row_fs);
        if row == 0 {
            let _ = writeln!(out, "0{fast_forward}");
            for side in &ids {
                write_packet(&mut out, side, None);
                let _ = writeln!(out, "b0 {}\nb0 {}", side.left_out[0], side.left_out[1]);
            }
        }
        for direction in Direction::BOTH {
            let side = timeline.row(row, direction);
            let side_ids = &ids[direction.index()];
            let last = &mut last_lanes[direction.index()];
            last.resize(side.lanes.len(), None);
            for (lane, symbol) in side.lanes.iter().enumerate() {
                let value = Some((symbol.byte, symbol.control));
                if last[lane] != value {
                    let (byte_id, flag_id) = &side_ids.lanes[lane];
                    let _ = writeln!(out, "b{:b} {byte_id}\n{}{flag_id}", symbol.byte, symbol.control as u8);
                    last[lane] = value;
                }
            }
            if let Some(sync) = side.sync {
                let _ = writeln!(out, "b{sync:b} {}", side_ids.sync);
            }
        }
    }
    for (time, change) in changes {
        stamp(&mut out, *time);
        apply(&mut out, change, &mut last_lanes);
    }
    stamp(&mut out, until_fs);
    out
}

fn write_packet(out: &mut String, ids: &Ids, packet: Option<&Packet>) {
    for (value, code) in packet_values(packet).iter().zip(&ids.packet) {
        let _ = writeln!(out, "b{value:b} {code}");
    }
}
