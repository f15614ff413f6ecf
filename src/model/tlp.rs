//! Transaction Layer Packets: their sizes on the wire and how a transfer is cut into them.
//!
//! Rules (PCIe Base Specification §2.2): a request never crosses a 4 KiB address boundary; data
//! travels in whole DWs with first/last byte enables, so an unaligned start or end costs the
//! partial DWs around it; completions for one request may be split only at addresses aligned to
//! the read completion boundary (RCB). The documents' tables ignore all three
//! ([`Accounting::ByteExact`]).

use super::{Accounting, Generation, LinkParams};

/// Completion header: always 3 DW (completer/requester IDs, tag, byte count, lower address).
pub const COMPLETION_HEADER_BYTES: u64 = 12;

/// Bytes a TLP may not cross (§2.2.7: requests must not cross a 4 KiB boundary).
pub const ADDRESS_BOUNDARY_BYTES: u64 = 4096;

/// Link-layer framing around one TLP. Gen1–2: STP 1 + sequence number 2 + LCRC 4 + END 1.
/// Gen3–5: STP token 4 (framing, length and sequence number) + LCRC 4. Gen6 flit mode: none per
/// TLP, the flit carries CRC, FEC and DLLP bytes for every TLP inside it (see [`super::flit`]).
pub fn framing_bytes(generation: Generation) -> u64 {
    match generation {
        Generation::Gen6 => 0,
        _ => 8,
    }
}

/// A group of `count` TLPs carrying `len` bytes each, the first starting at `start` (every
/// member has the same offset within a DW, so they cost the same on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub start: u64,
    pub len: u64,
    pub count: u64,
}

impl Piece {
    /// Data bytes on the wire for one member: whole DWs, or exactly `len` when byte-exact.
    pub fn wire_bytes(&self, accounting: Accounting) -> u64 {
        match accounting {
            Accounting::ByteExact => self.len,
            Accounting::WireAccurate => (self.start + self.len).div_ceil(4) * 4 - self.start / 4 * 4,
        }
    }
}

/// Cut `[start, start + size)` into pieces of at most `chunk` bytes. Wire-accurate: cut at
/// addresses that are multiples of `chunk` (what DMA engines do; since every allowed `chunk`
/// divides 4096, no piece crosses a 4 KiB boundary). Byte-exact: `size / chunk` full pieces and
/// the rest, as the documents count.
pub fn cut_aligned(start: u64, size: u64, chunk: u64, accounting: Accounting) -> Vec<Piece> {
    debug_assert!(chunk > 0 && ADDRESS_BOUNDARY_BYTES.is_multiple_of(chunk));
    if size == 0 {
        return Vec::new();
    }
    if accounting == Accounting::ByteExact {
        return cut_sequential(0, size, chunk);
    }
    if start.is_multiple_of(chunk) {
        return cut_sequential(start, size, chunk);
    }
    let end = start + size;
    let first_end = ((start / chunk) + 1) * chunk;
    if end <= first_end {
        return vec![Piece { start, len: size, count: 1 }];
    }
    let mut pieces = vec![Piece { start, len: first_end - start, count: 1 }];
    pieces.extend(cut_sequential(first_end, end - first_end, chunk));
    pieces
}

/// Cut `[start, start + size)` into consecutive pieces of `chunk` bytes and a shorter last one.
pub fn cut_sequential(start: u64, size: u64, chunk: u64) -> Vec<Piece> {
    let full = size / chunk;
    let rest = size % chunk;
    let mut pieces = Vec::with_capacity(2);
    if full > 0 {
        pieces.push(Piece { start, len: chunk, count: full });
    }
    if rest > 0 {
        pieces.push(Piece { start: start + full * chunk, len: rest, count: 1 });
    }
    pieces
}

/// Completions answering one read request `[start, start + len)`: each at most MaxPayload (or
/// `LinkParams::completion_bytes`), split
/// only at RCB-aligned addresses. The completer sends the largest completions it may: the first
/// ends at the last RCB boundary within MaxPayload of the start, the others are MaxPayload long.
pub fn completions(params: &LinkParams, request: Piece) -> Vec<Piece> {
    let mps = params.max_completion_bytes();
    let scale = |pieces: Vec<Piece>| -> Vec<Piece> {
        pieces.into_iter().map(|p| Piece { count: p.count * request.count, ..p }).collect()
    };
    if params.accounting == Accounting::ByteExact || request.len <= mps {
        return scale(cut_sequential(request.start, request.len, mps));
    }
    let end = request.start + request.len;
    let first_end = (request.start + mps) / params.rcb_bytes * params.rcb_bytes;
    let mut pieces = vec![Piece { start: request.start, len: first_end - request.start, count: 1 }];
    pieces.extend(cut_sequential(first_end, end - first_end, mps));
    scale(pieces)
}

