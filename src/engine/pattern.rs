//! Test data the host can regenerate anywhere (document 000 §5.1).
//!
//! The generator is a 32-bit xorshift LFSR (x ^= x<<13; x ^= x>>17; x ^= x<<5), restarted at
//! every 4 KiB block from a seed derived from (run seed, block index). Restarting per block makes
//! the pattern addressable, so any chunk at any offset can be generated or checked on its own, in
//! parallel, and a dropped, duplicated or reordered chunk shows up at its own offset. CRC32 uses
//! the Ethernet polynomial (crc32fast), as the document's Com CRC IP does.

use serde::{Deserialize, Serialize};

/// Bytes between restarts of the generator.
pub const PATTERN_BLOCK_BYTES: u64 = 4096;

/// Which sequence to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKind {
    /// xorshift32 LFSR, as the FPGA of document 000 generates.
    Lfsr,
    /// Little-endian 32-bit counter of the word's index, as document 002 checks.
    Counter,
}

/// A seeded pattern, addressable by byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    pub kind: PatternKind,
    pub seed: u64,
}

/// The first byte that differs from the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    pub offset: u64,
    pub expected: u8,
    pub actual: u8,
}

impl Pattern {
    pub fn lfsr(seed: u64) -> Self {
        Pattern { kind: PatternKind::Lfsr, seed }
    }

    fn block_seed(&self, block: u64) -> u32 {
        // splitmix64 finaliser: decorrelates neighbouring blocks and seeds.
        let mut z = self.seed ^ block.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let word = (z ^ (z >> 31)) as u32;
        if word == 0 { 0x1234_5678 } else { word } // an LFSR must not start at 0
    }

    /// Write one whole block's words into `out` (at most 4096 bytes, starting at the block start).
    fn generate_block(&self, block: u64, out: &mut [u8]) {
        match self.kind {
            PatternKind::Lfsr => {
                let mut state = self.block_seed(block);
                for word in out.chunks_mut(4) {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    word.copy_from_slice(&state.to_le_bytes()[..word.len()]);
                }
            }
            PatternKind::Counter => {
                let first_word = block * PATTERN_BLOCK_BYTES / 4;
                for (i, word) in out.chunks_mut(4).enumerate() {
                    let value = (first_word + i as u64) as u32 ^ self.seed as u32;
                    word.copy_from_slice(&value.to_le_bytes()[..word.len()]);
                }
            }
        }
    }

    /// Visit the pattern over `[offset, offset + len)` block by block: `visit(range_in_buf, bytes)`.
    fn for_each_block(&self, offset: u64, len: usize, mut visit: impl FnMut(std::ops::Range<usize>, &[u8]) -> bool) {
        let mut scratch = [0u8; PATTERN_BLOCK_BYTES as usize];
        let mut done = 0usize;
        while done < len {
            let position = offset + done as u64;
            let block = position / PATTERN_BLOCK_BYTES;
            let within = (position % PATTERN_BLOCK_BYTES) as usize;
            let take = (PATTERN_BLOCK_BYTES as usize - within).min(len - done);
            self.generate_block(block, &mut scratch[..within + take]);
            if !visit(done..done + take, &scratch[within..within + take]) {
                return;
            }
            done += take;
        }
    }

    /// Fill `buf` with the pattern as it stands at byte `offset` of the stream.
    pub fn fill(&self, offset: u64, buf: &mut [u8]) {
        let len = buf.len();
        self.for_each_block(offset, len, |range, bytes| {
            buf[range].copy_from_slice(bytes);
            true
        });
    }

    /// Compare `buf` with the pattern at `offset`; the first differing byte, if any.
    pub fn check(&self, offset: u64, buf: &[u8]) -> Option<Mismatch> {
        let mut found = None;
        self.for_each_block(offset, buf.len(), |range, bytes| {
            let start = range.start;
            if buf[range] == *bytes {
                return true;
            }
            let i = buf[start..].iter().zip(bytes).position(|(a, b)| a != b).unwrap_or(0);
            found = Some(Mismatch { offset: offset + (start + i) as u64, expected: bytes[i], actual: buf[start + i] });
            false
        });
        found
    }
}

/// CRC32 with the Ethernet polynomial 0x04C11DB7 (reflected, as IEEE 802.3).
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_addressable_at_any_offset() {
        let pattern = Pattern::lfsr(7);
        let mut whole = vec![0u8; 3 * 4096 + 100];
        pattern.fill(0, &mut whole);
        let mut part = vec![0u8; 5000];
        pattern.fill(1234, &mut part);
        assert_eq!(part, whole[1234..6234]);
        assert_eq!(pattern.check(1234, &part), None);
    }

    #[test]
    fn check_reports_the_first_mismatching_offset() {
        let pattern = Pattern { kind: PatternKind::Counter, seed: 0 };
        let mut buf = vec![0u8; 10_000];
        pattern.fill(4096, &mut buf);
        buf[5000] ^= 0x10;
        let mismatch = pattern.check(4096, &buf).unwrap();
        assert_eq!(mismatch.offset, 4096 + 5000);
        assert_eq!(mismatch.actual ^ mismatch.expected, 0x10);
    }

    #[test]
    fn seeds_give_different_data_and_crc_is_ethernet() {
        let (mut a, mut b) = (vec![0u8; 64], vec![0u8; 64]);
        Pattern::lfsr(1).fill(0, &mut a);
        Pattern::lfsr(2).fill(0, &mut b);
        assert_ne!(a, b);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
