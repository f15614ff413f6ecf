//! Both directions at once (`--direction both`): the d2h push ring of `ring.rs` and the h2d
//! push ring of `ring_h2d.rs` on ONE driven link, so each pays for the other's traffic.
//!
//! Upstream carry the d2h data, metadata and flag writes and the h2d device's "done" writes;
//! downstream the h2d data and doorbells and the d2h host's doorbells. Both share the lanes,
//! the Acks and UpdateFCs and the credits of each direction: a d2h message waits behind the
//! Acks its h2d twin's data makes the device return, and the other way round.
//!
//! The two rings behave as they do alone (the same device and host rules, `RingBehaviour`:
//! `dwell_ns` is the d2h device's pause and the h2d device's consume time), but as one event
//! loop: the next thing to happen is the link's next event, a d2h doorbell or an h2d "done"
//! write falling due, or a producer starting its next message. Every TLP is numbered in its
//! direction's order; the link delivers each direction in order, so "delivered ≥ my number"
//! says a TLP arrived, and "put on the lanes ≥ my number" that it left (its end is then the
//! last TLP end). Lossless push only: lossy and pull are refused before anything moves.

use std::collections::VecDeque;

use crate::engine::ring::{MessageEvent, MessageSink, RingPlan, StreamEnd, StreamStop, WaitCause};
use crate::engine::EngineError;
use crate::link::{transaction, Direction as LinkDirection, LinkSim, TlpKind};

use super::ring::{RingBehaviour, DATA_BASE, DOORBELL_ADDR, FLAG_BASE, FLAG_BYTES, METADATA_BASE, METADATA_BYTES};
use super::ring_h2d::{DeviceBuffers, DEVICE_DATA_BASE, DONE_BASE};
use super::rng::SimRng;

/// Messages started between two looks at the cancel flag.
const CANCEL_EVERY: u64 = 64;

const UP: usize = 0;
const DOWN: usize = 1;

fn link_direction(i: usize) -> LinkDirection {
    if i == UP { LinkDirection::Upstream } else { LinkDirection::Downstream }
}

/// One producer's progress: the message it is sending (until its last TLP left), when it may
/// start the next, and how the stream stands.
struct Producer {
    sequence: u64,
    limit_messages: u64,
    limit_ns: f64,
    /// The number of the message's last TLP while it is being sent.
    sending: Option<u64>,
    ready_ns: f64,
    last_done_ns: Option<f64>,
    first_start_ns: Option<f64>,
    /// Buffers handed to the consumer and buffers it has given back (as the producer sees them).
    committed: u64,
    freed: u64,
    last_freed_ns: f64,
    last_release_ns: f64,
}

impl Producer {
    fn new(stop: StreamStop) -> Self {
        let (limit_messages, limit_ns) = match stop {
            StreamStop::Messages(n) => (n, f64::INFINITY),
            StreamStop::Duration(d) => (u64::MAX, d.as_secs_f64() * 1e9),
        };
        Producer { sequence: 0, limit_messages, limit_ns, sending: None, ready_ns: 0.0, last_done_ns: None, first_start_ns: None, committed: 0, freed: 0, last_freed_ns: 0.0, last_release_ns: 0.0 }
    }

    fn has_more(&self, stopping: bool) -> bool {
        !stopping && self.sequence < self.limit_messages && self.ready_ns < self.limit_ns
    }

    /// When it can start its next message, if it can without waiting for anything but time.
    fn start_ns(&self, buffers: u64, stopping: bool) -> Option<f64> {
        (self.sending.is_none() && self.has_more(stopping) && self.committed - self.freed < buffers).then_some(self.ready_ns)
    }

    /// The bubble before a message starting at `start_ns`: no free buffer when the buffer came
    /// back after the producer was ready, else `idle` (its own pause, if it has one).
    fn wait(&self, start_ns: f64, buffers: u64, idle: WaitCause) -> (f64, WaitCause) {
        let Some(last) = self.last_done_ns else { return (0.0, WaitCause::None) };
        let wait_ns = (start_ns - last).max(0.0);
        let freed_at = if self.committed >= buffers { self.last_freed_ns } else { 0.0 };
        let cause = if wait_ns <= 0.0 { WaitCause::None } else if freed_at > self.ready_ns { WaitCause::NoFreeBuffer } else { idle };
        (wait_ns, cause)
    }

    fn end(&self) -> StreamEnd {
        StreamEnd { produced: self.sequence, dropped_by_producer: Some(0), start_ns: self.first_start_ns.unwrap_or(0.0), end_ns: self.last_release_ns, stopped_early: None, fast_forwarded: 0 }
    }
}

