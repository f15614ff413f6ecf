//! The ring personality host to device in pull mode (OCDP's pull "to device"; document 003:
//! "Pull mode keeps one read in flight"): the host fills its own buffers, the device reads each
//! message out of host memory.
//!
//! Per message the host, `host_use_ns` after its previous doorbell (its preparation; longer by
//! `host_stall_ns` every `host_stall_every` messages) and once one of its `host_buffers` is free,
//! fills the buffer and marks it full with a 1-DW doorbell MWr downstream. The device's engine,
//! once that doorbell has arrived, it is done with the message before and one of its
//! `device_buffers` is free, pauses for its reaction (`react_ns` + jitter, drawn per message),
//! then reads the message with MRd requests of at most MRRS (never crossing 4 KiB), exactly one
//! in flight (`ring/one_read.rs`): the next request leaves when every completion of the one
//! before has arrived (the host's memory answers after `latency_ns`, completions cut at RCB and
//! MPS by the link simulator's completer). With the last completion in, it marks the host buffer
//! free with a 1-DW MWr upstream to the host's flag (the host reuses the buffer when that write
//! has landed) and hands its copy to the device's consumer, which takes its buffers one at a time
//! for `dwell_ns` each. Lossy, a host with no free buffer drops the message (counted) and makes the
//! next one a message time later. Every time comes from TLPs crossing the link simulator.
//!
//! Events: device start is the engine's first request leaving (device clock), device done its
//! last completion arriving (the message is in the device buffer), host seen and released the
//! device's consumer taking and finishing it (as h2d push); the occupancy is the device's
//! buffers holding a message not yet consumed. The bubble before a message (the engine's idle
//! time after the previous one) is `producer_idle` when it waited for the host's doorbell,
//! `no_free_buffer` for a device buffer, `device_dwell` for its own reaction, whichever took
//! longest (`credits` where the link's starvation did, `ring/rules.rs`).

use std::collections::VecDeque;

use crate::engine::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamEnd, WaitCause};
use crate::engine::EngineError;
use crate::link::{Direction as LinkDirection, TlpKind};

use super::ring::drive::{Lanes, Next, Producer, Side};
use super::ring::one_read::{OneRead, Progress};
use super::ring::rules::{self, upstream_starved_ns, HostConsumer};
use super::ring::{RingBehaviour, RingTruth, DATA_BASE, DOORBELL_ADDR, DOORBELL_BYTES, FLAG_BYTES, REACTIONS_KEPT};
use super::rng::SimRng;

/// The host's "free" flags, one per host buffer.
const FREE_BASE: u64 = 1 << 38;

/// A host buffer marked full: its doorbell on its way down, then waiting at the device.
struct Marked {
    sequence: u64,
    slot: u64,
    /// The number of its doorbell downstream.
    doorbell: u64,
    arrived_ns: Option<f64>,
}

/// The device's one read in flight.
struct Pull {
    marked: Marked,
    read: OneRead,
    start_ns: f64,
    /// The upstream starvation counted when the first request left.
    starved_at_start_ns: f64,
    idle_ns: f64,
    idle_cause: WaitCause,
}

/// A message in a device buffer: landed, waiting for or taken by the device's consumer.
struct Landed {
    sequence: u64,
    start_ns: f64,
    done_ns: f64,
    seen_ns: f64,
    until_ns: f64,
    occupancy: u32,
    wait_before_ns: f64,
    wait_cause: WaitCause,
}

/// What the side does next, as `next` chose it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Act {
    Consumed,
    Pull,
    Host,
}

/// The h2d pull ring: the host producing into its buffers, the device reading and consuming.
pub(super) struct H2dPullSide<'a> {
    link: &'a crate::link::SimConfig,
    plan: &'a RingPlan,
    behaviour: &'a RingBehaviour,
    rng: &'a mut SimRng,
    sink: &'a mut dyn MessageSink,
    truth: RingTruth,
    /// The host, over its `host_buffers`.
    producer: Producer,
    lossy: bool,
    marked: VecDeque<Marked>,
    /// The device's engine: its read in flight, when it finished the one before, the reaction
    /// drawn for its next read (kept until that read leaves).
    pulling: Option<Pull>,
    engine_free_ns: f64,
    reaction: Option<f64>,
    last_done_ns: Option<f64>,
    starved_at_done_ns: f64,
    /// Free writes on their way up (their numbers).
    frees: VecDeque<u64>,
    /// The device's buffers: taken by a read or a landed message; since when one is free again
    /// after all were taken.
    in_device: u64,
    buffer_back_ns: f64,
    landed: VecDeque<Landed>,
    consumer_free_ns: f64,
    /// Truth: when every device buffer last came to hold a landed message, if they do.
    full_since_ns: Option<f64>,
    /// The first read's start (the report's stream starts there).
    first_start_ns: Option<f64>,
    sink_error: Option<EngineError>,
    chosen: Option<Act>,
}

