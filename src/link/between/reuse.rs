//! Reusing simulated credit holds: a hold's outcome measured on the simulated link, applied to
//! a later hold of the same steady state without simulating it again.
//!
//! A hold the credits in hand do not cover starves the device from when they run out until the
//! release's UpdateFC arrives: with the link in the same state at the hold's start, a longer
//! hold only moves the release later, so the stall grows by the difference and so does the time
//! each DMA channel loses. The fast-forward checks that relation on the link itself rather
//! than assuming it: every sampled hold is simulated twice from the same state (a clone of the
//! link taken before its lead), once as drawn and once half as long again, and the two runs'
//! stalls and lost times must differ by the difference of the hold lengths (within the
//! release's lag, plus a TLP of each channel for the lost time). One failed check and every
//! hold of that steady state is simulated, as without reuse. Every hold simulated later is a
//! check too: one reuse would have answered that did not starve exactly once (with reads and
//! writes both, a read request let through mid-hold ends a starvation and a next write starts
//! another) refuses reuse from then on.
//!
//! A sample is a hold's "cover" (hold length less stall: what the credits in hand absorbed at
//! that point of the UpdateFC loop) and each channel's time lost beyond the stall. A later hold
//! reuses one sample, drawn at random (the state at a hold's start is where in the loop it
//! falls, random in the full run too), and only where no sampled cover could change what the
//! counters see: it starves once whichever sample it meets, its stall stays clear of the
//! starvation threshold, and it is not among the longest holds the run may draw (those are
//! simulated, so the longest stall is always a simulated one).

use super::Span;
use crate::link::inject::Starvation;
use crate::link::packet::Direction;
use crate::link::sim::LinkSim;

/// Samples a steady state needs before its holds are reused.
const MIN_SAMPLES: usize = 3;
/// Samples kept (more phases of the UpdateFC loop; each costs two simulated holds).
const MAX_SAMPLES: usize = 8;
/// Holds watched at most for samples (a hold that did not starve exactly once, or met another
/// event, gives none).
const WATCH_AT_MOST: usize = 4 * MAX_SAMPLES;
/// The check's second run lengthens the hold by this share.
const LONGER_SHARE: f64 = 0.5;

/// One simulated hold's outcome, as a relation of its length.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Hold length less the stall, ns.
    cover_ns: f64,
    /// Time each channel lost beyond the stall, ns.
    extra_ns: [f64; 2],
}

/// What a hold cost, measured from a moment before its lead to one after its recovery.
#[derive(Debug, Clone, Copy)]
struct Cost {
    stall_ns: f64,
    lost_ns: [f64; 2],
}

/// A hold about to be simulated: the link's state before its lead.
pub(super) struct Pending {
    hold_ns: (f64, f64),
    from: Mark,
    /// A clone of the link here, to run the check's longer hold on.
    clone: Option<Box<LinkSim>>,
}

#[derive(Debug, Clone, Copy)]
struct Mark {
    ticks: u64,
    issued: [u64; 2],
    starvation: Starvation,
    replays: [u64; 2],
}

impl Mark {
    fn of(sim: &LinkSim) -> Mark {
        Mark {
            ticks: sim.now_ticks(),
            issued: sim.dma.as_ref().map_or([0; 2], |dma| dma.issued_bytes()),
            starvation: sim.outcome.starvation[Direction::Upstream.index()],
            replays: sim.outcome.replay.map(|r| r.replays),
        }
    }

    /// The cost of the one hold between `self` and `to`; None if it was not exactly one
    /// starvation and nothing else injected.
    fn cost_to(&self, to: &Mark, sim: &LinkSim, span: &Span) -> Option<Cost> {
        let count = to.starvation.count - self.starvation.count;
        if count != 1 || to.replays != self.replays {
            return None;
        }
        let elapsed = (to.ticks - self.ticks) as f64;
        let lost_ticks = [0, 1].map(|c| {
            let rate = span.bytes(c) as f64 / span.ticks().max(1) as f64;
            if rate > 0.0 { elapsed - (to.issued[c] - self.issued[c]) as f64 / rate } else { 0.0 }
        });
        let ns = |ticks: f64| sim.phy().ns(1) * ticks;
        Some(Cost { stall_ns: to.starvation.total_ns - self.starvation.total_ns, lost_ns: lost_ticks.map(ns) })
    }
}

/// What decides whether a hold's outcome may be reused, ns: the starvation threshold, the
/// longest hold the run may draw, the release's lag (how far the relation may be off).
pub(super) struct Limits {
    pub(super) threshold_ns: f64,
    pub(super) max_hold_ns: f64,
    pub(super) lag_ns: f64,
}

/// A reused hold: its stall and the time each channel loses, ns.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reused {
    pub(super) stall_ns: f64,
    pub(super) lost_ns: [f64; 2],
}

/// The samples of one steady state.
#[derive(Default)]
pub(super) struct HoldReuse {
    samples: Vec<Sample>,
    /// A check failed: this steady state's holds are all simulated.
    refused: bool,
    /// Holds watched so far.
    watched: usize,
    /// The longest hold simulated so far (ns).
    longest_simulated_ns: f64,
}

impl Pending {
    pub(super) fn hold_end_ns(&self) -> f64 {
        self.hold_ns.1
    }
}

impl HoldReuse {
    /// Whether a hold starting now should be watched to become a sample.
    pub(super) fn wants_samples(&self) -> bool {
        !self.refused && self.samples.len() < MAX_SAMPLES && self.watched < WATCH_AT_MOST
    }

