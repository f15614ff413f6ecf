//! Transaction layer rules: how a transfer is cut into requests and a request into completions,
//! and how many bytes each TLP takes on the wire.

use super::config::SimConfig;
use super::packet::{dw_bytes, Tlp, TlpKind};
use super::phy::{Phy, ECRC_BYTES};

/// Requests never cross a 4 KiB address boundary (PCIe Base Specification §2.2.7).
pub const ADDRESS_BOUNDARY_BYTES: u64 = 4096;
/// Completion headers are always 3 DW.
pub const COMPLETION_HEADER_BYTES: u64 = 12;

/// Cuts `[start, end)` into pieces at addresses that are multiples of `chunk` (MaxPayload for
/// writes, MaxReadRequest for reads) and of 4 KiB, as DMA engines do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Splitter {
    next: u64,
    end: u64,
    chunk: u64,
}

impl Splitter {
    pub fn new(start: u64, bytes: u64, chunk: u64) -> Self {
        Splitter { next: start, end: start + bytes, chunk }
    }

    pub fn is_done(&self) -> bool {
        self.next >= self.end
    }

    /// Address of the next piece.
    pub fn position(&self) -> u64 {
        self.next
    }

    pub fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.next)
    }

    /// Hand out `bytes` more at the end.
    pub fn extend(&mut self, bytes: u64) {
        self.end += bytes;
    }

    /// Move on by `bytes` without handing them out (at most what remains).
    pub fn skip(&mut self, bytes: u64) {
        self.next = (self.next + bytes).min(self.end);
    }

    /// The next piece as (address, length).
    pub fn next_piece(&mut self) -> Option<(u64, u64)> {
        if self.is_done() {
            return None;
        }
        let chunk_end = round_down(self.next, self.chunk) + self.chunk;
        let page_end = (self.next / ADDRESS_BOUNDARY_BYTES + 1) * ADDRESS_BOUNDARY_BYTES;
        let piece_end = self.end.min(chunk_end).min(page_end);
        let piece = (self.next, piece_end - self.next);
        self.next = piece_end;
        Some(piece)
    }
}

/// Completions answering a read of `[addr, addr + len)`: each at most `max_bytes`, split only
/// at addresses aligned to the read completion boundary (§2.3.1.1), largest first.
pub fn completions(addr: u64, len: u64, max_bytes: u64, rcb_bytes: u64) -> impl Iterator<Item = (u64, u64)> {
    let end = addr + len;
    let mut next = addr;
    std::iter::from_fn(move || {
        if next >= end {
            return None;
        }
        let piece_end = if end - next <= max_bytes { end } else { round_down(next + max_bytes, rcb_bytes) };
        let piece = (next, piece_end - next);
        next = piece_end;
        Some(piece)
    })
}

/// `value` down to a multiple of `unit`: a mask for the powers of two that sizes and
/// boundaries are (a division costs more than the rest of cutting a TLP).
fn round_down(value: u64, unit: u64) -> u64 {
    if unit.is_power_of_two() {
        value & !(unit - 1)
    } else {
        value / unit * unit
    }
}

/// A TLP of `kind` for `[addr, addr + len)` (sequence number given later, at transmission).
pub fn tlp(kind: TlpKind, addr: u64, len: u64, tag: u16) -> Tlp {
    let data_bytes = if kind == TlpKind::MemRead { 0 } else { dw_bytes(addr, len) };
    Tlp { kind, addr, len_bytes: len, data_bytes, tag, seq: 0 }
}

/// Link bytes of `tlp`: framing, header, data, ECRC.
pub fn wire_bytes(config: &SimConfig, phy: &Phy, tlp: &Tlp) -> u64 {
    let header = match tlp.kind {
        TlpKind::CompletionData => COMPLETION_HEADER_BYTES,
        _ => config.header.bytes(),
    };
    let ecrc = if config.ecrc { ECRC_BYTES } else { 0 };
    phy.tlp_framing_bytes() + header + tlp.data_bytes + ecrc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_split_at_payload_and_page_boundaries() {
        let mut s = Splitter::new(100, 300, 128);
        let pieces: Vec<_> = std::iter::from_fn(|| s.next_piece()).collect();
        assert_eq!(pieces, vec![(100, 28), (128, 128), (256, 128), (384, 16)]);
        let mut s = Splitter::new(4000, 200, 4096);
        assert_eq!(s.next_piece(), Some((4000, 96)));
        assert_eq!(s.next_piece(), Some((4096, 104)));
        assert_eq!(s.next_piece(), None);
    }

    #[test]
    fn completions_split_at_rcb_then_max_payload() {
        let pieces: Vec<_> = completions(32, 512, 256, 64).collect();
        assert_eq!(pieces, vec![(32, 224), (256, 256), (512, 32)]);
    }
}
