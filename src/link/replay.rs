//! Data link layer retry (PCIe Base Specification §3.6): the transmitter's replay buffer and
//! REPLAY_TIMER, the receiver's expected sequence number and Nak, and what retry cost a run.
//!
//! The same machinery serves TLPs (12-bit sequence numbers, Gen1–5) and flits (10-bit flit
//! sequence numbers, Gen6 flit mode): a buffer of what was sent and not yet acknowledged, purged
//! by Acks, replayed from the oldest entry on a Nak or a timer expiry.

use std::collections::VecDeque;

use crate::error::InvalidInput;
use crate::model::{Generation, Link};

/// The specification's largest number of unacknowledged TLPs: half the 12-bit sequence space.
pub const MAX_OUTSTANDING_TLPS: u32 = 2048;

/// Replay buffer, replay timer and retrain settings of both transmitters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayConfig {
    /// Link bytes of unacknowledged TLPs (framing included) the buffer holds; in flit mode,
    /// 256 per flit.
    pub buffer_bytes: u64,
    /// Unacknowledged TLPs (in flit mode: flits) the buffer holds.
    pub buffer_tlps: u32,
    /// REPLAY_TIMER limit in ns; `None`: the specification's formula ([`spec_timeout_ns`]).
    pub timeout_ns: Option<f64>,
    /// How long a link retrain (Recovery) takes after REPLAY_NUM rolls over, in ns. Not in the
    /// specification: a parameter; the default (2 µs) is a short Recovery.
    pub retrain_ns: f64,
}

impl Default for ReplayConfig {
    /// Large enough never to stall the transfers of the Ack-policy and model tests.
    fn default() -> Self {
        ReplayConfig { buffer_bytes: 1 << 20, buffer_tlps: MAX_OUTSTANDING_TLPS, timeout_ns: None, retrain_ns: 2000.0 }
    }
}

impl ReplayConfig {
    /// `largest_bytes`: the largest TLP (or flit) the buffer must hold.
    pub fn validate(&self, largest_bytes: u64) -> Result<(), InvalidInput> {
        if self.buffer_bytes < largest_bytes {
            return Err(InvalidInput::new(format!(
                "invalid replay buffer {} bytes: must hold the largest TLP ({largest_bytes} bytes) or more",
                self.buffer_bytes
            )));
        }
        if !(1..=MAX_OUTSTANDING_TLPS).contains(&self.buffer_tlps) {
            return Err(InvalidInput::new(format!("invalid replay buffer {} TLPs: allowed 1 to {MAX_OUTSTANDING_TLPS}", self.buffer_tlps)));
        }
        if let Some(ns) = self.timeout_ns {
            if !(ns > 0.0 && ns.is_finite()) {
                return Err(InvalidInput::new(format!("invalid replay timeout {ns} ns: must be more than 0")));
            }
        }
        if !(self.retrain_ns >= 0.0 && self.retrain_ns.is_finite()) {
            return Err(InvalidInput::new(format!("invalid retrain time {} ns: must be 0 or more", self.retrain_ns)));
        }
        Ok(())
    }
}

/// The REPLAY_TIMER limit of the specification, in symbol times (§3.6.2.1, "REPLAY_TIMER
/// Timeout"): ((Max_Payload_Size + TLPOverhead) × AckFactor / LinkWidth + InternalDelay) × 3,
/// plus Rx_L0s_Adjustment, with TLPOverhead = 28 symbols, Rx_L0s_Adjustment = 0 (no L0s), and
/// InternalDelay 19 symbol times at 2.5 GT/s, 70 at 5 GT/s, 115 at 8 GT/s and above (the
/// specification gives 115 for 8 GT/s; pcieperf keeps it for 16–64 GT/s, an assumption).
pub fn spec_timeout_symbols(link: Link, mps_bytes: u64) -> f64 {
    let internal_delay = match link.generation {
        Generation::Gen1 => 19.0,
        Generation::Gen2 => 70.0,
        _ => 115.0,
    };
    let width = link.width as f64;
    ((mps_bytes + 28) as f64 * ack_factor(mps_bytes, link.width) / width + internal_delay) * 3.0
}

/// The specification's REPLAY_TIMER limit in ns, `symbol_ns` being one symbol time.
pub fn spec_timeout_ns(link: Link, mps_bytes: u64, symbol_ns: f64) -> f64 {
    spec_timeout_symbols(link, mps_bytes) * symbol_ns
}

