//! `fault`: a wrapper engine that damages data on purpose, so tests can prove every kind of
//! damage is caught by the pattern check and the CRC32.
//!
//! Target: `fault:KIND[,KIND...][,skip=N][,chunk=BYTES]:INNER_TARGET`, e.g.
//! `fault:bitflip:sim:doc001`, `fault:drop,reorder,skip=2:sim`, `fault:hang:sim:gen5x16`.
//! - `bitflip`: one bit of the data flips.
//! - `drop`: one chunk never arrives; what follows moves up, the end stays empty (zeros).
//! - `dup`: one chunk arrives twice; what follows moves down, the last chunk is lost.
//! - `reorder`: two neighbouring chunks arrive swapped.
//! - `hang`: the transfer never completes; the caller gets `EngineError::Timeout` after its
//!   deadline (virtual time for a simulated inner engine, a real sleep otherwise).
//! - `skip=N`: the first N transfers pass untouched (default 0); `chunk=BYTES` (default 4096,
//!   one pattern block, a multiple of 4) is the unit of drop/dup/reorder.
//!
//! Every armed fault changes what the host finally sees; damage never cancels itself:
//! - Data that makes a round trip (a `Memory` or `Loopback` inner engine: written h2d, read back
//!   d2h) is damaged on the way back only, so a swap on the write is not undone by a swap on the
//!   read-back. With a `Generator` inner engine (the device checks h2d by CRC32 and generates
//!   d2h data) h2d data is damaged before the inner engine sees it and d2h data after it filled
//!   the buffer. An `Opaque` inner engine is refused: its reads are only compared with each
//!   other, so damage that repeats could not be seen.
//! - Stacked wrappers (`fault:reorder:fault:reorder:sim`) become one wrapper that applies each
//!   armed kind once per transfer (each level keeps its own `skip`); at most
//!   [`MAX_FAULT_LEVELS`] levels, so a hostile target cannot exhaust anything.
//! - When the damage leaves the bytes as they were (identical chunks, or a buffer too short for
//!   two chunks where several faults hit the only word), the first byte is inverted instead.
//!
//! Where the damage lands is drawn from the seed.

use std::time::Duration;

use crate::engine::pattern::PATTERN_BLOCK_BYTES;
use crate::engine::sim::rng::SimRng;
use crate::engine::{DataModel, Engine, EngineEntry, EngineError, EngineInfo, Io, Mmio, Opening, Transfer};
use crate::error::InvalidInput;

/// One kind of damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    BitFlip,
    Drop,
    Duplicate,
    Reorder,
    Hang,
}

impl Fault {
    pub const ALL: [Fault; 5] = [Fault::BitFlip, Fault::Drop, Fault::Duplicate, Fault::Reorder, Fault::Hang];

    pub fn name(self) -> &'static str {
        match self {
            Fault::BitFlip => "bitflip",
            Fault::Drop => "drop",
            Fault::Duplicate => "dup",
            Fault::Reorder => "reorder",
            Fault::Hang => "hang",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Fault::BitFlip => "a flipped bit",
            Fault::Drop => "a dropped chunk",
            Fault::Duplicate => "a duplicated chunk",
            Fault::Reorder => "two reordered chunks",
            Fault::Hang => "a hang",
        }
    }
}

/// What to inject and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpec {
    pub faults: Vec<Fault>,
    /// Transfers that pass untouched before faults start.
    pub skip: u64,
    /// Unit of drop, duplicate and reorder, in bytes.
    pub chunk_bytes: u64,
}

