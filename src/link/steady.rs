//! Steady-state fast-forward: long DMA streams without simulating every TLP.
//!
//! A long DMA transfer settles into a schedule that repeats: the same TLPs, DLLPs and SKP
//! ordered sets in the same proportions, period after period. The fast-forward runs the full
//! simulation, takes a checkpoint every `window_tlps` TLPs the device sends, and once two
//! successive windows move every DMA channel at the same rate (within `tolerance`), it leaves
//! out whole multiples of the last two windows: the clock, every queued event and both
//! transmitters' schedules move on by their duration, the DMA channels by the bytes they moved,
//! the per-direction totals by what crossed in them. Then it simulates the rest exactly, at
//! least one more span of two windows, so the end of the transfer (the last partial TLPs, the
//! last completions, the final Acks) is never extrapolated. Every time comes from simulated
//! packets; nothing here knows a throughput formula.
//!
//! What it cannot preserve: the record has a gap where periods were left out (marked by a
//! [`LeftOut`] entry in `Outcome::left_out`: when, how long, what each direction sent in it), and
//! sequence numbers continue after the gap as if the left-out TLPs had not been sent (so Ack and,
//! later, replay bookkeeping stay consistent). `tests/link_steady.rs` compares it with full
//! simulation over many configurations.

use super::agents::Workload;
use super::config::SimConfig;
use super::packet::Direction;
use super::record::{DirectionStats, LeftOut, LeftOutCounts};
use super::sim::{LinkSim, Outcome};
use crate::error::InvalidInput;

/// When the fast-forward looks for a repeating schedule and how close "the same" must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyOptions {
    /// TLPs the device sends before the first checkpoint (the start-up transient).
    pub warmup_tlps: u64,
    /// TLPs the device sends between checkpoints: long enough to hold several SKP intervals.
    pub window_tlps: u64,
    /// Largest relative difference of two windows' rates that still counts as steady.
    pub tolerance: f64,
}

impl Default for SteadyOptions {
    fn default() -> Self {
        SteadyOptions { warmup_tlps: 2048, window_tlps: 8192, tolerance: 3e-4 }
    }
}

/// What a fast-forwarded run produced, and how much of it was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Steady {
    pub outcome: Outcome,
    /// Simulated time left out, in ns (0: the whole run was simulated).
    pub skipped_ns: f64,
    /// Device TLPs left out.
    pub skipped_tlps: u64,
    /// Credit holds left out whose outcome a simulated hold of the same steady state gave
    /// (see `between.rs`).
    pub reused_holds: u64,
    /// Segments of the stream simulated apart (on another thread) and joined in (see
    /// `between.rs`, "split").
    pub segments: u64,
}

/// Simulate `workload`, fast-forwarding through the steady state of a long DMA stream.
pub fn simulate_steady(config: &SimConfig, workload: &Workload) -> Result<Outcome, InvalidInput> {
    Ok(fast_forward(config, workload, &SteadyOptions::default())?.outcome)
}

/// [`simulate_steady`] with explicit options, telling how much was left out.
pub fn fast_forward(config: &SimConfig, workload: &Workload, options: &SteadyOptions) -> Result<Steady, InvalidInput> {
    fast_forward_on(config, workload, options, true)
}

/// [`fast_forward`] on this thread alone: a run with credit holds simulates the segments it
/// splits off one after the other instead of at once. The result is the same.
pub fn fast_forward_on_one_thread(config: &SimConfig, workload: &Workload, options: &SteadyOptions) -> Result<Steady, InvalidInput> {
    fast_forward_on(config, workload, options, false)
}

fn fast_forward_on(config: &SimConfig, workload: &Workload, options: &SteadyOptions, parallel: bool) -> Result<Steady, InvalidInput> {
    if options.window_tlps == 0 || !(options.tolerance >= 0.0 && options.tolerance.is_finite()) {
        return Err(InvalidInput::new("invalid fast-forward options: the window must be 1 TLP or more, the tolerance 0 or more"));
    }
    let mut sim = LinkSim::new(config, workload)?;
    let mut skipped = Steady { outcome: Outcome::default(), skipped_ns: 0.0, skipped_tlps: 0, reused_holds: 0, segments: 0 };
    // Bit errors draw per packet and flits pack TLPs across boundaries: neither repeats by
    // whole TLP periods, so those runs are simulated whole.
    let repeats = config.errors.ber == 0.0 && config.errors.corrupt.is_empty() && config.link.generation != crate::model::Generation::Gen6;
    if repeats && config.inject.enabled() {
        // Injected events break the repetition: simulate each, leave out the time between.
        return super::between::fast_forward(config, workload, options, parallel);
    }
    if sim.dma.is_some() && repeats {
        // Each search simulates at least a window, so this ends with the run. A steady span
        // with no room to skip (a channel about to end) is searched again after it: the other
        // channel may go on alone for long, in a new steady state.
        while let Some(span) = find_steady_span(&mut sim, options) {
            let periods = periods_to_skip(&sim, &span);
            if periods == 0 {
                continue;
            }
            skip(&mut sim, &span, periods);
            skipped.skipped_ns += sim.phy().ns(span.ticks() * periods);
            skipped.skipped_tlps += span.upstream_tlps() * periods;
        }
    }
    while sim.step() {}
    skipped.outcome = std::mem::take(&mut sim.outcome);
    Ok(skipped)
}

