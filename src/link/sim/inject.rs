//! The event loop's side of injected disturbances ([`crate::link::inject`]): the host's
//! receiver withholding UpdateFCs during a credit hold, TLPs corrupted by injected errors, and
//! the transmitters' credit starvation measured as it happens.

use super::{Event, LinkSim};
#[allow(unused_imports)] // named in the documentation
use crate::link::inject::InjectState;
use crate::link::packet::{Direction, FcClass, Tlp, TlpKind};
use crate::link::record::Crossing;

/// After an injected error, the fast-forward waits this many REPLAY_TIMER periods (Nak, replay
/// and the Acks that end it) before it skips again.
const SETTLE_REPLAY_TIMEOUTS: u64 = 4;
/// After a starvation, the transmitter holds all its credits again and sends them off in a
/// burst: the fast-forward waits until the link's state is back in its steady range (checked
/// against the steady state's sample), but no longer than this many REPLAY_TIMER periods (a few
/// UpdateFC loops). Read requests a hold held back settle from when they are served (until
/// 2026-11-27 a starvation waited two completion latencies more with reads; measured against
/// full simulation, leaving that out moved no result beyond 0.03 % and halved the work per
/// hold of gen5x16's both-ways demo stream).
const SETTLE_AFTER_STARVING_REPLAY_TIMEOUTS: u64 = 1;

impl LinkSim {
    /// The receiver of `direction` may not send UpdateFCs now: the host's receiver is in a
    /// credit hold. Its release (an FcTimer event at the hold's end) is queued.
    pub(super) fn credits_held(&mut self, direction: Direction) -> bool {
        let Some(end) = self.hold_in_progress(direction) else { return false };
        if self.inject.release_at != Some(end) {
            self.inject.release_at = Some(end);
            self.schedule(end, Event::FcTimer(direction));
        }
        self.inject.settle_until = self.inject.settle_until.max(end);
        self.inject.disturbed = true;
        true
    }

    /// When the receiver of `direction` starts serving a read request that arrives now: at once,
    /// or at the end of the credit hold in progress. A hold is the host's receiver consuming
    /// nothing for a while (its memory busy elsewhere, say): it returns no credits
    /// ([`LinkSim::credits_held`]) and starts no completion; requests it started before complete
    /// as usual. The completions held back come out as a burst after it: the fast-forward waits
    /// until they are served, then for the link to be back in its steady state, as after a
    /// starvation.
    pub(super) fn served_from(&mut self, direction: Direction) -> u64 {
        let Some(end) = self.hold_in_progress(direction) else { return self.now };
        // Until the last request held back is served, the link is not in its steady state
        // whatever its counters say (all tags may be out in both).
        self.inject.disturbed = true;
        let served_ticks = end + self.ticks.completion_latency[direction.index()];
        self.inject.settle_until = self.inject.settle_until.max(served_ticks);
        let settle = SETTLE_AFTER_STARVING_REPLAY_TIMEOUTS * self.ticks.replay_timeout;
        self.inject.recover_until = Some(self.inject.recover_until.unwrap_or(0).max(served_ticks + settle));
        end
    }

    /// The end (ticks) of the hold the receiver of `direction` is in now: only the host's
    /// receiver (upstream) holds.
    fn hold_in_progress(&mut self, direction: Direction) -> Option<u64> {
        if direction != Direction::Upstream {
            return None;
        }
        let (start, end) = self.hold_ticks()?;
        (start <= self.now && self.now < end).then_some(end)
    }

    /// The hold in progress or the next one, [start, end) in ticks.
    fn hold_ticks(&mut self) -> Option<(u64, u64)> {
        let now_ns = self.phy.ns(self.now);
        if let Some((end_ns, start, end)) = self.inject.hold_ticks {
            // `at` would drop nothing before this end: the same hold.
            if now_ns < end_ns {
                return Some((start, end));
            }
        }
        let (start_ns, end_ns) = self.inject.holds.at(now_ns)?;
        let start = self.phy.ticks(start_ns);
        let end = self.phy.ticks(end_ns).max(start + 1);
        self.inject.hold_ticks = Some((end_ns, start, end));
        Some((start, end))
    }

    /// The transmitter of `direction` has a TLP ready that its credits refuse.
    pub(super) fn starving(&mut self, direction: Direction) {
        self.inject.starving_since[direction.index()].get_or_insert(self.now);
    }