/// A message on its way, device-side times known once its last TLP left.
struct Message {
    sequence: u64,
    slot: u64,
    /// The number of its last TLP (the flag, the doorbell) in its direction.
    last_tlp: u64,
    start_ns: f64,
    done_ns: f64,
    wait_before_ns: f64,
    wait_cause: WaitCause,
}

/// A buffer the h2d device is consuming: its "done" write leaves at `until_ns`.
struct Consuming {
    message: Message,
    seen_ns: f64,
    until_ns: f64,
    occupancy: u32,
}

pub(super) struct BothRun<'a, 's> {
    pub sim: LinkSim,
    pub mps_bytes: u64,
    pub plan: &'a RingPlan,
    pub behaviour: &'a RingBehaviour,
    pub rng: &'a mut SimRng,
    pub sinks: [&'s mut dyn MessageSink; 2],
}

/// The loop's state beside the link.
struct State {
    /// TLPs queued so far, per link direction (UP, DOWN).
    queued: [u64; 2],
    d2h: Producer,
    h2d: Producer,
    /// d2h: messages whose flag has not landed; the host's doorbells not yet rung (due times)
    /// and rung but not arrived (their numbers downstream); release times of landed messages.
    d2h_in_flight: VecDeque<Message>,
    d2h_bells_due: VecDeque<f64>,
    d2h_bells_sent: VecDeque<u64>,
    d2h_held: VecDeque<f64>,
    host_free_ns: f64,
    /// h2d: messages whose doorbell has not arrived; buffers the device consumes; "done"
    /// writes not yet landed (their numbers upstream).
    h2d_sent: VecDeque<Message>,
    h2d_consuming: VecDeque<Consuming>,
    h2d_done_sent: VecDeque<u64>,
    device: DeviceBuffers,
    sink_error: Option<EngineError>,
}

/// What happens next.
#[derive(Clone, Copy, PartialEq)]
enum Next {
    Bell,
    Release,
    Link,
    StartD2h,
    StartH2d,
}

impl BothRun<'_, '_> {
    pub fn run(mut self) -> Result<[StreamEnd; 2], EngineError> {
        let mut s = State {
            queued: [0; 2],
            d2h: Producer::new(self.plan.stop),
            h2d: Producer::new(self.plan.stop),
            d2h_in_flight: VecDeque::new(),
            d2h_bells_due: VecDeque::new(),
            d2h_bells_sent: VecDeque::new(),
            d2h_held: VecDeque::new(),
            host_free_ns: 0.0,
            h2d_sent: VecDeque::new(),
            h2d_consuming: VecDeque::new(),
            h2d_done_sent: VecDeque::new(),
            device: DeviceBuffers::default(),
            sink_error: None,
        };
        let host_buffers = u64::from(self.plan.host_buffers);
        let device_buffers = u64::from(self.plan.device_buffers);
        let mut stopping = false;
        let mut starts = 0u64;
        loop {
            if let Some(error) = s.sink_error.take() {
                return Err(error);
            }
            let link = self.sim.next_event_ns();
            let bell = s.d2h_bells_due.front().copied();
            let release = s.h2d_consuming.front().map(|c| c.until_ns);
            let d2h_start = s.d2h.start_ns(host_buffers, stopping);
            let h2d_start = s.h2d.start_ns(device_buffers, stopping);
            // Timers before link events at the same time, starts after both (as alone).
            let mut next: Option<(f64, Next)> = None;
            let mut consider = |t: Option<f64>, what: Next| {
                if let Some(t) = t {
                    if next.as_ref().is_none_or(|(best, _)| t < *best) {
                        next = Some((t, what));
                    }
                }
            };
            consider(bell, Next::Bell);
            consider(release, Next::Release);
            consider(link, Next::Link);
            consider(d2h_start, Next::StartD2h);
            consider(h2d_start, Next::StartH2d);
            let Some((at_ns, what)) = next else { break };
            match what {
                Next::Bell => {
                    s.d2h_bells_due.pop_front();
                    self.sim.run_until_ns(at_ns);
                    let number = self.queue(&mut s, DOWN, DOORBELL_ADDR, FLAG_BYTES);
                    s.d2h_bells_sent.push_back(number);
                }
                Next::Release => {
                    self.sim.run_until_ns(at_ns);
                    let done = s.h2d_consuming.pop_front().expect("checked");
                    let number = self.queue(&mut s, UP, DONE_BASE + done.message.slot * FLAG_BYTES, FLAG_BYTES);
                    s.h2d_done_sent.push_back(number);
                    s.device.released += 1;
                    s.h2d.last_release_ns = at_ns;
                    self.emit_h2d(&mut s, done);
                }
                Next::Link => {
                    self.sim.step_event();
                    self.after_step(&mut s);
                }
                Next::StartD2h | Next::StartH2d => {
                    if starts % CANCEL_EVERY == 0 && crate::cancel::requested() {
                        stopping = true;
                        continue;
                    }
                    starts += 1;
                    self.sim.run_until_ns(at_ns);
                    let start_ns = self.sim.now_ns().max(at_ns);
                    if what == Next::StartD2h {
                        self.start_d2h(&mut s, start_ns);
                    } else {
                        self.start_h2d(&mut s, start_ns);
                    }
                }
            }
        }
        if let Some(error) = s.sink_error.take() {
            return Err(error);
        }
        if s.d2h.has_more(stopping) || s.h2d.has_more(stopping) {
            return Err(EngineError::Unsupported("simulated rings (both directions) stalled: no buffer will ever be freed (a bug)".into()));
        }
        let stopped = stopping.then(|| "interrupted".to_string());
        Ok([StreamEnd { stopped_early: stopped.clone(), ..s.d2h.end() }, StreamEnd { stopped_early: stopped, ..s.h2d.end() }])
    }

