//! The ring personality host to device, push (XDMA H2C, OCDP's "to device"): the host writes
//! each message into one of the device's `device_buffers` buffers, the device consumes it.
//!
//! Per message the host, `host_use_ns` after its previous message's writes left (its own
//! preparation), and once the device has a free buffer, queues the data as MWr TLPs of at most
//! MPS that never cross 4 KiB and a 1-DW flag MWr (the doorbell) downstream. The device takes
//! each buffer when its flag arrives and after the previous one, uses it for `dwell_ns` (its
//! consume time), then writes a 1-DW "done" MWr upstream to a host flag; the buffer is the
//! host's again when that write has landed. Lossless only: a host can always wait. Every time
//! comes from TLPs crossing the link simulator.

use std::collections::VecDeque;

use crate::engine::ring::{MessageEvent, MessageSink, RingPlan, StreamEnd, StreamStop, WaitCause};
use crate::engine::EngineError;
use crate::link::{transaction, Direction as LinkDirection, LinkSim, TlpKind};

use super::ring::{RingBehaviour, RingTruth, FLAG_BYTES};

/// The device's buffers in its BAR, its doorbell register, the host's "done" flags.
pub(super) const DEVICE_DATA_BASE: u64 = 1 << 32;
const DOORBELL_ADDR: u64 = 0x1000;
pub(super) const DONE_BASE: u64 = 1 << 38;
const CANCEL_EVERY: u64 = 64;

/// A message the host has written, not yet consumed by the device.
struct Sent {
    sequence: u64,
    slot: u64,
    /// Downstream TLPs delivered once its flag has arrived.
    flag_index: u64,
    start_ns: f64,
    done_ns: f64,
    wait_before_ns: f64,
    wait_cause: WaitCause,
}

/// A buffer the device is consuming: its "done" write leaves at `until_ns`.
struct Consuming {
    sent: Sent,
    seen_ns: f64,
    until_ns: f64,
    occupancy: u32,
}

/// The device's side of an h2d ring: it consumes one buffer at a time, each for `dwell_ns`.
#[derive(Default)]
pub(super) struct DeviceBuffers {
    /// When the device is done with the buffer it is consuming.
    free_ns: f64,
    /// Buffers whose flag arrived, and buffers given back ("done" sent): the difference is what
    /// the device holds.
    arrived: u64,
    pub released: u64,
}

impl DeviceBuffers {
    /// A buffer's flag arrived at `now_ns`: the device takes it after the one it is consuming.
    /// When it starts, when it is done, and how many buffers it holds then.
    pub fn take(&mut self, now_ns: f64, dwell_ns: f64) -> (f64, f64, u32) {
        self.arrived += 1;
        let seen_ns = now_ns.max(self.free_ns);
        self.free_ns = seen_ns + dwell_ns;
        (seen_ns, self.free_ns, (self.arrived - self.released) as u32)
    }
}

pub(super) struct H2dRun<'a> {
    sim: LinkSim,
    mps_bytes: u64,
    plan: &'a RingPlan,
    behaviour: &'a RingBehaviour,
    sink: &'a mut dyn MessageSink,
    down_sent: u64,
    sent: VecDeque<Sent>,
    consuming: VecDeque<Consuming>,
    device: DeviceBuffers,
    last_release_ns: f64,
    sink_error: Option<EngineError>,
}

impl<'a> H2dRun<'a> {
    pub fn new(sim: LinkSim, mps_bytes: u64, plan: &'a RingPlan, behaviour: &'a RingBehaviour, sink: &'a mut dyn MessageSink) -> Self {
        H2dRun { sim, mps_bytes, plan, behaviour, sink, down_sent: 0, sent: VecDeque::new(), consuming: VecDeque::new(), device: DeviceBuffers::default(), last_release_ns: 0.0, sink_error: None }
    }

