//! The ring personality in pull mode (document 003: "Pull mode keeps one read in flight"): the
//! device's source fills the device's buffers, the host reads each message out of them.
//!
//! Per message the device, once its source has made the message and a device buffer holds it,
//! writes a 1-DW flag upstream. The host sees the flag after its reaction time, then reads the
//! message with MRd requests of at most MRRS (never crossing 4 KiB), exactly one in flight: the
//! next request leaves when every completion of the previous one has arrived (`ring/one_read.rs`).
//! The completions come from the link simulator's own completer on the device side (its
//! `latency_ns`, cut at RCB and MPS). With the last completion in, the host rings a doorbell (a 1-DW MWr downstream) that
//! frees the device buffer when it arrives, uses its copy and takes the next message.
//!
//! The source makes a message every `message_bytes / source_mbps` (0: whenever a device buffer is
//! free). With every device buffer full, lossless, it waits for a doorbell; lossy, it drops the
//! message (counted) and makes the next one a period later. Every time here comes from TLPs
//! crossing the link simulator; nothing is computed from a formula.
//!
//! One [`Side`] of the ring's event loop (`ring/drive.rs`): alone, or beside the h2d ring
//! (`ring_both.rs`). With credit holds injected only the flags can starve (the host advertises
//! infinite completion credits): a bubble during which the link counted mostly starvation is
//! `credits`.

use std::collections::VecDeque;

use crate::engine::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamEnd, WaitCause};
use crate::engine::EngineError;
use crate::link::{Direction as LinkDirection, TlpKind};

use super::ring::drive::{Lanes, Next, Side};
use super::ring::one_read::{OneRead, Progress};
use super::ring::rules::{self, upstream_starved_ns, HostConsumer, Limits, DEVICE_DATA_BASE};
use super::ring::{RingBehaviour, RingTruth, DOORBELL_ADDR, DOORBELL_BYTES, FLAG_BASE, FLAG_BYTES, REACTIONS_KEPT};
use super::rng::SimRng;

/// A message held in a device buffer, announced by its flag.
struct Held {
    sequence: u64,
    slot: u64,
    /// The number of its flag upstream.
    flag_index: u64,
    /// The source had to wait for a free device buffer before making it.
    waited_for_buffer: bool,
    produced_ns: f64,
    /// When its flag reached host memory.
    landed_ns: Option<f64>,
}

/// The host's one read in flight.
struct Reading {
    message: Held,
    read: OneRead,
    /// Number of the first request downstream (its arrival starts the device's service).
    first_request_index: u64,
    device_start_ns: Option<f64>,
    /// The upstream starvation counted when the device's service started.
    starved_at_start_ns: f64,
    wait_cause: WaitCause,
}

/// The pull ring: the device's source and buffers, the host reading.
pub(super) struct PullSide<'a> {
    link: &'a crate::link::SimConfig,
    plan: &'a RingPlan,
    behaviour: &'a RingBehaviour,
    rng: &'a mut SimRng,
    sink: &'a mut dyn MessageSink,
    truth: RingTruth,
    limits: Limits,
    stopped: bool,
    /// The source: a message every `period_ns` (0: as soon as a buffer is free).
    period_ns: f64,
    lossy: bool,
    numbered: u64,
    source_next_ns: f64,
    in_device: u64,
    free_slots: VecDeque<u64>,
    announced: VecDeque<Held>,
    /// The host.
    reading: Option<Reading>,
    host: HostConsumer,
    /// The reaction drawn for the next read, kept until it is issued.
    reaction: Option<f64>,
    /// Doorbells on their way down: (number, slot).
    doorbells: VecDeque<(u64, u64)>,
    last_done_ns: Option<f64>,
    starved_at_done_ns: f64,
    first_start_ns: Option<f64>,
    last_release_ns: f64,
    committed: u64,
    sink_error: Option<EngineError>,
}

