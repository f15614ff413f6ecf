//! What one direction of the link carries during a transfer, byte by byte.
//!
//! All byte counts are link bytes after encoding, summed over lanes, so a direction that carries
//! `B` bytes is busy for `B × byte_time_ns / width`. Counts are `f64` because a steady stream has
//! fractional SKPs and DLLPs per transfer.

use serde::{Deserialize, Serialize};

use super::tlp::TlpTotals;
use super::{dllp, flit, skp, Generation, Link, LinkParams, Span};

/// The traffic on one direction of the link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Load {
    pub tlps: f64,
    pub dllps: f64,
    pub skps: f64,
    /// Bytes the application asked for.
    pub payload_bytes: f64,
    /// Partial DWs at unaligned starts and ends (0 when byte-exact).
    pub alignment_bytes: f64,
    /// TLP headers and ECRC.
    pub header_bytes: f64,
    /// Per-TLP framing (Gen1–5).
    pub framing_bytes: f64,
    /// ACK and UpdateFC DLLPs (Gen1–5; in flit mode they ride in the flits).
    pub dllp_bytes: f64,
    /// Flit DLP, CRC and FEC bytes (Gen6).
    pub flit_bytes: f64,
    /// SKP ordered sets.
    pub skp_bytes: f64,
}

impl Load {
    /// Add TLPs (and, in flit mode, the flit overhead that carries them).
    pub fn add_tlps(&mut self, link: Link, tlps: &TlpTotals) {
        self.tlps += tlps.tlps;
        self.payload_bytes += tlps.payload_bytes;
        self.alignment_bytes += tlps.alignment_bytes;
        self.header_bytes += tlps.header_bytes;
        self.framing_bytes += tlps.framing_bytes;
        if link.generation == Generation::Gen6 {
            self.flit_bytes += flit::overhead_bytes(tlps.bytes());
        }
    }

    /// Add `count` DLLPs.
    pub fn add_dllps(&mut self, link: Link, count: f64) {
        self.dllps += count;
        self.dllp_bytes += dllp::bytes(link, count);
    }

    /// Add the SKP ordered sets the transmitter sends while carrying everything else.
    pub fn add_skps(&mut self, params: &LinkParams, span: Span) {
        if !params.include_skp {
            return;
        }
        let symbols = self.total_bytes() / params.link.width as f64;
        let count = skp::count(params.link.generation, symbols, span);
        self.skps += count;
        self.skp_bytes += skp::bytes(params.link, count);
    }

    /// TLP bytes including flit overhead (what the TLPs alone occupy).
    pub fn tlp_bytes(&self) -> f64 {
        self.payload_bytes + self.alignment_bytes + self.header_bytes + self.framing_bytes + self.flit_bytes
    }

    pub fn total_bytes(&self) -> f64 {
        self.tlp_bytes() + self.dllp_bytes + self.skp_bytes
    }

    /// Time the direction is busy, in ns.
    pub fn busy_ns(&self, link: Link) -> f64 {
        bytes_ns(link, self.total_bytes())
    }
}

/// Time `bytes` link bytes take on `link`, in ns.
pub fn bytes_ns(link: Link, bytes: f64) -> f64 {
    bytes * link.byte_time_ns() / link.width as f64
}

/// Symbol times per lane that `bytes` link bytes take.
pub fn bytes_symbols(link: Link, bytes: f64) -> f64 {
    bytes / link.width as f64
}