    /// The transmitter of `direction` sent a new TLP: a starvation in progress ends; an
    /// injected error may fall into it (the TLP just put on the lanes).
    pub(super) fn sent_new(&mut self, direction: Direction, tlp: &Tlp) {
        let i = direction.index();
        if let Some(since) = self.inject.starving_since[i].take() {
            let ns = self.phy.ns(self.now - since);
            self.outcome.starvation[i].add(ns, self.config.inject.threshold_ns);
            // Read requests a hold caught have their own settling ([`LinkSim::served_from`]).
            let settle = SETTLE_AFTER_STARVING_REPLAY_TIMEOUTS * self.ticks.replay_timeout;
            let until = self.inject.recover_until.unwrap_or(0).max(self.now + settle);
            self.inject.recover_until = Some(until);
        }
        if !self.inject.error_rate || tlp.kind == TlpKind::MemRead || !self.inject.errors.hits(direction, tlp.len_bytes) {
            return;
        }
        self.outcome.injected_errors[i] += 1;
        self.inject.disturbed = true;
        let settle = SETTLE_REPLAY_TIMEOUTS * self.ticks.replay_timeout;
        self.inject.settle_until = self.inject.settle_until.max(self.now + settle);
        if let Some(entry) = self.on_lanes[i].back_mut() {
            entry.1 = true;
        }
        if self.config.record {
            let start_ns = self.outcome.stats[i].last_tlp_end_ns - self.phy.ns(crate::link::transaction::wire_bytes(&self.config, &self.phy, tlp));
            let end_ns = self.outcome.stats[i].last_tlp_end_ns;
            self.outcome.corrupted.push(Crossing { direction, start_ns, end_ns, packet: crate::link::Packet::Tlp(*tlp) });
        }
    }

    /// A DMA channel has issued everything but its payload is still on its way (writes on the
    /// lanes, reads awaiting completions): a stretch left out now would delay that arrival by
    /// the stretch, the channel's end with it.
    pub(in crate::link) fn draining(&self) -> bool {
        let Some(dma) = self.dma.as_ref() else { return false };
        let done = |c: usize| dma.channels[c].as_ref().is_some_and(|ch| ch.left_bytes() == 0);
        let writes_on_lanes = || self.on_lanes[Direction::Upstream.index()].iter().any(|(packet, _)| matches!(packet, crate::link::Packet::Tlp(tlp) if tlp.kind == TlpKind::MemWrite));
        (done(0) && writes_on_lanes()) || (done(1) && dma.reads_outstanding())
    }

    /// Whether an injected event has met the stream ([`InjectState::disturbed`]).
    pub(in crate::link) fn disturbed(&self) -> bool {
        self.inject.disturbed
    }

    /// A copy of this link with nothing injected from now on and each DMA channel given
    /// `more_bytes` to move, recording nothing: where it settles is this run's own steady state.
    pub(in crate::link) fn quiet_copy(&self, more_bytes: [u64; 2]) -> LinkSim {
        let mut sim = self.clone();
        sim.config.inject = crate::link::Injection::default();
        sim.config.record = false;
        sim.inject = InjectState::new(&sim.config.inject);
        if let Some(dma) = sim.dma.as_mut() {
            dma.extend(more_bytes);
        }
        sim
    }

    /// Nothing injected is in progress: no hold, no starvation, no recovery from an error, no
    /// replay. The fast-forward may leave out time from here.
    pub(in crate::link) fn undisturbed(&mut self) -> bool {
        let holding = self.hold_in_progress(Direction::Upstream).is_some();
        !holding
            && self.now >= self.inject.settle_until
            && self.inject.starving_since.iter().all(Option::is_none)
            && self.tx.iter().all(|tx| tx.retry.to_replay == 0 && tx.retry.replay_num == 0)
    }

    /// A starvation ended a short while ago: the fast-forward may skip only once the link's
    /// state is back in its steady range ([`LinkSim::recovered`]), or from the deadline on.
    pub(in crate::link) fn recovering(&mut self) -> bool {
        match self.inject.recover_until {
            Some(until) if self.now < until => true,
            _ => {
                self.inject.recover_until = None;
                false
            }
        }
    }

    /// The fast-forward found the link's state back in its steady range after a starvation.
    pub(in crate::link) fn recovered(&mut self) {
        self.inject.recover_until = None;
    }

    /// The first credit hold in progress at `from_ns` or later that lasts longer than
    /// `covered_ticks` (those the device's credits in hand certainly cover) and starts before
    /// `until_ticks`, as [start, end) in ns.
    pub(in crate::link) fn next_uncovered_hold(&mut self, covered_ticks: u64, from_ns: f64, until_ticks: u64) -> Option<(f64, f64)> {
        // A hold's length in whole ticks may round one tick above its length in ns.
        let covered_ns = self.phy.ns(covered_ticks.saturating_sub(1));
        self.inject.holds.first_longer_than(from_ns, covered_ns, self.phy.ns(until_ticks))
    }

