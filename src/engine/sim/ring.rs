//! The simulated endpoint's ring personality (document 003, OpenCPI's OCDP in push mode): the
//! device streams messages into a ring of host buffers, on the link simulator.
//!
//! Per message the device queues, on the simulated link, the data as MWr TLPs of at most MPS
//! that never cross 4 KiB, one 16-byte metadata MWr and one 1-DW flag MWr, then idles for its
//! dwell. The host sees the flag after its reaction time (drawn per message), uses the buffer
//! and rings a doorbell, a 1-DW MWr downstream; the device may reuse a buffer once that
//! doorbell has arrived. Lossless, the device waits for a free buffer; lossy, it drops the
//! message and the next one comes a message time later. Every TLP and DLLP crosses the link
//! simulator ([`crate::link::LinkSim::driven`]); nothing here computes a time from a formula.
//!
//! What was injected is kept beside the stream ([`RingTruth`]), so tests can check that the
//! report recovers it from the events alone.
//!
//! Pull mode (the host reads each message from the device's buffers) is in `ring_pull.rs`, host
//! to device push in `ring_h2d.rs`, host to device pull (the device reads each message from the
//! host's buffers) in `ring_h2d_pull.rs`.

use std::collections::VecDeque;

use crate::engine::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamDirection, StreamEnd, Streaming, Transport, WaitCause};
use crate::engine::{EngineError, EngineInfo};
use crate::error::InvalidInput;
use crate::link::{self, transaction, Direction as LinkDirection, LinkSim, TlpKind};

use super::rng::SimRng;

pub(super) mod drive;
pub(super) mod one_read;
pub(super) mod rules;
mod steady;

use rules::{HostConsumer, Limits};

/// Bytes of the metadata each message carries (length, opcode, a 64-bit time: document 003).
pub const METADATA_BYTES: u64 = 16;
/// Bytes of the flag write that tells the host a buffer is full (one DW).
pub const FLAG_BYTES: u64 = 4;
/// Bytes of the host's doorbell write that frees a buffer.
pub const DOORBELL_BYTES: u64 = 4;

/// Where the ring's parts live in host memory (simulated addresses: 4 KiB aligned, apart).
pub(super) const DATA_BASE: u64 = 1 << 40;
pub(super) const METADATA_BASE: u64 = 1 << 39;
pub(super) const FLAG_BASE: u64 = 1 << 38;
/// The doorbell register in the device's BAR.
pub(super) const DOORBELL_ADDR: u64 = 0x1000;
/// Messages between two looks at the cancel flag (a 16 KiB message is ~500 link events).
const CANCEL_EVERY: u64 = 64;

/// How the simulated device and host behave around the ring; `sim:` target keys set it.
#[derive(Debug, Clone, PartialEq)]
pub struct RingBehaviour {
    /// The device's pause after each message's flag write.
    pub dwell_ns: f64,
    /// The host's reaction to a flag: uniform in [react_ns, react_ns + react_jitter_ns).
    pub react_ns: f64,
    pub react_jitter_ns: f64,
    /// How long the host uses a buffer before ringing its doorbell.
    pub host_use_ns: f64,
    /// Every `host_stall_every` messages (0: never) the host is away `host_stall_ns` longer
    /// before releasing: an injected full ring.
    pub host_stall_every: u64,
    pub host_stall_ns: f64,
    /// Pull mode: the device's source makes a message every `message_bytes / source_mbps`
    /// (MBps = 10^6 bytes/s); 0: whenever a device buffer is free.
    pub source_mbps: f64,
    /// Push d2h: once the state repeats, whole periods are the last one's events shifted
    /// (`ring/steady.rs`); false simulates every message.
    pub fast_forward: bool,
    /// The target set a flow-control stall key (`stalls_per_s`, `stall_min_ns`, `stall_max_ns`):
    /// the push d2h ring's link withholds the host's UpdateFCs for those holds
    /// ([`link::Injection`]). Presets alone inject none, so their streams stay as they were.
    pub credit_holds: bool,
}

impl Default for RingBehaviour {
    /// A host that polls in a tight loop and does nothing with the data; OCDP's short dwell.
    fn default() -> Self {
        RingBehaviour { dwell_ns: 0.0, react_ns: 200.0, react_jitter_ns: 0.0, host_use_ns: 100.0, host_stall_every: 0, host_stall_ns: 0.0, source_mbps: 0.0, fast_forward: true, credit_holds: false }
    }
}