    /// Queue one MWr in link direction `i`; returns its number in that direction.
    fn queue(&mut self, s: &mut State, i: usize, addr: u64, len: u64) -> u64 {
        self.sim.send(link_direction(i), transaction::tlp(TlpKind::MemWrite, addr, len, 0));
        s.queued[i] += 1;
        s.queued[i]
    }

    /// The device writes one message into a host buffer: data, metadata, flag, upstream.
    fn start_d2h(&mut self, s: &mut State, start_ns: f64) {
        let idle = if self.behaviour.dwell_ns > 0.0 { WaitCause::DeviceDwell } else { WaitCause::None };
        let (wait_before_ns, wait_cause) = s.d2h.wait(start_ns, u64::from(self.plan.host_buffers), idle);
        let slot = s.d2h.committed % u64::from(self.plan.host_buffers);
        let mut split = transaction::Splitter::new(DATA_BASE + slot * u64::from(self.plan.buffer_bytes), u64::from(self.plan.message_bytes), self.mps_bytes);
        while let Some((addr, len)) = split.next_piece() {
            self.queue(s, UP, addr, len);
        }
        self.queue(s, UP, METADATA_BASE + slot * METADATA_BYTES, METADATA_BYTES);
        let last_tlp = self.queue(s, UP, FLAG_BASE + slot * FLAG_BYTES, FLAG_BYTES);
        s.d2h_in_flight.push_back(Message { sequence: s.d2h.sequence, slot, last_tlp, start_ns, done_ns: f64::NAN, wait_before_ns, wait_cause });
        Self::started(&mut s.d2h, last_tlp, start_ns);
        self.after_step(s);
    }

    /// The host writes one message into a device buffer: data and doorbell, downstream.
    fn start_h2d(&mut self, s: &mut State, start_ns: f64) {
        let idle = if self.behaviour.host_use_ns > 0.0 { WaitCause::ProducerIdle } else { WaitCause::None };
        let (wait_before_ns, wait_cause) = s.h2d.wait(start_ns, u64::from(self.plan.device_buffers), idle);
        let slot = s.h2d.sequence % u64::from(self.plan.device_buffers);
        let mut split = transaction::Splitter::new(DEVICE_DATA_BASE + slot * u64::from(self.plan.buffer_bytes), u64::from(self.plan.message_bytes), self.mps_bytes);
        while let Some((addr, len)) = split.next_piece() {
            self.queue(s, DOWN, addr, len);
        }
        let last_tlp = self.queue(s, DOWN, DOORBELL_ADDR, FLAG_BYTES);
        s.h2d_sent.push_back(Message { sequence: s.h2d.sequence, slot, last_tlp, start_ns, done_ns: f64::NAN, wait_before_ns, wait_cause });
        Self::started(&mut s.h2d, last_tlp, start_ns);
        self.after_step(s);
    }

    fn started(producer: &mut Producer, last_tlp: u64, start_ns: f64) {
        producer.first_start_ns.get_or_insert(start_ns);
        producer.sending = Some(last_tlp);
        producer.committed += 1;
        producer.sequence += 1;
    }

