//! The ring personality host to device, push (XDMA H2C, OCDP's "to device"): the host writes
//! each message into one of the device's `device_buffers` buffers, the device consumes it.
//!
//! Per message the host, `host_use_ns` after its previous message's writes left (its own
//! preparation), and once the device has a free buffer, queues the data as MWr TLPs of at most
//! MPS that never cross 4 KiB and a 1-DW flag MWr (the doorbell) downstream. The device takes
//! each buffer when its flag arrives and after the previous one, uses it for `dwell_ns` (its
//! consume time), then writes a 1-DW "done" MWr upstream to a host flag; the buffer is the
//! host's again when that write has landed. Lossless, the host waits for a free buffer; lossy
//! (a producer that cannot wait, as a sensor feed), it drops the message when none is free and
//! makes the next one a message time later. Every time comes from TLPs crossing the link
//! simulator.
//!
//! One [`Side`] of the ring's event loop (`ring/drive.rs`): alone, or beside a d2h ring
//! (`ring_both.rs`). With credit holds injected, a "done" write may starve upstream: a bubble
//! during which the link counted mostly starvation is `credits`.

use std::collections::VecDeque;

use crate::engine::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamEnd, WaitCause};
use crate::engine::EngineError;
use crate::link::{Direction as LinkDirection, TlpKind};

use super::ring::drive::{Lanes, Next, Producer, Side};
use super::ring::rules::{self, upstream_starved_ns};
use super::ring::{RingBehaviour, RingTruth, FLAG_BYTES};

/// The host's "done" flags.
const DONE_BASE: u64 = 1 << 38;
/// The host's writes of a message waiting in the root port's transmitter at most: the rest are
/// issued as the link takes them (a CPU's write-combining buffers drain at the link's pace), so
/// what the host sends meanwhile for the other ring (the d2h doorbells, beside this ring) waits
/// behind a few writes, not a whole message.
const QUEUED_TLPS: usize = 4;

/// A message the host has written: device-side times known once its doorbell left.
struct Sent {
    sequence: u64,
    slot: u64,
    /// The number of its doorbell downstream.
    last_tlp: u64,
    start_ns: f64,
    done_ns: Option<f64>,
    wait_before_ns: f64,
    wait_cause: WaitCause,
}

/// A buffer the device is consuming: its "done" write leaves at `until_ns`.
struct Consuming {
    sent: Sent,
    done_ns: f64,
    seen_ns: f64,
    until_ns: f64,
    occupancy: u32,
}

/// The device's side of an h2d ring: it consumes one buffer at a time, each for `dwell_ns`.
#[derive(Default)]
struct DeviceBuffers {
    /// When the device is done with the buffer it is consuming.
    free_ns: f64,
    /// Buffers whose flag arrived, and buffers given back ("done" sent): the difference is what
    /// the device holds.
    arrived: u64,
    released: u64,
}

impl DeviceBuffers {
    /// A buffer's flag arrived at `now_ns`: the device takes it after the one it is consuming.
    /// When it starts, when it is done, and how many buffers it holds then.
    fn take(&mut self, now_ns: f64, dwell_ns: f64) -> (f64, f64, u32) {
        self.arrived += 1;
        let seen_ns = now_ns.max(self.free_ns);
        self.free_ns = seen_ns + dwell_ns;
        (seen_ns, self.free_ns, (self.arrived - self.released) as u32)
    }
}

/// The h2d push ring: the host producing, the device consuming.
pub(super) struct H2dSide<'a> {
    mps_bytes: u64,
    plan: &'a RingPlan,
    behaviour: &'a RingBehaviour,
    sink: &'a mut dyn MessageSink,
    producer: Producer,
    sent: VecDeque<Sent>,
    consuming: VecDeque<Consuming>,
    /// "Done" writes on their way up (their numbers).
    done_sent: VecDeque<u64>,
    /// The message's pieces not yet queued, and the numbers of those queued, not yet on the lanes.
    to_queue: VecDeque<(u64, u64)>,
    queued: VecDeque<u64>,
    device: DeviceBuffers,
    lossy: bool,
    sink_error: Option<EngineError>,
}

impl<'a> H2dSide<'a> {
    pub fn new(mps_bytes: u64, plan: &'a RingPlan, behaviour: &'a RingBehaviour, sink: &'a mut dyn MessageSink) -> Self {
        H2dSide {
            mps_bytes,
            plan,
            behaviour,
            sink,
            producer: Producer::new(plan.stop),
            sent: VecDeque::new(),
            consuming: VecDeque::new(),
            done_sent: VecDeque::new(),
            to_queue: VecDeque::new(),
            queued: VecDeque::new(),
            device: DeviceBuffers::default(),
            lossy: plan.backpressure == Backpressure::Lossy,
            sink_error: None,
        }
    }

    fn buffers(&self) -> u64 {
        u64::from(self.plan.device_buffers)
    }

