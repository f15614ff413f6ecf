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

    /// Fill `buf` with the pattern as it stands at byte `offset` of the stream, in place.
    pub fn fill(&self, offset: u64, buf: &mut [u8]) {
        for piece in pieces(offset, buf.len()) {
            let out = &mut buf[piece.range.clone()];
            match (self.kind, piece.whole_blocks) {
                (PatternKind::Lfsr, Some(first)) => lanes::fill(|i| self.block_seed(first + i as u64), out),
                (PatternKind::Counter, Some(first)) => {
                    let first_word = first * PATTERN_BLOCK_BYTES / 4;
                    for (i, word) in out.as_chunks_mut::<4>().0.iter_mut().enumerate() {
                        *word = self.counter_word(first_word + i as u64).to_le_bytes();
                    }
                }
                (_, None) => self.visit_partial(&piece, |range, bytes| out[range].copy_from_slice(bytes)),
            }
        }
    }

    /// Compare `buf` with the pattern at `offset`; the first differing byte, if any. Compares
    /// while generating, without a copy of the expected bytes.
    pub fn check(&self, offset: u64, buf: &[u8]) -> Option<Mismatch> {
        for piece in pieces(offset, buf.len()) {
            let part = &buf[piece.range.clone()];
            let equal = match (self.kind, piece.whole_blocks) {
                (PatternKind::Lfsr, Some(first)) => lanes::equal(|i| self.block_seed(first + i as u64), part),
                _ => {
                    let mut same = true;
                    self.visit_partial(&piece, |range, bytes| same &= part[range] == *bytes);
                    same
                }
            };
            if !equal {
                return Some(self.first_mismatch(offset + piece.range.start as u64, part));
            }
        }
        None
    }

    /// The first differing byte of `part` (known to differ), searched block by block: the slow
    /// path, taken once per failure.
    fn first_mismatch(&self, offset: u64, part: &[u8]) -> Mismatch {
        let block_bytes = PATTERN_BLOCK_BYTES as usize;
        let mut expected = [0u8; PATTERN_BLOCK_BYTES as usize];
        let mut done = 0;
        while done < part.len() {
            let position = offset + done as u64;
            let take = (block_bytes - (position % PATTERN_BLOCK_BYTES) as usize).min(part.len() - done);
            self.fill(position, &mut expected[..take]);
            let actual = &part[done..done + take];
            if let Some(i) = actual.iter().zip(&expected).position(|(a, e)| a != e) {
                return Mismatch { offset: position + i as u64, expected: expected[i], actual: actual[i] };
            }
            done += take;
        }
        unreachable!("a piece that compared unequal has a differing byte")
    }

    /// The pattern over a piece inside one block, word by word: `visit(range_in_piece, bytes)`.
    fn visit_partial(&self, piece: &Piece, mut visit: impl FnMut(std::ops::Range<usize>, &[u8])) {
        let (within, end) = (piece.within, piece.within + piece.range.len());
        let mut state = self.block_seed(piece.block);
        let first_word = piece.block * PATTERN_BLOCK_BYTES / 4;
        for word in 0..end.div_ceil(4) {
            let value = match self.kind {
                PatternKind::Lfsr => {
                    state = lanes::step(state);
                    state
                }
                PatternKind::Counter => self.counter_word(first_word + word as u64),
            };
            let (lo, hi) = ((word * 4).max(within), (word * 4 + 4).min(end));
            if lo < hi {
                visit(lo - within..hi - within, &value.to_le_bytes()[lo - word * 4..hi - word * 4]);
            }
        }
    }

    /// Word `index` of the counter pattern.
    fn counter_word(&self, index: u64) -> u32 {
        index as u32 ^ self.seed as u32
    }
}

/// A run of the buffer that lies in one block (`whole_blocks: None`), or a run of whole blocks
/// starting at block `whole_blocks` (the lanes' fast path).
#[derive(Debug, Clone)]
struct Piece {
    /// Where the piece lies in the caller's buffer.
    range: std::ops::Range<usize>,
    /// The block the piece starts in, and the byte within it.
    block: u64,
    within: usize,
    whole_blocks: Option<u64>,
}

