//! Fast-forward between injected events ([`crate::link::inject`]): a long DMA stream with
//! credit holds or TLP errors is simulated packet by packet around every event — the
//! transmitter draining its credits, starving, the UpdateFC that releases it, the Nak and the
//! replay — and only the undisturbed stretches between events are left out.
//!
//! The events are Poisson, so the stretches between them are the stream's steady state. Its
//! rates (bytes per tick of each DMA channel, and the per-direction totals) are measured once
//! per run and channel mix by simulating the same stream without injection until two windows
//! agree ([`super::steady`]). A stretch is left out when nothing injected is in progress: the
//! clock, every queued event and both transmitters' schedules move on by its length, each
//! channel by whole TLPs of its rate (the fraction carried to the next stretch, so nothing
//! drifts). It ends before the next hold the device's credits in hand may not cover (a hold
//! they certainly cover is left out with it: [`covered_ticks`] proves it from the simulated
//! steady state, for writes only, as a hold delays every read request it catches; a hold whose outcome a simulated hold of the same steady state already gave is
//! left out too, its stall counted: [`reuse`]), before the payload reaches the next injected
//! error, and leaves the end of every channel to full simulation. After a starvation it skips
//! again once the link's state is back in its steady range ([`SteadyRange`]). Leaving out
//! steady time while
//! the link is in a steady state only moves later what follows, so each event meets the link as
//! the full run would (`tests/link_inject.rs` compares both).

use super::agents::Workload;
use super::config::SimConfig;
use super::flow::ClassState;
use super::inject::Injection;
use super::packet::Direction;
use super::record::DirectionStats;
use super::sim::LinkSim;
use super::steady::{is_steady, run_for, shift_ends, Span, Steady, SteadyOptions, PAYLOAD};
use crate::error::InvalidInput;
use reuse::{HoldReuse, Limits, Pending, Reused};

mod reuse;

/// Windows the steady-state search tries before it takes the last two as they are.
const MAX_WINDOWS: u64 = 16;
/// Windows the rates are then measured over: "steady" allows a window to differ by one TLP of
/// a channel, which for the few reads among many writes is 0.1 % of their rate.
const RATE_WINDOWS: u64 = 8;
/// A stream shorter than this many windows is simulated whole (no baseline is worth it).
const WHOLE_BELOW_WINDOWS: u64 = 4;
/// Chunks of a channel always left to full simulation at its end (plus its tags' worth).
const END_CHUNKS: u64 = 64;
/// Shortest stretch worth leaving out, in device TLPs of the steady state.
const MIN_SKIP_TLPS: f64 = 32.0;
/// Steps between looks at whether a stretch can be left out. The link steps with fused events
/// ([`LinkSim::fuse_events`]: a step may be two events or more). Where the looks fall moves the
/// random leads, and a stall or two may land elsewhere: 2 and 3 keep the stall counts of
/// `tests/link_inject.rs`, 4–6 miss one (docs/link-simulator.md, "Sixth attempt").
const LOOK_EVERY_STEPS: u32 = 3;

/// [`super::fast_forward`] for a run with injected events, with the second segment of each
/// split ([`split`]) on a thread of its own (`parallel`) or after the first on this one: the
/// results are the same either way.
pub(super) fn fast_forward(config: &SimConfig, workload: &Workload, options: &SteadyOptions, parallel: bool) -> Result<Steady, InvalidInput> {
    let mut sim = LinkSim::new(config, workload)?;
    sim.fuse_events();
    let mut run = Segment::new(sim);
    let long = estimated_tlps(config, workload) >= WHOLE_BELOW_WINDOWS * options.window_tlps + options.warmup_tlps;
    if run.sim.dma.is_some() && long {
        let mut baselines: Baselines = Default::default();
        // Bit errors fall on payload bytes, not on time: a segment started further on would
        // meet them elsewhere. Only runs with holds alone are split.
        let splittable = config.inject.tlp_errors_per_tb == 0.0 && run.sim.hold_lengths_ns().is_some();
        let mut split_mixes = [!splittable; 4];
        while let Exit::Split(mix) = run.go(&mut baselines, config, workload, options, Goal::End { may_split: split_mixes }) {
            split_mixes[mix] = true;
            let Some(Some(baseline)) = baselines.of_mix[mix].clone() else { continue };
            split(&mut run, &baseline, &baselines, config, workload, options, parallel);
        }
    }
    while run.sim.step() {}
    Ok(Steady { outcome: std::mem::take(&mut run.sim.outcome), skipped_ns: run.skipped_ns, skipped_tlps: run.skipped_tlps, reused_holds: run.reused_holds, segments: run.segments })
}

