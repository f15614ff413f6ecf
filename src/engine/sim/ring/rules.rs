//! The ring's rules that do not depend on how a run is driven: when a stream stops, what TLPs
//! one message is, how the d2h host consumes a buffer, how a lossy source drops, how credit
//! starvation becomes a bubble, how an event reaches its sink. The single-direction runs
//! (`ring.rs`, `ring_pull.rs`, `ring_h2d.rs`) and both directions at once (`ring_both.rs`) use
//! these, so at once each direction follows exactly its rules alone.

use crate::engine::ring::{MessageEvent, MessageSink, RingPlan, StreamStop, WaitCause};
use crate::engine::EngineError;
use crate::link::{transaction, Direction as LinkDirection, LinkSim};

use super::{RingBehaviour, DATA_BASE, DOORBELL_ADDR, FLAG_BASE, FLAG_BYTES, METADATA_BASE, METADATA_BYTES};
use crate::engine::sim::rng::SimRng;

/// The device's buffers in its BAR (h2d data, pull sources).
pub const DEVICE_DATA_BASE: u64 = 1 << 32;

/// When a stream stops: after this many numbered messages, or once the producer is ready past
/// this time (virtual ns).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub messages: u64,
    pub ns: f64,
}

impl Limits {
    pub fn of(stop: StreamStop) -> Self {
        match stop {
            StreamStop::Messages(n) => Limits { messages: n, ns: f64::INFINITY },
            StreamStop::Duration(d) => Limits { messages: u64::MAX, ns: d.as_secs_f64() * 1e9 },
        }
    }

    /// The producer may number another message: `numbered` so far, ready at `ready_ns`.
    pub fn open(&self, numbered: u64, ready_ns: f64) -> bool {
        numbered < self.messages && ready_ns < self.ns
    }
}

/// One d2h push message into host buffer `slot`: the data as MWr pieces of at most MPS that never
/// cross 4 KiB, the metadata write, the flag write (address, length).
pub fn d2h_push_pieces(plan: &RingPlan, slot: u64, mps_bytes: u64) -> impl Iterator<Item = (u64, u64)> {
    let data = DATA_BASE + slot * u64::from(plan.buffer_bytes);
    pieces(data, u64::from(plan.message_bytes), mps_bytes).chain([(METADATA_BASE + slot * METADATA_BYTES, METADATA_BYTES), (FLAG_BASE + slot * FLAG_BYTES, FLAG_BYTES)])
}

/// One h2d push message into device buffer `slot`: the data pieces, then the doorbell.
pub fn h2d_push_pieces(plan: &RingPlan, slot: u64, mps_bytes: u64) -> impl Iterator<Item = (u64, u64)> {
    let data = DEVICE_DATA_BASE + slot * u64::from(plan.buffer_bytes);
    pieces(data, u64::from(plan.message_bytes), mps_bytes).chain([(DOORBELL_ADDR, FLAG_BYTES)])
}

fn pieces(addr: u64, bytes: u64, max_bytes: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut split = transaction::Splitter::new(addr, bytes, max_bytes);
    std::iter::from_fn(move || split.next_piece())
}

/// The d2h host: it sees a flag its reaction after it landed (once done with the buffer before),
/// uses the buffer, and is away longer every `host_stall_every` messages (an injected stall).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostConsumer {
    /// When the host is done with the buffer it holds.
    pub free_ns: f64,
}

impl HostConsumer {
    /// One reaction drawn: uniform in [react, react + jitter).
    pub fn react(behaviour: &RingBehaviour, rng: &mut SimRng) -> f64 {
        behaviour.react_ns + behaviour.react_jitter_ns * rng.unit()
    }

    /// The host's use of message `sequence`, an injected stall included.
    pub fn use_ns(behaviour: &RingBehaviour, sequence: u64) -> f64 {
        let stalls = behaviour.host_stall_every > 0 && (sequence + 1) % behaviour.host_stall_every == 0;
        behaviour.host_use_ns + if stalls { behaviour.host_stall_ns } else { 0.0 }
    }

    /// The host takes message `sequence`, whose flag it may see from `ready_ns` on: when it saw
    /// it and when it released it (`seen_ns` to `ready_ns` clamps at the buffer before).
    pub fn take(&mut self, behaviour: &RingBehaviour, sequence: u64, ready_ns: f64) -> (f64, f64) {
        let seen_ns = ready_ns.max(self.free_ns);
        let released_ns = seen_ns + Self::use_ns(behaviour, sequence);
        self.free_ns = released_ns;
        (seen_ns, released_ns)
    }
}

