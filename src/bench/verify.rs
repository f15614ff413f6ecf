//! Data verification, on by default, chosen by the engine's [`DataModel`].
//!
//! - `Generator` (000 §5.1): the device fills d2h buffers with `Pattern::lfsr(seed)` at the
//!   device offset, and reports the CRC32 of the h2d data it received; the host regenerates the
//!   pattern and compares the CRC of what it sent.
//! - `Memory`: h2d writes a pattern, a later d2h of the same region must return it. The first
//!   h2d write is read back and compared, and after it the next write is read back whenever the
//!   time spent reading back so far is at most [`READBACK_TIME_SHARE`] of the point's time (a
//!   read-back costs about as much as the write, so reading every write back would halve the
//!   sustained rate; the share bounds the cost on any device, however slow its reads). Each
//!   read-back write first switches to the other of two seeds, so a write that never landed
//!   shows up. The writes between repeat the bytes already on the device and are counted
//!   unchecked. When a point ends on a write that was not read back, it is read back then
//!   ([`Verifier::check_last_write`]), so damage a late write left on the device is found
//!   however short the point. `--verify all` reads every write back.
//! - `Loopback`: d2h returns the h2d bytes in order; the pattern is addressed by stream offset.
//!   A read that fails part-way (bytes lost in the loop never come, so it times out) has what
//!   did arrive compared with what was sent ([`Verifier::read_failed`]).
//! - `Opaque`: the contents are unknown; only consistency between reads of the same region is
//!   checked (the first read is the reference). h2d data cannot be checked at all.
//!
//! The host-side work happens between transfers, outside the timed interval, and is kept small
//! so it does not slow the transfers either: buffers are kept across transfers (the two
//! patterns of `Memory` in two buffers swapped by pointer, not regenerated), read-back and
//! priming buffers are page-aligned and reused. Its cost against memcpy is measured by
//! `benches/verify.rs`; how much of it a run does per transfer is in `docs/performance.md`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::pattern::{crc32, Mismatch, Pattern, PatternKind};
use crate::engine::{AlignedBuf, DataModel, Direction, Engine, EngineError, Io, Transfer};

/// Which check the user asked for (`--verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyKind {
    /// Seeded xorshift LFSR pattern (document 000 §5.1).
    Lfsr,
    /// 32-bit word counter (document 002).
    Counter,
    /// LFSR pattern, and every h2d write to a memory-like device read back (its sustained write
    /// rate then pays a read-back per write; other data models check every transfer anyway).
    All,
    /// No verification.
    None,
}

impl crate::named::Named for VerifyKind {
    const ALL: &'static [Self] = &[VerifyKind::Lfsr, VerifyKind::Counter, VerifyKind::All, VerifyKind::None];
    fn name(self) -> &'static str {
        match self {
            VerifyKind::Lfsr => "lfsr",
            VerifyKind::Counter => "counter",
            VerifyKind::All => "all",
            VerifyKind::None => "none",
        }
    }
}

/// Byte written into d2h buffers before a transfer, so data that never arrived is caught.
pub const POISON: u8 = 0xA5;

/// A verification failure, with the first mismatching offset where there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyFailure {
    pub direction: Direction,
    /// `pattern` (bytes compared), `crc` (device CRC vs host CRC), `consistency` (two reads).
    pub check: String,
    /// Device (or stream) offset of the first differing byte.
    pub offset: Option<u64>,
    /// Expected and actual values, hex (a byte, or a CRC32).
    pub expected: String,
    pub actual: String,
}

impl std::fmt::Display for VerifyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} check failed", self.direction.name(), self.check)?;
        if let Some(offset) = self.offset {
            write!(f, " at offset {offset} (0x{offset:x})")?;
        }
        write!(f, ": expected {}, got {}", self.expected, self.actual)
    }
}

/// Outcome of checking one transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Passed,
    Failed(VerifyFailure),
    /// Nothing could be checked (verification off, opaque device, no device CRC).
    Unchecked,
}

