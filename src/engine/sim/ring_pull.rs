//! The ring personality in pull mode (document 003: "Pull mode keeps one read in flight"): the
//! device's source fills the device's buffers, the host reads each message out of them.
//!
//! Per message the device, once its source has made the message and a device buffer holds it,
//! writes a 1-DW flag upstream. The host sees the flag after its reaction time, then reads the
//! message with MRd requests of at most MRRS (never crossing 4 KiB), exactly one in flight: the
//! next request leaves when every completion of the previous one has arrived. The completions
//! come from the link simulator's own completer on the device side (its `latency_ns`, cut at RCB
//! and MPS). With the last completion in, the host rings a doorbell (a 1-DW MWr downstream) that
//! frees the device buffer when it arrives, uses its copy and takes the next message.
//!
//! The source makes a message every `message_bytes / source_mbps` (0: whenever a device buffer is
//! free). With every device buffer full, lossless, it waits for a doorbell; lossy, it drops the
//! message (counted) and makes the next one a period later. Every time here comes from TLPs
//! crossing the link simulator; nothing is computed from a formula.

use std::collections::VecDeque;

use crate::engine::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamEnd, StreamStop, WaitCause};
use crate::engine::EngineError;
use crate::link::{transaction, Direction as LinkDirection, LinkSim, TlpKind};

use super::ring::{RingBehaviour, RingTruth, DOORBELL_BYTES, FLAG_BYTES, REACTIONS_KEPT};
use super::rng::SimRng;

/// The device's buffers in its BAR, the host's flag area, the doorbell register.
const DEVICE_DATA_BASE: u64 = 1 << 32;
const FLAG_BASE: u64 = 1 << 38;
const DOORBELL_ADDR: u64 = 0x1000;
/// Loop turns between two looks at the cancel flag.
const CANCEL_EVERY: u64 = 4096;

/// A message held in a device buffer, announced by its flag.
struct Held {
    sequence: u64,
    slot: u64,
    /// Upstream writes (flags) delivered once this one's flag has landed.
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
    /// Pieces of the message not yet requested.
    next_addr: u64,
    end_addr: u64,
    /// Downstream TLP index of the first request (its arrival starts the device's service).
    first_request_index: u64,
    device_start_ns: Option<f64>,
    /// Upstream completions delivered once the request in flight is answered.
    completions_due: u64,
    wait_cause: WaitCause,
}

pub(super) struct PullRun<'a> {
    pub sim: LinkSim,
    pub mps_bytes: u64,
    pub mrrs_bytes: u64,
    pub rcb_bytes: u64,
    pub plan: &'a RingPlan,
    pub behaviour: &'a RingBehaviour,
    pub rng: &'a mut SimRng,
    pub sink: &'a mut dyn MessageSink,
}