    /// After anything moved: a producer's last TLP left, TLPs arrived.
    fn after_step(&mut self, s: &mut State) {
        let now = self.sim.now_ns();
        // A message's last TLP on the lanes: the producer is done with it (after its pause).
        let on_lanes = |sim: &LinkSim, i: usize| sim.outcome().stats[link_direction(i).index()].tlps;
        if let Some(last) = s.d2h.sending.filter(|&n| on_lanes(&self.sim, UP) >= n) {
            let done_ns = self.sim.last_tlp_end_ns(LinkDirection::Upstream);
            Self::sent(&mut s.d2h, done_ns, self.behaviour.dwell_ns);
            if let Some(m) = s.d2h_in_flight.iter_mut().rev().find(|m| m.last_tlp == last) {
                m.done_ns = done_ns;
            }
        }
        if let Some(last) = s.h2d.sending.filter(|&n| on_lanes(&self.sim, DOWN) >= n) {
            let done_ns = self.sim.last_tlp_end_ns(LinkDirection::Downstream);
            Self::sent(&mut s.h2d, done_ns, self.behaviour.host_use_ns);
            if let Some(m) = s.h2d_sent.iter_mut().rev().find(|m| m.last_tlp == last) {
                m.done_ns = done_ns;
            }
        }
        let up = self.sim.delivered_tlps(LinkDirection::Upstream);
        let down = self.sim.delivered_tlps(LinkDirection::Downstream);
        while s.d2h_in_flight.front().is_some_and(|m| m.last_tlp <= up && !m.done_ns.is_nan()) {
            let message = s.d2h_in_flight.pop_front().expect("checked");
            self.host_takes(s, message, now);
        }
        while s.h2d_done_sent.front().is_some_and(|&n| n <= up) {
            s.h2d_done_sent.pop_front();
            s.h2d.freed += 1;
            s.h2d.last_freed_ns = now;
        }
        while s.d2h_bells_sent.front().is_some_and(|&n| n <= down) {
            s.d2h_bells_sent.pop_front();
            s.d2h.freed += 1;
            s.d2h.last_freed_ns = now;
        }
        while s.h2d_sent.front().is_some_and(|m| m.last_tlp <= down && !m.done_ns.is_nan()) {
            let message = s.h2d_sent.pop_front().expect("checked");
            let (seen_ns, until_ns, occupancy) = s.device.take(now, self.behaviour.dwell_ns);
            s.h2d_consuming.push_back(Consuming { message, seen_ns, until_ns, occupancy });
        }
    }

    fn sent(producer: &mut Producer, done_ns: f64, pause_ns: f64) {
        producer.sending = None;
        producer.last_done_ns = Some(done_ns);
        producer.ready_ns = done_ns + pause_ns;
    }

    /// The d2h host sees the flag that landed at `landed_ns`, uses the buffer, rings its
    /// doorbell (as `ring.rs`).
    fn host_takes(&mut self, s: &mut State, message: Message, landed_ns: f64) {
        let b = self.behaviour;
        let reaction_ns = b.react_ns + b.react_jitter_ns * self.rng.unit();
        let seen_ns = (landed_ns + reaction_ns).max(s.host_free_ns);
        let stall_ns = if b.host_stall_every > 0 && (message.sequence + 1) % b.host_stall_every == 0 { b.host_stall_ns } else { 0.0 };
        let released_ns = seen_ns + b.host_use_ns + stall_ns;
        s.host_free_ns = released_ns;
        s.d2h.last_release_ns = released_ns;
        s.d2h_bells_due.push_back(released_ns);
        while s.d2h_held.front().is_some_and(|&r| r <= landed_ns) {
            s.d2h_held.pop_front();
        }
        s.d2h_held.push_back(released_ns);
        let event = MessageEvent {
            sequence: message.sequence,
            bytes: self.plan.message_bytes,
            device_start_ns: Some(message.start_ns),
            device_done_ns: Some(message.done_ns),
            host_seen_ns: seen_ns,
            host_released_ns: released_ns,
            ring_occupancy: s.d2h_held.len() as u32,
            wait_before_ns: message.wait_before_ns,
            wait_cause: message.wait_cause,
        };
        self.emit(s, 0, &event);
    }

    fn emit_h2d(&mut self, s: &mut State, done: Consuming) {
        let event = MessageEvent {
            sequence: done.message.sequence,
            bytes: self.plan.message_bytes,
            device_start_ns: Some(done.message.start_ns),
            device_done_ns: Some(done.message.done_ns),
            host_seen_ns: done.seen_ns,
            host_released_ns: done.until_ns,
            ring_occupancy: done.occupancy,
            wait_before_ns: done.message.wait_before_ns,
            wait_cause: done.message.wait_cause,
        };
        self.emit(s, 1, &event);
    }

    fn emit(&mut self, s: &mut State, sink: usize, event: &MessageEvent) {
        if s.sink_error.is_none() {
            if let Err(error) = self.sinks[sink].message(event) {
                s.sink_error = Some(error);
            }
        }
    }
}