/// The steady state of each channel mix, once looked for (None inside: it could not be found).
#[derive(Clone, Default)]
struct Baselines {
    of_mix: [Option<Option<Baseline>>; 4],
    /// The both-ways baseline was taken again from the run itself after its first disturbance
    /// ([`run_baseline`]).
    taken_from_run: bool,
}

/// Both channels moving.
const BOTH_MIX: usize = 3;

/// One stretch of a stream simulated with the fast-forward: the link, and what was left out.
#[derive(Clone)]
struct Segment {
    sim: LinkSim,
    reuses: [HoldReuse; 4],
    watched: Option<(usize, Pending)>,
    carry: Carry,
    skipped_ns: f64,
    skipped_tlps: u64,
    reused_holds: u64,
    /// Segments simulated apart from this one and joined into it ([`split`]).
    segments: u64,
}

/// Where [`Segment::go`] stops.
#[derive(Clone, Copy)]
enum Goal {
    /// The end of the stream, or a point where the channel mix `m` may be split
    /// (`may_split[m]` false).
    End { may_split: [bool; 4] },
    /// The first settled point at `ticks` or after it with no hold left before it.
    Until { ticks: u64 },
    /// The first settled point from which a stretch would reach a channel's end reserve.
    Room,
}

enum Exit {
    Ended,
    Split(usize),
    Reached,
}

impl Segment {
    fn new(sim: LinkSim) -> Self {
        Segment { sim, reuses: Default::default(), watched: None, carry: Carry::default(), skipped_ns: 0.0, skipped_tlps: 0, reused_holds: 0, segments: 0 }
    }

    /// Simulate, leaving out the stretches between injected events, until `goal`.
    fn go(&mut self, baselines: &mut Baselines, config: &SimConfig, workload: &Workload, options: &SteadyOptions, goal: Goal) -> Exit {
        let mut steps = 0u32;
        while self.sim.step() {
            steps += 1;
            if steps < LOOK_EVERY_STEPS {
                continue;
            }
            steps = 0;
            let sim = &mut self.sim;
            if !sim.undisturbed() || sim.draining() {
                continue;
            }
            let mix = channel_mix(sim);
            if mix == 0 {
                continue;
            }
            if self.carry.mix != mix {
                self.carry = Carry { mix, ..Carry::default() };
            }
            if mix == BOTH_MIX && !baselines.taken_from_run && sim.disturbed() {
                baselines.taken_from_run = true;
                baselines.of_mix[mix] = Some(run_baseline(sim, config, options));
            }
            let baseline = baselines.of_mix[mix].get_or_insert_with(|| steady_baseline(config, workload, mix, options));
            let Some(Baseline { span, covered_ticks, range }) = baseline.as_ref() else { continue };
            if !settled(sim, range.as_ref()) {
                continue;
            }
            if let Some((watched_mix, pending)) = self.watched.take_if(|(_, pending)| sim.phy().ns(sim.now_ticks()) >= pending.hold_end_ns()) {
                if watched_mix == mix {
                    let limits = limits(sim);
                    self.reuses[mix].finish(pending, sim, span, &|clone: &mut LinkSim| settled(clone, range.as_ref()), &limits);
                }
            }
            let now = sim.now_ticks();
            let room = room_ticks(sim, span, config.tags as u64);
            let hold_before = |sim: &mut LinkSim, until: u64| sim.next_uncovered_hold(*covered_ticks, sim.phy().ns(now), until).is_some();
            match goal {
                Goal::End { may_split } if !may_split[mix] && self.watched.is_none() && !self.reuses[mix].wants_samples() && worth_splitting(sim, room) => return Exit::Split(mix),
                Goal::Until { ticks } if self.watched.is_none() && !hold_before(sim, ticks) => {
                    if ticks > now {
                        let tlps = leave_out(sim, span, ticks - now, &[], &mut self.carry);
                        self.skipped_ns += sim.phy().ns(ticks - now);
                        self.skipped_tlps += tlps;
                    }
                    return Exit::Reached;
                }
                Goal::Room if !hold_before(sim, now.saturating_add(room as u64)) => return Exit::Reached,
                _ => {}
            }
            let until = match goal {
                Goal::Until { ticks } => Some(ticks),
                _ => None,
            };
            let stretch = stretch_ticks(sim, span, *covered_ticks, config.tags as u64, &self.reuses[mix], until);
            if let Some(Stretch { ticks, reused, .. }) = &stretch {
                let tlps = leave_out(sim, span, *ticks, reused, &mut self.carry);
                self.skipped_ns += sim.phy().ns(*ticks);
                self.skipped_tlps += tlps;
                self.reused_holds += reused.len() as u64;
            }
            // The lead before a hold the link simulates starts here: watch it as a sample.
            if let Some(hold_ns) = stretch.and_then(|s| s.stopped_by) {
                if self.reuses[mix].watching() {
                    self.watched = Some((mix, self.reuses[mix].watch(sim, hold_ns)));
                }
            }
        }
        Exit::Ended
    }
}

