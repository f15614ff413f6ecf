//! Injected disturbances whose effects the link then simulates: the host's receiver withholding
//! flow-control credits for a while (a root complex returning credits late), and bit errors that
//! corrupt TLPs. Both are seeded Poisson processes, so a run repeats exactly; what they cost —
//! the transmitter starving for credits, Naks, replays, retrains — is not drawn but comes out of
//! the simulated link. See `docs/link-simulator.md` (Injected disturbances).

use super::packet::Direction;
use crate::error::InvalidInput;

/// A hold: the host's receiver sends no UpdateFC from `start_ns` for `duration_ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hold {
    pub start_ns: f64,
    pub duration_ns: f64,
}

/// What is injected into one run (nothing by default).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Injection {
    /// Credit holds per second of simulated time (Poisson arrivals), each lasting uniformly
    /// between `hold_min_ns` and `hold_max_ns`. An arrival during a hold is dropped (the host is
    /// late returning credits already), so no hold is longer than the maximum.
    pub holds_per_s: f64,
    pub hold_min_ns: f64,
    pub hold_max_ns: f64,
    /// Holds at given times, for tests (used instead of the Poisson process when not empty).
    pub holds: Vec<Hold>,
    /// Corrupted TLPs per 10^12 payload bytes, in each direction: a Poisson process over the
    /// payload bytes of first transmissions (a replay is not counted again). Several errors that
    /// fall into one TLP corrupt it once.
    pub tlp_errors_per_tb: f64,
    pub seed: u64,
    /// A starvation longer than this is counted in [`Starvation::over_threshold`].
    pub threshold_ns: f64,
}

impl Injection {
    pub fn enabled(&self) -> bool {
        self.holds_per_s > 0.0 || !self.holds.is_empty() || self.tlp_errors_per_tb > 0.0
    }

    pub fn validate(&self) -> Result<(), InvalidInput> {
        let finite = |v: f64| v >= 0.0 && v.is_finite();
        if !finite(self.holds_per_s) || !finite(self.tlp_errors_per_tb) || !finite(self.threshold_ns) {
            return Err(InvalidInput::new("invalid injection: rates and the starvation threshold must be finite and 0 or more"));
        }
        if !(finite(self.hold_min_ns) && finite(self.hold_max_ns) && self.hold_min_ns <= self.hold_max_ns) {
            return Err(InvalidInput::new("invalid credit hold length: need 0 ≤ minimum ≤ maximum, finite"));
        }
        if self.holds.iter().any(|h| !finite(h.start_ns) || !finite(h.duration_ns)) {
            return Err(InvalidInput::new("invalid credit hold: start and duration must be finite and 0 or more"));
        }
        Ok(())
    }
}

/// Credit starvation of one direction's transmitter: time with a TLP ready to go that the
/// credits did not allow (for whatever reason: a hold, or a credit loop too long).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Starvation {
    /// Starvations (each from the first refusal to the next new TLP sent).
    pub count: u64,
    pub total_ns: f64,
    pub longest_ns: f64,
    /// Starvations longer than [`Injection::threshold_ns`].
    pub over_threshold: u64,
}

impl Starvation {
    /// One starvation of `ns`, counted over `threshold_ns` when longer.
    pub fn add(&mut self, ns: f64, threshold_ns: f64) {
        self.count += 1;
        self.total_ns += ns;
        self.longest_ns = self.longest_ns.max(ns);
        self.over_threshold += (ns > threshold_ns) as u64;
    }

    /// Add what happened on another run of the same link between `from` and `to`.
    pub fn join(&mut self, from: &Starvation, to: &Starvation) {
        self.count += to.count - from.count;
        self.total_ns += to.total_ns - from.total_ns;
        self.over_threshold += to.over_threshold - from.over_threshold;
        if to.longest_ns > from.longest_ns {
            self.longest_ns = self.longest_ns.max(to.longest_ns);
        }
    }
}