impl<'a> H2dPullSide<'a> {
    pub fn new(link: &'a crate::link::SimConfig, plan: &'a RingPlan, behaviour: &'a RingBehaviour, rng: &'a mut SimRng, sink: &'a mut dyn MessageSink) -> Self {
        H2dPullSide {
            link,
            plan,
            behaviour,
            rng,
            sink,
            truth: RingTruth::default(),
            producer: Producer::new(plan.stop),
            lossy: plan.backpressure == Backpressure::Lossy,
            marked: VecDeque::new(),
            pulling: None,
            engine_free_ns: 0.0,
            reaction: None,
            last_done_ns: None,
            starved_at_done_ns: 0.0,
            frees: VecDeque::new(),
            in_device: 0,
            buffer_back_ns: 0.0,
            landed: VecDeque::new(),
            consumer_free_ns: 0.0,
            full_since_ns: None,
            first_start_ns: None,
            sink_error: None,
            chosen: None,
        }
    }

    fn host_buffers(&self) -> u64 {
        u64::from(self.plan.host_buffers)
    }

    fn device_buffers(&self) -> u64 {
        u64::from(self.plan.device_buffers)
    }

    /// The host fills a free host buffer and rings its doorbell; or, lossy with none free,
    /// drops the message. It prepares the next from its doorbell on (a posted write: the CPU
    /// does not wait for it).
    fn host_start(&mut self, lanes: &mut Lanes, at_ns: f64) {
        if !self.producer.admit(self.host_buffers()) {
            return;
        }
        let sequence = self.producer.sequence;
        let slot = self.producer.committed % self.host_buffers();
        let doorbell = lanes.send(LinkDirection::Downstream, TlpKind::MemWrite, DOORBELL_ADDR, DOORBELL_BYTES);
        self.marked.push_back(Marked { sequence, slot, doorbell, arrived_ns: None });
        self.producer.started(doorbell, at_ns);
        let preparation_ns = HostConsumer::use_ns(self.behaviour, sequence);
        self.producer.sent(at_ns, at_ns, preparation_ns, upstream_starved_ns(&lanes.sim));
    }

    /// When the engine could start its next read, its reaction aside: the doorbell arrived, the
    /// message before done, a device buffer free. With the wait before it and its cause.
    fn engine_ready(&self) -> Option<(f64, f64, WaitCause)> {
        if self.pulling.is_some() || self.in_device >= self.device_buffers() {
            return None;
        }
        let arrived_ns = self.marked.front()?.arrived_ns?;
        let from_ns = self.engine_free_ns;
        let doorbell_wait_ns = arrived_ns - from_ns;
        let buffer_wait_ns = self.buffer_back_ns - from_ns;
        let (wait_ns, cause) = if doorbell_wait_ns >= buffer_wait_ns { (doorbell_wait_ns, WaitCause::ProducerIdle) } else { (buffer_wait_ns, WaitCause::NoFreeBuffer) };
        Some((from_ns + wait_ns.max(0.0), wait_ns.max(0.0), cause))
    }

    fn engine_at(&mut self) -> Option<f64> {
        let (ready_ns, _, _) = self.engine_ready()?;
        let reaction_ns = *self.reaction.get_or_insert_with(|| HostConsumer::react(self.behaviour, self.rng));
        Some(ready_ns + reaction_ns)
    }

    /// The engine starts reading the oldest marked buffer.
    fn pull(&mut self, lanes: &mut Lanes, at_ns: f64) {
        let (_, wait_ns, wait_cause) = self.engine_ready().expect("engine_at said ready");
        let reaction_ns = self.reaction.take().expect("drawn with engine_at");
        if self.truth.reactions_ns.len() < REACTIONS_KEPT {
            self.truth.reactions_ns.push(reaction_ns);
        }
        // The bubble is the wait and the reaction; the longer names it.
        let idle_cause = if reaction_ns > wait_ns { WaitCause::DeviceDwell } else { wait_cause };
        let idle_ns = if self.last_done_ns.is_some() { at_ns - self.engine_free_ns } else { 0.0 };
        let marked = self.marked.pop_front().expect("engine_ready saw it");
        self.in_device += 1;
        let addr = DATA_BASE + marked.slot * u64::from(self.plan.buffer_bytes);
        let starved_at_start_ns = upstream_starved_ns(&lanes.sim);
        let (read, _) = OneRead::start(lanes, self.link, LinkDirection::Upstream, addr, u64::from(self.plan.message_bytes));
        self.pulling = Some(Pull { marked, read, start_ns: at_ns, starved_at_start_ns, idle_ns, idle_cause });
    }