/// The state that matters for extrapolation, at one checkpoint.
#[derive(Debug, Clone, Copy)]
pub(super) struct Checkpoint {
    pub(super) ticks: u64,
    /// Bytes each DMA channel (writes, reads) has handed out.
    pub(super) issued: [u64; 2],
    /// Bytes of each channel handed out but not yet on the lanes as payload (writes: 0; reads:
    /// requested, not yet completed). Equal at both ends of a span, the span is whole periods.
    pub(super) in_flight: [u64; 2],
    pub(super) stats: [DirectionStats; 2],
}

/// Two checkpoints: what happened between them.
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub(super) from: Checkpoint,
    pub(super) to: Checkpoint,
}

impl Span {
    pub(super) fn ticks(&self) -> u64 {
        self.to.ticks - self.from.ticks
    }

    pub(super) fn bytes(&self, channel: usize) -> u64 {
        self.to.issued[channel] - self.from.issued[channel]
    }

    pub(super) fn upstream_tlps(&self) -> u64 {
        let i = Direction::Upstream.index();
        self.to.stats[i].tlps - self.from.stats[i].tlps
    }

    /// Bytes per tick of each channel.
    fn rates(&self) -> [f64; 2] {
        [0, 1].map(|c| self.bytes(c) as f64 / self.ticks().max(1) as f64)
    }
}

pub(super) fn checkpoint(sim: &LinkSim) -> Checkpoint {
    let issued = sim.dma.as_ref().map_or([0; 2], |dma| dma.issued_bytes());
    let stats = sim.outcome.stats;
    // Write payload travels upstream, read completions downstream.
    let delivered = [stats[Direction::Upstream.index()].payload_bytes, stats[Direction::Downstream.index()].payload_bytes];
    let in_flight = [0, 1].map(|c| issued[c].saturating_sub(delivered[c]));
    Checkpoint { ticks: sim.now_ticks(), issued, in_flight, stats }
}

/// Run until the device has sent `tlps` more TLPs and then, if `in_flight` is given, on to the
/// first moment (within as many TLPs again) where that much is in flight; None if the run ends.
pub(super) fn run_for(sim: &mut LinkSim, tlps: u64, in_flight: Option<[u64; 2]>) -> Option<Checkpoint> {
    let up = Direction::Upstream.index();
    let target = sim.outcome.stats[up].tlps + tlps;
    while sim.outcome.stats[up].tlps < target {
        if !sim.step() {
            return None;
        }
    }
    let Some(wanted) = in_flight else { return Some(checkpoint(sim)) };
    let give_up = target + tlps;
    loop {
        let here = checkpoint(sim);
        if here.in_flight == wanted || sim.outcome.stats[up].tlps >= give_up {
            return Some(here);
        }
        if !sim.step() {
            return None;
        }
    }
}

/// Simulate until two successive windows agree; the span of both, or None if the run ends first.
fn find_steady_span(sim: &mut LinkSim, options: &SteadyOptions) -> Option<Span> {
    let mut a = run_for(sim, options.warmup_tlps, None)?;
    let mut b = run_for(sim, options.window_tlps, Some(a.in_flight))?;
    loop {
        let c = run_for(sim, options.window_tlps, Some(b.in_flight))?;
        let (first, second) = (Span { from: a, to: b }, Span { from: b, to: c });
        if a.in_flight == c.in_flight && is_steady(sim, &first, &second, options.tolerance) {
            return Some(Span { from: a, to: c });
        }
        (a, b) = (b, c);
    }
}