    /// The host writes one message into a device buffer: data and doorbell, downstream; or,
    /// lossy with every device buffer taken, drops it.
    fn start(&mut self, lanes: &mut Lanes, start_ns: f64) {
        if !self.producer.admit(self.buffers()) {
            return;
        }
        // Lossy: the time since the last message went to messages dropped for want of a buffer.
        let idle = if self.producer.dropped_after_last > 0 {
            WaitCause::NoFreeBuffer
        } else if self.behaviour.host_use_ns > 0.0 {
            WaitCause::ProducerIdle
        } else {
            WaitCause::None
        };
        let (idle_ns, idle_cause) = self.producer.wait(start_ns, self.buffers(), idle);
        // The host's own writes go downstream and never starve; a "done" write it waited for may.
        let (wait_before_ns, wait_cause) = rules::credit_bubble(idle_ns, idle_cause, upstream_starved_ns(&lanes.sim) - self.producer.starved_at_done_ns, 0.0);
        // Buffers come back in the order they were filled: the next one is the oldest.
        let slot = self.producer.committed % self.buffers();
        self.to_queue.extend(rules::h2d_push_pieces(self.plan, slot, self.mps_bytes));
        // Its doorbell's number is known once queued.
        self.sent.push_back(Sent { sequence: self.producer.sequence, slot, last_tlp: u64::MAX, start_ns, done_ns: None, wait_before_ns, wait_cause });
        self.producer.started(u64::MAX, start_ns);
        self.issue(lanes);
    }

    /// Queue the message's next writes while fewer than [`QUEUED_TLPS`] of them wait.
    fn issue(&mut self, lanes: &mut Lanes) {
        let left = lanes.left(LinkDirection::Downstream);
        while self.queued.front().is_some_and(|&n| n <= left) {
            self.queued.pop_front();
        }
        while self.queued.len() < QUEUED_TLPS {
            let Some((addr, len)) = self.to_queue.pop_front() else { return };
            let number = lanes.send(LinkDirection::Downstream, TlpKind::MemWrite, addr, len);
            self.queued.push_back(number);
            if self.to_queue.is_empty() {
                self.producer.sending = Some(number);
                self.sent.back_mut().expect("the message being sent").last_tlp = number;
            }
        }
    }

    /// The device is done with a buffer: its "done" write goes up, the message is complete.
    fn release(&mut self, lanes: &mut Lanes, at_ns: f64) {
        let done = self.consuming.pop_front().expect("a buffer being consumed");
        let number = lanes.send(LinkDirection::Upstream, TlpKind::MemWrite, DONE_BASE + done.sent.slot * FLAG_BYTES, FLAG_BYTES);
        self.done_sent.push_back(number);
        self.device.released += 1;
        self.producer.last_release_ns = at_ns;
        let event = MessageEvent {
            sequence: done.sent.sequence,
            bytes: self.plan.message_bytes,
            device_start_ns: Some(done.sent.start_ns),
            device_done_ns: Some(done.done_ns),
            host_seen_ns: done.seen_ns,
            host_released_ns: done.until_ns,
            ring_occupancy: done.occupancy,
            wait_before_ns: done.sent.wait_before_ns,
            wait_cause: done.sent.wait_cause,
        };
        rules::deliver(self.sink, &mut self.sink_error, &event);
    }
}

impl Side for H2dSide<'_> {
    fn next(&mut self, _now_ns: f64) -> Option<Next> {
        let release = self.consuming.front().map(|c| Next { at_ns: c.until_ns, before_link: true, starts: false });
        Next::first(release, self.producer.next(self.buffers(), self.lossy))
    }

    fn act(&mut self, lanes: &mut Lanes, at_ns: f64) {
        if self.consuming.front().is_some_and(|c| c.until_ns <= at_ns) {
            self.release(lanes, at_ns);
        } else {
            self.start(lanes, at_ns);
        }
    }

    fn observe(&mut self, lanes: &mut Lanes) {
        let now = lanes.sim.now_ns();
        self.issue(lanes);
        if let Some(last) = self.producer.sending.filter(|&n| lanes.left(LinkDirection::Downstream) >= n) {
            let done_ns = lanes.sim.last_tlp_end_ns(LinkDirection::Downstream);
            let sent = self.sent.iter_mut().rev().find(|m| m.last_tlp == last).expect("the message being sent");
            sent.done_ns = Some(done_ns);
            let start_ns = sent.start_ns;
            self.producer.sent(start_ns, done_ns, self.behaviour.host_use_ns, upstream_starved_ns(&lanes.sim));
        }
        let up = lanes.delivered(LinkDirection::Upstream);
        while self.done_sent.front().is_some_and(|&n| n <= up) {
            self.done_sent.pop_front();
            self.producer.freed_one(now);
        }
        let down = lanes.delivered(LinkDirection::Downstream);
        while self.sent.front().is_some_and(|m| m.last_tlp <= down && m.done_ns.is_some()) {
            let sent = self.sent.pop_front().expect("checked");
            let done_ns = sent.done_ns.expect("checked");
            let (seen_ns, until_ns, occupancy) = self.device.take(now, self.behaviour.dwell_ns);
            self.consuming.push_back(Consuming { sent, done_ns, seen_ns, until_ns, occupancy });
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
        let producer = &self.producer;
        let span_ns = producer.last_release_ns - producer.first_start_ns.unwrap_or(0.0);
        let truth = RingTruth { span_ns, dropped: producer.dropped, dropped_after_last: producer.dropped_after_last, ..RingTruth::default() };
        (producer.end(stopped_early), truth)
    }
}