impl PullRun<'_> {
    /// Run the stream to its stop; returns how it ended and the truth.
    pub fn run(mut self) -> (Result<StreamEnd, EngineError>, RingTruth) {
        let mut truth = RingTruth::default();
        let device_buffers = u64::from(self.plan.device_buffers.max(1));
        let (limit_messages, limit_ns) = match self.plan.stop {
            StreamStop::Messages(n) => (n, f64::INFINITY),
            StreamStop::Duration(d) => (u64::MAX, d.as_secs_f64() * 1e9),
        };
        let period_ns = if self.behaviour.source_mbps > 0.0 { f64::from(self.plan.message_bytes) * 1e3 / self.behaviour.source_mbps } else { 0.0 };
        let lossy = self.plan.backpressure == Backpressure::Lossy && period_ns > 0.0;

        // The source.
        let mut numbered = 0u64;
        let mut source_next_ns = 0.0f64;
        let mut in_device = 0u64;
        let mut flags_sent = 0u64;
        let mut free_slots: VecDeque<u64> = (0..device_buffers).collect();
        let mut announced: VecDeque<Held> = VecDeque::new();
        // The host.
        let mut reading: Option<Reading> = None;
        let mut host_free_ns = 0.0f64;
        let mut down_sent = 0u64;
        let mut completions_seen = 0u64;
        // Doorbells on their way down: (downstream index, slot).
        let mut doorbells: VecDeque<(u64, u64)> = VecDeque::new();
        let mut last_done_ns: Option<f64> = None;
        let mut first_start_ns: Option<f64> = None;
        let mut last_release_ns = 0.0f64;
        let mut committed = 0u64;
        let mut stopped_early = None;
        let mut sink_error = None;
        let mut turns = 0u64;
        let mut reaction: Option<f64> = None;

        loop {
            turns += 1;
            if turns % CANCEL_EVERY == 0 && crate::cancel::requested() {
                stopped_early = Some("interrupted".to_string());
                break;
            }
            if sink_error.is_some() {
                break;
            }
            let now = self.sim.now_ns();
            let source_open = numbered < limit_messages && source_next_ns < limit_ns;
            // When the source acts next: it waits for a buffer unless it may drop.
            let source_at = (source_open && (in_device < device_buffers || lossy)).then(|| source_next_ns.max(now));
            // When the host issues its next read: its reaction after the later of the flag
            // landing and the host being free.
            let host_at = match (&reading, announced.front().and_then(|m| m.landed_ns)) {
                (None, Some(landed_ns)) => {
                    let reaction_ns = *reaction.get_or_insert_with(|| self.behaviour.react_ns + self.behaviour.react_jitter_ns * self.rng.unit());
                    Some((host_free_ns.max(landed_ns) + reaction_ns).max(now))
                }
                _ => None,
            };
            let link_at = self.sim.next_event_ns();
            let next = [source_at, host_at, link_at].into_iter().flatten().fold(f64::INFINITY, f64::min);
            if !next.is_finite() {
                break;
            }
            if source_at == Some(next) {
                self.sim.run_until_ns(next);
                if in_device >= device_buffers {
                    truth.dropped += 1;
                    truth.dropped_after_last += 1;
                } else {
                    truth.dropped_after_last = 0;
                    let slot = free_slots.pop_front().expect("a free device buffer");
                    in_device += 1;
                    self.sim.send(LinkDirection::Upstream, transaction::tlp(TlpKind::MemWrite, FLAG_BASE + slot * FLAG_BYTES, FLAG_BYTES, 0));
                    flags_sent += 1;
                    announced.push_back(Held { sequence: numbered, slot, flag_index: flags_sent, waited_for_buffer: next > source_next_ns, produced_ns: next, landed_ns: None });
                    committed += 1;
                }
                numbered += 1;
                source_next_ns = if next > source_next_ns { next + period_ns } else { source_next_ns + period_ns };
                continue;
            }
            if host_at == Some(next) {
                self.sim.run_until_ns(next);
                let reaction_ns = reaction.take().expect("drawn with host_at");
                if truth.reactions_ns.len() < REACTIONS_KEPT {
                    truth.reactions_ns.push(reaction_ns);
                }
                let message = announced.pop_front().expect("host_at needs a landed flag");
                let addr = DEVICE_DATA_BASE + message.slot * u64::from(self.plan.buffer_bytes);
                let wait_cause = match last_done_ns {
                    Some(done) if message.produced_ns > done => {
                        if message.waited_for_buffer { WaitCause::NoFreeBuffer } else { WaitCause::ProducerIdle }
                    }
                    _ => WaitCause::HostLate,
                };
                let mut read = Reading {
                    message,
                    next_addr: addr,
                    end_addr: addr + u64::from(self.plan.message_bytes),
                    first_request_index: down_sent + 1,
                    device_start_ns: None,
                    completions_due: completions_seen,
                    wait_cause,
                };
                self.request(&mut read, &mut down_sent);
                reading = Some(read);
                continue;
            }
            // A link event.
            self.sim.step_event();
            self.on_arrivals(&mut doorbells, &mut free_slots, &mut in_device, &mut announced, reading.as_mut());
            let answered = reading.as_ref().is_some_and(|r| self.sim.delivered_completions(LinkDirection::Upstream) >= r.completions_due);
            if !answered {
                continue;
            }
            completions_seen = self.sim.delivered_completions(LinkDirection::Upstream);
            let mut read = reading.take().expect("checked");
            if read.next_addr < read.end_addr {
                self.request(&mut read, &mut down_sent);
                reading = Some(read);
                continue;
            }
            // The message is in: doorbell, use, next.
            let seen_ns = self.sim.now_ns();
            let device_done_ns = self.sim.last_tlp_end_ns(LinkDirection::Upstream).min(seen_ns);
            let device_start_ns = read.device_start_ns.unwrap_or(seen_ns);
            self.sim.send(LinkDirection::Downstream, transaction::tlp(TlpKind::MemWrite, DOORBELL_ADDR, DOORBELL_BYTES, 0));
            down_sent += 1;
            doorbells.push_back((down_sent, read.message.slot));
            let stall_ns = if self.behaviour.host_stall_every > 0 && (read.message.sequence + 1) % self.behaviour.host_stall_every == 0 { self.behaviour.host_stall_ns } else { 0.0 };
            let released_ns = seen_ns + self.behaviour.host_use_ns + stall_ns;
            host_free_ns = released_ns;
            last_release_ns = released_ns;
            first_start_ns.get_or_insert(device_start_ns);
            let wait_before_ns = match last_done_ns {
                None => 0.0,
                Some(done) => (device_start_ns - done).max(0.0),
            };
            last_done_ns = Some(device_done_ns);
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
                wait_cause: if wait_before_ns > 0.0 { read.wait_cause } else { WaitCause::None },
            };
            if let Err(error) = self.sink.message(&event) {
                sink_error = Some(error);
            }
        }
        let start_ns = first_start_ns.unwrap_or(0.0);
        truth.span_ns = last_release_ns - start_ns;
        let end = match sink_error {
            Some(error) => Err(error),
            None => Ok(StreamEnd { produced: committed + truth.dropped, dropped_by_producer: Some(truth.dropped), start_ns, end_ns: last_release_ns, stopped_early, fast_forwarded: 0 }),
        };
        (end, truth)
    }

    /// Issue the next read of at most MRRS (not crossing 4 KiB) and count its completions.
    fn request(&mut self, read: &mut Reading, down_sent: &mut u64) {
        let mut split = transaction::Splitter::new(read.next_addr, read.end_addr - read.next_addr, self.mrrs_bytes);
        let (addr, len) = split.next_piece().expect("bytes left to read");
        read.next_addr = addr + len;
        read.completions_due += transaction::completions(addr, len, self.mps_bytes, self.rcb_bytes).count() as u64;
        self.sim.send(LinkDirection::Downstream, transaction::tlp(TlpKind::MemRead, addr, len, 0));
        *down_sent += 1;
    }

    /// Doorbells that reached the device free their buffers; the first request's arrival starts
    /// the device's service of the message being read.
    fn on_arrivals(&mut self, doorbells: &mut VecDeque<(u64, u64)>, free_slots: &mut VecDeque<u64>, in_device: &mut u64, announced: &mut VecDeque<Held>, reading: Option<&mut Reading>) {
        let now = self.sim.now_ns();
        let flags = self.sim.delivered_tlps(LinkDirection::Upstream) - self.sim.delivered_completions(LinkDirection::Upstream);
        for message in announced.iter_mut().filter(|m| m.landed_ns.is_none() && m.flag_index <= flags) {
            message.landed_ns = Some(now);
        }
        let arrived = self.sim.delivered_tlps(LinkDirection::Downstream);
        while doorbells.front().is_some_and(|(index, _)| *index <= arrived) {
            let (_, slot) = doorbells.pop_front().expect("checked");
            free_slots.push_back(slot);
            *in_device -= 1;
        }
        if let Some(read) = reading {
            if read.device_start_ns.is_none() && read.first_request_index <= arrived {
                read.device_start_ns = Some(now);
            }
        }
    }
}