    /// Make the hold starting at `start_ns`, if it is the one in progress or next, end at
    /// `end_ns` instead (on a clone of the link, to see what the same state makes of a hold of
    /// another length); false if it cannot (another hold first, or the next one too near).
    pub(in crate::link) fn set_hold_end(&mut self, start_ns: f64, end_ns: f64) -> bool {
        let now_ns = self.phy.ns(self.now);
        self.inject.hold_ticks = None;
        self.inject.holds.set_end(now_ns, start_ns, end_ns)
    }

    /// Ticks of `ns` (rounded as the simulator rounds a time).
    pub(in crate::link) fn ticks_of(&self, ns: f64) -> u64 {
        self.phy.ticks(ns)
    }

    /// The host's credit holds as configured: Poisson (not listed) and [min, max] in ns.
    pub(in crate::link) fn hold_lengths_ns(&self) -> Option<(f64, f64)> {
        let inject = &self.config.inject;
        (inject.holds.is_empty() && inject.holds_per_s > 0.0).then_some((inject.hold_min_ns, inject.hold_max_ns))
    }

    /// Poisson credit holds per ns (0 with listed holds or none).
    pub(in crate::link) fn holds_per_ns(&self) -> f64 {
        self.hold_lengths_ns().map_or(0.0, |_| self.config.inject.holds_per_s / 1e9)
    }

    /// Give this link (a clone that simulates a segment of its own) a generator of random leads
    /// of its own, forked by `salt` (where the segment starts).
    pub(in crate::link) fn fork_jitter(&mut self, salt: u64) {
        self.inject.fork_jitter(salt);
    }

    /// Starvations longer than this are counted over the threshold, ns.
    pub(in crate::link) fn threshold_ns(&self) -> f64 {
        self.config.inject.threshold_ns
    }

    /// A uniform draw in [0, 1) from the injection's own generator.
    pub(in crate::link) fn jitter(&mut self) -> f64 {
        self.inject.jitter()
    }

    /// How much simulated time the fast-forward leaves before the next hold: half a loop to one
    /// and a half, at random (a loop: half a REPLAY_TIMER period, more than an UpdateFC loop,
    /// and with reads the completion latency), so that the hold meets the
    /// UpdateFC loop at a random point as in the full run (see [`InjectState::jitter`]).
    pub(in crate::link) fn lead_ticks(&mut self) -> u64 {
        let mut loop_ticks = 0.5 * self.ticks.replay_timeout as f64;
        if self.dma.as_ref().is_some_and(|dma| dma.channels[1].is_some()) {
            // Reads: the requests' round trip is a loop too.
            loop_ticks += self.phy.ticks(self.config.host_completion_latency_ns) as f64;
        }
        (0.5 * loop_ticks + self.inject.jitter() * loop_ticks) as u64
    }

    /// The device's transmitter's view of the host's credits for posted and non-posted TLPs:
    /// (limit, consumed) as (header, data) each, None for an infinite class.
    pub(in crate::link) fn upstream_credits(&self) -> [crate::link::flow::ClassState; 2] {
        let credits = &self.tx[Direction::Upstream.index()].credits;
        [FcClass::Posted, FcClass::NonPosted].map(|class| credits.state(class))
    }

    /// Ticks from a hold's end until the UpdateFC it released has reached the device, at most:
    /// the downstream lanes finishing their packet (the largest TLP, a SKP ordered set, DLLPs
    /// queued before it), then the UpdateFC and the wire.
    pub(in crate::link) fn release_lag_ticks(&self) -> u64 {
        let skp = self.phy.skp_span(0);
        let dllp = self.phy.dllp_bytes();
        2 * self.config.largest_replay_entry_bytes() + (skp.1 - skp.0) + 4 * dllp + self.ticks.wire + self.ticks.lane_align * 4
    }

    /// Payload bytes `direction` may still carry before the next injected error.
    pub(in crate::link) fn bytes_to_next_error(&self, direction: Direction) -> f64 {
        self.inject.errors.bytes_to_next(direction)
    }

    /// The fast-forward left out `bytes` of payload in `direction`.
    pub(in crate::link) fn skip_payload(&mut self, direction: Direction, bytes: u64) {
        self.inject.errors.moved_bytes[direction.index()] += bytes;
    }
}
