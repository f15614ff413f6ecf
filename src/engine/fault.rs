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
//! h2d data is damaged before the inner engine sees it (so the device's CRC32 differs from the
//! host's); d2h data is damaged after the inner engine filled the buffer (so the pattern check
//! fails). Where the damage lands is drawn from the seed.

use std::time::Duration;

use crate::engine::pattern::PATTERN_BLOCK_BYTES;
use crate::engine::sim::rng::SimRng;
use crate::engine::{Engine, EngineEntry, Opening, EngineError, EngineInfo, Io, Mmio, Transfer};
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
    open: |o| Ok(Box::new(FaultEngine::open(o)?)),
    detect: None,
};

/// The wrapper.
pub struct FaultEngine {
    inner: Box<dyn Engine>,
    info: EngineInfo,
    spec: FaultSpec,
    rng: SimRng,
    transfers: u64,
    /// Time lost in simulated hangs, added to a simulated inner engine's clock.
    hung_ns: f64,
}

impl FaultEngine {
    /// Open `fault:SPEC:INNER_TARGET`.
    pub fn open(opening: &Opening) -> Result<Self, EngineError> {
        let (target, options) = (opening.target, opening.options);
        let rest = target.strip_prefix("fault:").unwrap_or("");
        let (spec, inner) = rest.split_once(':').ok_or_else(|| {
            InvalidInput::new(format!("invalid fault target '{target}': expected fault:KIND[,KIND...][,skip=N][,chunk=BYTES]:TARGET"))
        })?;
        let spec = FaultSpec::parse(spec)?;
        Ok(FaultEngine::wrap(target, opening.open_inner(inner)?, spec, options.seed))
    }

    pub fn wrap(target: &str, inner: Box<dyn Engine>, spec: FaultSpec, seed: u64) -> Self {
        let inner_info = inner.info();
        let injected: Vec<&str> = spec.faults.iter().map(|f| f.describe()).collect();
        let info = EngineInfo {
            kind: "fault".into(),
            target: target.into(),
            description: format!(
                "fault injection ({}{}) over {}",
                injected.join(", "),
                if spec.skip > 0 { format!(", after {} clean transfers", spec.skip) } else { String::new() },
                inner_info.description
            ),
            ..inner_info.clone()
        };
        FaultEngine { inner, info, spec, rng: SimRng::new(seed ^ 0xFA17), transfers: 0, hung_ns: 0.0 }
    }

    pub fn spec(&self) -> &FaultSpec {
        &self.spec
    }

    /// Whether this transfer is damaged (counts it).
    fn armed(&mut self) -> bool {
        self.transfers += 1;
        self.transfers > self.spec.skip
    }

    fn hang(&mut self, deadline: Duration, what: &str) -> EngineError {
        if self.inner.info().simulated {
            self.hung_ns += deadline.as_nanos() as f64;
        } else {
            std::thread::sleep(deadline);
        }
        EngineError::Timeout { what: format!("{what} (fault injection: hang)"), after: deadline }
    }

    /// Shift a transfer onto this engine's clock (the inner clock plus time lost in hangs).
    fn on_our_clock(&self, mut transfer: Transfer) -> Transfer {
        transfer.start_ns += self.hung_ns;
        transfer.end_ns += self.hung_ns;
        transfer
    }

    /// Damage `data` with every configured fault except the hang.
    fn damage(&mut self, data: &mut [u8]) {
        for fault in self.spec.faults.clone() {
            damage(fault, data, self.spec.chunk_bytes as usize, &mut self.rng);
        }
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

    fn transfer(&mut self, io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        if !self.armed() {
            return self.inner.transfer(io, device_offset, deadline).map(|t| self.on_our_clock(t));
        }
        if self.spec.faults.contains(&Fault::Hang) {
            return Err(self.hang(deadline, &format!("{} transfer of {} bytes", io.direction().name(), io.len())));
        }
        let transfer = match io {
            Io::H2d(data) => {
                let mut sent = data.to_vec();
                self.damage(&mut sent);
                self.inner.transfer(Io::H2d(&sent), device_offset, deadline)
            }
            Io::D2h(buf) => {
                let transfer = self.inner.transfer(Io::D2h(&mut *buf), device_offset, deadline)?;
                self.damage(buf);
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
        if !self.armed() {
            let (a, b) = self.inner.transfer_both(h2d, d2h, device_offset, deadline)?;
            return Ok((self.on_our_clock(a), self.on_our_clock(b)));
        }
        if self.spec.faults.contains(&Fault::Hang) {
            return Err(self.hang(deadline, "concurrent h2d+d2h transfer"));
        }
        let mut sent = h2d.to_vec();
        self.damage(&mut sent);
        let (a, b) = self.inner.transfer_both(&sent, d2h, device_offset, deadline)?;
        self.damage(d2h);
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