/// Split `[offset, offset + len)` into a partial head block, whole blocks and a partial tail.
fn pieces(offset: u64, len: usize) -> impl Iterator<Item = Piece> {
    let block_bytes = PATTERN_BLOCK_BYTES as usize;
    let within = (offset % PATTERN_BLOCK_BYTES) as usize;
    let head = if within == 0 { 0 } else { (block_bytes - within).min(len) };
    let whole = (len - head) / block_bytes * block_bytes;
    let first = offset / PATTERN_BLOCK_BYTES;
    let after_head = first + (within != 0) as u64;
    let head_piece = (head > 0).then(|| Piece { range: 0..head, block: first, within, whole_blocks: None });
    let whole_piece = (whole > 0).then(|| Piece { range: head..head + whole, block: after_head, within: 0, whole_blocks: Some(after_head) });
    let tail_block = after_head + (whole / block_bytes) as u64;
    let tail_piece = (head + whole < len).then(|| Piece { range: head + whole..len, block: tail_block, within: 0, whole_blocks: None });
    head_piece.into_iter().chain(whole_piece).chain(tail_piece)
}

/// Whole blocks of the LFSR, several blocks at once: each block has its own generator, and the
/// generators of `LANES` blocks step together, independent of each other, so the CPU overlaps
/// them (one generator alone is a chain of dependent shifts, about 1 GB/s). Output is the same
/// bytes as one block at a time.
mod lanes {
    use super::PATTERN_BLOCK_BYTES;

    const BLOCK: usize = PATTERN_BLOCK_BYTES as usize;
    const WORDS: usize = BLOCK / 4;

    /// One xorshift32 step: the pattern's definition.
    #[inline(always)]
    pub fn step(mut x: u32) -> u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    }

    /// Run `N` generators over `N` blocks, calling `word(lane, word_index, value)`. Eight lanes,
    /// not more: the blocks are 4 KiB apart, so their words share an L1 cache set, and more
    /// streams than the cache's ways evict each other (16 lanes measured 10× slower).
    #[inline(always)]
    fn run<const N: usize>(mut state: [u32; N], mut word: impl FnMut(usize, usize, u32)) {
        for w in 0..WORDS {
            for (lane, x) in state.iter_mut().enumerate() {
                *x = step(*x);
                word(lane, w, *x);
            }
        }
    }

    fn fill_group<const N: usize>(seed: impl Fn(usize) -> u32, out: &mut [u8]) {
        let blocks: &mut [[[u8; 4]; WORDS]] = out.as_chunks_mut::<4>().0.as_chunks_mut::<WORDS>().0;
        let blocks: &mut [[[u8; 4]; WORDS]; N] = blocks.try_into().expect("N whole blocks");
        run::<N>(std::array::from_fn(&seed), |lane, w, x| blocks[lane][w] = x.to_le_bytes());
    }

    fn equal_group<const N: usize>(seed: impl Fn(usize) -> u32, part: &[u8]) -> bool {
        let blocks: &[[[u8; 4]; WORDS]] = part.as_chunks::<4>().0.as_chunks::<WORDS>().0;
        let blocks: &[[[u8; 4]; WORDS]; N] = blocks.try_into().expect("N whole blocks");
        let mut diff = 0u32;
        run::<N>(std::array::from_fn(&seed), |lane, w, x| diff |= u32::from_le_bytes(blocks[lane][w]) ^ x);
        diff == 0
    }

    /// Groups of 8, then 4, 2, 1 blocks: `visit(first_block_of_group, blocks, byte_range)`.
    fn groups(len: usize, mut visit: impl FnMut(usize, usize, std::ops::Range<usize>) -> bool) -> bool {
        let mut block = 0;
        let blocks = len / BLOCK;
        for n in [8, 4, 2, 1] {
            while blocks - block >= n {
                if !visit(block, n, block * BLOCK..(block + n) * BLOCK) {
                    return false;
                }
                block += n;
            }
        }
        true
    }

    /// Fill whole blocks; `seed(i)` is block i's seed.
    pub fn fill(seed: impl Fn(usize) -> u32, out: &mut [u8]) {
        groups(out.len(), |first, n, range| {
            let seed = |i| seed(first + i);
            let out = &mut out[range];
            match n {
                8 => fill_group::<8>(seed, out),
                4 => fill_group::<4>(seed, out),
                2 => fill_group::<2>(seed, out),
                _ => fill_group::<1>(seed, out),
            }
            true
        });
    }

    /// Whether whole blocks equal the pattern.
    pub fn equal(seed: impl Fn(usize) -> u32, part: &[u8]) -> bool {
        groups(part.len(), |first, n, range| {
            let seed = |i| seed(first + i);
            let part = &part[range];
            match n {
                8 => equal_group::<8>(seed, part),
                4 => equal_group::<4>(seed, part),
                2 => equal_group::<2>(seed, part),
                _ => equal_group::<1>(seed, part),
            }
        })
    }
}

