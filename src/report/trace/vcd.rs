//! VCD trace for GTKWave. Per direction (scopes `pcie.down` and `pcie.up`): for each lane a
//! byte `laneN` and its control flag `laneN_k` (K code at 8b/10b, token or ordered-set byte at
//! 128b/130b), changing every symbol time; at 128b/130b `sync`, the sync header of the block in
//! progress; and the decoded packet, changing at the packet's first tick: `kind` (four ASCII
//! characters: `MWr `, `MRd `, `CplD`, `Ack `, `FC-P`, `FCNP`, `FCCp`, `SKP `; 0 while the lanes
//! idle — show it in GTKWave with Data Format → ASCII), `seq` (TLP or Ack sequence number),
//! `tag`, `addr`, `len` (bytes), `hdr_fc` and `data_fc` (UpdateFC, as on the wire).
//! Times are in femtoseconds (`$timescale 1 fs`), rounded.

use std::fmt::Write;

use super::{wire_credits, Trace};
use crate::link::{Crossing, Direction, Dllp, FcClass, Packet};
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
        let _ = writeln!(out, "$upscope $end");
        Ids { lanes, sync, packet }
    })
}

/// When each packet's decoded signals change: (time fs, direction, the packet or None for
/// idle), in time order.
fn packet_changes(record: &[Crossing], until_fs: u64) -> Vec<(u64, Direction, Option<&Packet>)> {
    let mut changes = Vec::new();
    for direction in Direction::BOTH {
        let mine: Vec<&Crossing> = record.iter().filter(|c| c.direction == direction && fs(c.start_ns) < until_fs).collect();
        for (i, crossing) in mine.iter().enumerate() {
            changes.push((fs(crossing.start_ns), direction, Some(&crossing.packet)));
            let next_start = mine.get(i + 1).map(|c| fs(c.start_ns));
            if next_start.is_none_or(|next| next > fs(crossing.end_ns)) && fs(crossing.end_ns) < until_fs {
                changes.push((fs(crossing.end_ns), direction, None));
            }
        }
    }
    changes.sort_by_key(|change| change.0);
    changes
}

/// The whole VCD file.
pub fn render(trace: &Trace) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "$version pcieperf trace $end\n$comment {} simulated, {} symbol times $end", trace.config.link, trace.rows);
    let _ = writeln!(out, "$timescale 1 fs $end\n$scope module pcie $end");
    let mut next = 0;
    let ids = declare(&mut out, trace, &mut next);
    let _ = writeln!(out, "$upscope $end\n$enddefinitions $end");
    let mut timeline = trace.timeline();
    let until_fs = fs(timeline.row_ns(trace.rows));
    let changes = packet_changes(trace.record, until_fs);
    let mut changes = changes.iter().peekable();
    let mut last_lanes: [Vec<Option<(u8, bool)>>; 2] = Default::default();
    let mut last_time = None;
    let mut stamp = |out: &mut String, time: u64| {
        if last_time != Some(time) {
            let _ = writeln!(out, "#{time}");
            last_time = Some(time);
        }
    };
    for row in 0..trace.rows {
        let row_fs = fs(timeline.row_ns(row));
        while let Some((time, direction, packet)) = changes.next_if(|c| c.0 < row_fs) {
            stamp(&mut out, *time);
            write_packet(&mut out, &ids[direction.index()], *packet);
        }
        stamp(&mut out, row_fs);
        if row == 0 {
            for side in &ids {
                write_packet(&mut out, side, None);
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
    for (time, direction, packet) in changes {
        stamp(&mut out, *time);
        write_packet(&mut out, &ids[direction.index()], *packet);
    }
    stamp(&mut out, until_fs);
    out
}

fn write_packet(out: &mut String, ids: &Ids, packet: Option<&Packet>) {
    for (value, code) in packet_values(packet).iter().zip(&ids.packet) {
        let _ = writeln!(out, "b{value:b} {code}");
    }
}