/// Holds (at their rate) a stretch of `room_ticks` must hold at least before it is split.
const SPLIT_AT_LEAST_HOLDS: f64 = 64.0;

/// Whether what is left of the present channel mix (`room_ticks` before a channel's end
/// reserve) holds enough holds to be worth simulating in two segments at once.
fn worth_splitting(sim: &LinkSim, room_ticks: f64) -> bool {
    let per_ns = sim.holds_per_ns();
    per_ns * sim.phy().ns(1) * room_ticks >= SPLIT_AT_LEAST_HOLDS
}

/// Split what is left of the present channel mix in two segments simulated at once (each hold's
/// effect ends when the link is back in its steady range, so stretches separated by steady state
/// are independent): the link goes on to the middle of the first gap between holds after half
/// the room (`Goal::Until`), while a clone of it, moved on to that point by the steady state's
/// rates, simulates the holds after it until the channels' end reserve is near (`Goal::Room`).
/// The clone starts with the bytes the link would have left without losing time to holds, at
/// most what it really has left, so nothing it simulates is the stream's end. Then the link
/// leaves out the clone's stretch with the clone's own counts: its TLPs, payload, DLLPs, SKPs and
/// starvations (a [`Span`] of the clone). The clone's random leads come from its own generator,
/// forked by where it starts: the same seed gives the same run on any number of threads.
fn split(run: &mut Segment, baseline: &Baseline, baselines: &Baselines, config: &SimConfig, workload: &Workload, options: &SteadyOptions, parallel: bool) {
    let span = &baseline.span;
    let now = run.sim.now_ticks();
    let half = (room_ticks(&run.sim, span, config.tags as u64) / 2.0) as u64;
    // The middle of the gap between the holds either side of half the room.
    let Some(at) = gap_middle(&mut run.sim, baseline.covered_ticks, now + half) else { return };
    let mix = run.carry.mix;
    let refused_before = run.reuses[mix].refused();
    let mut second = Segment { watched: None, carry: Carry { mix, ..Carry::default() }, skipped_ns: 0.0, skipped_tlps: 0, reused_holds: 0, segments: 0, ..run.clone() };
    second.sim.fork_jitter(at);
    leave_out(&mut second.sim, span, at - now, &[], &mut Carry { mix, ..Carry::default() });
    let from = Mark::of(&second.sim);
    let mut second_baselines = baselines.clone();
    let first_goal = Goal::Until { ticks: at };
    let mut first_baselines = baselines.clone();
    let first = &mut *run;
    let (first_exit, second_exit) = if parallel {
        std::thread::scope(|scope| {
            let other = scope.spawn(|| second.go(&mut second_baselines, config, workload, options, Goal::Room));
            let mine = first.go(&mut first_baselines, config, workload, options, first_goal);
            (mine, other.join().expect("a fast-forward segment panicked"))
        })
    } else {
        let mine = first.go(&mut first_baselines, config, workload, options, first_goal);
        (mine, second.go(&mut second_baselines, config, workload, options, Goal::Room))
    };
    let to = Mark::of(&second.sim);
    let sim = &mut run.sim;
    // Joined only where both stopped as planned and the clone got beyond the link (which may
    // have gone a few events past the clone's start), and where the clone reused no hold after a
    // check on the link refused reuse (one run would have simulated those); otherwise the link
    // simply goes on.
    let refused_meanwhile = run.reuses[mix].refused() && !refused_before;
    if !matches!((first_exit, second_exit), (Exit::Reached, Exit::Reached)) || to.ticks <= sim.now_ticks() || refused_meanwhile && second.reused_holds > 0 {
        return;
    }
    let clone_span = Span { from: from.checkpoint, to: to.checkpoint };
    let ticks = to.ticks - sim.now_ticks();
    // Whatever part of the clone's stretch the link has not simulated itself, at the clone's
    // counts; its starvations all (none falls that near the middle of a gap between holds).
    leave_out(sim, &clone_span, ticks, &[], &mut Carry { mix, ..Carry::default() });
    sim.outcome.starvation[Direction::Upstream.index()].join(&from.starvation, &to.starvation);
    for d in 0..2 {
        sim.outcome.payload_gaps[d].join(&from.payload_gaps[d], &to.payload_gaps[d]);
    }
    run.skipped_ns += second.skipped_ns;
    run.skipped_tlps += second.skipped_tlps;
    run.reused_holds += second.reused_holds;
    run.segments += 1;
}

