//! The record of what crossed the link, and per-direction totals kept even without it.

use std::fmt;

use super::packet::{Direction, Dllp, Packet};

/// One packet on the lanes of one direction, from its first to its last tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crossing {
    pub direction: Direction,
    pub start_ns: f64,
    pub end_ns: f64,
    pub packet: Packet,
}

impl fmt::Display for Crossing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>12.3} {:>12.3} {:<4} ", self.start_ns, self.end_ns, self.direction.name())?;
        match self.packet {
            Packet::Tlp(t) => write!(
                f,
                "{} seq={} tag={} addr={:#x} len={} data={}",
                t.kind.name(),
                t.seq,
                t.tag,
                t.addr,
                t.len_bytes,
                t.data_bytes
            ),
            Packet::Dllp(Dllp::Ack { seq }) => write!(f, "Ack seq={seq}"),
            Packet::Dllp(Dllp::Nak { seq }) => write!(f, "Nak seq={seq}"),
            Packet::Dllp(Dllp::UpdateFc { class, header, data }) => write!(f, "UpdateFC {class:?} hdr={header} data={data}"),
            Packet::Skp => write!(f, "SKP"),
            Packet::Flit(flit) => {
                match flit.seq {
                    Some(seq) => write!(f, "Flit seq={seq} tlp_bytes={}", flit.tlp_bytes)?,
                    None => write!(f, "Flit (no TLP bytes)")?,
                }
                if flit.replay {
                    write!(f, " replay")?;
                }
                Ok(())
            }
        }
    }
}

/// Totals of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DirectionStats {
    pub tlps: u64,
    pub acks: u64,
    pub update_fcs: u64,
    pub skps: u64,
    /// Link bytes of TLPs, framing included.
    pub tlp_bytes: u64,
    pub dllp_bytes: u64,
    /// Ticks the SKP ordered sets (and their EDS and PAD) took.
    pub skp_ticks: u64,
    /// Payload bytes (byte-exact) of writes and completions.
    pub payload_bytes: u64,
    pub first_tlp_start_ns: Option<f64>,
    pub last_tlp_end_ns: f64,
    /// End of the last packet of any kind.
    pub last_end_ns: f64,
}

impl DirectionStats {
    pub fn dllps(&self) -> u64 {
        self.acks + self.update_fcs
    }
}

/// What one direction sent in time the fast-forward left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftOutCounts {
    pub tlps: u64,
    /// Payload bytes of writes and completions.
    pub payload_bytes: u64,
    pub acks: u64,
    pub update_fcs: u64,
    pub skps: u64,
}

impl LeftOutCounts {
    /// What `after` counted beyond `before`.
    pub fn between(before: &DirectionStats, after: &DirectionStats) -> Self {
        LeftOutCounts {
            tlps: after.tlps - before.tlps,
            payload_bytes: after.payload_bytes - before.payload_bytes,
            acks: after.acks - before.acks,
            update_fcs: after.update_fcs - before.update_fcs,
            skps: after.skps - before.skps,
        }
    }
}

/// One skip of the steady-state fast-forward, where the record has nothing: `periods`
/// repetitions of `period_ns`, from `start_ns` (the simulated clock when it skipped) for
/// `duration_ns`. Packets that follow start at `start_ns + duration_ns` or later (one put on the
/// lanes at `start_ns` itself is the first of them); a packet already on the lanes at `start_ns`
/// is recorded before the gap, its end inside it (the rest of it follows the gap).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeftOut {
    pub start_ns: f64,
    pub duration_ns: f64,
    pub periods: u64,
    pub period_ns: f64,
    /// Per direction, indexed by [`Direction::index`].
    pub counts: [LeftOutCounts; 2],
}

impl LeftOut {
    pub fn end_ns(&self) -> f64 {
        self.start_ns + self.duration_ns
    }
}

impl fmt::Display for LeftOut {
    /// `29 periods of 308798.242 ns left out (fast-forward): 0 TLPs, 0 B, … downstream; … upstream`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} periods of {:.3} ns left out (fast-forward)", self.periods, self.period_ns)?;
        for (direction, (separator, name)) in Direction::BOTH.into_iter().zip([(": ", "downstream"), ("; ", "upstream")]) {
            let c = &self.counts[direction.index()];
            write!(f, "{separator}{} TLPs, {} B, {} Acks, {} UpdateFCs, {} SKPs {name}", c.tlps, c.payload_bytes, c.acks, c.update_fcs, c.skps)?;
        }
        Ok(())
    }
}

/// Text dump of a record, one crossing per line.
pub fn dump(record: &[Crossing]) -> String {
    let mut text = format!("{:>12} {:>12} {:<4} packet\n", "start_ns", "end_ns", "dir");
    for crossing in record {
        text.push_str(&crossing.to_string());
        text.push('\n');
    }
    text
}