/// What the simulator knows that the events do not say: the ground truth a test compares the
/// report with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RingTruth {
    /// Time every host buffer held a message (flag landed in host memory, not yet released), ns.
    pub full_ns: f64,
    /// From the first message's start to the last release, ns.
    pub span_ns: f64,
    /// Messages the device dropped (lossy).
    pub dropped: u64,
    /// Of those, the drops after the last delivered message: no sequence gap can show them.
    pub dropped_after_last: u64,
    /// The reaction delays drawn, in message order (only the first `REACTIONS_KEPT`).
    pub reactions_ns: Vec<f64>,
    /// Messages handed over as shifted copies of a repeating period, not simulated one by one.
    pub fast_forwarded: u64,
    /// The device's (upstream) transmitter's credit starvation over the stream, as the link
    /// counted it (injected credit holds).
    pub credit_starvation: link::Starvation,
    /// Both directions at once: the h2d ring's own truth (this one is the d2h ring's).
    pub h2d: Option<Box<RingTruth>>,
}

/// Reaction delays kept in the truth (enough for percentiles in tests, bounded for long runs).
pub const REACTIONS_KEPT: usize = 1 << 20;

/// The ring personality of one simulated endpoint.
pub struct SimRing {
    pub(super) info: EngineInfo,
    pub(super) link: Result<link::SimConfig, InvalidInput>,
    pub(super) behaviour: RingBehaviour,
    pub(super) rng: SimRng,
    pub(super) truth: Option<RingTruth>,
}

/// A message on its way: device side known, flag not yet landed.
struct InFlight {
    sequence: u64,
    bytes: u32,
    /// Upstream TLPs delivered once its flag has landed.
    last_tlp: u64,
    device_start_ns: f64,
    device_done_ns: f64,
    wait_before_ns: f64,
    wait_cause: WaitCause,
}

/// One stream's state: the link, the device's and the host's side of the ring.
struct Run<'a> {
    sim: LinkSim,
    /// The link's MaxPayload: data TLPs are cut at it.
    mps_bytes: u64,
    plan: &'a RingPlan,
    behaviour: &'a RingBehaviour,
    rng: &'a mut SimRng,
    sink: &'a mut dyn MessageSink,
    truth: RingTruth,
    /// Upstream TLPs queued so far.
    sent_tlps: u64,
    in_flight: VecDeque<InFlight>,
    /// Doorbells the host has rung, in order, at these times (ns), not yet on the link.
    doorbells: VecDeque<f64>,
    /// Doorbells queued on the link so far, and arrived at the device.
    doorbells_sent: u64,
    doorbells_arrived: u64,
    last_doorbell_arrival_ns: f64,
    /// Messages committed to the ring (delivered, not dropped).
    committed: u64,
    /// When the host is free for the next buffer.
    host: HostConsumer,
    /// Release times of landed messages still counted in the ring (for occupancy), oldest first.
    held: VecDeque<f64>,
    /// Truth sweep: when the ring last became full, if it is.
    full_since_ns: Option<f64>,
    first_start_ns: Option<f64>,
    last_release_ns: f64,
    sink_error: Option<EngineError>,
    ff: steady::FastForward,
}

impl SimRing {
    /// The truth of the last stream (None before any).
    pub fn truth(&self) -> Option<&RingTruth> {
        self.truth.as_ref()
    }
}

impl Streaming for SimRing {
    fn check(&self, plan: &RingPlan) -> Result<(), EngineError> {
        self.link.as_ref().map_err(|e| EngineError::Unsupported(e.0.clone()))?;
        if plan.device_buffers == 0 {
            return Err(InvalidInput::new("the simulated ring needs at least one device buffer").into());
        }
        Ok(())
    }