/// The link's state where a segment starts and ends ([`split`]).
struct Mark {
    ticks: u64,
    checkpoint: super::steady::Checkpoint,
    starvation: crate::link::inject::Starvation,
    payload_gaps: [crate::link::inject::PayloadGaps; 2],
}

impl Mark {
    fn of(sim: &LinkSim) -> Mark {
        Mark { ticks: sim.now_ticks(), checkpoint: super::steady::checkpoint(sim), starvation: sim.outcome.starvation[Direction::Upstream.index()], payload_gaps: sim.outcome.payload_gaps }
    }
}

/// The middle of the gap between the uncovered holds either side of `ticks` (None if no hold
/// follows).
fn gap_middle(sim: &mut LinkSim, covered_ticks: u64, ticks: u64) -> Option<u64> {
    let at_ns = sim.phy().ns(ticks);
    let mut before_end_ns = at_ns;
    // A hold in progress at `ticks` (or starting exactly there) moves the gap's start to its end.
    if let Some((start_ns, end_ns)) = sim.next_uncovered_hold(covered_ticks, at_ns, u64::MAX / 4) {
        if start_ns <= at_ns {
            before_end_ns = end_ns;
        }
    }
    let (next_start_ns, _) = sim.next_uncovered_hold(covered_ticks, before_end_ns + 1.0, u64::MAX / 4)?;
    Some(sim.ticks_of((before_end_ns + next_start_ns) / 2.0))
}

/// Ticks at the steady state's rates until a channel's payload reaches its end reserve (or the
/// next injected error).
fn room_ticks(sim: &LinkSim, span: &Span, tags: u64) -> f64 {
    let mut ticks = f64::INFINITY;
    let Some(dma) = sim.dma.as_ref() else { return 0.0 };
    for c in 0..2 {
        let Some(channel) = dma.channels[c].as_ref() else { continue };
        let rate = span.bytes(c) as f64 / span.ticks().max(1) as f64;
        if channel.left_bytes() == 0 || rate == 0.0 {
            continue;
        }
        let reserve = (END_CHUNKS + tags) * channel.chunk_bytes;
        let room = (channel.left_bytes().saturating_sub(reserve) as f64).min(sim.bytes_to_next_error(PAYLOAD[c]) - 2.0 * channel.chunk_bytes as f64);
        ticks = ticks.min(room.max(0.0) / rate);
    }
    if ticks.is_finite() {
        ticks
    } else {
        0.0
    }
}

/// After a starvation, whether the link is back in its steady state (`range`), or waited long
/// enough.
fn settled(sim: &mut LinkSim, range: Option<&SteadyRange>) -> bool {
    if sim.recovering() {
        if !range.is_some_and(|range| range.holds(sim)) {
            return false;
        }
        sim.recovered();
    }
    true
}

/// TLPs the device will send, about.
fn estimated_tlps(config: &SimConfig, workload: &Workload) -> u64 {
    match *workload {
        Workload::DmaWrite { bytes, .. } => bytes / config.mps_bytes,
        Workload::DmaRead { bytes, .. } => bytes / config.mrrs_bytes,
        Workload::DmaBoth { write_bytes, read_bytes, .. } => write_bytes / config.mps_bytes + read_bytes / config.mrrs_bytes,
        _ => 0,
    }
}

/// Which channels still have bytes to hand out: bit 0 writes, bit 1 reads.
fn channel_mix(sim: &LinkSim) -> usize {
    let Some(dma) = sim.dma.as_ref() else { return 0 };
    (0..2).filter(|&c| dma.channels[c].as_ref().is_some_and(|ch| ch.left_bytes() > 0)).map(|c| 1 << c).sum()
}

