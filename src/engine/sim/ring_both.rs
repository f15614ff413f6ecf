//! Both directions at once (`--direction both`): a d2h ring (push as `ring.rs`, or pull as
//! `ring_pull.rs`) and an h2d ring of the same mode (push as `ring_h2d.rs`, or pull as
//! `ring_h2d_pull.rs`) on ONE driven link, so each pays for the other's traffic.
//!
//! Upstream carry the d2h data, metadata and flag writes (pull: the flags and the completions
//! of the host's reads) and the h2d device's "done" writes (pull: its read requests and its
//! "free" writes); downstream the h2d data and doorbells (pull: the doorbells and the
//! completions of the device's reads) and the d2h host's doorbells (pull: and its read
//! requests). Both share the lanes, the Acks and UpdateFCs and the credits of each direction.
//!
//! Each ring is a [`Side`] of the one event loop (`ring/drive.rs`), with the rules it has alone
//! (`ring/rules.rs`, `ring/one_read.rs`; `dwell_ns` is the d2h device's pause and the h2d
//! device's consume time, `react_ns` the d2h host's reaction and the h2d pull device's). The d2h
//! push device alone runs in `ring.rs` (its loop carries the steady-state fast-forward); beside
//! the h2d ring it is [`PushD2hSide`], the same rules under the shared loop. Lossy applies to
//! both producers: the d2h device drops a message when no host buffer is free, the h2d host when
//! no buffer is free (push: a device buffer; pull: one of its own).

use std::collections::VecDeque;

use crate::engine::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamDirection, StreamEnd, Transport, WaitCause};
use crate::engine::EngineError;
use crate::link::{Direction as LinkDirection, LinkSim, SimConfig, TlpKind};

use super::ring::drive::{drive, Lanes, Next, Producer, Side};
use super::ring::rules::{self, upstream_starved_ns, HostConsumer};
use super::ring::{RingBehaviour, RingTruth, DOORBELL_ADDR, DOORBELL_BYTES, REACTIONS_KEPT};
use super::ring_h2d::H2dSide;
use super::ring_h2d_pull::H2dPullSide;
use super::ring_pull::PullSide;
use super::rng::SimRng;

/// A d2h push message on its way: device-side times known once its last TLP left.
struct Message {
    sequence: u64,
    /// The number of its flag upstream.
    last_tlp: u64,
    /// Queued at; the upstream starvation counted then.
    queued_ns: f64,
    starved_before_ns: f64,
    idle_ns: f64,
    idle_cause: WaitCause,
    /// Once its flag left: its start (moved by any credit starvation), done, bubble.
    sent: Option<(f64, f64, f64, WaitCause)>,
}

/// The d2h push ring (device producing into the host's buffers) as a side of the shared loop.
pub(super) struct PushD2hSide<'a> {
    mps_bytes: u64,
    plan: &'a RingPlan,
    behaviour: &'a RingBehaviour,
    rng: &'a mut SimRng,
    sink: &'a mut dyn MessageSink,
    producer: Producer,
    truth: RingTruth,
    lossy: bool,
    /// Messages whose flag has not landed; doorbells not yet rung (due times) and rung but not
    /// arrived (their numbers downstream); release times of landed messages.
    in_flight: VecDeque<Message>,
    bells_due: VecDeque<f64>,
    bells_sent: VecDeque<u64>,
    held: VecDeque<f64>,
    host: HostConsumer,
    sink_error: Option<EngineError>,
}

impl<'a> PushD2hSide<'a> {
    pub fn new(mps_bytes: u64, plan: &'a RingPlan, behaviour: &'a RingBehaviour, rng: &'a mut SimRng, sink: &'a mut dyn MessageSink) -> Self {
        PushD2hSide {
            mps_bytes,
            plan,
            behaviour,
            rng,
            sink,
            producer: Producer::new(plan.stop),
            truth: RingTruth::default(),
            lossy: plan.backpressure == Backpressure::Lossy,
            in_flight: VecDeque::new(),
            bells_due: VecDeque::new(),
            bells_sent: VecDeque::new(),
            held: VecDeque::new(),
            host: HostConsumer::default(),
            sink_error: None,
        }
    }