impl FaultSpec {
    /// Parse `KIND[,KIND...][,skip=N][,chunk=BYTES]`.
    pub fn parse(text: &str) -> Result<Self, InvalidInput> {
        let mut spec = FaultSpec { faults: Vec::new(), skip: 0, chunk_bytes: PATTERN_BLOCK_BYTES };
        let kinds = || Fault::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ");
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let number = |value: &str| {
                value.parse::<u64>().map_err(|_| InvalidInput::new(format!("invalid fault option '{item}': expected a whole number")))
            };
            match item.split_once('=') {
                Some(("skip", value)) => spec.skip = number(value)?,
                Some(("chunk", value)) => spec.chunk_bytes = crate::units::parse_size(value)?,
                Some(_) => return Err(InvalidInput::new(format!("unknown fault option '{item}': options are skip=N, chunk=BYTES"))),
                None => spec.faults.push(
                    Fault::ALL
                        .into_iter()
                        .find(|f| f.name() == item)
                        .ok_or_else(|| InvalidInput::new(format!("unknown fault '{item}': faults are {}", kinds())))?,
                ),
            }
        }
        if spec.faults.is_empty() {
            return Err(InvalidInput::new(format!("no fault given: write fault:KIND:TARGET with KIND one of {}", kinds())));
        }
        if spec.chunk_bytes == 0 || spec.chunk_bytes % 4 != 0 {
            return Err(InvalidInput::new(format!("fault chunk {} bytes: must be a non-zero multiple of 4", spec.chunk_bytes)));
        }
        Ok(spec)
    }
}

pub const ENTRY: EngineEntry = EngineEntry {
    name: "fault",
    argument: "KIND[,KIND..][,skip=N][,chunk=BYTES]:TARGET",
    about: "wraps any target and injects bitflip, drop, dup, reorder or hang faults (for testing verification)",
    options: &[],
    flags: &[],
    open: |o| Ok(Box::new(FaultEngine::open(o)?)),
    detect: None,
};

/// Most `fault:` wrappers one target may stack.
pub const MAX_FAULT_LEVELS: usize = 4;

/// One `fault:SPEC:` level and the transfers it has seen.
struct Level {
    spec: FaultSpec,
    transfers: u64,
}

/// The wrapper (every stacked level in one).
pub struct FaultEngine {
    inner: Box<dyn Engine>,
    info: EngineInfo,
    levels: Vec<Level>,
    /// Damage h2d data too (a `Generator` device checks it by CRC32); otherwise the data comes
    /// back d2h and is damaged there only.
    damage_h2d: bool,
    rng: SimRng,
    /// Time lost in simulated hangs, added to a simulated inner engine's clock.
    hung_ns: f64,
}

impl FaultEngine {
    /// Open `fault:SPEC:INNER_TARGET`; stacked `fault:` levels are read in a loop, not recursion.
    pub fn open(opening: &Opening) -> Result<Self, EngineError> {
        let target = opening.target;
        let mut rest = target;
        let mut specs = Vec::new();
        while let Some(after) = rest.strip_prefix("fault:") {
            if specs.len() == MAX_FAULT_LEVELS {
                return Err(InvalidInput::new(format!("too many nested fault: wrappers: at most {MAX_FAULT_LEVELS}")).into());
            }
            let (spec, inner) = after.split_once(':').ok_or_else(|| {
                InvalidInput::new(format!("invalid fault target '{target}': expected fault:KIND[,KIND...][,skip=N][,chunk=BYTES]:TARGET"))
            })?;
            specs.push(FaultSpec::parse(spec)?);
            rest = inner;
        }
        let inner = opening.open_inner(rest)?;
        if inner.info().data_model == DataModel::Opaque {
            return Err(InvalidInput::new(format!(
                "fault injection needs data the host can check, but {rest} is read-only with unknown contents (reads are only \
                 compared with each other): give --destructive or --scratch DIR for a file, or use another target"
            ))
            .into());
        }
        let mut engine = FaultEngine::wrap(target, inner, specs.remove(0), opening.options.seed);
        engine.levels.extend(specs.into_iter().map(|spec| Level { spec, transfers: 0 }));
        engine.info.description = engine.describe();
        Ok(engine)
    }