/// AckFactor of the specification's Ack latency tables: how many maximum-size TLPs may pass
/// before an Ack must go (more on wide links, where TLPs are short).
pub fn ack_factor(mps_bytes: u64, width: u32) -> f64 {
    match (mps_bytes, width) {
        (..=256, ..=4) => 1.4,
        (..=256, 8) => 2.5,
        (..=256, _) => 3.0,
        (512, 12..) => 2.0,
        _ => 1.0,
    }
}

/// `a` minus `b` in a sequence space of `modulo` numbers (a power of two: 4096 or 1024, so
/// a mask, not a division, in the per-packet path).
fn distance(a: u16, b: u16, modulo: u16) -> u16 {
    (a + modulo - b) & (modulo - 1)
}

/// The transmitter's side: what it sent and has not seen acknowledged, REPLAY_NUM and the
/// REPLAY_TIMER. `T` is what a replay sends again (a TLP, or the contents of a flit).
#[derive(Debug, Clone)]
pub struct ReplayBuffer<T> {
    modulo: u16,
    entries: VecDeque<(u16, T, u64)>,
    bytes: u64,
    /// Entries (from the oldest) still to be sent again by the replay in progress.
    pub to_replay: usize,
    /// Replays since the last forward progress (2 bits: the fourth rolls over).
    pub replay_num: u8,
}

/// The REPLAY_TIMER, checked lazily: one event stays queued while the deadline moves later.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayTimer {
    /// When it runs out, in ticks; `None` while it is stopped.
    pub deadline: Option<u64>,
    /// A timer event is queued for this tick.
    pub event_at: Option<u64>,
}

/// What an Ack or Nak did to the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    pub entries: usize,
}

impl<T: Clone> ReplayBuffer<T> {
    pub fn new(modulo: u16) -> Self {
        assert!(modulo.is_power_of_two(), "sequence spaces are powers of two");
        ReplayBuffer { modulo, entries: VecDeque::new(), bytes: 0, to_replay: 0, replay_num: 0 }
    }

    /// Sequence number and link bytes of each entry, oldest first (the periodic-state key).
    pub fn entries(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.entries.iter().map(|(seq, _, bytes)| (*seq, *bytes))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Room for one more entry of `bytes` within the limits (and half the sequence space).
    pub fn has_room(&self, bytes: u64, config: &ReplayConfig) -> bool {
        let most = (config.buffer_tlps as usize).min(self.modulo as usize / 2 - 1);
        self.entries.len() < most && self.bytes + bytes <= config.buffer_bytes
    }

    pub fn push(&mut self, seq: u16, item: T, bytes: u64) {
        self.entries.push_back((seq, item, bytes));
        self.bytes += bytes;
    }

    /// An Ack (or Nak) for `seq` purges every entry up to and including it. A stale one (for
    /// a sequence number before the oldest entry) purges nothing.
    pub fn acknowledge(&mut self, seq: u16) -> Purged {
        let mut entries = 0;
        while let Some(&(oldest, _, bytes)) = self.entries.front() {
            if distance(seq, oldest, self.modulo) >= self.modulo / 2 {
                break;
            }
            self.entries.pop_front();
            self.bytes -= bytes;
            entries += 1;
        }
        // Purged entries were sent already (the oldest go first): what is left to replay stays.
        self.to_replay = self.to_replay.min(self.entries.len());
        if entries > 0 {
            self.replay_num = 0;
        }
        Purged { entries }
    }

    /// Begin a replay of everything unacknowledged. Returns true when REPLAY_NUM rolled over
    /// (the fourth replay without progress): the link must retrain first.
    pub fn start_replay(&mut self) -> bool {
        self.to_replay = self.entries.len();
        self.replay_num = (self.replay_num + 1) % 4;
        self.replay_num == 0
    }

    /// The next entry of the replay in progress, as (sequence number, item, bytes).
    pub fn next_replay(&mut self) -> Option<(u16, T, u64)> {
        if self.to_replay == 0 {
            return None;
        }
        let entry = self.entries[self.entries.len() - self.to_replay].clone();
        self.to_replay -= 1;
        Some(entry)
    }
}

/// What the receiver does with an arriving TLP (or flit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The expected one, intact: pass it on.
    Accept,
    /// Already received (a replay after a lost Ack): drop it, Ack the last good one.
    Duplicate { ack: u16 },
    /// Bad CRC or a gap in the sequence: drop it and send this Nak.
    Nak { seq: u16 },
    /// Dropped while a Nak is outstanding.
    Discard,
}

/// The receiver's side: NEXT_RCV_SEQ and NAK_SCHEDULED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxSequence {
    modulo: u16,
    next: u16,
    nak_scheduled: bool,
}

