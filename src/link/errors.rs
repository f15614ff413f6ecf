//! Injected bit errors: a seeded, deterministic error process that decides, packet by packet,
//! whether a TLP, a DLLP or a flit arrives with a bad CRC.
//!
//! Two sources, both optional: a bit error rate (each bit on the wire is wrong with probability
//! `ber`, independently; the random numbers come from a SplitMix64 generator seeded by `seed`,
//! so a run repeats exactly), and a list of [`Corrupt`] targets that tests use to hit one chosen
//! packet. SKP ordered sets are never corrupted (no CRC checks them). Gen6 flits carry FEC: a
//! flit fails only when one of its three interleaved FEC groups has two or more bytes in error
//! (each group corrects one byte).

use super::packet::Direction;
use crate::error::InvalidInput;
use crate::model::Encoding;

/// One packet a test wants corrupted: the next transmission that matches, once per entry
/// (repeat an entry to corrupt its replays too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corrupt {
    /// The TLP with this data link sequence number travelling in `direction` (in flit mode:
    /// the payload flit with this flit sequence number).
    Tlp { direction: Direction, seq: u16 },
    /// The Ack DLLP acknowledging `seq` travelling in `direction`.
    Ack { direction: Direction, seq: u16 },
}

/// How errors are injected.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ErrorConfig {
    /// Probability that one bit on the wire is wrong, in [0, 1).
    pub ber: f64,
    pub seed: u64,
    pub corrupt: Vec<Corrupt>,
}

impl ErrorConfig {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if !(0.0..1.0).contains(&self.ber) {
            return Err(InvalidInput::new(format!("invalid bit error rate {}: allowed 0 to less than 1", self.ber)));
        }
        Ok(())
    }
}

/// What is checked on arrival: the kind of packet a corruption may hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    Tlp { seq: u16 },
    Ack { seq: u16 },
    OtherDllp,
    /// A flit; `seq` is `None` for a flit that carries no TLP bytes.
    Flit { seq: Option<u16> },
}

/// Bytes in one of the three interleaved FEC groups of a 256-byte flit (86, 85, 85).
const FEC_GROUP_BYTES: [u64; 3] = [86, 85, 85];

/// The error process of one run.
#[derive(Debug, Clone)]
pub struct ErrorProcess {
    ber: f64,
    state: u64,
    targets: Vec<Corrupt>,
    bits_per_byte: f64,
}

impl ErrorProcess {
    pub fn new(config: &ErrorConfig, encoding: Encoding) -> Self {
        let bits_per_byte = match encoding {
            Encoding::B8b10b => 10.0,
            Encoding::Flit1b1b => 8.0,
            _ => 8.0 * 130.0 / 128.0,
        };
        ErrorProcess { ber: config.ber, state: config.seed, targets: config.corrupt.clone(), bits_per_byte }
    }

    /// Errors can happen at all in this run.
    pub fn enabled(&self) -> bool {
        self.ber > 0.0 || !self.targets.is_empty()
    }

    /// Does this packet of `bytes` link bytes, travelling in `direction`, arrive corrupted?
    pub fn corrupts(&mut self, direction: Direction, checked: Checked, bytes: u64) -> bool {
        if !self.enabled() {
            return false;
        }
        if self.take_target(direction, checked) {
            return true;
        }
        if self.ber == 0.0 {
            return false;
        }
        let p = match checked {
            Checked::Flit { .. } => flit_failure_probability(self.ber),
            _ => -(bytes as f64 * self.bits_per_byte * (-self.ber).ln_1p()).exp_m1(),
        };
        self.uniform() < p
    }

    fn take_target(&mut self, direction: Direction, checked: Checked) -> bool {
        let hit = self.targets.iter().position(|target| match (*target, checked) {
            (Corrupt::Tlp { direction: d, seq }, Checked::Tlp { seq: s }) => d == direction && seq == s,
            (Corrupt::Tlp { direction: d, seq }, Checked::Flit { seq: Some(s) }) => d == direction && seq == s,
            (Corrupt::Ack { direction: d, seq }, Checked::Ack { seq: s }) => d == direction && seq == s,
            _ => false,
        });
        hit.map(|i| self.targets.remove(i)).is_some()
    }

    /// SplitMix64, mapped to [0, 1).
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Probability that a flit is not corrected by its FEC: some group has ≥ 2 bytes in error.
/// For a group of n bytes, each wrong with probability q: 1 − (1 − q)^(n−1) (1 + (n − 1) q),
/// computed with `ln_1p`/`exp_m1` so that tiny rates do not cancel to 0.
pub fn flit_failure_probability(ber: f64) -> f64 {
    let byte_error = -(8.0 * (-ber).ln_1p()).exp_m1();
    let log_survives: f64 = FEC_GROUP_BYTES
        .iter()
        .map(|&n| {
            let others = (n - 1) as f64;
            let group_fails = -(others * (-byte_error).ln_1p() + (others * byte_error).ln_1p()).exp_m1();
            (-group_fails).ln_1p()
        })
        .sum();
    -log_survives.exp_m1()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_repeats_and_hits_at_the_rate() {
        let config = ErrorConfig { ber: 1e-4, seed: 7, corrupt: Vec::new() };
        let run = || {
            let mut process = ErrorProcess::new(&config, Encoding::B8b10b);
            (0..20_000).filter(|_| process.corrupts(Direction::Upstream, Checked::Tlp { seq: 0 }, 100)).count()
        };
        // 1000 bits per packet at 1e-4: p = 1 - (1 - 1e-4)^1000 = 0.0952.
        let hits = run();
        assert_eq!(hits, run());
        assert!((hits as f64 / 20_000.0 - 0.0952).abs() < 0.01, "{hits}");
    }

    #[test]
    fn targets_hit_once_per_entry() {
        let target = Corrupt::Tlp { direction: Direction::Upstream, seq: 3 };
        let config = ErrorConfig { ber: 0.0, seed: 0, corrupt: vec![target, target] };
        let mut process = ErrorProcess::new(&config, Encoding::B8b10b);
        let tlp3 = Checked::Tlp { seq: 3 };
        assert!(!process.corrupts(Direction::Downstream, tlp3, 20));
        assert!(process.corrupts(Direction::Upstream, tlp3, 20));
        assert!(process.corrupts(Direction::Upstream, tlp3, 20));
        assert!(!process.corrupts(Direction::Upstream, tlp3, 20));
    }

    #[test]
    fn fec_corrects_single_byte_errors() {
        // One byte error per flit on average is mostly corrected.
        let p = flit_failure_probability(1.0 / 2048.0);
        assert!(p > 0.1 && p < 0.4, "{p}");
        let tiny = flit_failure_probability(1e-12);
        assert!(tiny > 0.0 && tiny < 1e-18, "{tiny}");
        assert!(ErrorConfig { ber: 1.0, ..Default::default() }.validate().is_err());
        assert!(ErrorConfig { ber: -0.1, ..Default::default() }.validate().is_err());
        assert!(ErrorConfig { ber: f64::NAN, ..Default::default() }.validate().is_err());
    }
}
