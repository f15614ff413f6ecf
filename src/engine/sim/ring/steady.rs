//! The ring's steady-state fast-forward: once its schedule repeats, whole periods of messages
//! are the last period's, shifted.
//!
//! Before each message the device's loop takes the key of the whole state (the link's, from
//! [`LinkSim::periodic_key`], and the ring's: its pending times relative to now, its counts
//! relative to each other) and looks its 128-bit hash up among the recent ones. A hash seen
//! before names a candidate period; one more period is simulated in full and its end's key
//! compared, value by value, with its start's. Equal keys `T` ns and `P` numbered messages
//! apart mean the simulation from here is the one from there, shifted: the next periods'
//! events are the last period's with sequence numbers `P` on and times `T` later.
//! So they are handed to the sink without stepping the link, and the link's and the ring's
//! state are moved on by as many periods (the counts by what one period added). The stream's
//! end is never extrapolated: the last one or two periods before the stop are simulated in full,
//! and so is the start-up transient before the first repeat. What the key cannot follow turns
//! the fast-forward off and leaves the stream simulated in full: a host reaction with jitter (a
//! random draw per message), a link with bit errors, injected events or flits, a recorded link.
//! An injected host stall every N messages is part of the state (the message number modulo N),
//! so the period then spans whole stall cycles; a lossy ring's drops are the period's drops.
//!
//! The ring's times are f64 ns: they enter the key rounded to 1 ps, and shifted times may
//! differ from the full simulation's by float rounding (far below 0.1 %).

use std::collections::HashMap;

use super::{RingBehaviour, Run, REACTIONS_KEPT};
use crate::engine::ring::{MessageEvent, RingPlan, StreamStop};
use crate::engine::EngineError;
use crate::link::sim::LinkCounts;
use crate::link::{transaction, Direction as LinkDirection};

/// Keys remembered while searching (one per message, 16 bytes of hash each); with more, the
/// search forgets them and starts again, so periods up to half of this are found.
const REMEMBERED: usize = 1 << 18;
/// Fast-forwarded events between two looks at the cancel flag.
const CANCEL_EVERY: u64 = 4096;

/// The loop's own variables, part of the state.
#[derive(Debug, Clone, Copy)]
pub(super) struct LoopState {
    pub sequence: u64,
    pub ready_ns: f64,
    pub last_done_ns: f64,
    pub period_ns: f64,
}

/// What is counted at one checkpoint (a period's worth is the difference of two).
#[derive(Debug, Clone)]
struct Checkpoint {
    at: LoopState,
    now_ticks: u64,
    now_ns: f64,
    committed: u64,
    sent_tlps: u64,
    doorbells_sent: u64,
    doorbells_arrived: u64,
    dropped: u64,
    full_ns: f64,
    link: LinkCounts,
}

/// A candidate period: the state at its start, simulated in full until it should repeat.
struct Candidate {
    key: Vec<u64>,
    from: Checkpoint,
    /// Loop checks (messages numbered) until the state should be `key` again.
    left: u64,
    /// The loop checks' latest `ready_ns`, relative to the period's start.
    latest_ready_ns: f64,
    events: Vec<MessageEvent>,
}

/// The search for a repeating state, and what was left out.
pub(super) struct FastForward {
    searching: bool,
    /// Whether every host buffer's data TLPs are cut alike (else the slot is part of the key).
    uniform_split: bool,
    /// 128-bit hash of each key seen → the loop check that had it.
    seen: HashMap<u128, u64>,
    checks: u64,
    candidate: Option<Candidate>,
    /// Messages handed to the sink without simulating them.
    pub fast_forwarded: u64,
}

impl FastForward {
    /// Off when asked, and when the host's reaction has jitter: every message draws a random
    /// number, so no state repeats.
    pub fn new(plan: &RingPlan, behaviour: &RingBehaviour, mps_bytes: u64) -> Self {
        FastForward {
            searching: behaviour.fast_forward && behaviour.react_jitter_ns == 0.0,
            uniform_split: uniform_split(plan, mps_bytes),
            seen: HashMap::new(),
            checks: 0,
            candidate: None,
            fast_forwarded: 0,
        }
    }

    /// An event the full simulation handed to the sink.
    pub fn note(&mut self, event: &MessageEvent) {
        if let Some(candidate) = self.candidate.as_mut() {
            candidate.events.push(*event);
        }
    }
}

fn hash128(key: &[u64]) -> u128 {
    use std::hash::{Hash, Hasher};
    let half = |salt: u64| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut hasher);
        key.hash(&mut hasher);
        hasher.finish()
    };
    u128::from(half(0x5eed)) << 64 | u128::from(half(0xfeed))
}