/// Host-side state of verification across the transfers of a run.
#[derive(Debug)]
pub struct Verifier {
    kind: VerifyKind,
    seed: u64,
    model: DataModel,
    /// Memory: which pattern the region [0, len) holds.
    memory: Option<(Pattern, usize)>,
    /// Loopback: stream offsets of bytes sent and received.
    sent: u64,
    received: u64,
    /// Opaque: the first read of each size.
    reference: Option<Vec<u8>>,
    /// The h2d buffer's content and its CRC, to refill only when it changes.
    h2d_content: Option<Content>,
    /// The previous h2d content in its own buffer, swapped back in when it is wanted again.
    spare: Option<(Content, AlignedBuf)>,
    /// Alternates Memory h2d read-back writes between two seeds.
    toggle: bool,
    /// Memory: whether the current h2d write is read back, and the budget that decides it.
    read_back: bool,
    read_back_share: ReadBackShare,
    /// Memory, h2d alone: the point's last write, and whether it was read back.
    last_write: Option<LastWrite>,
    /// Loopback: what a read that failed part-way found, until the procedure takes it.
    lost_in_loop: Option<VerifyFailure>,
    /// Read-back and priming buffer, kept across transfers.
    scratch: Option<AlignedBuf>,
    /// The buffer (address, length) the last d2h check left poisoned: the next d2h into it
    /// needs no poisoning pass of its own.
    poisoned: Option<(usize, usize)>,
}

/// Memory: the last h2d write of a point (not part of a `both` step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LastWrite {
    ReadBack,
    /// Not read back yet: the pattern it wrote over `[0, len)`.
    Unchecked(Pattern, usize),
}

/// Where a buffer is and how long, to recognise it again.
fn identity(buf: &[u8]) -> (usize, usize) {
    (buf.as_ptr() as usize, buf.len())
}

/// Bytes compared, then poisoned, at a time: both passes over a piece while it is in the L1
/// cache (a multiple of the pattern block, so pattern checks stay on the fast path).
const CHECK_PIECE_BYTES: usize = 16 << 10;

/// What an h2d buffer holds: (pattern, stream offset, length) and the CRC32 of those bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Content {
    pattern: Pattern,
    offset: u64,
    len: usize,
    crc: u32,
}

/// Memory: the largest share of a point's time (engine clock) spent reading h2d writes back.
pub const READBACK_TIME_SHARE: f64 = 0.01;

/// Memory: which h2d writes are read back. The first always; after it, the next one whenever
/// the read-backs so far took at most [`READBACK_TIME_SHARE`] of the time since the first
/// write started, so their cost stays within that share plus one read-back.
#[derive(Debug, Default, Clone, Copy)]
struct ReadBackShare {
    /// Engine time when the first write of the point started.
    since_ns: Option<f64>,
    spent_ns: f64,
}

impl ReadBackShare {
    fn next_is_read_back(&self, now_ns: f64) -> bool {
        self.since_ns.is_none_or(|since| self.spent_ns <= READBACK_TIME_SHARE * (now_ns - since))
    }
}

/// A page-aligned buffer of `len` bytes in `slot`, reused while the length stays the same.
fn kept(slot: &mut Option<AlignedBuf>, len: usize) -> &mut AlignedBuf {
    if slot.as_ref().is_none_or(|b| b.len() != len) {
        *slot = Some(AlignedBuf::new(len));
    }
    slot.as_mut().expect("just set")
}

/// Largest buffer kept beside the DMA buffers (the spare h2d pattern, the read-back buffer):
/// larger regions are read back in pieces of this size, and their spare pattern is generated
/// again rather than kept (faulting in a second large buffer costs more).
pub const KEPT_MAX_BYTES: usize = 16 << 20;

impl Verifier {
    pub fn new(kind: VerifyKind, seed: u64, model: DataModel) -> Self {
        Verifier {
            kind,
            seed,
            model,
            memory: None,
            sent: 0,
            received: 0,
            reference: None,
            h2d_content: None,
            spare: None,
            toggle: false,
            read_back: true,
            read_back_share: ReadBackShare::default(),
            last_write: None,
            lost_in_loop: None,
            scratch: None,
            poisoned: None,
        }
    }

    /// New host buffers: forget what the old ones held.
    pub fn buffers_changed(&mut self) {
        self.h2d_content = None;
        self.read_back = true;
        self.read_back_share = ReadBackShare::default();
        self.last_write = None;
        self.spare = None;
        self.scratch = None;
        self.poisoned = None;
    }

    pub fn enabled(&self) -> bool {
        self.kind != VerifyKind::None
    }