    fn stream(&mut self, plan: &RingPlan, sink: &mut dyn MessageSink) -> Result<StreamEnd, EngineError> {
        self.check(plan)?;
        let config = self.link.as_ref().map_err(|e| EngineError::Unsupported(e.0.clone()))?;
        let mut rng = self.rng.fork(0x5712_EA);
        if plan.direction == StreamDirection::H2d || plan.transport == Transport::Pull {
            // One side under the shared loop (`ring/drive.rs`), as beside the other direction.
            let mut lanes = drive::Lanes::new(LinkSim::driven(config)?);
            let mut side: Box<dyn drive::Side> = if plan.direction == StreamDirection::H2d {
                super::ring_both::h2d_side(config, plan, &self.behaviour, &mut rng, sink)
            } else {
                Box::new(super::ring_pull::PullSide::new(config, plan, &self.behaviour, &mut rng, sink))
            };
            let result = drive::drive(&mut lanes, &mut [side.as_mut()]);
            let (end, mut truth) = side.finish(result.as_ref().ok().cloned().flatten());
            truth.credit_starvation = lanes.sim.outcome().starvation[LinkDirection::Upstream.index()];
            self.truth = Some(truth);
            return result.map(|_| end);
        }
        let mut run = Run {
            sim: LinkSim::driven(config)?,
            mps_bytes: config.mps_bytes,
            plan,
            behaviour: &self.behaviour,
            rng: &mut rng,
            sink,
            truth: RingTruth::default(),
            sent_tlps: 0,
            in_flight: VecDeque::new(),
            doorbells: VecDeque::new(),
            doorbells_sent: 0,
            doorbells_arrived: 0,
            last_doorbell_arrival_ns: 0.0,
            committed: 0,
            host: HostConsumer::default(),
            held: VecDeque::new(),
            full_since_ns: None,
            first_start_ns: None,
            last_release_ns: 0.0,
            sink_error: None,
            ff: steady::FastForward::new(plan, &self.behaviour, config.mps_bytes),
        };
        let result = run.produce();
        let (end, truth) = run.finish(result);
        self.truth = Some(truth);
        end
    }

    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn stream_both(&mut self, plan: &RingPlan, sinks: [&mut dyn MessageSink; 2]) -> Result<[StreamEnd; 2], EngineError> {
        let config = self.link.as_ref().map_err(|e| EngineError::Unsupported(e.0.clone()))?;
        // Both rings in the plan's mode (push or pull, lossless or lossy), each with its own draws.
        self.check(&RingPlan { direction: StreamDirection::D2h, ..plan.clone() })?;
        let mut d2h_rng = self.rng.fork(0x5712_EA);
        let mut h2d_rng = self.rng.fork(0x42D0_5712);
        self.truth = None;
        let (ends, truth) = super::ring_both::run(LinkSim::driven(config)?, config, plan, &self.behaviour, [&mut d2h_rng, &mut h2d_rng], sinks)?;
        // The d2h ring's truth, the h2d ring's beside it.
        self.truth = Some(truth);
        Ok(ends)
    }
}