impl RxSequence {
    pub fn new(modulo: u16) -> Self {
        assert!(modulo.is_power_of_two(), "sequence spaces are powers of two");
        RxSequence { modulo, next: 0, nak_scheduled: false }
    }

    /// The last sequence number received in order.
    /// NAK_SCHEDULED (the periodic-state key).
    pub fn nak_scheduled(&self) -> bool {
        self.nak_scheduled
    }

    pub fn last_good(&self) -> u16 {
        (self.next + self.modulo - 1) & (self.modulo - 1)
    }

    pub fn check(&mut self, seq: u16, corrupted: bool) -> Verdict {
        if !corrupted && seq == self.next {
            self.next = (self.next + 1) & (self.modulo - 1);
            self.nak_scheduled = false;
            return Verdict::Accept;
        }
        if !corrupted && distance(self.next, seq, self.modulo) <= self.modulo / 2 {
            return Verdict::Duplicate { ack: self.last_good() };
        }
        if self.nak_scheduled {
            return Verdict::Discard;
        }
        self.nak_scheduled = true;
        Verdict::Nak { seq: self.last_good() }
    }
}

/// What retry cost one direction's transmitter in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReplayStats {
    /// TLPs (flits) that arrived with a bad LCRC (flit CRC after FEC).
    pub corrupted: u64,
    /// DLLPs (or DLP contents of a bad flit) lost to errors on this direction.
    pub corrupted_dllps: u64,
    /// Naks this transmitter received.
    pub naks: u64,
    pub replays: u64,
    pub replayed: u64,
    /// Link bytes of the replayed TLPs (flits).
    pub replayed_bytes: u64,
    pub timer_expiries: u64,
    pub retrains: u64,
    /// Lane time of replayed TLPs (flits) plus retrain time, in ns.
    pub lost_ns: f64,
    /// Times the transmitter had a TLP ready but the replay buffer was full.
    pub buffer_full_waits: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_timeout_matches_the_2_5_gt_table() {
        // PCIe 1.1 Table 3-4 (2.5 GT/s, symbol times): MPS 128 x1 711, x8 201; MPS 256 x1 1248,
        // MPS 512 x1 1677, x4 462. The table rounds; the formula is within 3 symbol times.
        let check = |name: &str, mps, table: f64| {
            let got = spec_timeout_symbols(name.parse().unwrap(), mps);
            assert!((got - table).abs() <= 3.0, "{name} MPS {mps}: {got} against {table}");
        };
        check("gen1x1", 128, 711.0);
        check("gen1x8", 128, 201.0);
        check("gen1x1", 256, 1248.0);
        check("gen1x1", 512, 1677.0);
        check("gen1x4", 512, 462.0);
    }

    #[test]
    fn acks_purge_in_sequence_space_and_replays_roll_over() {
        let mut buffer = ReplayBuffer::<u16>::new(4096);
        for seq in [4094, 4095, 0, 1] {
            buffer.push(seq, seq, 10);
        }
        // A Nak for 4093 (nothing received) purges nothing.
        assert_eq!(buffer.acknowledge(4093).entries, 0);
        assert_eq!(buffer.acknowledge(4095).entries, 2);
        assert!(!buffer.start_replay());
        assert_eq!(buffer.next_replay().map(|e| e.0), Some(0));
        // An Ack for 0 during the replay does not skip 1.
        assert_eq!(buffer.acknowledge(0).entries, 1);
        assert_eq!(buffer.next_replay().map(|e| e.0), Some(1));
        assert_eq!(buffer.next_replay(), None);
        assert!(!buffer.start_replay() && !buffer.start_replay() && !buffer.start_replay());
        assert!(buffer.start_replay(), "the fourth replay without progress retrains");
        assert!(buffer.has_room(10, &ReplayConfig::default()));
        assert!(!buffer.has_room(10, &ReplayConfig { buffer_tlps: 1, ..ReplayConfig::default() }));
    }

    #[test]
    fn receiver_accepts_in_order_naks_once_and_acks_duplicates() {
        let mut rx = RxSequence::new(4096);
        assert_eq!(rx.check(0, false), Verdict::Accept);
        assert_eq!(rx.check(1, true), Verdict::Nak { seq: 0 });
        assert_eq!(rx.check(2, false), Verdict::Discard);
        assert_eq!(rx.check(1, false), Verdict::Accept);
        assert_eq!(rx.check(1, false), Verdict::Duplicate { ack: 1 });
        assert_eq!(rx.check(3, false), Verdict::Nak { seq: 1 });
    }
}