    fn buffers(&self) -> u64 {
        u64::from(self.plan.host_buffers)
    }

    /// The device writes one message into a host buffer (data, metadata, flag, upstream), or,
    /// lossy with every host buffer full, drops it.
    fn start(&mut self, lanes: &mut Lanes, start_ns: f64) {
        if !self.producer.admit(self.buffers()) {
            return;
        }
        let idle = if self.behaviour.dwell_ns > 0.0 { WaitCause::DeviceDwell } else { WaitCause::None };
        let (idle_ns, idle_cause) = self.producer.wait(start_ns, self.buffers(), idle);
        let slot = self.producer.committed % self.buffers();
        let mut last_tlp = 0;
        for (addr, len) in rules::d2h_push_pieces(self.plan, slot, self.mps_bytes) {
            last_tlp = lanes.send(LinkDirection::Upstream, TlpKind::MemWrite, addr, len);
        }
        let starved_before_ns = upstream_starved_ns(&lanes.sim);
        self.in_flight.push_back(Message { sequence: self.producer.sequence, last_tlp, queued_ns: start_ns, starved_before_ns, idle_ns, idle_cause, sent: None });
        self.producer.started(last_tlp, start_ns);
    }

    /// The host sees the flag that landed at `landed_ns`, uses the buffer, rings its doorbell
    /// (the rules of `ring.rs`).
    fn host_takes(&mut self, message: Message, landed_ns: f64) {
        let (start_ns, done_ns, wait_before_ns, wait_cause) = message.sent.expect("its flag left");
        let reaction_ns = HostConsumer::react(self.behaviour, self.rng);
        if self.truth.reactions_ns.len() < REACTIONS_KEPT {
            self.truth.reactions_ns.push(reaction_ns);
        }
        let (seen_ns, released_ns) = self.host.take(self.behaviour, message.sequence, landed_ns + reaction_ns);
        self.producer.last_release_ns = released_ns;
        self.bells_due.push_back(released_ns);
        while self.held.front().is_some_and(|&r| r <= landed_ns) {
            self.held.pop_front();
        }
        self.held.push_back(released_ns);
        let event = MessageEvent {
            sequence: message.sequence,
            bytes: self.plan.message_bytes,
            device_start_ns: Some(start_ns),
            device_done_ns: Some(done_ns),
            host_seen_ns: seen_ns,
            host_released_ns: released_ns,
            ring_occupancy: self.held.len() as u32,
            wait_before_ns,
            wait_cause,
        };
        rules::deliver(self.sink, &mut self.sink_error, &event);
    }

}

impl Side for PushD2hSide<'_> {
    fn next(&mut self, _now_ns: f64) -> Option<Next> {
        let bell = self.bells_due.front().map(|&at_ns| Next { at_ns, before_link: true, starts: false });
        Next::first(bell, self.producer.next(self.buffers(), self.lossy))
    }

    fn act(&mut self, lanes: &mut Lanes, at_ns: f64) {
        if self.bells_due.front().is_some_and(|&t| t <= at_ns) {
            self.bells_due.pop_front();
            let number = lanes.send(LinkDirection::Downstream, TlpKind::MemWrite, DOORBELL_ADDR, DOORBELL_BYTES);
            self.bells_sent.push_back(number);
        } else {
            self.start(lanes, at_ns);
        }
    }

    fn observe(&mut self, lanes: &mut Lanes) {
        let now = lanes.sim.now_ns();
        if let Some(last) = self.producer.sending.filter(|&n| lanes.left(LinkDirection::Upstream) >= n) {
            let done_ns = lanes.sim.last_tlp_end_ns(LinkDirection::Upstream);
            let starved_total_ns = upstream_starved_ns(&lanes.sim);
            let m = self.in_flight.iter_mut().rev().find(|m| m.last_tlp == last).expect("the message being sent");
            // Every TLP of it has left: any starvation during it has ended and is counted.
            let starved_ns = starved_total_ns - m.starved_before_ns;
            let (wait_ns, cause) = rules::credit_bubble(m.idle_ns, m.idle_cause, 0.0, starved_ns);
            let wait_cause = if wait_ns > 0.0 { cause } else { WaitCause::None };
            m.sent = Some((m.queued_ns + starved_ns, done_ns, wait_ns, wait_cause));
            let queued_ns = m.queued_ns;
            self.producer.sent(queued_ns, done_ns, self.behaviour.dwell_ns, starved_total_ns);
        }
        let up = lanes.delivered(LinkDirection::Upstream);
        while self.in_flight.front().is_some_and(|m| m.last_tlp <= up && m.sent.is_some()) {
            let message = self.in_flight.pop_front().expect("checked");
            self.host_takes(message, now);
        }
        let down = lanes.delivered(LinkDirection::Downstream);
        while self.bells_sent.front().is_some_and(|&n| n <= down) {
            self.bells_sent.pop_front();
            self.producer.freed_one(now);
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
        self.truth.span_ns = self.producer.last_release_ns - self.producer.first_start_ns.unwrap_or(0.0);
        (self.truth.dropped, self.truth.dropped_after_last) = (self.producer.dropped, self.producer.dropped_after_last);
        (self.producer.end(stopped_early), std::mem::take(&mut self.truth))
    }
}