    /// The last completion is in: the free write goes up, the consumer takes the copy.
    fn landed(&mut self, lanes: &mut Lanes, pull: Pull) {
        let done_ns = lanes.sim.now_ns();
        // Starvation while it was read (a request behind a starving free write) moves its start
        // later; starvation that ended in the bubble before it is the bubble's.
        let starved_now_ns = upstream_starved_ns(&lanes.sim);
        let during_ns = (starved_now_ns - pull.starved_at_start_ns).min(done_ns - pull.start_ns).max(0.0);
        let (wait_before_ns, cause) = rules::credit_bubble(pull.idle_ns, pull.idle_cause, pull.starved_at_start_ns - self.starved_at_done_ns, during_ns);
        let wait_cause = if wait_before_ns > 0.0 { cause } else { WaitCause::None };
        let number = lanes.send(LinkDirection::Upstream, TlpKind::MemWrite, FREE_BASE + pull.marked.slot * FLAG_BYTES, FLAG_BYTES);
        self.frees.push_back(number);
        self.engine_free_ns = done_ns;
        self.last_done_ns = Some(done_ns);
        self.starved_at_done_ns = starved_now_ns;
        let seen_ns = done_ns.max(self.consumer_free_ns);
        self.consumer_free_ns = seen_ns + self.behaviour.dwell_ns;
        let occupancy = self.landed.len() as u32 + 1;
        if u64::from(occupancy) >= self.device_buffers() && self.full_since_ns.is_none() {
            self.full_since_ns = Some(done_ns);
        }
        self.first_start_ns.get_or_insert(pull.start_ns + during_ns);
        self.landed.push_back(Landed {
            sequence: pull.marked.sequence,
            start_ns: pull.start_ns + during_ns,
            done_ns,
            seen_ns,
            until_ns: self.consumer_free_ns,
            occupancy,
            wait_before_ns,
            wait_cause,
        });
    }

    /// The consumer is done with the oldest landed message: its device buffer is free.
    fn consumed(&mut self, at_ns: f64) {
        let done = self.landed.pop_front().expect("a message being consumed");
        if let Some(since) = self.full_since_ns.take() {
            self.truth.full_ns += at_ns - since;
        }
        if self.in_device == self.device_buffers() {
            self.buffer_back_ns = at_ns;
        }
        self.in_device -= 1;
        self.producer.last_release_ns = at_ns;
        let event = MessageEvent {
            sequence: done.sequence,
            bytes: self.plan.message_bytes,
            device_start_ns: Some(done.start_ns),
            device_done_ns: Some(done.done_ns),
            host_seen_ns: done.seen_ns,
            host_released_ns: done.until_ns,
            ring_occupancy: done.occupancy,
            wait_before_ns: done.wait_before_ns,
            wait_cause: done.wait_cause,
        };
        rules::deliver(self.sink, &mut self.sink_error, &event);
    }

}

impl Side for H2dPullSide<'_> {
    fn next(&mut self, _now_ns: f64) -> Option<Next> {
        let consumed = self.landed.front().map(|l| (l.until_ns, Act::Consumed));
        let pull = self.engine_at().map(|at| (at, Act::Pull));
        let host = self.producer.next(self.host_buffers(), self.lossy).map(|n| (n.at_ns, Act::Host));
        // Timers before the link's events; the host's start after them (as every producer).
        let best = [consumed, pull, host].into_iter().flatten().min_by(|a, b| a.0.total_cmp(&b.0).then((a.1 == Act::Host).cmp(&(b.1 == Act::Host))));
        self.chosen = best.map(|(_, act)| act);
        best.map(|(at_ns, act)| Next { at_ns, before_link: act != Act::Host, starts: act == Act::Host })
    }

    fn act(&mut self, lanes: &mut Lanes, at_ns: f64) {
        match self.chosen.take().expect("next chose") {
            Act::Consumed => self.consumed(at_ns),
            Act::Pull => self.pull(lanes, at_ns),
            Act::Host => self.host_start(lanes, at_ns),
        }
    }

    fn observe(&mut self, lanes: &mut Lanes) {
        let now = lanes.sim.now_ns();
        let down = lanes.delivered(LinkDirection::Downstream);
        for marked in self.marked.iter_mut().filter(|m| m.arrived_ns.is_none() && m.doorbell <= down) {
            marked.arrived_ns = Some(now);
        }
        let up = lanes.delivered(LinkDirection::Upstream);
        while self.frees.front().is_some_and(|&n| n <= up) {
            self.frees.pop_front();
            self.producer.freed_one(now);
        }
        let Some(mut pull) = self.pulling.take() else { return };
        match pull.read.advance(lanes) {
            Progress::Reading => self.pulling = Some(pull),
            Progress::Done => self.landed(lanes, pull),
        }
    }

    fn stop(&mut self) {
        self.producer.stop();
    }

    fn unfinished(&self) -> bool {
        self.producer.has_more()
    }

    fn failed(&mut self) -> Option<EngineError> {
        self.sink_error.take()
    }

    fn finish(&mut self, stopped_early: Option<String>) -> (StreamEnd, RingTruth) {
        let end = self.producer.end(stopped_early);
        self.truth.span_ns = end.end_ns - self.first_start_ns.unwrap_or(0.0);
        (self.truth.dropped, self.truth.dropped_after_last) = (self.producer.dropped, self.producer.dropped_after_last);
        (end, std::mem::take(&mut self.truth))
    }
}