/// Totals over a set of TLPs of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TlpTotals {
    pub tlps: f64,
    /// Bytes the application asked for.
    pub payload_bytes: f64,
    /// Extra data bytes on the wire: partial DWs at unaligned starts and ends.
    pub alignment_bytes: f64,
    /// TLP headers and ECRC.
    pub header_bytes: f64,
    /// Per-TLP link framing (STP/sequence/LCRC/END or STP token/LCRC).
    pub framing_bytes: f64,
}

impl TlpTotals {
    /// TLPs carrying `pieces` of data behind a header of `header_bytes`.
    pub fn of(params: &LinkParams, pieces: &[Piece], header_bytes: u64) -> Self {
        let ecrc = if params.ecrc { 4 } else { 0 };
        let mut totals = TlpTotals::default();
        for piece in pieces {
            let n = piece.count as f64;
            totals.tlps += n;
            totals.payload_bytes += n * piece.len as f64;
            totals.alignment_bytes += n * (piece.wire_bytes(params.accounting) - piece.len) as f64;
            totals.header_bytes += n * (header_bytes + ecrc) as f64;
            totals.framing_bytes += n * framing_bytes(params.link.generation) as f64;
        }
        totals
    }

    /// `count` TLPs without data (read requests) behind a header of `header_bytes`.
    pub fn requests(params: &LinkParams, count: f64, header_bytes: u64) -> Self {
        let ecrc = if params.ecrc { 4 } else { 0 };
        TlpTotals {
            tlps: count,
            header_bytes: count * (header_bytes + ecrc) as f64,
            framing_bytes: count * framing_bytes(params.link.generation) as f64,
            ..TlpTotals::default()
        }
    }

    pub fn bytes(&self) -> f64 {
        self.payload_bytes + self.alignment_bytes + self.header_bytes + self.framing_bytes
    }
}

/// Number of request TLPs in `pieces`.
pub fn count(pieces: &[Piece]) -> u64 {
    pieces.iter().map(|p| p.count).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LinkParams;

    fn params() -> LinkParams {
        LinkParams::typical("gen3x8".parse().unwrap())
    }

    #[test]
    fn aligned_transfers_cut_into_full_payloads() {
        assert_eq!(cut_aligned(0, 1024, 256, Accounting::WireAccurate), vec![Piece { start: 0, len: 256, count: 4 }]);
    }

    #[test]
    fn unaligned_start_costs_an_extra_tlp_and_partial_dws() {
        let pieces = cut_aligned(2, 1024, 256, Accounting::WireAccurate);
        assert_eq!(count(&pieces), 5);
        assert_eq!(pieces[0], Piece { start: 2, len: 254, count: 1 });
        assert_eq!(pieces[0].wire_bytes(Accounting::WireAccurate), 256);
        assert_eq!(pieces.last().unwrap().wire_bytes(Accounting::WireAccurate), 4);
        // Never crosses a 4 KiB boundary.
        for p in cut_aligned(4000, 8192, 4096, Accounting::WireAccurate) {
            assert_eq!(p.start / 4096, (p.start + p.len - 1) / 4096, "{p:?}");
        }
    }

    #[test]
    fn completions_split_at_rcb_then_max_payload() {
        let mut p = params();
        p.mps_bytes = 256;
        p.rcb_bytes = 64;
        let cpls = completions(&p, Piece { start: 32, len: 512, count: 1 });
        assert_eq!(cpls[0], Piece { start: 32, len: 224, count: 1 });
        assert_eq!(cpls.iter().map(|c| c.len * c.count).sum::<u64>(), 512);
        assert!(cpls.iter().all(|c| c.len <= 256));
    }

    #[test]
    fn one_byte_still_carries_one_dw() {
        let piece = Piece { start: 0, len: 1, count: 1 };
        assert_eq!(piece.wire_bytes(Accounting::WireAccurate), 4);
        assert_eq!(piece.wire_bytes(Accounting::ByteExact), 1);
        assert_eq!(Piece { start: 3, len: 2, count: 1 }.wire_bytes(Accounting::WireAccurate), 8);
    }
}