/// The steady state of one channel mix, and the longest hold it certainly rides out.
#[derive(Clone)]
struct Baseline {
    span: Span,
    /// A credit hold no longer than this (ticks) cannot starve the device's transmitter in this
    /// steady state ([`covered_ticks`]): the fast-forward leaves it out with the stretch around.
    covered_ticks: u64,
    /// The range the link's state keeps to in this steady state (None: not sampled).
    range: Option<SteadyRange>,
}

/// What the device's credits in hand and each channel's bytes in flight stay within over a
/// sample of a steady state: after a starvation, the link is back in its steady state once both
/// are inside again (the release's burst spent, the reads' tags back in step).
#[derive(Debug, Clone, Copy)]
struct SteadyRange {
    /// Least and most in hand of each finite credit counter: [class][header, data].
    in_hand: [[(f64, f64); 2]; 2],
    /// Least and most bytes in flight of each channel (writes, reads).
    in_flight: [(u64, u64); 2],
}

impl SteadyRange {
    fn holds(&self, sim: &LinkSim) -> bool {
        let credits = sim.upstream_credits();
        let flight = in_flight(sim);
        (0..2).all(|class| (0..2).all(|part| credits[class].is_none() || within(counter(&credits, class, part).0, self.in_hand[class][part])))
            && (0..2).all(|c| (self.in_flight[c].0..=self.in_flight[c].1).contains(&flight[c]))
    }
}

fn within(value: f64, (low, high): (f64, f64)) -> bool {
    low <= value && value <= high
}

/// One finite credit counter of the device's transmitter: (in hand, consumed), part 0 the
/// headers, 1 the data.
fn counter(state: &[ClassState; 2], class: usize, part: usize) -> (f64, f64) {
    let ((limit_h, limit_d), (used_h, used_d)) = state[class].unwrap_or_default();
    let (limit, used) = if part == 0 { (limit_h, used_h) } else { (limit_d, used_d) };
    (limit as f64 - used as f64, used as f64)
}

/// Bytes of each channel handed out but not yet delivered as payload.
fn in_flight(sim: &LinkSim) -> [u64; 2] {
    let issued = sim.dma.as_ref().map_or([0; 2], |dma| dma.issued_bytes());
    [0, 1].map(|c| issued[c].saturating_sub(sim.outcome.stats[PAYLOAD[c].index()].payload_bytes))
}

/// The steady state of the same stream with only the channels of `mix` moving and nothing
/// injected: simulated from the start until two successive windows agree (or, after
/// [`MAX_WINDOWS`], the last two as they are, covering no hold). None if it cannot be simulated.
fn steady_baseline(config: &SimConfig, workload: &Workload, mix: usize, options: &SteadyOptions) -> Option<Baseline> {
    let quiet = SimConfig { inject: Injection::default(), record: false, ..config.clone() };
    let (write_addr, read_addr) = match *workload {
        Workload::DmaWrite { addr, .. } => (addr, addr),
        Workload::DmaRead { addr, .. } => (addr, addr),
        Workload::DmaBoth { write_addr, read_addr, .. } => (write_addr, read_addr),
        _ => return None,
    };
    // Enough TLPs that no channel ends during the search.
    let tlps = search_tlps(options);
    let (write_bytes, read_bytes) = (tlps * config.mps_bytes, tlps * config.mrrs_bytes);
    let stream = match mix {
        1 => Workload::DmaWrite { addr: write_addr, bytes: write_bytes },
        2 => Workload::DmaRead { addr: read_addr, bytes: read_bytes },
        _ => Workload::DmaBoth { write_addr, write_bytes, read_addr, read_bytes },
    };
    baseline_of(LinkSim::new(&quiet, &stream).ok()?, config, options)
}

/// TLPs of the baseline search (no channel may end during it).
fn search_tlps(options: &SteadyOptions) -> u64 {
    options.warmup_tlps + (MAX_WINDOWS + RATE_WINDOWS + 4) * options.window_tlps * 2
}

/// The both-ways steady state the run itself settles into, from a quiet copy of it. Reads and
/// writes sharing the device's transmit queue can interleave in more than one steady way, and
/// a disturbance (a hold, a replay) can move the stream from the way a clean start settles into
/// to another that persists (doc001 both at once: reads 797 MB/s from a clean start, 781 MB/s
/// after a single hold); the run's stretches are left out at the rates of the way it is in.
fn run_baseline(run: &LinkSim, config: &SimConfig, options: &SteadyOptions) -> Option<Baseline> {
    let tlps = search_tlps(options);
    baseline_of(run.quiet_copy([tlps * config.mps_bytes, tlps * config.mrrs_bytes]), config, options)
}

