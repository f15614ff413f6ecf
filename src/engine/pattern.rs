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
        self.fill_by(lanes::Path::best(), offset, buf)
    }

    fn fill_by(&self, path: lanes::Path, offset: u64, buf: &mut [u8]) {
        for piece in pieces(offset, buf.len()) {
            let out = &mut buf[piece.range.clone()];
            match (self.kind, piece.whole_blocks) {
                (PatternKind::Lfsr, Some(first)) => lanes::fill(path, |i| self.block_seed(first + i as u64), out),
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

    /// Compare `buf` with the pattern at `offset`; the first differing byte, if any. Whole blocks
    /// are checked word against word (each must be one step of the generator from the one
    /// before), without generating or keeping a copy of the expected bytes.
    pub fn check(&self, offset: u64, buf: &[u8]) -> Option<Mismatch> {
        self.check_by(lanes::Path::best(), offset, buf)
    }

    fn check_by(&self, path: lanes::Path, offset: u64, buf: &[u8]) -> Option<Mismatch> {
        for piece in pieces(offset, buf.len()) {
            let part = &buf[piece.range.clone()];
            let equal = match (self.kind, piece.whole_blocks) {
                (PatternKind::Lfsr, Some(first)) => lanes::equal(path, |i| self.block_seed(first + i as u64), part),
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

/// Whole blocks of the LFSR at SIMD speed, same bytes as one generator per block.
///
/// Checking needs no generator: `equal_blocks` tests each word against its predecessor, all
/// words independently. Filling must run the generators. One generator alone is a chain of dependent shifts (about 1 GB/s), so each block is cut into
/// `LANES` segments, each started from the state the block's generator has there: xorshift is
/// linear over GF(2), so stepping `SEGMENT_WORDS` times is a fixed 32×32 bit matrix, applied
/// with nibble tables (`jump`). The lanes of a block step together as one vector; every
/// `TILE` steps the tile of words is transposed so each segment gets `TILE` contiguous words (one
/// 32-byte store, not eight scattered ones), and `CHAINS` blocks run at once so the CPU overlaps
/// their independent chains. The segments of a block are 512 bytes apart, in different L1 cache
/// sets (the earlier one-lane-per-block layout put 8 streams 4 KiB apart in one set).
///
/// The code is portable; on x86-64 it is compiled again with AVX2 and with AVX-512 enabled (the
/// transpositions with explicit intrinsics), and the widest the CPU has is chosen at run time
/// (`Path`). Tests run every path available here.
mod lanes {
    use super::PATTERN_BLOCK_BYTES;

    const BLOCK: usize = PATTERN_BLOCK_BYTES as usize;
    /// Generators per block (one vector of 8 × u32 with AVX2).
    const LANES: usize = 8;
    /// Words each lane generates: one segment of the block.
    const SEGMENT_WORDS: usize = BLOCK / 4 / LANES;
    /// Words of each lane generated between transpositions (8 × 4 bytes = one 32-byte store).
    const TILE: usize = 8;
    /// Blocks generated at once, as independent dependency chains.
    const CHAINS: usize = 4;

    /// One xorshift32 step: the pattern's definition.
    #[inline(always)]
    pub const fn step(mut x: u32) -> u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    }

    /// The state `SEGMENT_WORDS` steps on, as 8 tables (one per nibble of the state) of the XOR
    /// of the matrix columns that nibble selects. Column `bit` is where the unit state
    /// `1 << bit` goes, by linearity.
    const JUMP: [[u32; 16]; 8] = {
        let mut columns = [0u32; 32];
        let mut bit = 0;
        while bit < 32 {
            let mut x = 1u32 << bit;
            let mut i = 0;
            while i < SEGMENT_WORDS {
                x = step(x);
                i += 1;
            }
            columns[bit] = x;
            bit += 1;
        }
        let mut tables = [[0u32; 16]; 8];
        let mut index = 0;
        while index < 8 * 16 {
            let (nibble, value) = (index / 16, index % 16);
            let mut b = 0;
            while b < 4 {
                if value >> b & 1 == 1 {
                    tables[nibble][value] ^= columns[4 * nibble + b];
                }
                b += 1;
            }
            index += 1;
        }
        tables
    };

    /// `SEGMENT_WORDS` steps of the generator at once.
    #[inline(always)]
    fn jump(x: u32) -> u32 {
        let mut out = 0;
        for (nibble, table) in JUMP.iter().enumerate() {
            out ^= table[(x >> (4 * nibble)) as usize & 15];
        }
        out
    }

    /// The state before each segment's first word, for a block whose generator starts at `seed`.
    #[inline(always)]
    fn segment_states(seed: u32) -> [u32; LANES] {
        let mut states = [seed; LANES];
        for lane in 1..LANES {
            states[lane] = jump(states[lane - 1]);
        }
        states
    }

    /// How a block's lanes are held and stepped: an array (any CPU), an AVX2 register (one
    /// block), an AVX-512 register (two blocks side by side).
    trait Lanes: Copy {
        type Vector: Copy;
        /// Blocks one vector generates.
        const BLOCKS: usize;
        /// The segment states of blocks `0..BLOCKS`, block `b` seeded `seed(b)`.
        fn load(self, seed: impl Fn(usize) -> u32) -> Self::Vector;
        /// The next `TILE` words of every lane, transposed: `emit(lane, words)` for each lane,
        /// lane `l` of block `b` numbered `b * LANES + l`.
        fn tile(self, states: &mut Self::Vector, emit: impl FnMut(usize, [u32; TILE]));
    }

    /// Plain arrays: LLVM vectorises the steps; the transposition stays scalar.
    #[derive(Clone, Copy)]
    struct Portable;

    impl Lanes for Portable {
        type Vector = [u32; LANES];
        const BLOCKS: usize = 1;

        #[inline(always)]
        fn load(self, seed: impl Fn(usize) -> u32) -> [u32; LANES] {
            segment_states(seed(0))
        }

        #[inline(always)]
        fn tile(self, states: &mut [u32; LANES], mut emit: impl FnMut(usize, [u32; TILE])) {
            let mut columns = [[0u32; LANES]; TILE];
            for column in &mut columns {
                for x in states.iter_mut() {
                    *x = step(*x);
                }
                *column = *states;
            }
            for lane in 0..LANES {
                emit(lane, std::array::from_fn(|word| columns[word][lane]));
            }
        }
    }

    /// Run `N` vectors' generators (`N * L::BLOCKS` blocks), calling `row(index, words)` for
    /// every run of `TILE` words, in any order; `index` counts `TILE`-word rows from the first
    /// block's start.
    #[inline(always)]
    fn run<const N: usize, L: Lanes>(lanes: L, seed: impl Fn(usize) -> u32, mut row: impl FnMut(usize, [u32; TILE])) {
        let mut states: [L::Vector; N] = std::array::from_fn(|v| lanes.load(|b| seed(v * L::BLOCKS + b)));
        const ROWS_PER_BLOCK: usize = BLOCK / 4 / TILE;
        const ROWS_PER_SEGMENT: usize = SEGMENT_WORDS / TILE;
        for t in 0..ROWS_PER_SEGMENT {
            for (v, state) in states.iter_mut().enumerate() {
                // Lane `b * LANES + l` starts `b * ROWS_PER_BLOCK + l * ROWS_PER_SEGMENT` rows in.
                lanes.tile(state, |lane, words| row((v * L::BLOCKS) * ROWS_PER_BLOCK + lane * ROWS_PER_SEGMENT + t, words));
            }
        }
    }

    type Row = [[u8; 4]; TILE];

    #[inline(always)]
    fn fill_group<const N: usize>(lanes: impl Lanes, seed: impl Fn(usize) -> u32, out: &mut [Row]) {
        run::<N, _>(lanes, seed, |i, words| out[i] = words.map(u32::to_le_bytes));
    }

    /// Fill the blocks of `out` that whole vectors of `L::BLOCKS` blocks cover, in groups of
    /// `CHAINS`, then 2 and 1 vectors; the bytes filled.
    #[inline(always)]
    fn fill_blocks<L: Lanes>(lanes: L, seed: impl Fn(usize) -> u32, out: &mut [u8]) -> usize {
        const ROWS: usize = BLOCK / 4 / TILE;
        let unit = L::BLOCKS;
        let (mut block, blocks) = (0, out.len() / BLOCK / unit * unit);
        let rows: &mut [Row] = out.as_chunks_mut::<4>().0.as_chunks_mut::<TILE>().0;
        for n in [CHAINS, 2, 1] {
            while blocks - block >= n * unit {
                let first = block;
                let seed = |i| seed(first + i);
                let out = &mut rows[block * ROWS..(block + n * unit) * ROWS];
                match n {
                    CHAINS => fill_group::<CHAINS>(lanes, seed, out),
                    2 => fill_group::<2>(lanes, seed, out),
                    _ => fill_group::<1>(lanes, seed, out),
                }
                block += n * unit;
            }
        }
        blocks * BLOCK
    }

    /// Whether whole blocks hold the pattern, without running the generators: a block's words
    /// are its generator's exactly when the first is one step from the seed and every other one
    /// step from the word before it (a step is a function, so by induction each word is the
    /// one the generator makes). Every word is checked independently of the others: no chain
    /// of dependent steps, no transposition, contiguous loads.
    #[inline(always)]
    fn equal_blocks(seed: impl Fn(usize) -> u32, part: &[u8]) -> bool {
        let blocks: &[[[u8; 4]; BLOCK / 4]] = part.as_chunks::<4>().0.as_chunks().0;
        blocks.iter().enumerate().all(|(i, block)| {
            let word = |bytes: &[u8; 4]| u32::from_le_bytes(*bytes);
            let first = word(&block[0]) ^ step(seed(i));
            let rest = block.iter().zip(&block[1..]).fold(0, |diff, (before, this)| diff | (word(this) ^ step(word(before))));
            first | rest == 0
        })
    }

    /// Which implementation runs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Path {
        /// Any CPU.
        Portable,
        /// x86-64 CPUs with AVX2.
        #[cfg(target_arch = "x86_64")]
        Avx2(avx2::Avx2),
        /// x86-64 CPUs with AVX-512F and BW.
        #[cfg(target_arch = "x86_64")]
        Avx512(avx512::Avx512),
    }

    impl Path {
        /// The fastest path this CPU runs: the widest vectors it has.
        pub fn best() -> Path {
            #[cfg(target_arch = "x86_64")]
            {
                if let Some(avx512) = avx512::Avx512::detect() {
                    return Path::Avx512(avx512);
                }
                if let Some(avx2) = avx2::Avx2::detect() {
                    return Path::Avx2(avx2);
                }
            }
            Path::Portable
        }

        /// Every path this CPU runs.
        #[cfg(test)]
        pub fn available() -> Vec<Path> {
            let mut paths = vec![Path::Portable];
            #[cfg(target_arch = "x86_64")]
            {
                paths.extend(avx2::Avx2::detect().map(Path::Avx2));
                paths.extend(avx512::Avx512::detect().map(Path::Avx512));
            }
            paths
        }
    }

    /// Fill whole blocks; `seed(i)` is block i's seed.
    pub fn fill(path: Path, seed: impl Fn(usize) -> u32, out: &mut [u8]) {
        match path {
            Path::Portable => {
                fill_blocks(Portable, seed, out);
            }
            #[cfg(target_arch = "x86_64")]
            Path::Avx2(avx2) => avx2.fill(seed, out),
            #[cfg(target_arch = "x86_64")]
            Path::Avx512(avx512) => avx512.fill(seed, out),
        }
    }

    /// Whether whole blocks equal the pattern.
    pub fn equal(path: Path, seed: impl Fn(usize) -> u32, part: &[u8]) -> bool {
        match path {
            Path::Portable => equal_blocks(seed, part),
            #[cfg(target_arch = "x86_64")]
            Path::Avx2(avx2) => avx2.equal(seed, part),
            #[cfg(target_arch = "x86_64")]
            Path::Avx512(avx512) => avx512.equal(seed, part),
        }
    }

    /// AVX2: a block's 8 lanes in one 256-bit register, the 8×8 tile transposed with unpack and
    /// lane-permute instructions (LLVM does not find these from the portable code).
    #[cfg(target_arch = "x86_64")]
    mod avx2 {
        use std::arch::x86_64::*;

        use super::{Lanes, LANES, TILE};

        /// Proof that this CPU has AVX2: only [`Avx2::detect`] makes one.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Avx2(());

        impl Avx2 {
            pub fn detect() -> Option<Avx2> {
                std::arch::is_x86_feature_detected!("avx2").then_some(Avx2(()))
            }

            pub fn fill(self, seed: impl Fn(usize) -> u32, out: &mut [u8]) {
                // SAFETY: an `Avx2` exists only on a CPU with AVX2.
                unsafe { fill(self, seed, out) };
            }

            pub fn equal(self, seed: impl Fn(usize) -> u32, part: &[u8]) -> bool {
                // SAFETY: as in `fill`.
                unsafe { equal(self, seed, part) }
            }
        }

        /// The shared code compiled with AVX2 enabled (256-bit stores, loads and compares).
        #[target_feature(enable = "avx2")]
        fn fill(avx2: Avx2, seed: impl Fn(usize) -> u32, out: &mut [u8]) -> usize {
            super::fill_blocks(avx2, seed, out)
        }

        #[target_feature(enable = "avx2")]
        fn equal(_: Avx2, seed: impl Fn(usize) -> u32, part: &[u8]) -> bool {
            super::equal_blocks(seed, part)
        }

        impl Lanes for Avx2 {
            type Vector = __m256i;
            const BLOCKS: usize = 1;

            #[inline(always)]
            fn load(self, seed: impl Fn(usize) -> u32) -> __m256i {
                // SAFETY: `self` proves the CPU has AVX2.
                unsafe { load(super::segment_states(seed(0))) }
            }

            #[inline(always)]
            fn tile(self, states: &mut __m256i, mut emit: impl FnMut(usize, [u32; TILE])) {
                // SAFETY: `self` proves the CPU has AVX2.
                for (lane, words) in unsafe { tile(states) }.into_iter().enumerate() {
                    emit(lane, words);
                }
            }
        }

        #[target_feature(enable = "avx2")]
        fn load(states: [u32; LANES]) -> __m256i {
            let [a, b, c, d, e, f, g, h] = states.map(|x| x as i32);
            _mm256_setr_epi32(a, b, c, d, e, f, g, h)
        }

        #[target_feature(enable = "avx2")]
        fn step(mut x: __m256i) -> __m256i {
            x = _mm256_xor_si256(x, _mm256_slli_epi32::<13>(x));
            x = _mm256_xor_si256(x, _mm256_srli_epi32::<17>(x));
            _mm256_xor_si256(x, _mm256_slli_epi32::<5>(x))
        }

        #[target_feature(enable = "avx2")]
        fn tile(states: &mut __m256i) -> [[u32; TILE]; LANES] {
            let mut c = [*states; TILE];
            for column in &mut c {
                *states = step(*states);
                *column = *states;
            }
            // c[k] = word k of every lane; pairs, then quads, then halves swap places.
            let t = |f: fn(__m256i, __m256i) -> __m256i, a: usize, b: usize| f(c[a], c[b]);
            let (t0, t1, t2, t3) = (t(_mm256_unpacklo_epi32, 0, 1), t(_mm256_unpackhi_epi32, 0, 1), t(_mm256_unpacklo_epi32, 2, 3), t(_mm256_unpackhi_epi32, 2, 3));
            let (t4, t5, t6, t7) = (t(_mm256_unpacklo_epi32, 4, 5), t(_mm256_unpackhi_epi32, 4, 5), t(_mm256_unpacklo_epi32, 6, 7), t(_mm256_unpackhi_epi32, 6, 7));
            let (u0, u1) = (_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2));
            let (u2, u3) = (_mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3));
            let (u4, u5) = (_mm256_unpacklo_epi64(t4, t6), _mm256_unpackhi_epi64(t4, t6));
            let (u6, u7) = (_mm256_unpacklo_epi64(t5, t7), _mm256_unpackhi_epi64(t5, t7));
            let low = |a, b| _mm256_permute2x128_si256::<0x20>(a, b);
            let high = |a, b| _mm256_permute2x128_si256::<0x31>(a, b);
            let rows = [low(u0, u4), low(u1, u5), low(u2, u6), low(u3, u7), high(u0, u4), high(u1, u5), high(u2, u6), high(u3, u7)];
            // SAFETY: `__m256i` and `[u32; 8]` are both 32 bytes of plain integers.
            rows.map(|row| unsafe { std::mem::transmute::<__m256i, [u32; TILE]>(row) })
        }
    }

    /// AVX-512: two blocks' 8 lanes in one 512-bit register (block `b` in 256-bit half `b`), so
    /// the blocks share the segment layout and jump tables of the other paths; each half's
    /// 8×8 tile is transposed as AVX2 does, the last step with a two-source qword permute
    /// (`vpermt2q`). An odd last block goes through the AVX2 code.
    #[cfg(target_arch = "x86_64")]
    mod avx512 {
        use std::arch::x86_64::*;

        use super::avx2::Avx2;
        use super::{Lanes, BLOCK, LANES, TILE};

        /// Proof that this CPU has AVX-512F and BW (and so AVX2): only [`Avx512::detect`]
        /// makes one.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Avx512(Avx2);

        impl Avx512 {
            pub fn detect() -> Option<Avx512> {
                let wide = std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw");
                Avx2::detect().filter(|_| wide).map(Avx512)
            }

            pub fn fill(self, seed: impl Fn(usize) -> u32, out: &mut [u8]) {
                // SAFETY: an `Avx512` exists only on a CPU with AVX-512F and BW.
                let done = unsafe { fill(self, &seed, out) };
                if done < out.len() {
                    self.0.fill(|i| seed(done / BLOCK + i), &mut out[done..]);
                }
            }

            pub fn equal(self, seed: impl Fn(usize) -> u32, part: &[u8]) -> bool {
                // SAFETY: as in `fill`.
                unsafe { equal(self, seed, part) }
            }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        fn fill(avx512: Avx512, seed: impl Fn(usize) -> u32, out: &mut [u8]) -> usize {
            super::fill_blocks(avx512, seed, out)
        }

        /// The shared check compiled for 512-bit vectors (and three-input logic, `vpternlogd`).
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        fn equal(_: Avx512, seed: impl Fn(usize) -> u32, part: &[u8]) -> bool {
            super::equal_blocks(seed, part)
        }

        impl Lanes for Avx512 {
            type Vector = __m512i;
            const BLOCKS: usize = 2;

            #[inline(always)]
            fn load(self, seed: impl Fn(usize) -> u32) -> __m512i {
                let [a, b] = [0, 1].map(|block| super::segment_states(seed(block)));
                let states: [u32; 2 * LANES] = std::array::from_fn(|i| if i < LANES { a[i] } else { b[i - LANES] });
                // SAFETY: `__m512i` and `[u32; 16]` are both 64 bytes of plain integers.
                unsafe { std::mem::transmute::<[u32; 2 * LANES], __m512i>(states) }
            }

            #[inline(always)]
            fn tile(self, states: &mut __m512i, mut emit: impl FnMut(usize, [u32; TILE])) {
                // SAFETY: `self` proves the CPU has AVX-512F.
                let rows = unsafe { tile(states) };
                for (lane, row) in rows.into_iter().enumerate() {
                    // SAFETY: as in `load`; the halves are the two blocks' rows.
                    let [first, second] = unsafe { std::mem::transmute::<__m512i, [[u32; TILE]; 2]>(row) };
                    emit(lane, first);
                    emit(LANES + lane, second);
                }
            }
        }

        #[target_feature(enable = "avx512f")]
        fn step(mut x: __m512i) -> __m512i {
            x = _mm512_xor_si512(x, _mm512_slli_epi32::<13>(x));
            x = _mm512_xor_si512(x, _mm512_srli_epi32::<17>(x));
            _mm512_xor_si512(x, _mm512_slli_epi32::<5>(x))
        }

        /// Row `lane` of both blocks: `rows[lane]` holds block 0's words of that lane in its low
        /// half, block 1's in its high half.
        #[target_feature(enable = "avx512f")]
        fn tile(states: &mut __m512i) -> [__m512i; LANES] {
            let mut c = [*states; TILE];
            for column in &mut c {
                *states = step(*states);
                *column = *states;
            }
            // As AVX2, in each 128-bit chunk: after two unpack stages `u[k]` holds, in chunk j,
            // words 0–3 (k < 4) or 4–7 of lane 4·(j mod 2) + k mod 4 of block j / 2.
            let t = |f: fn(__m512i, __m512i) -> __m512i, a: usize, b: usize| f(c[a], c[b]);
            let (t0, t1, t2, t3) = (t(_mm512_unpacklo_epi32, 0, 1), t(_mm512_unpackhi_epi32, 0, 1), t(_mm512_unpacklo_epi32, 2, 3), t(_mm512_unpackhi_epi32, 2, 3));
            let (t4, t5, t6, t7) = (t(_mm512_unpacklo_epi32, 4, 5), t(_mm512_unpackhi_epi32, 4, 5), t(_mm512_unpacklo_epi32, 6, 7), t(_mm512_unpackhi_epi32, 6, 7));
            let (u0, u1) = (_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2));
            let (u2, u3) = (_mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3));
            let (u4, u5) = (_mm512_unpacklo_epi64(t4, t6), _mm512_unpackhi_epi64(t4, t6));
            let (u6, u7) = (_mm512_unpacklo_epi64(t5, t7), _mm512_unpackhi_epi64(t5, t7));
            // Qword indices (8 and up: the second source): chunks 0 and 2 (lanes 0–3 of each
            // block), or 1 and 3 (lanes 4–7), of words 0–3 then 4–7.
            let low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
            let high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
            let pick = |index, a, b| _mm512_permutex2var_epi64(a, index, b);
            [pick(low, u0, u4), pick(low, u1, u5), pick(low, u2, u6), pick(low, u3, u7), pick(high, u0, u4), pick(high, u1, u5), pick(high, u2, u6), pick(high, u3, u7)]
        }
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
            let expected = reference(&pattern, offset, len);
            for path in lanes::Path::available() {
                let mut buf = vec![0u8; len];
                pattern.fill_by(path, offset, &mut buf);
                prop_assert!(buf == expected, "{path:?} differs from the serial generators");
                prop_assert_eq!(pattern.check_by(path, offset, &buf), None, "{:?}", path);
            }
        }

        #[test]
        fn check_finds_the_first_flipped_byte(pattern in any_pattern(), offset in 0u64..100_000, len in 1usize..70_000, at in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let mut buf = reference(&pattern, offset, len);
            let i = at.index(len);
            buf[i] ^= flip;
            let expected = buf[i] ^ flip;
            for path in lanes::Path::available() {
                prop_assert_eq!(pattern.check_by(path, offset, &buf), Some(Mismatch { offset: offset + i as u64, expected, actual: buf[i] }), "{:?}", path);
            }
        }
    }

    #[test]
    fn the_widest_vectors_this_cpu_has_are_tested() {
        // The proptests force every path in `available`; make sure it names the wide ones.
        #[cfg(target_arch = "x86_64")]
        {
            let paths = lanes::Path::available();
            let has = |feature: &str| match feature {
                "avx2" => std::arch::is_x86_feature_detected!("avx2"),
                _ => std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw"),
            };
            assert_eq!(paths.iter().any(|p| matches!(p, lanes::Path::Avx2(_))), has("avx2"));
            assert_eq!(paths.iter().any(|p| matches!(p, lanes::Path::Avx512(_))), has("avx512"));
            assert_eq!(paths.len(), 1 + has("avx2") as usize + has("avx512") as usize);
            if !has("avx512") {
                println!("skipped: the AVX-512 path (this CPU has no AVX-512F/BW)");
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        println!("skipped: the x86-64 paths (not an x86-64 CPU)");
    }

    #[test]
    fn first_words_of_seed_1_are_unchanged() {
        // Pinned words (computed independently): the simulator, the fault wrapper and the
        // Verilog core generate these; blocks 0 and 9 (9 is in the third group of blocks generated at once).
        for path in lanes::Path::available() {
            let mut buf = vec![0u8; 10 * 4096];
            Pattern::lfsr(1).fill_by(path, 0, &mut buf);
            let word = |at: usize| u32::from_le_bytes(buf[at..at + 4].try_into().unwrap());
            assert_eq!([word(0), word(4)], [0x6644_2a7e, 0x8278_e49b], "{path:?}");
            assert_eq!([word(9 * 4096), word(9 * 4096 + 4)], [0x4b22_399b, 0x8e3a_adf3], "{path:?}");
        }
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
