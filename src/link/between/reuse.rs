//! Reusing simulated credit holds: a hold's outcome measured on the simulated link, applied to
//! a later hold of the same steady state without simulating it again.
//!
//! A hold the credits in hand do not cover starves the device from when they run out until the
//! release's UpdateFC arrives: with the link in the same state at the hold's start, a longer
//! hold only moves the release later, so the stall grows by the difference and so does the time
//! each DMA channel loses. The fast-forward checks that relation on the link itself rather
//! than assuming it: every sampled hold is run from the same state (a clone of the link taken
//! before its lead) as drawn, half as long again and not at all, and the two held runs' stalls
//! and lost times must differ by the difference of the hold lengths (within the release's lag,
//! plus two TLPs of each channel for the lost time). A channel's lost time is how much later
//! it delivers the same payload byte than the run without the hold. One failed check and every
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
//! starvation threshold, and it stays below the longest stall a simulated hold gave (so the
//! longest stall is always a simulated one).
//!
//! Reads give no samples: a hold does not starve them (the host serves none of the requests
//! that reach it during the hold, so the device waits with its tags out), and a sample needs
//! exactly one starvation. Only writes are reused.

use super::{Span, PAYLOAD};
use crate::link::inject::Starvation;
use crate::link::packet::Direction;
use crate::link::sim::LinkSim;

/// Samples a steady state needs before its holds are reused.
const MIN_SAMPLES: usize = 6;
/// Samples kept (more phases of the UpdateFC loop and of the reads' round of tags; each costs
/// two simulated holds and a run without the hold).
const MAX_SAMPLES: usize = 16;
/// Holds watched at most for samples (a hold that did not starve exactly once, or met another
/// event, gives none).
const WATCH_AT_MOST: usize = 4 * MAX_SAMPLES;
/// The check's second run lengthens the hold by this share.
const LONGER_SHARE: f64 = 0.5;
/// Chunks of each channel (writes, reads) beyond where the runs compared have got to, at which
/// their times are compared. A hold's effect on reads rides the round of tags for several
/// rounds (gen5x16's reads measured 0 ns lost two rounds of 32 tags after a hold, 24 ns eight
/// rounds after, and the relation to the hold's length holds only there); writes settle at once.
const COMPARE_AFTER_CHUNKS: [u64; 2] = [32, 256];

/// One simulated hold's outcome, as a relation of its length.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Hold length less the stall, ns.
    cover_ns: f64,
    /// Time each channel lost beyond the stall, ns (negative: the burst after the release made
    /// up for part of it).
    extra_ns: [f64; 2],
}

/// A hold about to be simulated: the link's state before its lead.
#[derive(Clone)]
pub(super) struct Pending {
    hold_ns: (f64, f64),
    from: Mark,
    /// A clone of the link here, to run the check's longer hold and the run without a hold on.
    clone: Option<Box<LinkSim>>,
}

#[derive(Debug, Clone, Copy)]
struct Mark {
    starvation: Starvation,
    replays: [u64; 2],
}

impl Mark {
    fn of(sim: &LinkSim) -> Mark {
        Mark { starvation: sim.outcome.starvation[Direction::Upstream.index()], replays: sim.outcome.replay.map(|r| r.replays) }
    }