impl<'a> PullSide<'a> {
    pub fn new(link: &'a crate::link::SimConfig, plan: &'a RingPlan, behaviour: &'a RingBehaviour, rng: &'a mut SimRng, sink: &'a mut dyn MessageSink) -> Self {
        let device_buffers = u64::from(plan.device_buffers.max(1));
        let period_ns = if behaviour.source_mbps > 0.0 { f64::from(plan.message_bytes) * 1e3 / behaviour.source_mbps } else { 0.0 };
        PullSide {
            link,
            plan,
            behaviour,
            rng,
            sink,
            truth: RingTruth::default(),
            limits: Limits::of(plan.stop),
            stopped: false,
            period_ns,
            lossy: plan.backpressure == Backpressure::Lossy && period_ns > 0.0,
            numbered: 0,
            source_next_ns: 0.0,
            in_device: 0,
            free_slots: (0..device_buffers).collect(),
            announced: VecDeque::new(),
            reading: None,
            host: HostConsumer::default(),
            reaction: None,
            doorbells: VecDeque::new(),
            last_done_ns: None,
            starved_at_done_ns: 0.0,
            first_start_ns: None,
            last_release_ns: 0.0,
            committed: 0,
            sink_error: None,
        }
    }

    fn device_buffers(&self) -> u64 {
        u64::from(self.plan.device_buffers.max(1))
    }

    fn source_open(&self) -> bool {
        !self.stopped && self.limits.open(self.numbered, self.source_next_ns)
    }

    /// When the source acts next: it waits for a buffer unless it may drop.
    fn source_at(&self, now_ns: f64) -> Option<f64> {
        (self.source_open() && (self.in_device < self.device_buffers() || self.lossy)).then(|| self.source_next_ns.max(now_ns))
    }

    /// When the host issues its next read: its reaction after the later of the flag landing and
    /// the host being free.
    fn host_at(&mut self, now_ns: f64) -> Option<f64> {
        let landed_ns = self.announced.front().and_then(|m| m.landed_ns).filter(|_| self.reading.is_none())?;
        let reaction_ns = *self.reaction.get_or_insert_with(|| HostConsumer::react(self.behaviour, self.rng));
        Some((self.host.free_ns.max(landed_ns) + reaction_ns).max(now_ns))
    }

    /// The source makes a message at `at_ns`: into a free device buffer with its flag, or
    /// (lossy, none free) dropped.
    fn make(&mut self, lanes: &mut Lanes, at_ns: f64) {
        if self.in_device >= self.device_buffers() {
            self.truth.dropped += 1;
            self.truth.dropped_after_last += 1;
        } else {
            self.truth.dropped_after_last = 0;
            let slot = self.free_slots.pop_front().expect("a free device buffer");
            self.in_device += 1;
            let flag_index = lanes.send(LinkDirection::Upstream, TlpKind::MemWrite, FLAG_BASE + slot * FLAG_BYTES, FLAG_BYTES);
            self.announced.push_back(Held { sequence: self.numbered, slot, flag_index, waited_for_buffer: at_ns > self.source_next_ns, produced_ns: at_ns, landed_ns: None });
            self.committed += 1;
        }
        self.numbered += 1;
        self.source_next_ns = if at_ns > self.source_next_ns { at_ns } else { self.source_next_ns } + self.period_ns;
    }

    /// The host starts reading the first announced message.
    fn read(&mut self, lanes: &mut Lanes) {
        let reaction_ns = self.reaction.take().expect("drawn with host_at");
        if self.truth.reactions_ns.len() < REACTIONS_KEPT {
            self.truth.reactions_ns.push(reaction_ns);
        }
        let message = self.announced.pop_front().expect("host_at needs a landed flag");
        let addr = DEVICE_DATA_BASE + message.slot * u64::from(self.plan.buffer_bytes);
        let wait_cause = match self.last_done_ns {
            Some(done) if message.produced_ns > done => {
                if message.waited_for_buffer { WaitCause::NoFreeBuffer } else { WaitCause::ProducerIdle }
            }
            _ => WaitCause::HostLate,
        };
        let (read, first_request_index) = OneRead::start(lanes, self.link, LinkDirection::Downstream, addr, u64::from(self.plan.message_bytes));
        self.reading = Some(Reading { message, read, first_request_index, device_start_ns: None, starved_at_start_ns: 0.0, wait_cause });
    }