    /// One line saying what the verification can and cannot tell, for reports.
    pub fn method(&self) -> String {
        if !self.enabled() {
            return "off (--verify none)".into();
        }
        let kind = match self.kind {
            VerifyKind::Counter => "counter",
            _ => "LFSR",
        };
        match self.model {
            DataModel::Generator => {
                format!("generator: d2h checked against the device's LFSR pattern, h2d {kind} data by CRC32 reported by the device")
            }
            DataModel::Memory if self.kind == VerifyKind::All => {
                format!("memory: {kind} pattern written h2d and read back d2h (h2d: every write read back, --verify all)")
            }
            DataModel::Memory => format!(
                "memory: {kind} pattern written h2d and read back d2h (h2d: the first write, then as many as take {} % of the time, \
                 and the last write of each point; the writes between repeat the device's bytes, unchecked)",
                READBACK_TIME_SHARE * 100.0
            ),
            DataModel::Loopback => format!("loopback: {kind} pattern sent h2d must come back d2h in order"),
            DataModel::Opaque => {
                "opaque device: only consistency between reads of the same region; contents and h2d data cannot be checked".into()
            }
        }
    }

    fn pattern(&self, seed: u64) -> Pattern {
        let kind = if self.kind == VerifyKind::Counter { PatternKind::Counter } else { PatternKind::Lfsr };
        Pattern { kind, seed }
    }

    /// Make `buf` hold `pattern` at `offset`: nothing to do when it already does, a pointer
    /// swap when the spare buffer does, else generate (keeping the old content as the spare).
    fn fill(&mut self, pattern: Pattern, offset: u64, buf: &mut AlignedBuf) -> u32 {
        let wanted = |c: &Content| c.pattern == pattern && c.offset == offset && c.len == buf.len();
        if let Some(content) = self.h2d_content.filter(wanted) {
            return content.crc;
        }
        if let Some((content, spare)) = self.spare.as_mut().filter(|(c, _)| wanted(c)) {
            let content = *content;
            std::mem::swap(buf, spare);
            self.spare = self.h2d_content.take().map(|old| (old, self.spare.take().expect("matched").1));
            self.h2d_content = Some(content);
            return content.crc;
        }
        // Keep the old content as the spare, in a buffer of its own, up to the size whose second
        // buffer costs less than generating again (faulting in a large one costs more).
        if let Some(old) = self.h2d_content.take().filter(|_| buf.len() <= KEPT_MAX_BYTES) {
            let mut spare = match self.spare.take() {
                Some((_, b)) if b.len() == buf.len() => b,
                _ => AlignedBuf::new(buf.len()),
            };
            std::mem::swap(buf, &mut spare);
            self.spare = Some((old, spare));
        }
        pattern.fill(offset, buf);
        let content = Content { pattern, offset, len: buf.len(), crc: crc32(buf) };
        self.h2d_content = Some(content);
        content.crc
    }

    /// Prepare an h2d transfer: make `buf` hold what the check will expect. `concurrent` is
    /// true when a d2h of the same region runs at the same time (`both`).
    pub fn before_h2d(&mut self, buf: &mut AlignedBuf, concurrent: bool) {
        if !self.enabled() {
            return;
        }
        let pattern = match self.model {
            DataModel::Memory if concurrent => self.memory.map_or(self.pattern(self.seed), |m| m.0),
            DataModel::Memory => {
                if self.read_back || self.h2d_content.is_none() {
                    self.toggle = !self.toggle;
                }
                self.pattern(self.seed.wrapping_add(self.toggle as u64))
            }
            DataModel::Loopback => {
                let pattern = self.pattern(self.seed);
                pattern.fill(self.sent, buf);
                self.h2d_content = None;
                return;
            }
            // The device generates its own d2h data from `seed`: send something different.
            DataModel::Generator | DataModel::Opaque => self.pattern(self.seed.wrapping_add(0x5eed)),
        };
        self.fill(pattern, 0, buf);
    }