    pub fn run(mut self) -> (Result<StreamEnd, EngineError>, RingTruth) {
        let device_buffers = u64::from(self.plan.device_buffers);
        let (limit_messages, limit_ns) = match self.plan.stop {
            StreamStop::Messages(n) => (n, f64::INFINITY),
            StreamStop::Duration(d) => (u64::MAX, d.as_secs_f64() * 1e9),
        };
        let mut sequence = 0u64;
        let mut ready_ns = 0.0f64;
        let mut last_done_ns: Option<f64> = None;
        let mut first_start_ns = None;
        let mut stopped_early = None;
        let mut last_free_ns = 0.0f64;
        while sequence < limit_messages && ready_ns < limit_ns {
            if sequence % CANCEL_EVERY == 0 && crate::cancel::requested() {
                stopped_early = Some("interrupted".to_string());
                break;
            }
            if self.sink_error.is_some() {
                break;
            }
            // The host's view of free buffers: a buffer is back when its "done" write landed.
            let mut waited = false;
            while sequence - self.done_landed() >= device_buffers {
                if !self.advance(f64::INFINITY) {
                    return (Err(EngineError::Unsupported("simulated h2d ring stalled: no buffer will ever be freed (a bug)".into())), RingTruth::default());
                }
                waited = true;
                last_free_ns = self.sim.now_ns();
            }
            let start_ns = if waited { ready_ns.max(last_free_ns) } else { ready_ns };
            let cause = if waited && last_free_ns > ready_ns { WaitCause::NoFreeBuffer } else if self.behaviour.host_use_ns > 0.0 { WaitCause::ProducerIdle } else { WaitCause::None };
            self.run_until(start_ns);
            let start_ns = self.sim.now_ns().max(start_ns);
            let slot = sequence % device_buffers;
            let mut split = transaction::Splitter::new(DEVICE_DATA_BASE + slot * u64::from(self.plan.buffer_bytes), u64::from(self.plan.message_bytes), self.mps_bytes);
            while let Some((addr, len)) = split.next_piece() {
                self.send_down(addr, len);
            }
            self.send_down(DOORBELL_ADDR, FLAG_BYTES);
            while self.sim.queued_tlps(LinkDirection::Downstream) > 0 {
                if !self.advance(f64::INFINITY) {
                    break;
                }
            }
            let done_ns = self.sim.last_tlp_end_ns(LinkDirection::Downstream);
            let wait_before_ns = last_done_ns.map_or(0.0, |last| (start_ns - last).max(0.0));
            first_start_ns.get_or_insert(start_ns);
            self.sent.push_back(Sent { sequence, slot, flag_index: self.down_sent, start_ns, done_ns, wait_before_ns, wait_cause: if wait_before_ns > 0.0 { cause } else { WaitCause::None } });
            last_done_ns = Some(done_ns);
            ready_ns = done_ns + self.behaviour.host_use_ns;
            sequence += 1;
        }
        if stopped_early.is_none() && self.sink_error.is_none() {
            while (!self.sent.is_empty() || !self.consuming.is_empty()) && self.advance(f64::INFINITY) {}
        }
        let start_ns = first_start_ns.unwrap_or(0.0);
        let truth = RingTruth { span_ns: self.last_release_ns - start_ns, ..RingTruth::default() };
        let end = match self.sink_error.take() {
            Some(error) => Err(error),
            None => Ok(StreamEnd { produced: sequence, dropped_by_producer: Some(0), start_ns, end_ns: self.last_release_ns, stopped_early, fast_forwarded: 0 }),
        };
        (end, truth)
    }

    /// "Done" writes that reached host memory: the only upstream TLPs of this ring.
    fn done_landed(&self) -> u64 {
        self.sim.delivered_tlps(LinkDirection::Upstream)
    }

    fn send_down(&mut self, addr: u64, len: u64) {
        self.sim.send(LinkDirection::Downstream, transaction::tlp(TlpKind::MemWrite, addr, len, 0));
        self.down_sent += 1;
    }

    fn run_until(&mut self, at_ns: f64) {
        while self.advance(at_ns) {}
        self.sim.run_until_ns(at_ns);
    }

    /// One step no later than `limit_ns`: the device finishing a buffer if that comes first,
    /// else the link's next event. False when nothing is due by then.
    fn advance(&mut self, limit_ns: f64) -> bool {
        let event = self.sim.next_event_ns().filter(|t| *t <= limit_ns);
        let release = self.consuming.front().map(|c| c.until_ns).filter(|t| *t <= limit_ns);
        match (event, release) {
            (_, Some(release)) if event.is_none_or(|e| release <= e) => {
                self.sim.run_until_ns(release);
                let done = self.consuming.pop_front().expect("checked");
                self.sim.send(LinkDirection::Upstream, transaction::tlp(TlpKind::MemWrite, DONE_BASE + done.sent.slot * FLAG_BYTES, FLAG_BYTES, 0));
                self.device.released += 1;
                self.last_release_ns = release;
                self.emit(done);
            }
            (Some(_), _) => {
                self.sim.step_event();
                self.flags_arrived();
            }
            _ => return false,
        }
        true
    }

    /// A flag reached the device: it takes the buffer after the one it is consuming.
    fn flags_arrived(&mut self) {
        let now = self.sim.now_ns();
        let delivered = self.sim.delivered_tlps(LinkDirection::Downstream);
        while self.sent.front().is_some_and(|s| s.flag_index <= delivered) {
            let sent = self.sent.pop_front().expect("checked");
            let (seen_ns, until_ns, occupancy) = self.device.take(now, self.behaviour.dwell_ns);
            self.consuming.push_back(Consuming { sent, seen_ns, until_ns, occupancy });
        }
    }

    fn emit(&mut self, done: Consuming) {
        let event = MessageEvent {
            sequence: done.sent.sequence,
            bytes: self.plan.message_bytes,
            device_start_ns: Some(done.sent.start_ns),
            device_done_ns: Some(done.sent.done_ns),
            host_seen_ns: done.seen_ns,
            host_released_ns: done.until_ns,
            ring_occupancy: done.occupancy,
            wait_before_ns: done.sent.wait_before_ns,
            wait_cause: done.sent.wait_cause,
        };
        if self.sink_error.is_none() {
            if let Err(error) = self.sink.message(&event) {
                self.sink_error = Some(error);
            }
        }
    }
}