/// A lossy source with no free buffer: the message is dropped and the next one comes a message
/// time later (the last one's period) — the source does not wait.
pub fn ready_after_drop(ready_ns: f64, period_ns: f64) -> f64 {
    ready_ns + period_ns.max(1.0)
}

/// Credit starvation around one message becomes its bubble: `before_ns` the link counted
/// during the idle bubble before it (a flag or "done" write it waited for), `during_ns` while it
/// was being served (its own TLPs, or completions behind a starving write: completions may not
/// pass posted writes). The message's start moves later by `during_ns` (the caller's), which
/// joins the bubble; the bubble is `Credits` when starvation is its larger part, else the idle
/// bubble's own cause.
pub fn credit_bubble(idle_ns: f64, idle_cause: WaitCause, before_ns: f64, during_ns: f64) -> (f64, WaitCause) {
    let wait_ns = idle_ns + during_ns;
    let credit_ns = before_ns.clamp(0.0, idle_ns) + during_ns;
    let cause = if credit_ns > 0.0 && credit_ns >= wait_ns - credit_ns { WaitCause::Credits } else { idle_cause };
    (wait_ns, cause)
}

/// The upstream transmitter's credit starvation so far (the device's: injected holds withhold
/// the host's UpdateFCs), ns.
pub fn upstream_starved_ns(sim: &LinkSim) -> f64 {
    sim.outcome().starvation[LinkDirection::Upstream.index()].total_ns
}

/// Writes (not completions) the receiver of `direction` delivered: the driver numbers only
/// the TLPs it queued, the far side's completer answers reads on its own.
pub fn delivered_writes(sim: &LinkSim, direction: LinkDirection) -> u64 {
    sim.delivered_tlps(direction) - sim.delivered_completions(direction)
}

/// Hand `event` to `sink` unless it already failed; its first error is kept to stop the run.
pub fn deliver(sink: &mut dyn MessageSink, error: &mut Option<EngineError>, event: &MessageEvent) {
    if error.is_none() {
        if let Err(e) = sink.message(event) {
            *error = Some(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starvation_is_the_bubbles_cause_when_it_is_the_larger_part() {
        // Push: 300 ns of dwell, 500 ns starved while sending: one credits bubble of both.
        assert_eq!(credit_bubble(300.0, WaitCause::DeviceDwell, 0.0, 500.0), (800.0, WaitCause::Credits));
        assert_eq!(credit_bubble(600.0, WaitCause::DeviceDwell, 0.0, 500.0), (1100.0, WaitCause::DeviceDwell));
        // A starvation that began before the bubble counts only for the bubble's length.
        assert_eq!(credit_bubble(1000.0, WaitCause::NoFreeBuffer, 5000.0, 0.0), (1000.0, WaitCause::Credits));
        assert_eq!(credit_bubble(1000.0, WaitCause::NoFreeBuffer, 400.0, 0.0), (1000.0, WaitCause::NoFreeBuffer));
        // No starvation, no credits; no bubble, nothing.
        assert_eq!(credit_bubble(1000.0, WaitCause::HostLate, 0.0, 0.0), (1000.0, WaitCause::HostLate));
        assert_eq!(credit_bubble(0.0, WaitCause::None, 0.0, 0.0), (0.0, WaitCause::None));
    }

    #[test]
    fn a_message_is_its_data_then_metadata_then_flag() {
        let plan = RingPlan {
            direction: crate::engine::ring::StreamDirection::D2h,
            transport: crate::engine::ring::Transport::Push,
            backpressure: crate::engine::ring::Backpressure::Lossless,
            host_buffers: 4,
            device_buffers: 2,
            buffer_bytes: 8192,
            message_bytes: 300,
            stop: StreamStop::Messages(1),
        };
        let d2h: Vec<_> = d2h_push_pieces(&plan, 1, 128).collect();
        assert_eq!(d2h, vec![(DATA_BASE + 8192, 128), (DATA_BASE + 8192 + 128, 128), (DATA_BASE + 8192 + 256, 44), (METADATA_BASE + 16, 16), (FLAG_BASE + 4, 4)]);
        let h2d: Vec<_> = h2d_push_pieces(&plan, 0, 256).collect();
        assert_eq!(h2d, vec![(DEVICE_DATA_BASE, 256), (DEVICE_DATA_BASE + 256, 44), (DOORBELL_ADDR, 4)]);
        assert!(Limits::of(StreamStop::Messages(3)).open(2, 1e12) && !Limits::of(StreamStop::Messages(3)).open(3, 0.0));
    }
}