    /// Whether a simulated hold is still worth watching: for samples, or as a check.
    pub(super) fn watching(&self) -> bool {
        !self.refused
    }

    /// Watch the hold `hold_ns` that the link is about to simulate (its lead starts now).
    /// A hold of `hold_ns` is simulated.
    pub(super) fn simulated(&mut self, hold_ns: f64) {
        self.longest_simulated_ns = self.longest_simulated_ns.max(hold_ns);
    }

    pub(super) fn watch(&mut self, sim: &LinkSim, hold_ns: (f64, f64)) -> Pending {
        self.watched += self.wants_samples() as usize;
        Pending { hold_ns, from: Mark::of(sim), clone: self.wants_samples().then(|| Box::new(sim.clone())) }
    }

    /// The watched hold is over and the link is back in its steady state: measure it, check the
    /// relation on the clone with a longer hold, and keep it as a sample.
    ///
    /// Every simulated hold is also a check: one that did not starve exactly once although
    /// reuse would have answered it (it counts one) refuses reuse for this steady state.
    pub(super) fn finish(&mut self, pending: Pending, sim: &LinkSim, span: &Span, steady: &dyn Fn(&mut LinkSim) -> bool, limits: &Limits) {
        let (start_ns, end_ns) = pending.hold_ns;
        let hold_ns = end_ns - start_ns;
        let Some(cost) = pending.from.cost_to(&Mark::of(sim), sim, span) else {
            let other_event = Mark::of(sim).replays != pending.from.replays;
            if !other_event && self.answers(hold_ns, limits) {
                self.refused = true;
            }
            return;
        };
        let Some(mut clone) = pending.clone else { return };
        let longer_ns = hold_ns * (1.0 + LONGER_SHARE);
        if !clone.set_hold_end(start_ns, start_ns + longer_ns) {
            return;
        }
        let end_ticks = clone.ticks_of(start_ns + longer_ns);
        // The clone runs until its hold is over and it is back in its steady state, as the
        // fast-forward would see it; a run that does not get there refuses nothing (no sample).
        let limit = sim.now_ticks().saturating_sub(pending.from.ticks) * 4 + end_ticks;
        loop {
            if !clone.step() || clone.now_ticks() > limit {
                return;
            }
            if clone.now_ticks() >= end_ticks && clone.undisturbed() && steady(&mut clone) {
                break;
            }
        }
        let Some(longer) = pending.from.cost_to(&Mark::of(&clone), &clone, span) else {
            self.refused = true;
            return;
        };
        let grew_ns = longer_ns - hold_ns;
        let lag_ns = sim.phy().ns(sim.release_lag_ticks());
        let stall_agrees = ((longer.stall_ns - cost.stall_ns) - grew_ns).abs() <= lag_ns;
        let lost_agrees = (0..2).all(|c| {
            let rate = span.bytes(c) as f64 / span.ticks().max(1) as f64;
            if rate == 0.0 {
                return true;
            }
            let chunk_ns = sim.phy().ns(1) * chunk_bytes(sim, c) as f64 / rate;
            ((longer.lost_ns[c] - cost.lost_ns[c]) - grew_ns).abs() <= lag_ns + 2.0 * chunk_ns
        });
        if !(stall_agrees && lost_agrees) {
            self.refused = true;
            return;
        }
        self.samples.push(Sample { cover_ns: hold_ns - cost.stall_ns, extra_ns: cost.lost_ns.map(|lost| lost - cost.stall_ns) });
    }

    /// Whether the samples settle everything the counters see of a hold of `hold_ns`.
    fn answers(&self, hold_ns: f64, limits: &Limits) -> bool {
        if self.refused || self.samples.len() < MIN_SAMPLES {
            return false;
        }
        let (least, most) = self.samples.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, m), s| (l.min(s.cover_ns), m.max(s.cover_ns)));
        // The covers sampled are some of the loop's points; a hold meeting another is off by up
        // to their spread, plus the release's lag.
        let margin = (most - least) + limits.lag_ns;
        let (low, high) = (hold_ns - most - margin, hold_ns - least + margin);
        let starves = low > 0.0;
        let clear_of_threshold = high < limits.threshold_ns || low > limits.threshold_ns;
        // Its stall must stay below that of a hold already simulated (whichever covers they
        // met), so that the longest stall is a simulated one.
        let not_longest = hold_ns + 2.0 * margin < self.longest_simulated_ns.min(limits.max_hold_ns);
        starves && clear_of_threshold && not_longest
    }

    /// The outcome of a hold of `hold_ns` from a sample drawn at random, if the samples settle
    /// everything the counters see of it ([`HoldReuse::answers`]).
    pub(super) fn reuse(&self, sim: &mut LinkSim, hold_ns: f64, limits: &Limits) -> Option<Reused> {
        if !self.answers(hold_ns, limits) {
            return None;
        }
        let sample = self.samples[((sim.jitter() * self.samples.len() as f64) as usize).min(self.samples.len() - 1)];
        let stall_ns = hold_ns - sample.cover_ns;
        Some(Reused { stall_ns, lost_ns: sample.extra_ns.map(|extra| stall_ns + extra) })
    }
}

fn chunk_bytes(sim: &LinkSim, channel: usize) -> u64 {
    sim.dma.as_ref().and_then(|dma| dma.channels[channel].as_ref()).map_or(0, |ch| ch.chunk_bytes)
}