/// The h2d ring of `plan` as a side of the shared loop: push (`ring_h2d.rs`) or pull
/// (`ring_h2d_pull.rs`), lossless or lossy.
pub(super) fn h2d_side<'a>(link: &'a SimConfig, plan: &'a RingPlan, behaviour: &'a RingBehaviour, rng: &'a mut SimRng, sink: &'a mut dyn MessageSink) -> Box<dyn Side + 'a> {
    match plan.transport {
        Transport::Push => Box::new(H2dSide::new(link.mps_bytes, plan, behaviour, sink)),
        Transport::Pull => Box::new(H2dPullSide::new(link, plan, behaviour, rng, sink)),
    }
}

/// The d2h ring of `plan` as a side of the shared loop: push (the rules of `ring.rs`) or pull
/// (`ring_pull.rs`), lossless or lossy.
fn d2h_side<'a>(link: &'a SimConfig, plan: &'a RingPlan, behaviour: &'a RingBehaviour, rng: &'a mut SimRng, sink: &'a mut dyn MessageSink) -> Box<dyn Side + 'a> {
    match plan.transport {
        Transport::Push => Box::new(PushD2hSide::new(link.mps_bytes, plan, behaviour, rng, sink)),
        Transport::Pull => Box::new(PullSide::new(link, plan, behaviour, rng, sink)),
    }
}

/// Run the d2h ring of `plan` and the h2d ring of the same shape and mode (push or pull,
/// lossless or lossy) at once on one link; `sinks[0]` gets the d2h messages, `sinks[1]` the
/// h2d ones. `rngs` are each ring's own draws (the d2h host's reactions, the h2d device's).
/// Returns their ends and the d2h ring's truth with the h2d ring's beside it, each with the
/// link's upstream starvation.
pub(super) fn run(sim: LinkSim, link: &SimConfig, plan: &RingPlan, behaviour: &RingBehaviour, rngs: [&mut SimRng; 2], sinks: [&mut dyn MessageSink; 2]) -> Result<([StreamEnd; 2], RingTruth), EngineError> {
    let [d2h_sink, h2d_sink] = sinks;
    let [d2h_rng, h2d_rng] = rngs;
    let d2h_plan = RingPlan { direction: StreamDirection::D2h, ..plan.clone() };
    let h2d_plan = RingPlan { direction: StreamDirection::H2d, ..plan.clone() };
    let mut d2h = d2h_side(link, &d2h_plan, behaviour, d2h_rng, d2h_sink);
    let mut h2d = h2d_side(link, &h2d_plan, behaviour, h2d_rng, h2d_sink);
    let mut lanes = Lanes::new(sim);
    let stopped = drive(&mut lanes, &mut [d2h.as_mut(), h2d.as_mut()])?;
    let (d2h_end, mut truth) = d2h.finish(stopped.clone());
    let (h2d_end, mut h2d_truth) = h2d.finish(stopped);
    let starvation = lanes.sim.outcome().starvation[LinkDirection::Upstream.index()];
    (truth.credit_starvation, h2d_truth.credit_starvation) = (starvation, starvation);
    truth.h2d = Some(Box::new(h2d_truth));
    Ok(([d2h_end, h2d_end], truth))
}