/// Pauses in one direction's payload, from one data TLP's arrival (a write or a completion) to
/// the next: what document 001 calls a stall, "no data could be transferred". A credit
/// starvation of writes is one; a read whose completions a hold delays is another.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PayloadGaps {
    pub longest_ns: f64,
    /// Gaps longer than [`Injection::threshold_ns`] (none counted while it is 0).
    pub over_threshold: u64,
}

impl PayloadGaps {
    pub fn add(&mut self, gap_ns: f64, threshold_ns: f64) {
        self.longest_ns = self.longest_ns.max(gap_ns);
        self.over_threshold += (threshold_ns > 0.0 && gap_ns > threshold_ns) as u64;
    }

    /// Add what happened on another run of the same link between `from` and `to`.
    pub fn join(&mut self, from: &PayloadGaps, to: &PayloadGaps) {
        self.over_threshold += to.over_threshold - from.over_threshold;
        if to.longest_ns > from.longest_ns {
            self.longest_ns = self.longest_ns.max(to.longest_ns);
        }
    }
}

/// SplitMix64: one u64 of state, the same sequence on every platform.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Gap to the next arrival of a Poisson process of mean gap `mean`.
    fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

/// The holds of one run, generated lazily in time order, in ns. Listed holds that overlap merge;
/// Poisson arrivals during a hold are dropped.
#[derive(Debug, Clone)]
pub struct HoldSchedule {
    rng: Rng,
    mean_gap_ns: f64,
    min_ns: f64,
    max_ns: f64,
    listed: Vec<Hold>,
    next_listed: usize,
    /// Start of the next Poisson arrival not yet merged into `current`.
    next_arrival_ns: f64,
    /// The current or next hold, [start, end) in ns; None when there are no more.
    current: Option<(f64, f64)>,
}

impl HoldSchedule {
    pub fn new(injection: &Injection) -> Self {
        let mut rng = Rng(injection.seed ^ 0x401D_C2ED_17);
        let mean_gap_ns = if injection.holds_per_s > 0.0 { 1e9 / injection.holds_per_s } else { f64::INFINITY };
        let mut listed = injection.holds.clone();
        listed.sort_by(|a, b| a.start_ns.total_cmp(&b.start_ns));
        let next_arrival_ns = if listed.is_empty() { rng.exponential(mean_gap_ns) } else { f64::INFINITY };
        let mut schedule = HoldSchedule {
            rng,
            mean_gap_ns,
            min_ns: injection.hold_min_ns,
            max_ns: injection.hold_max_ns,
            listed,
            next_listed: 0,
            next_arrival_ns,
            current: None,
        };
        schedule.current = schedule.next_hold();
        schedule
    }

    /// The next hold after those taken, merged with any that start inside it.
    fn next_hold(&mut self) -> Option<(f64, f64)> {
        let (start, mut end) = self.take()?;
        while self.peek_start() <= end {
            let (_, later_end) = self.take()?;
            end = end.max(later_end);
        }
        Some((start, end))
    }

    fn peek_start(&self) -> f64 {
        match self.listed.get(self.next_listed) {
            Some(hold) => hold.start_ns,
            None if self.listed.is_empty() => self.next_arrival_ns,
            None => f64::INFINITY,
        }
    }

    fn take(&mut self) -> Option<(f64, f64)> {
        if !self.listed.is_empty() {
            let hold = *self.listed.get(self.next_listed)?;
            self.next_listed += 1;
            return Some((hold.start_ns, hold.start_ns + hold.duration_ns));
        }
        if !self.next_arrival_ns.is_finite() {
            return None;
        }
        let start = self.next_arrival_ns;
        let end = start + self.min_ns + (self.max_ns - self.min_ns) * self.rng.unit();
        self.next_arrival_ns = start + self.rng.exponential(self.mean_gap_ns);
        while self.next_arrival_ns <= end {
            self.next_arrival_ns += self.rng.exponential(self.mean_gap_ns);
        }
        Some((start, end))
    }