    /// Prepare a d2h transfer of `len` bytes: put the data it must return in place (Memory,
    /// Loopback, by untimed h2d transfers) and poison the buffer (unless the last check left it poisoned).
    pub fn before_d2h(&mut self, engine: &mut dyn Engine, buf: &mut [u8], deadline: Duration) -> Result<(), EngineError> {
        if !self.enabled() {
            return Ok(());
        }
        let len = buf.len();
        match self.model {
            DataModel::Memory if self.memory.is_none_or(|(_, l)| l < len) => {
                let pattern = self.memory.map_or(self.pattern(self.seed), |m| m.0);
                let data = kept(&mut self.scratch, len);
                pattern.fill(0, data);
                match engine.transfer(Io::H2d(data), 0, deadline) {
                    Ok(_) => self.memory = Some((pattern, len)),
                    // Writing needs consent the user did not give: check reads for consistency only.
                    Err(EngineError::Unsupported(_) | EngineError::PermissionDenied { .. }) => self.model = DataModel::Opaque,
                    Err(error) => return Err(error),
                }
            }
            DataModel::Loopback if self.sent - self.received < len as u64 => {
                let pattern = self.pattern(self.seed);
                let data = kept(&mut self.scratch, len);
                pattern.fill(self.sent, data);
                engine.transfer(Io::H2d(data), 0, deadline)?;
                self.sent += len as u64;
            }
            _ => {}
        }
        // The last check poisoned this buffer in its own pass, and nothing wrote it since.
        if self.poisoned.take() != Some(identity(buf)) {
            buf.fill(POISON);
        }
        Ok(())
    }

    /// Check a completed h2d transfer of `buf`. `concurrent`: part of a `both` step.
    pub fn after_h2d(
        &mut self,
        engine: &mut dyn Engine,
        transfer: &Transfer,
        buf: &[u8],
        concurrent: bool,
        deadline: Duration,
    ) -> Result<Check, EngineError> {
        if !self.enabled() {
            return Ok(Check::Unchecked);
        }
        match self.model {
            DataModel::Generator => {
                let Some(device_crc) = transfer.device.crc32 else { return Ok(Check::Unchecked) };
                let host_crc = self.h2d_content.map_or_else(|| crc32(buf), |c| c.crc);
                // The device compares with its LFSR pattern only: its offset means nothing for
                // counter data.
                let lfsr = self.h2d_content.map_or(self.kind != VerifyKind::Counter, |c| c.pattern.kind == PatternKind::Lfsr);
                Ok(if device_crc == host_crc {
                    Check::Passed
                } else {
                    Check::Failed(VerifyFailure {
                        direction: Direction::H2d,
                        check: "crc".into(),
                        offset: transfer.device.first_error_offset.filter(|_| lfsr),
                        expected: format!("CRC32 0x{host_crc:08x}"),
                        actual: format!("CRC32 0x{device_crc:08x}"),
                    })
                })
            }
            DataModel::Memory => {
                let pattern = self.h2d_content.map_or(self.pattern(self.seed), |c| c.pattern);
                self.memory = Some((pattern, buf.len()));
                if concurrent {
                    return Ok(Check::Unchecked); // the d2h read of the same pattern is the check
                }
                self.read_back_share.since_ns.get_or_insert(transfer.start_ns);
                // A write not read back repeated the bytes the device held already.
                let mut check = Check::Unchecked;
                if self.read_back {
                    let start_ns = engine.now_ns();
                    check = self.read_back_memory(engine, pattern, buf.len(), deadline)?;
                    self.read_back_share.spent_ns += engine.now_ns() - start_ns;
                }
                self.last_write = Some(if self.read_back { LastWrite::ReadBack } else { LastWrite::Unchecked(pattern, buf.len()) });
                self.read_back = self.kind == VerifyKind::All || self.read_back_share.next_is_read_back(engine.now_ns());
                Ok(check)
            }
            DataModel::Loopback => {
                self.sent += buf.len() as u64;
                if concurrent {
                    return Ok(Check::Unchecked); // checked when the bytes come back d2h
                }
                let mut back = match self.read_back_into_scratch(engine, buf.len(), deadline) {
                    Ok(back) => back,
                    Err(error) => {
                        let arrived = self.scratch.take().expect("kept on failure");
                        let error = self.read_failed(Direction::H2d, &arrived, error);
                        self.scratch = Some(arrived);
                        return Err(error);
                    }
                };
                // The check reads the bytes back but judges the h2d transfer: name it so.
                let result = match self.after_d2h(&mut back) {
                    Check::Failed(failure) => Check::Failed(VerifyFailure { direction: Direction::H2d, ..failure }),
                    other => other,
                };
                self.scratch = Some(back);
                Ok(result)
            }
            DataModel::Opaque => Ok(Check::Unchecked),
        }
    }