/// The steady state `sim` settles into: simulated until two successive windows agree.
fn baseline_of(mut sim: LinkSim, config: &SimConfig, options: &SteadyOptions) -> Option<Baseline> {
    let mut a = run_for(&mut sim, options.warmup_tlps, None)?;
    let mut b = run_for(&mut sim, options.window_tlps, Some(a.in_flight))?;
    for _ in 0..MAX_WINDOWS {
        let c = run_for(&mut sim, options.window_tlps, Some(b.in_flight))?;
        let (first, second) = (Span { from: a, to: b }, Span { from: b, to: c });
        if a.in_flight == c.in_flight && is_steady(&sim, &first, &second, options.tolerance) {
            let mut to = c;
            for _ in 2..RATE_WINDOWS {
                let next = run_for(&mut sim, options.window_tlps, Some(a.in_flight))?;
                if next.in_flight == a.in_flight {
                    to = next;
                }
            }
            let span = Span { from: a, to };
            let window_ticks = span.ticks() * options.window_tlps / span.upstream_tlps().max(1);
            let holds = config.inject.holds_per_s > 0.0 || !config.inject.holds.is_empty();
            let (covered_ticks, range) = if holds { covered_ticks(&mut sim, window_ticks) } else { (0, None) };
            return Some(Baseline { span, covered_ticks, range });
        }
        (a, b) = (b, c);
    }
    Some(Baseline { span: Span { from: a, to: b }, covered_ticks: 0, range: None })
}

/// The longest credit hold that certainly cannot starve the device's transmitter in the
/// steady state `sim` is in, in ticks, from `sample_ticks` more of it simulated.
///
/// During a hold the host sends no UpdateFC, so the device has at most the credits in hand
/// at the hold's start (UpdateFCs still on their way only add). Over the sample, for each
/// finite credit counter (posted and non-posted headers and data) it measures the least in
/// hand, the steady rate of consumption and how far consumption strays from that straight line
/// (its bursts, plus the largest single TLP). A hold of `h` ticks consumes at most
/// rate·(h + lag) + bursts, `lag` being the release's UpdateFC reaching the device
/// ([`LinkSim::release_lag_ticks`]); while that fits into the least in hand, no TLP is refused.
///
/// The same sample gives the state's [`SteadyRange`].
fn covered_ticks(sim: &mut LinkSim, sample_ticks: u64) -> (u64, Option<SteadyRange>) {
    let lag = sim.release_lag_ticks() as f64;
    let until = sim.now_ticks() + sample_ticks;
    let mut samples = Vec::new();
    let mut range = SteadyRange { in_hand: [[(f64::INFINITY, f64::NEG_INFINITY); 2]; 2], in_flight: [(u64::MAX, 0); 2] };
    while sim.now_ticks() < until && sim.step() {
        samples.push((sim.now_ticks(), sim.upstream_credits()));
        for (c, bytes) in in_flight(sim).into_iter().enumerate() {
            let (low, high) = range.in_flight[c];
            range.in_flight[c] = (low.min(bytes), high.max(bytes));
        }
    }
    let (Some(&(t0, first)), Some(&(t1, last))) = (samples.first(), samples.last()) else { return (0, None) };
    if t1 <= t0 {
        return (0, None);
    }
    let mut covered = f64::INFINITY;
    for class in 0..2 {
        if first[class].is_none() {
            continue;
        }
        for part in 0..2 {
            let rate = (counter(&last, class, part).1 - counter(&first, class, part).1) / (t1 - t0) as f64;
            let (mut least, mut most, mut low, mut high, mut jump, mut before) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY, 0.0f64, counter(&first, class, part).1);
            for (t, state) in &samples {
                let (in_hand, used) = counter(state, class, part);
                let stray = used - rate * (t - t0) as f64;
                (least, most, low, high, jump, before) = (least.min(in_hand), most.max(in_hand), low.min(stray), high.max(stray), jump.max(used - before), used);
            }
            range.in_hand[class][part] = (least, most);
            let room = least - (high - low) - jump;
            if room < 0.0 {
                covered = 0.0;
            } else if rate > 0.0 {
                covered = covered.min(room / rate - lag);
            }
        }
    }
    // A hold delays every read request that reaches the host during it ([`LinkSim::served_from`]),
    // whatever the credits in hand: with reads in flight no hold is covered.
    if range.in_flight[1].1 > 0 {
        covered = 0.0;
    }
    (covered.clamp(0.0, u64::MAX as f64 / 4.0) as u64, Some(range))
}

