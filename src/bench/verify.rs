//! Data verification, on by default, chosen by the engine's [`DataModel`].
//!
//! - `Generator` (000 §5.1): the device fills d2h buffers with `Pattern::lfsr(seed)` at the
//!   device offset, and reports the CRC32 of the h2d data it received; the host regenerates the
//!   pattern and compares the CRC of what it sent.
//! - `Memory`: h2d writes a pattern, a later d2h of the same region must return it. Consecutive
//!   h2d transfers alternate between two seeds, so a write that never landed shows up.
//! - `Loopback`: d2h returns the h2d bytes in order; the pattern is addressed by stream offset.
//! - `Opaque`: the contents are unknown; only consistency between reads of the same region is
//!   checked (the first read is the reference). h2d data cannot be checked at all.
//!
//! The host-side work happens between transfers, outside the timed interval; its cost against
//! memcpy is measured by `benches/verify.rs`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::pattern::{crc32, Pattern, PatternKind};
use crate::engine::{DataModel, Direction, Engine, EngineError, Io, Transfer};

/// Which check the user asked for (`--verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyKind {
    /// Seeded xorshift LFSR pattern (document 000 §5.1).
    Lfsr,
    /// 32-bit word counter (document 002).
    Counter,
    /// No verification.
    None,
}