    /// Read the region `[0, len)` back and compare it with `pattern`: whole up to
    /// [`KEPT_MAX_BYTES`], in pieces of that size above, so a large region needs no second
    /// buffer of its size.
    fn read_back_memory(&mut self, engine: &mut dyn Engine, pattern: Pattern, len: usize, deadline: Duration) -> Result<Check, EngineError> {
        if len <= KEPT_MAX_BYTES {
            let mut back = self.read_back_into_scratch(engine, len, deadline)?;
            let result = pattern_check(Direction::H2d, pattern, 0, &mut back);
            self.scratch = Some(back);
            return Ok(result);
        }
        let mut piece = AlignedBuf::new(KEPT_MAX_BYTES);
        for offset in (0..len).step_by(KEPT_MAX_BYTES) {
            let part = &mut piece[..KEPT_MAX_BYTES.min(len - offset)];
            part.fill(POISON);
            engine.transfer(Io::D2h(part), offset as u64, deadline)?;
            if let failed @ Check::Failed(_) = pattern_check(Direction::H2d, pattern, offset as u64, part) {
                return Ok(failed);
            }
        }
        Ok(Check::Passed)
    }

    /// Read `len` bytes back from device offset 0 into the kept scratch buffer (taken out of
    /// `self` so the check can borrow `self`; the caller puts it back). On failure the buffer
    /// stays in `self.scratch`, holding what did arrive.
    fn read_back_into_scratch(&mut self, engine: &mut dyn Engine, len: usize, deadline: Duration) -> Result<AlignedBuf, EngineError> {
        kept(&mut self.scratch, len);
        let mut back = self.scratch.take().expect("kept");
        back.fill(POISON);
        match engine.transfer(Io::D2h(&mut back), 0, deadline) {
            Ok(_) => Ok(back),
            Err(error) => {
                self.scratch = Some(back);
                Err(error)
            }
        }
    }

    /// Memory: read the point's last h2d write back when the sampling did not, so damage a
    /// late write left on the device is found however short the point. `None` when there is
    /// nothing to read back (the last write was read back, or the point wrote nothing alone).
    /// Its cost is outside the [`READBACK_TIME_SHARE`]: one read-back per point.
    pub fn check_last_write(&mut self, engine: &mut dyn Engine, deadline: Duration) -> Result<Option<Check>, EngineError> {
        let Some(LastWrite::Unchecked(pattern, len)) = self.last_write else { return Ok(None) };
        let check = self.read_back_memory(engine, pattern, len, deadline)?;
        self.last_write = Some(LastWrite::ReadBack);
        Ok(Some(check))
    }

    /// Memory, h2d alone: whether the point's last write was read back and compared (false
    /// when the point ended, by an error or Ctrl-C, before it could be); `None` for other points.
    pub fn last_write_checked(&self) -> Option<bool> {
        self.last_write.map(|last| last == LastWrite::ReadBack)
    }

    /// A d2h read into `buf` (poisoned before it) failed part-way, `direction` being what the
    /// read checks. On a loopback, compare what did arrive with what was sent: bytes lost in
    /// the loop never come, so the read times out, and the bytes that came after the loss are
    /// the wrong ones. A difference is kept for [`Verifier::take_lost_in_loop`]; bytes that all
    /// match (the device just stopped sending) are not one. Returns `error` unchanged.
    pub fn read_failed(&mut self, direction: Direction, buf: &[u8], error: EngineError) -> EngineError {
        if !self.enabled() || self.model != DataModel::Loopback || matches!(error, EngineError::Interrupted) {
            return error;
        }
        let offset = self.received;
        let Some(m) = self.pattern(self.seed).check(offset, buf) else { return error };
        // Poison from the first difference to the end: nothing more arrived, nothing arrived wrong.
        if buf[(m.offset - offset) as usize..].iter().all(|&b| b == POISON) {
            return error;
        }
        self.lost_in_loop = Some(byte_failure(direction, "pattern", m));
        error
    }

    /// The difference [`Verifier::read_failed`] found, once.
    pub fn take_lost_in_loop(&mut self) -> Option<VerifyFailure> {
        self.lost_in_loop.take()
    }