impl Run<'_> {
    /// The device's loop: one message after the other until the plan's stop, a signal or the
    /// sink says stop. Returns why it stopped early, if it did.
    fn produce(&mut self) -> Result<Option<String>, EngineError> {
        let host_buffers = u64::from(self.plan.host_buffers);
        let limits = Limits::of(self.plan.stop);
        let mut at = steady::LoopState { sequence: 0, ready_ns: 0.0, last_done_ns: 0.0, period_ns: 0.0 };
        while limits.open(at.sequence, at.ready_ns) {
            if at.sequence % CANCEL_EVERY == 0 && crate::cancel::requested() {
                return Ok(Some("interrupted".into()));
            }
            if let Some(error) = self.sink_error.take() {
                return Err(error);
            }
            if let Some(stopped) = self.fast_forward(&mut at)? {
                return Ok(Some(stopped));
            }
            if !limits.open(at.sequence, at.ready_ns) {
                break;
            }
            let (start_ns, cause) = match self.plan.backpressure {
                Backpressure::Lossless => {
                    while self.committed - self.doorbells_arrived >= host_buffers {
                        if !self.advance(f64::INFINITY) {
                            return Err(EngineError::Unsupported("simulated ring stalled: no buffer will ever be freed (a bug)".into()));
                        }
                    }
                    let freed_at = if self.committed >= host_buffers { self.last_doorbell_arrival_ns } else { 0.0 };
                    if freed_at > at.ready_ns { (freed_at, WaitCause::NoFreeBuffer) } else { (at.ready_ns, self.idle_cause()) }
                }
                Backpressure::Lossy => {
                    self.run_until(at.ready_ns);
                    if self.committed - self.doorbells_arrived >= host_buffers {
                        self.truth.dropped += 1;
                        at.sequence += 1;
                        at.ready_ns = rules::ready_after_drop(at.ready_ns, at.period_ns);
                        continue;
                    }
                    (at.ready_ns, self.idle_cause())
                }
            };
            let wait_before_ns = if at.sequence == 0 && self.committed == 0 { 0.0 } else { start_ns - at.last_done_ns };
            let cause = if wait_before_ns > 0.0 { cause } else { WaitCause::None };
            let done_ns = self.send_message(at.sequence, start_ns, wait_before_ns, cause);
            self.first_start_ns.get_or_insert(start_ns);
            at.period_ns = done_ns - start_ns + self.behaviour.dwell_ns;
            at.last_done_ns = done_ns;
            at.ready_ns = done_ns + self.behaviour.dwell_ns;
            at.sequence += 1;
        }
        Ok(None)
    }

    /// Why the device was idle before a message it could start at once: its dwell, if any.
    fn idle_cause(&self) -> WaitCause {
        if self.behaviour.dwell_ns > 0.0 { WaitCause::DeviceDwell } else { WaitCause::None }
    }

    /// Queue one message's TLPs at `queued_ns`; returns when its flag write left the device.
    ///
    /// With credit holds the device's transmitter may starve while the message goes out: the
    /// message's start is then its queueing moved later by that starvation, and the starvation
    /// is a bubble before it (`Credits` when it is the larger part of the bubble). So the
    /// device's service is the time its TLPs took without a credit stall, and every stall shows
    /// as one bubble of its own length.
    fn send_message(&mut self, sequence: u64, queued_ns: f64, idle_before_ns: f64, idle_cause: WaitCause) -> f64 {
        self.run_until(queued_ns);
        let starved_before_ns = self.upstream_starvation().total_ns;
        let slot = self.committed % u64::from(self.plan.host_buffers);
        for (addr, len) in rules::d2h_push_pieces(self.plan, slot, self.mps_bytes) {
            self.queue_up(addr, len);
        }
        self.committed += 1;
        // The device is done when its flag write has left: step until nothing of it is queued.
        while self.sim.queued_tlps(LinkDirection::Upstream) > 0 {
            if !self.advance(f64::INFINITY) {
                break;
            }
        }
        let done_ns = self.sim.last_tlp_end_ns(LinkDirection::Upstream);
        // Every TLP of the message has left, so any starvation during it has ended and is counted.
        let starved_ns = self.upstream_starvation().total_ns - starved_before_ns;
        let (wait_before_ns, wait_cause) = rules::credit_bubble(idle_before_ns, idle_cause, 0.0, starved_ns);
        self.in_flight.push_back(InFlight {
            sequence,
            bytes: self.plan.message_bytes,
            last_tlp: self.sent_tlps,
            device_start_ns: queued_ns + starved_ns,
            device_done_ns: done_ns,
            wait_before_ns,
            wait_cause,
        });
        done_ns
    }

    fn upstream_starvation(&self) -> link::Starvation {
        self.sim.outcome().starvation[LinkDirection::Upstream.index()]
    }

    fn queue_up(&mut self, addr: u64, len: u64) {
        self.sim.send(LinkDirection::Upstream, transaction::tlp(TlpKind::MemWrite, addr, len, 0));
        self.sent_tlps += 1;
    }

    /// Handle events and doorbells due by `at_ns`, then stand at `at_ns`.
    fn run_until(&mut self, at_ns: f64) {
        while self.advance(at_ns) {}
        self.sim.run_until_ns(at_ns);
    }

    /// One step no later than `limit_ns`: ring the next doorbell if it is due first, else
    /// handle the link's next event. False when nothing is due by then.
    fn advance(&mut self, limit_ns: f64) -> bool {
        let event = self.sim.next_event_ns().filter(|t| *t <= limit_ns);
        let bell = self.doorbells.front().copied().filter(|t| *t <= limit_ns);
        match (event, bell) {
            (_, Some(bell)) if event.is_none_or(|e| bell <= e) => {
                self.doorbells.pop_front();
                self.sim.run_until_ns(bell);
                let tlp = transaction::tlp(TlpKind::MemWrite, DOORBELL_ADDR, DOORBELL_BYTES, 0);
                self.sim.send(LinkDirection::Downstream, tlp);
                self.doorbells_sent += 1;
            }
            (Some(_), _) => {
                self.sim.step_event();
                self.arrivals();
            }
            _ => return false,
        }
        true
    }

    /// After a step: a doorbell reached the device, or a flag reached host memory.
    fn arrivals(&mut self) {
        let now = self.sim.now_ns();
        let bells = self.sim.delivered_tlps(LinkDirection::Downstream);
        if bells > self.doorbells_arrived {
            self.doorbells_arrived = bells;
            self.last_doorbell_arrival_ns = now;
        }
        let landed = self.sim.delivered_tlps(LinkDirection::Upstream);
        while self.in_flight.front().is_some_and(|m| m.last_tlp <= landed) {
            let message = self.in_flight.pop_front().expect("checked");
            self.host_takes(message, now);
        }
    }

    /// The host sees the flag that landed at `landed_ns`, uses the buffer, rings its doorbell.
    fn host_takes(&mut self, message: InFlight, landed_ns: f64) {
        let reaction_ns = HostConsumer::react(self.behaviour, self.rng);
        if self.truth.reactions_ns.len() < REACTIONS_KEPT {
            self.truth.reactions_ns.push(reaction_ns);
        }
        let (seen_ns, released_ns) = self.host.take(self.behaviour, message.sequence, landed_ns + reaction_ns);
        self.last_release_ns = released_ns;
        self.doorbells.push_back(released_ns);
        let occupancy = self.occupancy_after_landing(landed_ns, released_ns);
        let event = MessageEvent {
            sequence: message.sequence,
            bytes: message.bytes,
            device_start_ns: Some(message.device_start_ns),
            device_done_ns: Some(message.device_done_ns),
            host_seen_ns: seen_ns,
            host_released_ns: released_ns,
            ring_occupancy: occupancy,
            wait_before_ns: message.wait_before_ns,
            wait_cause: message.wait_cause,
        };
        self.ff.note(&event);
        rules::deliver(self.sink, &mut self.sink_error, &event);
    }

    /// Count the ring's full buffers when a message lands (truth: landing in host memory, as
    /// only the simulator knows it), and the time the ring spent full.
    fn occupancy_after_landing(&mut self, landed_ns: f64, released_ns: f64) -> u32 {
        let host_buffers = self.plan.host_buffers as usize;
        while let Some(&release) = self.held.front() {
            if release > landed_ns {
                break;
            }
            self.held.pop_front();
            if let Some(since) = self.full_since_ns.take() {
                self.truth.full_ns += release - since;
            }
        }
        self.held.push_back(released_ns);
        if self.held.len() >= host_buffers && self.full_since_ns.is_none() {
            self.full_since_ns = Some(landed_ns);
        }
        self.held.len() as u32
    }

    /// Let every message in flight land (its host side runs), then say how the stream ended.
    fn finish(mut self, stopped: Result<Option<String>, EngineError>) -> (Result<StreamEnd, EngineError>, RingTruth) {
        if stopped.is_ok() {
            while !self.in_flight.is_empty() && self.advance(f64::INFINITY) {}
        }
        // Close the truth's full interval at the release that ends it.
        if let (Some(since), Some(&release)) = (self.full_since_ns.take(), self.held.front()) {
            self.truth.full_ns += release - since;
        }
        let start_ns = self.first_start_ns.unwrap_or(0.0);
        self.truth.span_ns = self.last_release_ns - start_ns;
        self.truth.fast_forwarded = self.ff.fast_forwarded;
        self.truth.credit_starvation = self.upstream_starvation();
        let produced = self.committed + self.truth.dropped;
        let end = match stopped {
            Ok(stopped_early) => match self.sink_error.take() {
                Some(error) => Err(error),
                None => Ok(StreamEnd {
                    produced,
                    dropped_by_producer: Some(self.truth.dropped),
                    start_ns,
                    end_ns: self.last_release_ns,
                    stopped_early,
                    fast_forwarded: self.ff.fast_forwarded,
                }),
            },
            Err(error) => Err(error),
        };
        (end, self.truth)
    }
}