/// Whether every slot's data TLPs have the same offsets, lengths and DW alignment.
fn uniform_split(plan: &RingPlan, mps_bytes: u64) -> bool {
    let pieces = |slot: u64| {
        let base = super::DATA_BASE + slot * u64::from(plan.buffer_bytes);
        let mut split = transaction::Splitter::new(base, u64::from(plan.message_bytes), mps_bytes);
        std::iter::from_fn(move || split.next_piece().map(|(addr, len)| (addr - base, len, addr % 4))).collect::<Vec<_>>()
    };
    let first = pieces(0);
    let slots = u64::from(plan.host_buffers).min(1 << 16);
    u64::from(plan.host_buffers) <= slots && (1..slots).all(|slot| pieces(slot) == first)
}

impl Run<'_> {
    /// At the top of the device's loop: take the state's key; once it repeats one seen before,
    /// simulate one more period in full and, if the state at its end is again exactly the one
    /// at its start, hand whole periods to the sink and move the state on. Returns why the
    /// stream stopped, if a signal came during the fast-forward.
    pub(super) fn fast_forward(&mut self, at: &mut LoopState) -> Result<Option<String>, EngineError> {
        if !self.ff.searching {
            return Ok(None);
        }
        if let Some(candidate) = self.ff.candidate.as_mut() {
            candidate.left -= 1;
            candidate.latest_ready_ns = candidate.latest_ready_ns.max(at.ready_ns - candidate.from.now_ns);
            if candidate.left > 0 {
                return Ok(None);
            }
        }
        let mut key = Vec::with_capacity(160);
        if !self.state_key(at, &mut key) {
            self.ff.searching = false;
            self.ff.candidate = None;
            return Ok(None);
        }
        if let Some(candidate) = self.ff.candidate.take() {
            if candidate.key == key {
                // One skip: after it less than two periods are left, simulated in full.
                self.ff.searching = false;
                self.ff.seen = HashMap::new();
                let here = self.checkpoint(at);
                let periods = self.periods_to_skip(&candidate, &here);
                return if periods == 0 { Ok(None) } else { self.skip(at, &candidate, &here, periods) };
            }
            // A hash collision, or the key came back before the period's end: search on.
            self.ff.seen.clear();
        }
        let hash = hash128(&key);
        self.ff.checks += 1;
        match self.ff.seen.insert(hash, self.ff.checks) {
            Some(earlier) => {
                let from = self.checkpoint(at);
                let left = self.ff.checks - earlier;
                self.ff.candidate = Some(Candidate { key, from, left, latest_ready_ns: at.ready_ns - self.sim.now_ns(), events: Vec::new() });
            }
            None if self.ff.seen.len() > REMEMBERED => self.ff.seen.clear(),
            None => {}
        }
        Ok(None)
    }

    fn checkpoint(&self, at: &LoopState) -> Checkpoint {
        Checkpoint {
            at: *at,
            now_ticks: self.sim.now_ticks(),
            now_ns: self.sim.now_ns(),
            committed: self.committed,
            sent_tlps: self.sent_tlps,
            doorbells_sent: self.doorbells_sent,
            doorbells_arrived: self.doorbells_arrived,
            dropped: self.truth.dropped,
            full_ns: self.truth.full_ns,
            link: self.sim.counts(),
        }
    }

    /// The ring's state relative to now, after the link's; false when the link's cannot repeat.
    fn state_key(&self, at: &LoopState, key: &mut Vec<u64>) -> bool {
        if !self.sim.periodic_key(key) {
            return false;
        }
        let now = self.sim.now_ns();
        let ps = |ns: f64| (ns * 1000.0).round() as i64 as u64;
        let t = |ns: f64| ps(ns - now);
        key.extend([t(at.ready_ns), t(at.last_done_ns), ps(at.period_ns), (self.committed == 0) as u64, self.first_start_ns.is_some() as u64]);
        key.extend([self.sent_tlps - self.sim.delivered_tlps(LinkDirection::Upstream), self.committed - self.doorbells_arrived]);
        key.extend([self.doorbells_sent - self.doorbells_arrived, self.doorbells_arrived - self.sim.delivered_tlps(LinkDirection::Downstream)]);
        key.extend([t(self.last_doorbell_arrival_ns), t(self.host.free_ns), t(self.last_release_ns)]);
        key.push(self.in_flight.len() as u64);
        for m in &self.in_flight {
            key.extend([at.sequence - m.sequence, self.sent_tlps - m.last_tlp, u64::from(m.bytes)]);
            key.extend([t(m.device_start_ns), t(m.device_done_ns), ps(m.wait_before_ns), m.wait_cause as u64]);
        }
        key.push(self.doorbells.len() as u64);
        key.extend(self.doorbells.iter().map(|&bell| t(bell)));
        key.push(self.held.len() as u64);
        key.extend(self.held.iter().map(|&release| t(release)));
        key.push(self.full_since_ns.map_or(u64::MAX, t));
        let every = self.behaviour.host_stall_every;
        if every > 0 && self.behaviour.host_stall_ns > 0.0 {
            key.push(at.sequence % every);
        }
        if !self.ff.uniform_split {
            key.push(self.committed % u64::from(self.plan.host_buffers));
        }
        key.push(self.sink_error.is_some() as u64);
        true
    }

    /// Whole periods that can be left out with at least one more simulated in full before the
    /// stop (the loop's every check, message count or time, stays true through all of them).
    fn periods_to_skip(&self, period: &Candidate, to: &Checkpoint) -> u64 {
        let from = &period.from;
        let messages = to.at.sequence - from.at.sequence;
        let span_ns = to.now_ns - from.now_ns;
        if messages == 0 || span_ns <= 0.0 || period.events.is_empty() {
            return 0;
        }
        match self.plan.stop {
            StreamStop::Messages(limit) => (limit.saturating_sub(to.at.sequence) / messages).saturating_sub(1),
            StreamStop::Duration(duration) => {
                let room_ns = duration.as_secs_f64() * 1e9 - (to.now_ns + period.latest_ready_ns);
                if room_ns <= 0.0 { 0 } else { ((room_ns / span_ns).floor() as u64).saturating_sub(1) }
            }
        }
    }

    /// Hand `periods` shifted copies of the period's events to the sink, then move the state
    /// on by as many (fewer if a signal comes: whole periods only).
    fn skip(&mut self, at: &mut LoopState, period: &Candidate, to: &Checkpoint, periods: u64) -> Result<Option<String>, EngineError> {
        let from = &period.from;
        let messages = to.at.sequence - from.at.sequence;
        let span_ns = to.now_ns - from.now_ns;
        let mut done = 0;
        let mut stopped = None;
        let mut since_check = 0u64;
        while done < periods {
            let k = done + 1;
            let shift_ns = span_ns * k as f64;
            for event in &period.events {
                let shifted = MessageEvent {
                    sequence: event.sequence + messages * k,
                    device_start_ns: event.device_start_ns.map(|t| t + shift_ns),
                    device_done_ns: event.device_done_ns.map(|t| t + shift_ns),
                    host_seen_ns: event.host_seen_ns + shift_ns,
                    host_released_ns: event.host_released_ns + shift_ns,
                    ..*event
                };
                self.sink.message(&shifted)?;
            }
            done = k;
            since_check += period.events.len() as u64;
            if since_check >= CANCEL_EVERY {
                since_check = 0;
                if crate::cancel::requested() {
                    stopped = Some("interrupted".to_string());
                    break;
                }
            }
        }
        self.move_on(at, from, to, done, period.events.len() as u64);
        Ok(stopped)
    }

    /// The state `periods` periods later: every time shifted, every count advanced.
    fn move_on(&mut self, at: &mut LoopState, from: &Checkpoint, to: &Checkpoint, periods: u64, events: u64) {
        let shift_ns = (to.now_ns - from.now_ns) * periods as f64;
        let messages = (to.at.sequence - from.at.sequence) * periods;
        let sent = (to.sent_tlps - from.sent_tlps) * periods;
        self.sim.skip_periods(to.now_ticks - from.now_ticks, &to.link.since(&from.link), periods);
        at.sequence += messages;
        at.ready_ns += shift_ns;
        at.last_done_ns += shift_ns;
        self.committed += (to.committed - from.committed) * periods;
        self.sent_tlps += sent;
        self.doorbells_sent += (to.doorbells_sent - from.doorbells_sent) * periods;
        self.doorbells_arrived += (to.doorbells_arrived - from.doorbells_arrived) * periods;
        self.last_doorbell_arrival_ns += shift_ns;
        self.host.free_ns += shift_ns;
        self.last_release_ns += shift_ns;
        for m in &mut self.in_flight {
            m.sequence += messages;
            m.last_tlp += sent;
            m.device_start_ns += shift_ns;
            m.device_done_ns += shift_ns;
        }
        self.doorbells.iter_mut().for_each(|bell| *bell += shift_ns);
        self.held.iter_mut().for_each(|release| *release += shift_ns);
        self.full_since_ns = self.full_since_ns.map(|since| since + shift_ns);
        self.truth.dropped += (to.dropped - from.dropped) * periods;
        self.truth.full_ns += (to.full_ns - from.full_ns) * periods as f64;
        // Without jitter every reaction is `react_ns`.
        let kept = (REACTIONS_KEPT - self.truth.reactions_ns.len().min(REACTIONS_KEPT)).min((events * periods) as usize);
        self.truth.reactions_ns.extend(std::iter::repeat_n(self.behaviour.react_ns, kept));
        self.ff.fast_forwarded += events * periods;
    }
}