    /// Check the data a d2h transfer returned, and poison `buf` for the next transfer in the
    /// same pass.
    pub fn after_d2h(&mut self, buf: &mut [u8]) -> Check {
        if !self.enabled() {
            return Check::Unchecked;
        }
        let check = self.check_d2h(buf);
        // Only a check that passed went over (and poisoned) the whole buffer.
        self.poisoned = (check == Check::Passed).then(|| identity(buf));
        check
    }

    fn check_d2h(&mut self, buf: &mut [u8]) -> Check {
        match self.model {
            DataModel::Generator => pattern_check(Direction::D2h, Pattern::lfsr(self.seed), 0, buf),
            DataModel::Memory => match self.memory {
                Some((pattern, _)) => pattern_check(Direction::D2h, pattern, 0, buf),
                None => Check::Unchecked,
            },
            DataModel::Loopback => {
                let offset = self.received;
                self.received += buf.len() as u64;
                pattern_check(Direction::D2h, self.pattern(self.seed), offset, buf)
            }
            DataModel::Opaque => match &self.reference {
                Some(reference) if reference.len() == buf.len() => {
                    check_and_poison(Direction::D2h, "consistency", 0, buf, |at, piece| first_difference(at, &reference[at as usize..], piece))
                }
                _ => {
                    self.reference = Some(buf.to_vec());
                    Check::Unchecked
                }
            },
        }
    }
}

/// Compare `buf`, which starts at stream offset `offset`, with the pattern, poisoning it as it goes.
fn pattern_check(direction: Direction, pattern: Pattern, offset: u64, buf: &mut [u8]) -> Check {
    check_and_poison(direction, "pattern", offset, buf, |at, piece| pattern.check(at, piece))
}

/// The first byte of `actual` that differs from `expected`; `at` is `actual`'s offset.
fn first_difference(at: u64, expected: &[u8], actual: &[u8]) -> Option<Mismatch> {
    let expected = &expected[..actual.len()];
    if actual == expected {
        return None; // memcmp: the common case, fast
    }
    let i = actual.iter().zip(expected).position(|(a, e)| a != e)?;
    Some(Mismatch { offset: at + i as u64, expected: expected[i], actual: actual[i] })
}

/// The failure a differing byte makes.
fn byte_failure(direction: Direction, check: &str, m: Mismatch) -> VerifyFailure {
    VerifyFailure {
        direction,
        check: check.into(),
        offset: Some(m.offset),
        expected: format!("0x{:02x}", m.expected),
        actual: format!("0x{:02x}", m.actual),
    }
}

/// Check `buf` (at stream offset `offset`) piece by piece, `differs(piece_offset, piece)` giving
/// a piece's first differing byte, and poison each piece that compared equal while it is still
/// in the L1 cache: the next transfer into `buf` needs no poisoning pass of its own. A failure
/// leaves the rest of `buf` as it was.
fn check_and_poison(
    direction: Direction,
    check: &str,
    offset: u64,
    buf: &mut [u8],
    mut differs: impl FnMut(u64, &[u8]) -> Option<Mismatch>,
) -> Check {
    let mut done = 0;
    while done < buf.len() {
        let at = offset + done as u64;
        let take = (CHECK_PIECE_BYTES - (at % CHECK_PIECE_BYTES as u64) as usize).min(buf.len() - done);
        let piece = &mut buf[done..done + take];
        if let Some(m) = differs(at, piece) {
            return Check::Failed(byte_failure(direction, check, m));
        }
        piece.fill(POISON);
        done += take;
    }
    Check::Passed
}

/// Per-point tally of checks, kept in the results document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyTally {
    pub passed: u64,
    pub failed: u64,
    pub unchecked: u64,
    pub first_failure: Option<VerifyFailure>,
    /// Memory, h2d alone: whether the point's last write was read back and compared (absent
    /// for other points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_write_checked: Option<bool>,
}

impl VerifyTally {
    /// The last write, counted unchecked, was read back after all: count it by `check`.
    pub fn last_write_read_back(&mut self, check: Check) {
        self.unchecked = self.unchecked.saturating_sub(1);
        self.add(check);
    }

    pub fn add(&mut self, check: Check) {
        match check {
            Check::Passed => self.passed += 1,
            Check::Unchecked => self.unchecked += 1,
            Check::Failed(failure) => {
                self.failed += 1;
                self.first_failure.get_or_insert(failure);
            }
        }
    }
}