impl crate::named::Named for VerifyKind {
    const ALL: &'static [Self] = &[VerifyKind::Lfsr, VerifyKind::Counter, VerifyKind::None];
    fn name(self) -> &'static str {
        match self {
            VerifyKind::Lfsr => "lfsr",
            VerifyKind::Counter => "counter",
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
    /// The h2d buffer content and its CRC, to refill only when it changes.
    h2d_content: Option<(Pattern, u64, usize, u32)>,
    /// Alternates Memory h2d transfers between two seeds.
    toggle: bool,
    /// Expected d2h contents at offset 0, generated once and compared with memcmp: the LFSR is
    /// serial (about 1 GB/s to regenerate), a comparison runs at memory speed.
    expected: Vec<(Pattern, Vec<u8>)>,
}

/// Expected buffers kept at once (Memory alternates between two patterns).
const EXPECTED_KEPT: usize = 2;

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
            toggle: false,
            expected: Vec::new(),
        }
    }

    /// New host buffers: forget what the old ones held.
    pub fn buffers_changed(&mut self) {
        self.h2d_content = None;
        self.expected.clear();
    }

    /// Compare `buf` with `pattern` at offset 0 through the cache of expected contents.
    fn check_at_zero(&mut self, direction: Direction, pattern: Pattern, buf: &[u8]) -> Check {
        let index = match self.expected.iter().position(|(p, e)| *p == pattern && e.len() == buf.len()) {
            Some(i) => i,
            None => {
                if self.expected.len() >= EXPECTED_KEPT {
                    self.expected.remove(0);
                }
                let mut data = vec![0u8; buf.len()];
                pattern.fill(0, &mut data);
                self.expected.push((pattern, data));
                self.expected.len() - 1
            }
        };
        let expected = &self.expected[index].1;
        if expected.as_slice() == buf {
            return Check::Passed;
        }
        let i = expected.iter().zip(buf).position(|(e, a)| e != a).unwrap_or(0);
        Check::Failed(VerifyFailure {
            direction,
            check: "pattern".into(),
            offset: Some(i as u64),
            expected: format!("0x{:02x}", expected[i]),
            actual: format!("0x{:02x}", buf[i]),
        })
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
            DataModel::Memory => format!("memory: {kind} pattern written h2d and read back d2h"),
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

    fn fill(&mut self, pattern: Pattern, offset: u64, buf: &mut [u8]) -> u32 {
        if let Some((p, o, len, crc)) = self.h2d_content {
            if p == pattern && o == offset && len == buf.len() {
                return crc;
            }
        }
        pattern.fill(offset, buf);
        let crc = crc32(buf);
        self.h2d_content = Some((pattern, offset, buf.len(), crc));
        crc
    }

    /// Prepare an h2d transfer: fill `buf` with what the check will expect. `concurrent` is true
    /// when a d2h of the same region runs at the same time (`both`).
    pub fn before_h2d(&mut self, buf: &mut [u8], concurrent: bool) {
        if !self.enabled() {
            return;
        }
        let pattern = match self.model {
            DataModel::Memory if concurrent => self.memory.map_or(self.pattern(self.seed), |m| m.0),
            DataModel::Memory => {
                self.toggle = !self.toggle;
                self.pattern(self.seed.wrapping_add(self.toggle as u64))
            }
            DataModel::Loopback => {
                let pattern = self.pattern(self.seed);
                pattern.fill(self.sent, buf);
                return;
            }
            // The device generates its own d2h data from `seed`: send something different.
            DataModel::Generator | DataModel::Opaque => self.pattern(self.seed.wrapping_add(0x5eed)),
        };
        self.fill(pattern, 0, buf);
    }

    /// Prepare a d2h transfer of `len` bytes: put the data it must return in place (Memory,
    /// Loopback, by untimed h2d transfers) and poison the buffer.
    pub fn before_d2h(&mut self, engine: &mut dyn Engine, buf: &mut [u8], deadline: Duration) -> Result<(), EngineError> {
        if !self.enabled() {
            return Ok(());
        }
        let len = buf.len();
        match self.model {
            DataModel::Memory if self.memory.is_none_or(|(_, l)| l < len) => {
                let pattern = self.memory.map_or(self.pattern(self.seed), |m| m.0);
                let mut data = vec![0u8; len];
                pattern.fill(0, &mut data);
                match engine.transfer(Io::H2d(&data), 0, deadline) {
                    Ok(_) => self.memory = Some((pattern, len)),
                    // Writing needs consent the user did not give: check reads for consistency only.
                    Err(EngineError::Unsupported(_) | EngineError::PermissionDenied { .. }) => self.model = DataModel::Opaque,
                    Err(error) => return Err(error),
                }
            }
            DataModel::Loopback if self.sent - self.received < len as u64 => {
                let mut data = vec![0u8; len];
                self.pattern(self.seed).fill(self.sent, &mut data);
                engine.transfer(Io::H2d(&data), 0, deadline)?;
                self.sent += len as u64;
            }
            _ => {}
        }
        buf.fill(POISON);
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
                let host_crc = self.h2d_content.map_or_else(|| crc32(buf), |c| c.3);
                Ok(if device_crc == host_crc {
                    Check::Passed
                } else {
                    Check::Failed(VerifyFailure {
                        direction: Direction::H2d,
                        check: "crc".into(),
                        offset: None,
                        expected: format!("CRC32 0x{host_crc:08x}"),
                        actual: format!("CRC32 0x{device_crc:08x}"),
                    })
                })
            }
            DataModel::Memory => {
                let pattern = self.h2d_content.map_or(self.pattern(self.seed), |c| c.0);
                self.memory = Some((pattern, buf.len()));
                if concurrent {
                    return Ok(Check::Unchecked); // same pattern as before: the concurrent d2h read is the check
                }
                let mut back = vec![POISON; buf.len()];
                engine.transfer(Io::D2h(&mut back), 0, deadline)?;
                Ok(self.check_at_zero(Direction::H2d, pattern, &back))
            }
            DataModel::Loopback => {
                self.sent += buf.len() as u64;
                if concurrent {
                    return Ok(Check::Unchecked); // checked when the bytes come back d2h
                }
                let mut back = vec![POISON; buf.len()];
                engine.transfer(Io::D2h(&mut back), 0, deadline)?;
                Ok(self.after_d2h(&back))
            }
            DataModel::Opaque => Ok(Check::Unchecked),
        }
    }

    /// Check the data a d2h transfer returned.
    pub fn after_d2h(&mut self, buf: &[u8]) -> Check {
        if !self.enabled() {
            return Check::Unchecked;
        }
        match self.model {
            DataModel::Generator => self.check_at_zero(Direction::D2h, Pattern::lfsr(self.seed), buf),
            DataModel::Memory => match self.memory {
                Some((pattern, _)) => self.check_at_zero(Direction::D2h, pattern, buf),
                None => Check::Unchecked,
            },
            DataModel::Loopback => {
                let offset = self.received;
                self.received += buf.len() as u64;
                pattern_check(Direction::D2h, self.pattern(self.seed), offset, buf)
            }
            DataModel::Opaque => match &self.reference {
                Some(reference) if reference.len() == buf.len() => {
                    match reference.iter().zip(buf).position(|(a, b)| a != b) {
                        None => Check::Passed,
                        Some(i) => Check::Failed(VerifyFailure {
                            direction: Direction::D2h,
                            check: "consistency".into(),
                            offset: Some(i as u64),
                            expected: format!("0x{:02x}", reference[i]),
                            actual: format!("0x{:02x}", buf[i]),
                        }),
                    }
                }
                _ => {
                    self.reference = Some(buf.to_vec());
                    Check::Unchecked
                }
            },
        }
    }
}

fn pattern_check(direction: Direction, pattern: Pattern, offset: u64, buf: &[u8]) -> Check {
    match pattern.check(offset, buf) {
        None => Check::Passed,
        Some(m) => Check::Failed(VerifyFailure {
            direction,
            check: "pattern".into(),
            offset: Some(m.offset),
            expected: format!("0x{:02x}", m.expected),
            actual: format!("0x{:02x}", m.actual),
        }),
    }
}

/// Per-point tally of checks, kept in the results document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyTally {
    pub passed: u64,
    pub failed: u64,
    pub unchecked: u64,
    pub first_failure: Option<VerifyFailure>,
}

impl VerifyTally {
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