    /// The stall of the one hold between `self` and `to`, ns; None if it was not exactly one
    /// starvation and nothing else injected.
    fn stall_to(&self, to: &Mark) -> Option<f64> {
        let count = to.starvation.count - self.starvation.count;
        (count == 1 && to.replays == self.replays).then(|| to.starvation.total_ns - self.starvation.total_ns)
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
#[derive(Default, Clone)]
pub(super) struct HoldReuse {
    samples: Vec<Sample>,
    /// A check failed: this steady state's holds are all simulated.
    refused: bool,
    /// Holds watched so far.
    watched: usize,
    /// The longest stall a simulated hold of this steady state gave (ns).
    longest_simulated_ns: f64,
}

impl Pending {
    pub(super) fn hold_end_ns(&self) -> f64 {
        self.hold_ns.1
    }
}

impl HoldReuse {
    /// Whether a hold starting now should be watched to become a sample (while it does, the
    /// stream is not split: both segments start from the same samples, as one run would go on).
    pub(super) fn wants_samples(&self) -> bool {
        !self.refused && self.samples.len() < MAX_SAMPLES && self.watched < WATCH_AT_MOST
    }

    /// Whether a check failed: this steady state's holds are all simulated.
    pub(super) fn refused(&self) -> bool {
        self.refused
    }

    /// Whether a simulated hold is still worth watching: for samples, or as a check.
    pub(super) fn watching(&self) -> bool {
        !self.refused
    }

    /// Watch the hold `hold_ns` that the link is about to simulate (its lead starts now).
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
        let Some(stall_ns) = pending.from.stall_to(&Mark::of(sim)) else {
            let other_event = Mark::of(sim).replays != pending.from.replays;
            if !other_event && self.answers(hold_ns, limits) {
                self.refused = true;
            }
            return;
        };
        self.longest_simulated_ns = self.longest_simulated_ns.max(stall_ns);
        let Some(mut longer) = pending.clone else { return };
        // The same state without the hold (one of a tick, which nothing starves on): the
        // reference the time lost is measured against.
        let mut quiet = longer.clone();
        let longer_ns = hold_ns * (1.0 + LONGER_SHARE);
        if !quiet.set_hold_end(start_ns, start_ns) || !longer.set_hold_end(start_ns, start_ns + longer_ns) {
            return;
        }
        let end_ticks = longer.ticks_of(start_ns + longer_ns);
        // The longer run goes on until its hold is over and it is back in its steady state, as
        // the fast-forward would see it; a run that does not get there refuses nothing (no sample).
        let limit = sim.now_ticks().saturating_sub(quiet.now_ticks()) * 4 + end_ticks;
        loop {
            if !longer.step() || longer.now_ticks() > limit {
                return;
            }
            if longer.now_ticks() >= end_ticks && longer.undisturbed() && steady(&mut longer) {
                break;
            }
        }
        let Some(longer_stall_ns) = pending.from.stall_to(&Mark::of(&longer)) else {
            self.refused = true;
            return;
        };
        let mut held = Box::new(sim.clone());
        let Some([lost, longer_lost]) = lost_ns(&mut quiet, [&mut held, &mut longer], span, &pending.from) else { return };
        let grew_ns = longer_ns - hold_ns;
        let stall_agrees = ((longer_stall_ns - stall_ns) - grew_ns).abs() <= limits.lag_ns;
        let lost_agrees = (0..2).all(|c| {
            let rate = span.bytes(c) as f64 / span.ticks().max(1) as f64;
            if rate == 0.0 {
                return true;
            }
            let chunk_ns = sim.phy().ns(1) * chunk_bytes(sim, c) as f64 / rate;
            ((longer_lost[c] - lost[c]) - grew_ns).abs() <= limits.lag_ns + 2.0 * chunk_ns
        });
        if !(stall_agrees && lost_agrees) {
            self.refused = true;
            return;
        }
        self.samples.push(Sample { cover_ns: hold_ns - stall_ns, extra_ns: lost.map(|lost| lost - stall_ns) });
    }

    /// Whether the samples settle everything the counters see of a hold of `hold_ns`.
    fn answers(&self, hold_ns: f64, limits: &Limits) -> bool {
        if self.refused || self.samples.len() < MIN_SAMPLES || limits.max_hold_ns <= 0.0 {
            return false;
        }
        let mut covers: Vec<f64> = self.samples.iter().map(|s| s.cover_ns).collect();
        covers.sort_by(f64::total_cmp);
        let (least, most) = (covers[0], covers[covers.len() - 1]);
        // The covers sampled are some of the loop's points, drawn at random: one not sampled may
        // lie beyond the extremes by about the widest gap between neighbours; plus the release's lag.
        let gap = covers.windows(2).map(|pair| pair[1] - pair[0]).fold(0.0, f64::max);
        let margin = gap + limits.lag_ns;
        let (low, high) = (hold_ns - most - margin, hold_ns - least + margin);
        let starves = low > 0.0;
        let clear_of_threshold = high < limits.threshold_ns || low > limits.threshold_ns;
        // Its stall must stay below one a simulated hold gave, so that the longest stall is
        // always a simulated one.
        let not_longest = high < self.longest_simulated_ns;
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

/// The time each channel lost in `held` and in `longer` against `quiet` (the same state
/// without the hold), ns: when each run's channel has delivered the same payload, a little
/// beyond where the furthest run has got. Measured on the delivered payload, not on the bytes
/// handed out at one moment: reads hand out whole rounds of tags at once, so a moment's count
/// strays by up to a round (gen5x16: 600 ns) with where in the round it falls. None if a run
/// ends first or meets another event on the way (`from`: the mark before the hold's lead).
fn lost_ns(quiet: &mut LinkSim, runs: [&mut LinkSim; 2], span: &Span, from: &Mark) -> Option<[[f64; 2]; 2]> {
    let payload = |sim: &LinkSim| PAYLOAD.map(|d| sim.outcome.stats[d.index()].payload_bytes);
    let furthest = runs.iter().map(|sim| payload(sim)).fold(payload(quiet), |a, b| [a[0].max(b[0]), a[1].max(b[1])]);
    let moving = [0, 1].map(|c| span.bytes(c) > 0);
    let target = [0, 1].map(|c| furthest[c] + COMPARE_AFTER_CHUNKS[c] * chunk_bytes(quiet, c));
    // The quiet run starves nothing, the held ones once: more is another hold (or error) met.
    let alone = |sim: &LinkSim, stalls: u64| {
        let to = Mark::of(sim);
        to.starvation.count - from.starvation.count == stalls && to.replays == from.replays
    };
    let reach = |sim: &mut LinkSim| -> Option<[u64; 2]> {
        let mut at = [None; 2];
        loop {
            let delivered = payload(sim);
            for c in 0..2 {
                if at[c].is_none() && (!moving[c] || delivered[c] >= target[c]) {
                    at[c] = Some(sim.now_ticks());
                }
            }
            if let [Some(a), Some(b)] = at {
                return Some([a, b]);
            }
            if !sim.step() {
                return None;
            }
        }
    };
    let reference = reach(quiet).filter(|_| alone(quiet, 0))?;
    let tick_ns = quiet.phy().ns(1);
    let mut lost = [[0.0; 2]; 2];
    for (run, sim) in runs.into_iter().enumerate() {
        let at = reach(sim).filter(|_| alone(sim, 1))?;
        for c in (0..2).filter(|&c| moving[c]) {
            lost[run][c] = (at[c] as f64 - reference[c] as f64) * tick_ns;
        }
    }
    Some(lost)
}

fn chunk_bytes(sim: &LinkSim, channel: usize) -> u64 {
    sim.dma.as_ref().and_then(|dma| dma.channels[channel].as_ref()).map_or(0, |ch| ch.chunk_bytes)
}