    /// The first hold in progress at `now_ns` or later that lasts longer than `covered_ns`
    /// and starts before `until_ns`, as [start, end) in ns; the schedule itself does not move.
    pub fn first_longer_than(&self, now_ns: f64, covered_ns: f64, until_ns: f64) -> Option<(f64, f64)> {
        let mut ahead = self.clone();
        let mut from_ns = now_ns;
        while let Some((start, end)) = ahead.at(from_ns) {
            if start >= until_ns {
                return None;
            }
            if end - start > covered_ns {
                return Some((start, end));
            }
            from_ns = end;
        }
        None
    }

    /// Let the hold in progress at `now_ns` or the next one, if it starts at `start_ns`, end at
    /// `end_ns` instead; false (nothing changed) if another hold comes first or the new end
    /// would reach the hold after it.
    pub fn set_end(&mut self, now_ns: f64, start_ns: f64, end_ns: f64) -> bool {
        let Some((start, _)) = self.at(now_ns) else { return false };
        if start != start_ns || end_ns < start || end_ns >= self.peek_start() {
            return false;
        }
        self.current = Some((start, end_ns));
        true
    }

    /// The hold in progress at `now_ns` or the next one, as [start, end) in ns (holds that
    /// ended by `now_ns` are dropped).
    pub fn at(&mut self, now_ns: f64) -> Option<(f64, f64)> {
        while let Some((_, end)) = self.current {
            if end > now_ns {
                break;
            }
            self.current = self.next_hold();
        }
        self.current
    }
}

/// Where the next injected TLP error falls, per direction, in payload bytes of first
/// transmissions.
#[derive(Debug, Clone)]
pub struct ErrorSchedule {
    rng: Rng,
    mean_gap_bytes: f64,
    /// Payload bytes sent so far, per direction.
    pub moved_bytes: [u64; 2],
    /// Position of the next error, per direction (infinite: none).
    pub next_at: [f64; 2],
}

impl ErrorSchedule {
    pub fn new(injection: &Injection) -> Self {
        let mut rng = Rng(injection.seed ^ 0xE220_25B1_7E);
        let mean_gap_bytes = if injection.tlp_errors_per_tb > 0.0 { 1e12 / injection.tlp_errors_per_tb } else { f64::INFINITY };
        let next_at = [rng.exponential(mean_gap_bytes), rng.exponential(mean_gap_bytes)];
        ErrorSchedule { rng, mean_gap_bytes, moved_bytes: [0; 2], next_at }
    }

    /// A TLP carrying `payload_bytes` is sent for the first time in `direction`: does an error
    /// fall into it?
    pub fn hits(&mut self, direction: Direction, payload_bytes: u64) -> bool {
        let i = direction.index();
        self.moved_bytes[i] += payload_bytes;
        let end = self.moved_bytes[i] as f64;
        if self.next_at[i] >= end {
            return false;
        }
        while self.next_at[i] < end {
            self.next_at[i] += self.rng.exponential(self.mean_gap_bytes);
        }
        true
    }

    /// Payload bytes that may still go in `direction` before the next error.
    pub fn bytes_to_next(&self, direction: Direction) -> f64 {
        let i = direction.index();
        self.next_at[i] - self.moved_bytes[i] as f64
    }
}