    pub fn wrap(target: &str, inner: Box<dyn Engine>, spec: FaultSpec, seed: u64) -> Self {
        let info = EngineInfo { kind: "fault".into(), target: target.into(), ..inner.info().clone() };
        let damage_h2d = !matches!(info.data_model, DataModel::Memory | DataModel::Loopback);
        let mut engine = FaultEngine {
            inner,
            info,
            levels: vec![Level { spec, transfers: 0 }],
            damage_h2d,
            rng: SimRng::new(seed ^ 0xFA17),
            hung_ns: 0.0,
        };
        engine.info.description = engine.describe();
        engine
    }

    fn describe(&self) -> String {
        let levels: Vec<String> = self
            .levels
            .iter()
            .map(|level| {
                let injected: Vec<&str> = level.spec.faults.iter().map(|f| f.describe()).collect();
                let after = if level.spec.skip > 0 { format!(", after {} clean transfers", level.spec.skip) } else { String::new() };
                format!("{}{after}", injected.join(", "))
            })
            .collect();
        format!("fault injection ({}) over {}", levels.join("; "), self.inner.info().description)
    }

    /// The outermost level's spec.
    pub fn spec(&self) -> &FaultSpec {
        &self.levels[0].spec
    }

    /// The faults armed for this transfer (counts it at every level): each kind once, and the
    /// chunk of the outermost armed level.
    fn armed(&mut self) -> Option<(Vec<Fault>, usize)> {
        let mut faults: Vec<Fault> = Vec::new();
        let mut chunk = None;
        for level in &mut self.levels {
            level.transfers += 1;
            if level.transfers > level.spec.skip {
                chunk.get_or_insert(level.spec.chunk_bytes as usize);
                for &fault in &level.spec.faults {
                    if !faults.contains(&fault) {
                        faults.push(fault);
                    }
                }
            }
        }
        chunk.map(|chunk| (faults, chunk))
    }

    fn hang(&mut self, deadline: Duration, what: &str) -> EngineError {
        if self.inner.info().simulated {
            self.hung_ns += deadline.as_nanos() as f64;
        } else if crate::cancel::sleep(deadline) {
            return EngineError::Interrupted;
        }
        EngineError::Timeout { what: format!("{what} (fault injection: hang)"), after: deadline }
    }

    /// Shift a transfer onto this engine's clock (the inner clock plus time lost in hangs).
    fn on_our_clock(&self, mut transfer: Transfer) -> Transfer {
        transfer.start_ns += self.hung_ns;
        transfer.end_ns += self.hung_ns;
        transfer
    }
}

/// Apply every fault (but the hang) to `data`, and make sure the bytes changed.
fn damage_all(faults: &[Fault], data: &mut [u8], chunk_bytes: usize, rng: &mut SimRng) {
    if data.is_empty() {
        return;
    }
    let original = data.to_vec();
    for &fault in faults {
        damage(fault, data, chunk_bytes, rng);
    }
    if data == original.as_slice() {
        data[0] ^= 0xFF; // the damage undid itself or moved identical bytes: make it visible
    }
}

/// Apply one fault to `data`. Chunks shrink to half the buffer when it holds fewer than two.
fn damage(fault: Fault, data: &mut [u8], chunk_bytes: usize, rng: &mut SimRng) {
    let len = data.len();
    if len == 0 {
        return;
    }
    if fault == Fault::BitFlip {
        let bit = (rng.next_u64() % (len as u64 * 8)) as usize;
        data[bit / 8] ^= 1 << (bit % 8);
        return;
    }
    let chunk = chunk_bytes.min(len / 2 / 4 * 4);
    if chunk == 0 {
        data[0] ^= 0xFF; // too short for chunks: any loss damages the only word
        return;
    }
    let chunks = len / chunk;
    let k = (rng.next_u64() % (chunks as u64 - 1)) as usize; // k + 1 is a whole chunk too
    let (at, next) = (k * chunk, (k + 1) * chunk);
    match fault {
        Fault::Drop => {
            data.copy_within(next.., at);
            data[len - chunk..].fill(0);
        }
        Fault::Duplicate => data.copy_within(at..len - chunk, next),
        Fault::Reorder => {
            let (head, tail) = data.split_at_mut(next);
            head[at..].swap_with_slice(&mut tail[..chunk]);
        }
        Fault::BitFlip | Fault::Hang => {}
    }
}