/// What the channels and totals moved beyond whole TLPs in earlier stretches, so that leaving
/// out many short stretches adds up to the steady rates exactly.
#[derive(Debug, Default, Clone)]
struct Carry {
    mix: usize,
    bytes: [f64; 2],
    stats: [[f64; 7]; 2],
}

/// A stretch the fast-forward leaves out.
struct Stretch {
    ticks: u64,
    /// Holds inside it whose outcome a sample gives ([`HoldReuse`]), in time order.
    reused: Vec<Reused>,
    /// The hold it ends a lead before, [start, end) in ns.
    stopped_by: Option<(f64, f64)>,
}

/// How long a stretch from now can be left out: up to a simulated lead before the next hold
/// longer than `covered_ticks` whose outcome `reuse` cannot give, before the payload of a
/// channel reaches the next injected error, leaving every channel's end to full simulation.
/// None if too short to be worth it.
fn stretch_ticks(sim: &mut LinkSim, span: &Span, covered_ticks: u64, tags: u64, reuse: &HoldReuse, until: Option<u64>) -> Option<Stretch> {
    let now = sim.now_ticks();
    sim.dma.as_ref()?;
    let mut ticks = room_ticks(sim, span, tags);
    if let Some(until) = until {
        ticks = ticks.min(until.saturating_sub(now) as f64);
    }
    // Holds the credits in hand certainly cover are left out with the stretch, and so are those
    // a sample answers (each losing time, so the stretch's room counts it); the stretch ends a
    // simulated lead before the next one.
    let until = now.saturating_add(ticks.min(u64::MAX as f64 / 4.0) as u64);
    let (mut reused, mut lost_ticks, mut from_ns, mut stopped_by) = (Vec::new(), 0.0f64, sim.phy().ns(now), None);
    while let Some((start_ns, end_ns)) = sim.next_uncovered_hold(covered_ticks, from_ns, until) {
        let start = sim.ticks_of(start_ns);
        match reuse_hold(sim, reuse, end_ns - start_ns) {
            // The stretch's room in bytes shrinks by the time the hold loses.
            Some(outcome) if (sim.ticks_of(end_ns) as f64) + lost_ticks + lost_of(sim, &outcome) < now as f64 + ticks => {
                lost_ticks += lost_of(sim, &outcome);
                reused.push((start_ns, end_ns, outcome));
                from_ns = end_ns;
            }
            _ => {
                stopped_by = Some((start_ns, end_ns));
                ticks = ticks.min(start.saturating_sub(now).saturating_sub(sim.lead_ticks()) as f64);
                break;
            }
        }
    }
    // A reused hold the lead before the stopping one reaches into is simulated instead: the
    // stretch ends a lead before it.
    while let Some(&(start_ns, end_ns, _)) = reused.last() {
        if (sim.ticks_of(end_ns) as f64) < now as f64 + ticks {
            break;
        }
        reused.pop();
        stopped_by = Some((start_ns, end_ns));
        ticks = ticks.min(sim.ticks_of(start_ns).saturating_sub(now).saturating_sub(sim.lead_ticks()) as f64);
    }
    let tlp_ticks = span.ticks() as f64 / span.upstream_tlps().max(1) as f64;
    let ticks = (ticks >= MIN_SKIP_TLPS * tlp_ticks).then_some(ticks.floor() as u64)?;
    Some(Stretch { ticks, reused: reused.into_iter().map(|(_, _, outcome)| outcome).collect(), stopped_by })
}

/// The outcome of an uncovered hold of `hold_ns` from the steady state's samples, if they
/// settle it.
fn reuse_hold(sim: &mut LinkSim, reuse: &HoldReuse, hold_ns: f64) -> Option<Reused> {
    sim.hold_lengths_ns()?;
    // With reads and writes both, a read request let through mid-hold ends a starvation and
    // the next write starts another: how many a hold counts depends on where it falls, which
    // the samples do not settle (a gen5x16 test lost one of 51). One channel only.
    if channel_mix(sim) == 3 {
        return None;
    }
    let limits = limits(sim);
    reuse.reuse(sim, hold_ns, &limits)
}