/// The injection state of one run.
#[derive(Debug, Clone)]
pub struct InjectState {
    pub holds: HoldSchedule,
    pub errors: ErrorSchedule,
    pub error_rate: bool,
    /// A FcTimer release is queued for the end of this hold (ticks).
    pub release_at: Option<u64>,
    /// The hold [`HoldSchedule::at`] last gave, as its end in ns and [start, end) in ticks:
    /// it stays the hold in progress or next until the clock reaches that end, and the event
    /// loop asks at every UpdateFC (converting ns to ticks rounds, a call each).
    pub hold_ticks: Option<(f64, u64, u64)>,
    /// Since when each direction's transmitter has been refused by its credits (ticks).
    pub starving_since: [Option<u64>; 2],
    /// Until when (ticks) the link is still recovering from the last injected event: the
    /// fast-forward does not skip before.
    pub settle_until: u64,
    /// After a starvation: until when (ticks) at the latest the fast-forward waits for the link
    /// to be back in its steady state (it checks the state itself, and may skip earlier).
    pub recover_until: Option<u64>,
    /// An injected event has met the stream (a hold while credits or requests were due, or an
    /// error): the fast-forward takes the both-ways steady state from the run from then on.
    pub disturbed: bool,
    jitter: Rng,
}

impl InjectState {
    pub fn new(injection: &Injection) -> Self {
        InjectState {
            holds: HoldSchedule::new(injection),
            errors: ErrorSchedule::new(injection),
            error_rate: injection.tlp_errors_per_tb > 0.0,
            release_at: None,
            hold_ticks: None,
            starving_since: [None; 2],
            settle_until: 0,
            recover_until: None,
            disturbed: false,
            jitter: Rng(injection.seed ^ 0x5E77_1E),
        }
    }

    /// Uniform in [0, 1). The fast-forward simulates a random lead before each hold: the credits
    /// in hand when a hold starts depend on where in the UpdateFC loop it falls, and a fixed
    /// lead from wherever the skip began would meet every hold at a biased point of the loop.
    pub fn jitter(&mut self) -> f64 {
        self.jitter.unit()
    }

    /// A generator of its own for a segment simulated apart, forked by `salt`.
    pub fn fork_jitter(&mut self, salt: u64) {
        let mut fork = Rng(self.jitter.0 ^ salt.rotate_left(17) ^ 0xF0_4C);
        fork.unit();
        self.jitter = fork;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_follow_their_rate_merge_and_repeat() {
        let injection = Injection { holds_per_s: 1e5, hold_min_ns: 100.0, hold_max_ns: 9_000.0, seed: 3, ..Default::default() };
        let count = |injection: &Injection| {
            let mut schedule = HoldSchedule::new(injection);
            let (mut n, mut last_end) = (0, 0.0);
            while let Some((start, end)) = schedule.at(last_end) {
                if start > 1e8 {
                    break;
                }
                assert!(start > last_end && (100.0..=9_000.0).contains(&(end - start)), "{start} {end} after {last_end}");
                (n, last_end) = (n + 1, end);
            }
            n
        };
        // A hold lasts 4.55 µs on average, the next arrival after it comes 10 µs later on
        // average: 0.1 s / 14.55 µs ≈ 6870 holds.
        let n = count(&injection);
        assert_eq!(n, count(&injection));
        assert!((6_600..7_150).contains(&n), "{n}");
        let listed = Injection { holds: vec![Hold { start_ns: 5.0, duration_ns: 10.0 }, Hold { start_ns: 12.0, duration_ns: 10.0 }], ..Default::default() };
        let mut schedule = HoldSchedule::new(&listed);
        assert_eq!(schedule.at(0.0), Some((5.0, 22.0)));
        assert_eq!(schedule.at(22.0), None);
    }

    #[test]
    fn errors_fall_at_the_rate_once_per_tlp() {
        let injection = Injection { tlp_errors_per_tb: 1e9, seed: 1, ..Default::default() };
        let mut schedule = ErrorSchedule::new(&injection);
        // 1000 B per error on average, TLPs of 100 B: about 1 in 10.5 TLPs (e^(−0.1) of them clean).
        let hits = (0..100_000).filter(|_| schedule.hits(Direction::Upstream, 100)).count();
        assert!((9_000..10_000).contains(&hits), "{hits}");
        assert!(!ErrorSchedule::new(&Injection::default()).hits(Direction::Upstream, u64::MAX / 2));
    }
}