impl Engine for FaultEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn conditions(&self) -> Option<crate::model::Conditions> {
        self.inner.conditions()
    }

    fn link_omits_skp_and_dllps(&self) -> Option<&'static str> {
        self.inner.link_omits_skp_and_dllps()
    }

    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }

    fn transfer(&mut self, io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        let Some((faults, chunk)) = self.armed() else {
            return self.inner.transfer(io, device_offset, deadline).map(|t| self.on_our_clock(t));
        };
        if faults.contains(&Fault::Hang) {
            return Err(self.hang(deadline, &format!("{} transfer of {} bytes", io.direction().name(), io.len())));
        }
        let transfer = match io {
            Io::H2d(data) if self.damage_h2d => {
                let mut sent = data.to_vec();
                damage_all(&faults, &mut sent, chunk, &mut self.rng);
                self.inner.transfer(Io::H2d(&sent), device_offset, deadline)
            }
            Io::H2d(data) => self.inner.transfer(Io::H2d(data), device_offset, deadline),
            Io::D2h(buf) => {
                let transfer = self.inner.transfer(Io::D2h(&mut *buf), device_offset, deadline)?;
                damage_all(&faults, buf, chunk, &mut self.rng);
                Ok(transfer)
            }
        };
        transfer.map(|t| self.on_our_clock(t))
    }

    fn transfer_both(
        &mut self,
        h2d: &[u8],
        d2h: &mut [u8],
        device_offset: u64,
        deadline: Duration,
    ) -> Result<(Transfer, Transfer), EngineError> {
        let Some((faults, chunk)) = self.armed() else {
            let (a, b) = self.inner.transfer_both(h2d, d2h, device_offset, deadline)?;
            return Ok((self.on_our_clock(a), self.on_our_clock(b)));
        };
        if faults.contains(&Fault::Hang) {
            return Err(self.hang(deadline, "concurrent h2d+d2h transfer"));
        }
        let mut sent = h2d.to_vec();
        if self.damage_h2d {
            damage_all(&faults, &mut sent, chunk, &mut self.rng);
        }
        let (a, b) = self.inner.transfer_both(&sent, d2h, device_offset, deadline)?;
        damage_all(&faults, d2h, chunk, &mut self.rng);
        Ok((self.on_our_clock(a), self.on_our_clock(b)))
    }

    fn now_ns(&self) -> f64 {
        self.inner.now_ns() + self.hung_ns
    }

    fn mmio(&mut self) -> Option<&mut dyn Mmio> {
        self.inner.mmio()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_faults_move_the_right_bytes() {
        let original: Vec<u8> = (0..16u8).collect();
        let mut rng = SimRng::new(0);
        for fault in [Fault::Drop, Fault::Duplicate, Fault::Reorder] {
            let mut data = original.clone();
            damage(fault, &mut data, 4, &mut rng);
            assert_ne!(data, original, "{fault:?}");
            assert_eq!(data.len(), 16);
        }
        let mut one_word = vec![1u8, 2, 3, 4];
        damage(Fault::Drop, &mut one_word, 4096, &mut rng);
        assert_ne!(one_word, [1, 2, 3, 4]);
    }

    #[test]
    fn spec_parsing() {
        let spec = FaultSpec::parse("drop,reorder,skip=2,chunk=8KiB").unwrap();
        assert_eq!((spec.faults.len(), spec.skip, spec.chunk_bytes), (2, 2, 8192));
        assert!(FaultSpec::parse("melt").unwrap_err().0.contains("bitflip"));
        assert!(FaultSpec::parse("").is_err());
        assert!(FaultSpec::parse("drop,chunk=6").is_err());
    }
}