/// Both windows move each channel at the same rate, in whole TLPs of its chunk (so leaving out
/// whole spans keeps every later TLP where the full run would cut it). "The same": within
/// `tolerance`, plus one TLP of the channel per window (a channel that sends a few TLPs among
/// many of the other's, such as tag-limited reads among writes, gains or loses one at the
/// window's edge).
pub(super) fn is_steady(sim: &LinkSim, first: &Span, second: &Span, tolerance: f64) -> bool {
    let Some(dma) = sim.dma.as_ref() else { return false };
    let (r1, r2) = (first.rates(), second.rates());
    (0..2).all(|c| {
        let Some(channel) = dma.channels[c].as_ref() else { return true };
        let whole = first.bytes(c) % channel.chunk_bytes == 0 && second.bytes(c) % channel.chunk_bytes == 0;
        let moving_or_done = first.bytes(c) > 0 || channel.left_bytes() == 0;
        let one_tlp = channel.chunk_bytes as f64 / first.ticks().min(second.ticks()).max(1) as f64;
        whole && moving_or_done && (r1[c] - r2[c]).abs() <= tolerance * r1[c].max(r2[c]) + one_tlp
    })
}

/// Whole spans that can be left out while at least one more span remains for every channel
/// still moving (the end of the transfer is always simulated).
fn periods_to_skip(sim: &LinkSim, span: &Span) -> u64 {
    let Some(dma) = sim.dma.as_ref() else { return 0 };
    let mut periods = u64::MAX;
    for c in 0..2 {
        let Some(channel) = dma.channels[c].as_ref() else { continue };
        let moved = span.bytes(c);
        if moved == 0 {
            continue;
        }
        periods = periods.min((channel.left_bytes() / moved).saturating_sub(1));
    }
    if periods == u64::MAX { 0 } else { periods }
}

/// The payload direction of each DMA channel: writes go upstream, read completions downstream.
pub(super) const PAYLOAD: [Direction; 2] = [Direction::Upstream, Direction::Downstream];

/// After `shift_ns` left out: every direction's last packet ends that much later, and so does
/// the last payload arrival of each `moving` channel (its payload left out arrived too: no
/// pause across the stretch; a channel already done keeps its end).
pub(super) fn shift_ends(sim: &mut LinkSim, shift_ns: f64, moving: [bool; 2]) {
    for stats in sim.outcome.stats.iter_mut() {
        stats.last_tlp_end_ns += shift_ns;
        stats.last_end_ns += shift_ns;
    }
    for (c, direction) in PAYLOAD.into_iter().enumerate() {
        let arrived_ns = &mut sim.outcome.arrived_ns[direction.index()];
        if moving[c] && *arrived_ns > 0.0 {
            *arrived_ns += shift_ns;
        }
    }
}

/// Leave out `periods` repetitions of `span` (and mark the gap in the record, if kept).
fn skip(sim: &mut LinkSim, span: &Span, periods: u64) {
    let (start_ns, before) = (sim.phy().ns(sim.now_ticks()), sim.outcome.stats);
    sim.advance_clock(span.ticks() * periods);
    if let Some(dma) = sim.dma.as_mut() {
        dma.skip([0, 1].map(|c| span.bytes(c) * periods));
    }
    let shift_ns = sim.phy().ns(span.ticks() * periods);
    for (stats, (from, to)) in sim.outcome.stats.iter_mut().zip(span.from.stats.iter().zip(&span.to.stats)) {
        stats.tlps += (to.tlps - from.tlps) * periods;
        stats.acks += (to.acks - from.acks) * periods;
        stats.update_fcs += (to.update_fcs - from.update_fcs) * periods;
        stats.skps += (to.skps - from.skps) * periods;
        stats.tlp_bytes += (to.tlp_bytes - from.tlp_bytes) * periods;
        stats.dllp_bytes += (to.dllp_bytes - from.dllp_bytes) * periods;
        stats.skp_ticks += (to.skp_ticks - from.skp_ticks) * periods;
        stats.payload_bytes += (to.payload_bytes - from.payload_bytes) * periods;
    }
    shift_ends(sim, shift_ns, [0, 1].map(|c| span.bytes(c) > 0));
    if sim.keeps_record() {
        // A packet put on the lanes at the moment of the skip is the first of the periods after
        // it (its transmitter is busy until its end plus the gap): it is recorded there.
        for crossing in sim.outcome.record.iter_mut().filter(|c| c.start_ns >= start_ns) {
            crossing.start_ns += shift_ns;
            crossing.end_ns += shift_ns;
        }
        let counts = [0, 1].map(|d| LeftOutCounts::between(&before[d], &sim.outcome.stats[d]));
        let period_ns = sim.phy().ns(span.ticks());
        sim.outcome.left_out.push(LeftOut { start_ns, duration_ns: shift_ns, periods, period_ns, counts });
    }
}