    /// The last completion is in: doorbell, the event, the host's use.
    fn complete(&mut self, lanes: &mut Lanes, read: Reading) {
        let seen_ns = lanes.sim.now_ns();
        let device_done_ns = lanes.sim.last_tlp_end_ns(LinkDirection::Upstream).min(seen_ns);
        // Starvation while it was read (its completions behind a starving flag) moves its start
        // later; starvation that ended in the bubble before it (its own flag) is the bubble's.
        let starved_now_ns = upstream_starved_ns(&lanes.sim);
        let read_start_ns = read.device_start_ns.unwrap_or(seen_ns);
        let during_ns = (starved_now_ns - read.starved_at_start_ns).min(device_done_ns - read_start_ns).max(0.0);
        let device_start_ns = read_start_ns + during_ns;
        let number = lanes.send(LinkDirection::Downstream, TlpKind::MemWrite, DOORBELL_ADDR, DOORBELL_BYTES);
        self.doorbells.push_back((number, read.message.slot));
        let (_, released_ns) = self.host.take(self.behaviour, read.message.sequence, seen_ns);
        self.last_release_ns = released_ns;
        self.first_start_ns.get_or_insert(device_start_ns);
        let idle_ns = self.last_done_ns.map_or(0.0, |done| (read_start_ns - done).max(0.0));
        let (wait_before_ns, cause) = rules::credit_bubble(idle_ns, read.wait_cause, read.starved_at_start_ns - self.starved_at_done_ns, during_ns);
        let wait_cause = if wait_before_ns > 0.0 { cause } else { WaitCause::None };
        self.last_done_ns = Some(device_done_ns);
        self.starved_at_done_ns = starved_now_ns;
        let event = MessageEvent {
            sequence: read.message.sequence,
            bytes: self.plan.message_bytes,
            device_start_ns: Some(device_start_ns),
            device_done_ns: Some(device_done_ns),
            host_seen_ns: seen_ns,
            host_released_ns: released_ns,
            // The host holds one message at a time: the one it just read.
            ring_occupancy: 1,
            wait_before_ns,
            wait_cause,
        };
        rules::deliver(self.sink, &mut self.sink_error, &event);
    }

}

impl Side for PullSide<'_> {
    fn next(&mut self, now_ns: f64) -> Option<Next> {
        let source = self.source_at(now_ns).map(|at_ns| Next { at_ns, before_link: true, starts: true });
        let host = self.host_at(now_ns).map(|at_ns| Next { at_ns, before_link: true, starts: false });
        Next::first(source, host)
    }

    fn act(&mut self, lanes: &mut Lanes, at_ns: f64) {
        // The source first at a tie, as `next` chose.
        if self.source_at(at_ns) == Some(at_ns) {
            self.make(lanes, at_ns);
        } else {
            self.read(lanes);
        }
    }

    fn observe(&mut self, lanes: &mut Lanes) {
        let now = lanes.sim.now_ns();
        let flags = lanes.delivered(LinkDirection::Upstream);
        for message in self.announced.iter_mut().filter(|m| m.landed_ns.is_none() && m.flag_index <= flags) {
            message.landed_ns = Some(now);
        }
        let arrived = lanes.delivered(LinkDirection::Downstream);
        while self.doorbells.front().is_some_and(|(index, _)| *index <= arrived) {
            let (_, slot) = self.doorbells.pop_front().expect("checked");
            self.free_slots.push_back(slot);
            self.in_device -= 1;
        }
        let starved_ns = upstream_starved_ns(&lanes.sim);
        let Some(mut read) = self.reading.take() else { return };
        if read.device_start_ns.is_none() && read.first_request_index <= arrived {
            read.device_start_ns = Some(now);
            read.starved_at_start_ns = starved_ns;
        }
        match read.read.advance(lanes) {
            Progress::Reading => self.reading = Some(read),
            Progress::Done => self.complete(lanes, read),
        }
    }

    fn stop(&mut self) {
        self.stopped = true;
    }

    fn unfinished(&self) -> bool {
        self.source_open()
    }

    fn failed(&mut self) -> Option<EngineError> {
        self.sink_error.take()
    }

    fn finish(&mut self, stopped_early: Option<String>) -> (StreamEnd, RingTruth) {
        let start_ns = self.first_start_ns.unwrap_or(0.0);
        self.truth.span_ns = self.last_release_ns - start_ns;
        let end = StreamEnd {
            produced: self.committed + self.truth.dropped,
            dropped_by_producer: Some(self.truth.dropped),
            start_ns,
            end_ns: self.last_release_ns,
            stopped_early,
            fast_forwarded: 0,
        };
        (end, std::mem::take(&mut self.truth))
    }
}