/// CRC32 with the Ethernet polynomial 0x04C11DB7 (reflected, as IEEE 802.3).
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The pattern's definition, one serial generator per block, one word at a time: what the
    /// simulator, the fault wrapper and the Verilog core reproduce.
    fn reference(pattern: &Pattern, offset: u64, len: usize) -> Vec<u8> {
        let first_block = offset / PATTERN_BLOCK_BYTES;
        let last_block = (offset + len as u64).div_ceil(PATTERN_BLOCK_BYTES);
        let mut stream = Vec::new();
        for block in first_block..last_block {
            let mut state = pattern.block_seed(block);
            for word in 0..PATTERN_BLOCK_BYTES / 4 {
                let value = match pattern.kind {
                    PatternKind::Lfsr => {
                        state ^= state << 13;
                        state ^= state >> 17;
                        state ^= state << 5;
                        state
                    }
                    PatternKind::Counter => (block * PATTERN_BLOCK_BYTES / 4 + word) as u32 ^ pattern.seed as u32,
                };
                stream.extend_from_slice(&value.to_le_bytes());
            }
        }
        let skip = (offset - first_block * PATTERN_BLOCK_BYTES) as usize;
        stream[skip..skip + len].to_vec()
    }

    fn any_pattern() -> impl Strategy<Value = Pattern> {
        (any::<bool>(), any::<u64>()).prop_map(|(lfsr, seed)| Pattern { kind: if lfsr { PatternKind::Lfsr } else { PatternKind::Counter }, seed })
    }

    proptest! {
        #[test]
        fn lanes_give_the_serial_generators_bytes(pattern in any_pattern(), offset in 0u64..200_000, len in 0usize..70_000) {
            let mut buf = vec![0u8; len];
            pattern.fill(offset, &mut buf);
            prop_assert_eq!(&buf, &reference(&pattern, offset, len));
            prop_assert_eq!(pattern.check(offset, &buf), None);
        }

        #[test]
        fn check_finds_the_first_flipped_byte(pattern in any_pattern(), offset in 0u64..100_000, len in 1usize..70_000, at in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let mut buf = reference(&pattern, offset, len);
            let i = at.index(len);
            buf[i] ^= flip;
            let expected = buf[i] ^ flip;
            prop_assert_eq!(pattern.check(offset, &buf), Some(Mismatch { offset: offset + i as u64, expected, actual: buf[i] }));
        }
    }

    #[test]
    fn first_words_of_seed_1_are_unchanged() {
        // Pinned words (computed independently): the simulator, the fault wrapper and the
        // Verilog core generate these; blocks 0 and 9 (9 is in the second group of 8 lanes).
        let mut buf = vec![0u8; 10 * 4096];
        Pattern::lfsr(1).fill(0, &mut buf);
        let word = |at: usize| u32::from_le_bytes(buf[at..at + 4].try_into().unwrap());
        assert_eq!([word(0), word(4)], [0x6644_2a7e, 0x8278_e49b]);
        assert_eq!([word(9 * 4096), word(9 * 4096 + 4)], [0x4b22_399b, 0x8e3a_adf3]);
    }

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