fn limits(sim: &LinkSim) -> Limits {
    // Listed holds (tests) are never reused: the longest is then 0.
    let max_hold_ns = sim.hold_lengths_ns().map_or(0.0, |(_, max)| max);
    Limits { threshold_ns: sim.threshold_ns(), max_hold_ns, lag_ns: sim.phy().ns(sim.release_lag_ticks()) }
}

/// The most time a reused hold loses on any channel, in ticks.
fn lost_of(sim: &LinkSim, outcome: &Reused) -> f64 {
    outcome.lost_ns[0].max(outcome.lost_ns[1]) / sim.phy().ns(1)
}

/// Leave out `ticks` of the steady state `span` with the `reused` holds in it (their stalls
/// counted, the time they lose not moving the channels); the device TLPs left out.
fn leave_out(sim: &mut LinkSim, span: &Span, ticks: u64, reused: &[Reused], carry: &mut Carry) -> u64 {
    let tick_ns = sim.phy().ns(1);
    let lost_ticks = [0, 1].map(|c| reused.iter().map(|r| r.lost_ns[c]).sum::<f64>() / tick_ns);
    let moving = [0, 1].map(|c| (ticks as f64 - lost_ticks[c]).max(0.0) / span.ticks().max(1) as f64);
    let threshold_ns = sim.threshold_ns();
    let up = Direction::Upstream.index();
    for r in reused {
        sim.outcome.starvation[up].add(r.stall_ns, threshold_ns);
        // Only writes are reused (reads never starve): the writes' payload pauses for the stall
        // (a TLP's time more, within the margin that keeps reuse clear of the threshold).
        sim.outcome.payload_gaps[up].add(r.stall_ns, threshold_ns);
    }
    // The totals (TLPs, DLLPs, SKPs) move as the stream does: by its slower channel's time.
    let share = moving[0].min(moving[1]);
    let share = if span.bytes(0) == 0 { moving[1] } else if span.bytes(1) == 0 { moving[0] } else { share };
    let mut bytes = [0u64; 2];
    let flight = in_flight(sim);
    let mut unfinished = [false; 2];
    if let Some(dma) = sim.dma.as_ref() {
        for c in 0..2 {
            let Some(channel) = dma.channels[c].as_ref() else { continue };
            unfinished[c] = channel.left_bytes() > 0 || flight[c] > 0;
            carry.bytes[c] += span.bytes(c) as f64 * moving[c];
            let whole = (carry.bytes[c] / channel.chunk_bytes as f64).floor() as u64 * channel.chunk_bytes;
            bytes[c] = whole.min(channel.left_bytes());
            carry.bytes[c] -= bytes[c] as f64;
        }
    }
    sim.advance_clock(ticks);
    if let Some(dma) = sim.dma.as_mut() {
        dma.skip(bytes);
    }
    let shift_ns = sim.phy().ns(ticks);
    let up_tlps_before = sim.outcome.stats[Direction::Upstream.index()].tlps;
    for d in 0..2 {
        let (from, to) = (&span.from.stats[d], &span.to.stats[d]);
        let stats: &mut DirectionStats = &mut sim.outcome.stats[d];
        let fields: [(&mut u64, u64); 7] = [
            (&mut stats.tlps, to.tlps - from.tlps),
            (&mut stats.acks, to.acks - from.acks),
            (&mut stats.update_fcs, to.update_fcs - from.update_fcs),
            (&mut stats.skps, to.skps - from.skps),
            (&mut stats.tlp_bytes, to.tlp_bytes - from.tlp_bytes),
            (&mut stats.dllp_bytes, to.dllp_bytes - from.dllp_bytes),
            (&mut stats.skp_ticks, to.skp_ticks - from.skp_ticks),
        ];
        for ((field, delta), rest) in fields.into_iter().zip(carry.stats[d].iter_mut()) {
            *rest += delta as f64 * share;
            let whole = rest.floor();
            *field += whole as u64;
            *rest -= whole;
        }
    }
    // What a channel has in flight arrives after the stretch too.
    shift_ends(sim, shift_ns, unfinished);
    for c in 0..2 {
        sim.outcome.stats[PAYLOAD[c].index()].payload_bytes += bytes[c];
        sim.skip_payload(PAYLOAD[c], bytes[c]);
    }
    sim.outcome.stats[Direction::Upstream.index()].tlps - up_tlps_before
}
