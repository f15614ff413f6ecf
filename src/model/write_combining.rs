//! Write combining: how a CPU turns sequential byte writes to a write-combining BAR into TLPs
//! (document 000 §4.16, Test 14; Intel SDM Vol. 3 §11.3.1).
//!
//! The CPU collects writes in 64-byte buffers. A full buffer leaves as one 64-byte TLP; a partial
//! buffer (evicted by `sfence`) leaves in aligned 8-byte chunks, one TLP each. So 16- and 32-byte
//! writes run at the 8-byte rate, and everything from 64 bytes up at the 64-byte rate.

use serde::{Deserialize, Serialize};

use super::tlp::{self, Piece};
use super::{write, Accounting, LinkParams, Span};

/// Size of one write-combining buffer (a cache line).
pub const WC_BUFFER_BYTES: u64 = 64;
/// Chunk a partial buffer is written out in.
pub const WC_PARTIAL_CHUNK_BYTES: u64 = 8;

/// The TLPs a sequential write of `size_bytes` from `start` leaves the CPU as.
pub fn tlps(start: u64, size_bytes: u64) -> Vec<Piece> {
    tlp::cut_aligned(start, size_bytes, WC_BUFFER_BYTES, Accounting::WireAccurate)
        .into_iter()
        .flat_map(|line| {
            if line.len == WC_BUFFER_BYTES {
                vec![line]
            } else {
                tlp::cut_aligned(line.start, line.len, WC_PARTIAL_CHUNK_BYTES, Accounting::WireAccurate)
            }
        })
        .collect()
}

/// One row of the write-combining table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WcRow {
    pub size_bytes: u64,
    /// The document's "max PCIe throughput": the whole write as one TLP, MB/s.
    #[serde(rename = "one_tlp_MBps")]
    pub one_tlp_mbps: f64,
    /// TLP payload sizes the write combining produces: (bytes, count).
    pub tlps: Vec<(u64, u64)>,
    /// Rate with those TLPs, MB/s.
    #[serde(rename = "write_combining_MBps")]
    pub wc_mbps: f64,
}

/// Theory for a sequential write of `size_bytes` through write-combining buffers.
pub fn row(params: &LinkParams, size_bytes: u64) -> WcRow {
    let start = params.start_addr % tlp::ADDRESS_BOUNDARY_BYTES;
    let single = [Piece { start, len: size_bytes, count: 1 }];
    let pieces = tlps(start, size_bytes);
    let mut sizes: Vec<(u64, u64)> = Vec::new();
    for piece in &pieces {
        match sizes.iter_mut().find(|(len, _)| *len == piece.len) {
            Some(entry) => entry.1 += piece.count,
            None => sizes.push((piece.len, piece.count)),
        }
    }
    WcRow {
        size_bytes,
        one_tlp_mbps: write::write_pieces(params, &single, size_bytes, Span::Steady).throughput.mbps,
        tlps: sizes,
        wc_mbps: write::write_pieces(params, &pieces, size_bytes, Span::Steady).throughput.mbps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_buffers_leave_in_8_byte_chunks() {
        assert_eq!(tlps(0, 4), vec![Piece { start: 0, len: 4, count: 1 }]);
        assert_eq!(tlps(0, 32), vec![Piece { start: 0, len: 8, count: 4 }]);
        assert_eq!(tlps(0, 4096), vec![Piece { start: 0, len: 64, count: 64 }]);
        let mixed = tlps(0, 80);
        assert_eq!(mixed, vec![Piece { start: 0, len: 64, count: 1 }, Piece { start: 64, len: 8, count: 2 }]);
    }
}
