//! The discrete-event engine: two transmitters, two receivers, the agents, and a queue of
//! timed events. Nothing here knows a throughput formula: the time of a transfer is when its
//! last packet has crossed the link, symbol by symbol.

mod driven;
mod flit_tx;
mod inject;
mod periodic;

pub use periodic::LinkCounts;
mod retry;

use std::collections::VecDeque;

use super::agents::{Cpu, DmaEngine, Workload};
use super::config::{AckPolicy, FcPolicy, Receiver, SimConfig};
use super::errors::ErrorProcess;
use super::events::{Event, EventQueue};
use super::flit::FLIT_SEQ_MODULO;
use super::inject::{InjectState, PayloadGaps, Starvation};
use super::replay::{ReplayBuffer, ReplayStats, ReplayTimer, RxSequence};
use super::flow::{RxCredits, TxCredits};
use super::packet::{Direction, Dllp, FcClass, Packet, Tlp, TlpKind, SEQ_MODULO};
use super::phy::Phy;
use super::record::{Crossing, DirectionStats, LeftOut};
use super::transaction;
use crate::error::InvalidInput;

/// What a run produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Totals per direction, indexed by [`Direction::index`].
    pub stats: [DirectionStats; 2],
    /// Every packet that crossed the link (empty unless `SimConfig::record`).
    pub record: Vec<Crossing>,
    /// When the last payload byte of the workload arrived, in ns.
    pub done_ns: f64,
    /// Data link layer retry, per direction of the TLPs ([`Direction::index`]).
    pub replay: [ReplayStats; 2],
    /// What each receiver passed to its transaction layer, in order (only with `record`).
    pub delivered: Vec<(Direction, Tlp)>,
    /// Packets that arrived with a bad CRC (only with `record`).
    pub corrupted: Vec<Crossing>,
    /// When the last payload byte travelling in each direction arrived (indexed by
    /// [`Direction::index`]; 0 if none): a DMA write's end upstream, a DMA read's downstream.
    pub arrived_ns: [f64; 2],
    /// Credit starvation of each direction's transmitter ([`Direction::index`]).
    pub starvation: [Starvation; 2],
    /// Pauses in each direction's payload ([`Direction::index`]), from its first arrival on.
    pub payload_gaps: [PayloadGaps; 2],
    /// TLPs corrupted by the injected error process ([`crate::link::Injection`]), per direction.
    pub injected_errors: [u64; 2],
    /// What the steady-state fast-forward left out of the record, one entry per skip, in time
    /// order (only with `record`).
    pub left_out: Vec<LeftOut>,
}

impl Outcome {
    pub fn direction(&self, direction: Direction) -> &DirectionStats {
        &self.stats[direction.index()]
    }

    /// The sequence numbers of the Acks in the record, in the order they went out.
    pub fn ack_sequences(&self) -> Vec<u16> {
        self.record
            .iter()
            .filter_map(|c| match c.packet {
                Packet::Dllp(Dllp::Ack { seq }) => Some(seq),
                _ => None,
            })
            .collect()
    }
}

/// One direction's transmitter.
#[derive(Debug, Clone)]
struct Transmitter {
    /// End of the packet on the lanes now.
    free_at: u64,
    /// A TxFree event is queued.
    woken: bool,
    next_skp: u64,
    dllps: VecDeque<Dllp>,
    tlps: VecDeque<Tlp>,
    credits: TxCredits,
    next_seq: u16,
    retry: ReplayBuffer<Tlp>,
    timer: ReplayTimer,
}

/// One direction's receiver (the far end of it).
#[derive(Debug, Clone)]
struct ReceiverState {
    policy: Receiver,
    credits: RxCredits,
    unacked: u32,
    last_seq: u16,
    ack_timer: bool,
    fc_timer: bool,
    sequence: RxSequence,
}

/// Durations in ticks that every run converts once from the configuration's ns (per packet,
/// the float division and rounding cost more than the rest of the step).
#[derive(Debug, Clone, Copy)]
struct Ticks {
    /// `SimConfig::wire_delay_ns`.
    wire: u64,
    /// Between SKP ordered sets.
    skp_interval: u64,
    /// The REPLAY_TIMER limit, the configured one or the specification's.
    replay_timeout: u64,
    /// From a read request's arrival to its completions, by the direction the request took.
    completion_latency: [u64; 2],
    /// Packets start on a lane 4k: the tick they may start on is a multiple of this (1, 2 or 4).
    lane_align: u64,
}

/// The simulator of one link (a clone goes on from the same state: the fast-forward tries a
/// credit hold of another length on one).
#[derive(Clone)]
pub struct LinkSim {
    config: SimConfig,
    phy: Phy,
    ticks: Ticks,
    /// Link bytes of a TLP besides its data (framing, header, ECRC), by [`TlpKind`].
    tlp_overhead_bytes: [u64; 3],
    now: u64,
    events: EventQueue,
    /// Packets on the lanes of each direction, oldest first (they arrive in that order), each
    /// with whether it will arrive with a bad CRC.
    on_lanes: [VecDeque<(Packet, bool)>; 2],
    /// Read requests waiting for their completer, per direction the completions will take.
    requests: [VecDeque<Tlp>; 2],
    tx: [Transmitter; 2],
    rx: [ReceiverState; 2],
    pub(super) dma: Option<DmaEngine>,
    cpu: Option<Cpu>,
    errors: ErrorProcess,
    /// Gen6 flit mode: the flit transmitters (`None` for Gen1–5).
    flits: Option<[flit_tx::FlitTx; 2]>,
    /// Injected credit holds and TLP errors, and the starvation they cause.
    inject: InjectState,
    pub(super) outcome: Outcome,
    /// TLPs each receiver passed to its transaction layer so far, per [`Direction::index`]
    /// (a driver outside the simulator learns arrivals from it: see [`driven`]).
    delivered_tlps: [u64; 2],
    /// Of those, completions (a driver tells its reads' data from its own writes).
    delivered_completions: [u64; 2],
    /// A whole run ([`LinkSim::run`]): nothing looks at the simulator between two events, so
    /// events that would come out one right after the other may be one
    /// ([`Event::ArriveAndFree`]). Off where a driver or the fast-forward steps event by event.
    fuse_events: bool,
    /// Within a fused event's handling: a transmitter woken for now while nothing else is due
    /// now starts right after the event instead of through the queue ([`LinkSim::wake`]).
    wake_inline: bool,
    /// Those transmitters, in the order their wake-ups would have come out of the queue.
    woken_now: Vec<Direction>,
}

impl LinkSim {
    pub fn new(config: &SimConfig, workload: &Workload) -> Result<Self, InvalidInput> {
        config.validate()?;
        validate_workload(config, workload)?;
        let sim = Self::with_agents(config, Some(workload))?;
        Ok(sim)
    }

    /// The simulator with the agents of `workload`, or none (a driver feeds it TLPs).
    fn with_agents(config: &SimConfig, workload: Option<&Workload>) -> Result<Self, InvalidInput> {
        config.validate()?;
        let phy = Phy::new(config.link);
        let flit_mode = phy.encoding == crate::model::Encoding::Flit1b1b;
        let skp_interval = phy.skp_interval_ticks(config.skp_interval);
        let first_skp = skp_interval - phy.skp_interval_ticks(config.skp_phase);
        // The receiver of each direction: downstream TLPs arrive at the device.
        let receivers = [config.device_rx, config.host_rx];
        let transmitter = |rx: &Receiver| Transmitter {
            free_at: 0,
            woken: false,
            next_skp: first_skp,
            dllps: VecDeque::new(),
            tlps: VecDeque::new(),
            credits: TxCredits::new(&rx.credits),
            next_seq: 0,
            retry: ReplayBuffer::new(SEQ_MODULO),
            timer: ReplayTimer::default(),
        };
        let receiver = |rx: &Receiver| ReceiverState {
            policy: *rx,
            credits: RxCredits::new(&rx.credits),
            unacked: 0,
            last_seq: 0,
            ack_timer: false,
            fc_timer: false,
            sequence: RxSequence::new(if flit_mode { FLIT_SEQ_MODULO } else { SEQ_MODULO }),
        };
        let dma = workload.and_then(|w| DmaEngine::new(config, w));
        let cpu = workload.and_then(|w| Cpu::new(w, |ns| phy.ticks(ns)));
        let ticks = Ticks {
            wire: phy.ticks(config.wire_delay_ns),
            skp_interval,
            replay_timeout: retry::replay_timeout_ticks(config, &phy),
            completion_latency: Direction::BOTH.map(|direction| match direction {
                Direction::Upstream => phy.ticks(config.host_completion_latency_ns),
                Direction::Downstream => phy.ticks(config.device_completion_latency_ns),
            }),
            lane_align: phy.width.min(4),
        };
        debug_assert!(ticks.lane_align.is_power_of_two());
        let tlp_overhead_bytes =
            [TlpKind::MemWrite, TlpKind::MemRead, TlpKind::CompletionData].map(|kind| transaction::wire_bytes(config, &phy, &transaction::tlp(kind, 0, 0, 0)));
        let mut sim = LinkSim {
            config: config.clone(),
            phy,
            ticks,
            tlp_overhead_bytes,
            now: 0,
            events: EventQueue::default(),
            on_lanes: Default::default(),
            requests: Default::default(),
            tx: receivers.map(|r| transmitter(&r)),
            rx: receivers.map(|r| receiver(&r)),
            dma,
            cpu,
            errors: ErrorProcess::new(&config.errors, phy.encoding),
            flits: flit_mode.then(|| [flit_tx::FlitTx::new(), flit_tx::FlitTx::new()]),
            inject: InjectState::new(&config.inject),
            outcome: Outcome {
                stats: Default::default(),
                record: Vec::new(),
                done_ns: 0.0,
                replay: Default::default(),
                delivered: Vec::new(),
                corrupted: Vec::new(),
                arrived_ns: [0.0; 2],
                starvation: Default::default(),
                payload_gaps: Default::default(),
                injected_errors: [0; 2],
                left_out: Vec::new(),
            },
            delivered_tlps: [0; 2],
            delivered_completions: [0; 2],
            fuse_events: false,
            wake_inline: false,
            woken_now: Vec::with_capacity(4),
        };
        if let (true, Some(workload)) = (config.record, workload) {
            sim.outcome.record.reserve(record_capacity(config, workload, sim.ticks.skp_interval));
        }
        if sim.cpu.is_some() {
            sim.schedule(0, Event::CpuIssue);
        } else if sim.dma.is_some() {
            sim.wake(Direction::Upstream);
        }
        Ok(sim)
    }

    /// Run until nothing is left to send, then hand back what crossed the link.
    pub fn run(mut self) -> Outcome {
        self.fuse_events = true;
        while self.step() {}
        self.outcome
    }

    /// Let events fuse and woken transmitters start inline from here on, as in
    /// [`LinkSim::run`]: each step ends in a state that stepping event by event passes through
    /// (the whole run's outcome is the same: a test compares, with credit holds too), only the
    /// states inside a fused step are never seen. The fast-forward between injected events
    /// steps this way: it asks whole-state questions (settled, undisturbed, how far to skip).
    pub(in crate::link) fn fuse_events(&mut self) {
        self.fuse_events = true;
    }

    /// Handle the next event; false when the run is over.
    #[inline(always)]
    pub(super) fn step(&mut self) -> bool {
        if let Some((time, event)) = self.events.pop() {
            // Held-back Acks go before a REPLAY_TIMER runs out (the AckNak latency timer is
            // shorter than the replay timer): the timer's event goes back, behind them.
            if self.replay_timer_runs_out(time, event) {
                self.events.unpop();
                if self.flush_receivers() {
                    return true;
                }
                self.events.pop();
            }
            self.now = time;
            self.wake_inline = self.fuse_events;
            self.handle(event);
            self.start_woken_now();
            self.wake_inline = false;
            return true;
        }
        // Partial Ack or UpdateFC groups would wait for a timer forever: flush them.
        self.flush_receivers() || self.refresh_credits()
    }

    /// Now, in ticks.
    pub fn now_ticks(&self) -> u64 {
        self.now
    }

    pub(super) fn phy(&self) -> &Phy {
        &self.phy
    }

    /// Whether the packets that cross are recorded (`SimConfig::record`).
    pub(super) fn keeps_record(&self) -> bool {
        self.config.record
    }

    /// Move every pending time `ticks` later (the steady-state fast-forward leaves out whole
    /// periods of the schedule): the clock, the queued events, the transmitters' schedules.
    pub(super) fn advance_clock(&mut self, ticks: u64) {
        self.now += ticks;
        self.events.delay_all(ticks);
        for tx in &mut self.tx {
            tx.free_at += ticks;
            tx.next_skp += ticks;
            tx.timer.deadline = tx.timer.deadline.map(|at| at + ticks);
            tx.timer.event_at = tx.timer.event_at.map(|at| at + ticks);
        }
    }

    fn schedule(&mut self, time: u64, event: Event) {
        self.events.push(time, event);
    }

    #[inline(always)]
    fn handle(&mut self, event: Event) {
        match event {
            Event::TxFree(direction) => {
                self.tx[direction.index()].woken = false;
                self.transmit(direction);
            }
            Event::Arrive(direction) => self.arrive_oldest(direction),
            Event::ArriveAndFree(direction) => {
                self.arrive_oldest(direction);
                self.tx[direction.index()].woken = false;
                self.transmit(direction);
            }
            Event::CompletionReady(direction) => {
                if let Some(request) = self.requests[direction.index()].pop_front() {
                    self.complete_request(direction, &request);
                }
            }
            Event::CpuIssue => self.cpu_issue(),
            Event::AckTimer(direction) => {
                self.rx[direction.index()].ack_timer = false;
                self.send_ack(direction);
            }
            Event::FcTimer(direction) => {
                self.rx[direction.index()].fc_timer = false;
                for class in FcClass::ALL {
                    self.send_update_fc(direction, class);
                }
            }
            Event::ReplayTimer(direction) => self.replay_timer_event(direction),
            Event::FcRefresh(direction) => self.repeat_update_fcs(direction),
        }
    }

    /// Make sure the transmitter of `direction` looks at its queues now (or when it is free).
    fn wake(&mut self, direction: Direction) {
        let tx = &mut self.tx[direction.index()];
        if !tx.woken {
            tx.woken = true;
            let at = tx.free_at.max(self.now);
            // With nothing else due now, this wake-up's key would come out right after the
            // event being handled (and after those woken before it): start it then.
            if self.wake_inline && at == self.now && self.events.next_time().map_or(true, |next| next > at) {
                self.woken_now.push(direction);
            } else {
                self.schedule(at, Event::TxFree(direction));
            }
        }
    }

    /// The transmitters [`LinkSim::wake`] woke for now, in order, as their `TxFree` would.
    #[inline(always)]
    fn start_woken_now(&mut self) {
        if !self.woken_now.is_empty() {
            self.start_woken_transmitters();
        }
    }

    fn start_woken_transmitters(&mut self) {
        let mut k = 0;
        while let Some(&direction) = self.woken_now.get(k) {
            self.tx[direction.index()].woken = false;
            self.transmit(direction);
            k += 1;
        }
        self.woken_now.clear();
    }

    /// Start the next packet: a due SKP, then DLLPs, then a TLP the credits allow.
    #[inline(always)]
    fn transmit(&mut self, direction: Direction) {
        self.send_due_skps(direction);
        let i = direction.index();
        if self.tx[i].free_at > self.now {
            self.wake(direction);
            return;
        }
        if self.flits.is_some() {
            self.transmit_flit(direction);
            return;
        }
        if let Some(dllp) = self.tx[i].dllps.pop_front() {
            let bytes = self.phy.dllp_bytes();
            self.put_on_lanes(direction, Packet::Dllp(dllp), bytes);
            return;
        }
        if let Some((tlp, bytes)) = self.next_replay_tlp(direction) {
            self.put_on_lanes(direction, Packet::Tlp(tlp), bytes);
            self.replayed(direction, &tlp, bytes);
            self.start_replay_timer(direction);
            return;
        }
        if let Some((mut tlp, bytes)) = self.next_tlp(direction) {
            let tx = &mut self.tx[i];
            tlp.seq = tx.next_seq;
            tx.next_seq = (tx.next_seq + 1) % SEQ_MODULO;
            tx.credits.consume(&tlp);
            tx.retry.push(tlp.seq, tlp, bytes);
            self.put_on_lanes(direction, Packet::Tlp(tlp), bytes);
            self.start_replay_timer(direction);
            self.sent_new(direction, &tlp);
        }
        // Otherwise idle until something is queued or credits return.
    }

    /// SKPs due by now: one pending since inside a packet goes first; during idle they went
    /// out on their schedule.
    #[inline(always)]
    fn send_due_skps(&mut self, direction: Direction) {
        // Checked at every transmitter start, due once in hundreds of packets.
        if self.tx[direction.index()].next_skp <= self.now {
            self.send_skps(direction);
        }
    }

    #[cold]
    #[inline(never)]
    fn send_skps(&mut self, direction: Direction) {
        let interval = self.ticks.skp_interval;
        while self.tx[direction.index()].next_skp <= self.now {
            let tx = &mut self.tx[direction.index()];
            let (start, end) = self.phy.skp_span(tx.next_skp.max(tx.free_at));
            tx.next_skp = start + interval;
            tx.free_at = end;
            self.note(direction, start, end, Packet::Skp);
            let stats = &mut self.outcome.stats[direction.index()];
            stats.skps += 1;
            stats.skp_ticks += end - start;
        }
    }

    /// Link bytes of `tlp` ([`transaction::wire_bytes`], from the per-kind overhead).
    fn wire_bytes(&self, tlp: &Tlp) -> u64 {
        self.tlp_overhead_bytes[tlp.kind as usize] + tlp.data_bytes
    }

    /// The TLP at the head of the queue (or the DMA engine's next), with its link bytes, if
    /// the credits and the replay buffer allow it.
    #[inline(always)]
    pub(super) fn next_tlp(&mut self, direction: Direction) -> Option<(Tlp, u64)> {
        let i = direction.index();
        let from_dma = self.tx[i].tlps.is_empty() && direction == Direction::Upstream;
        let head = match from_dma {
            true => self.dma.as_mut().and_then(|dma| dma.next_tlp())?,
            false => *self.tx[i].tlps.front()?,
        };
        let bytes = self.wire_bytes(&head);
        let credited = self.tx[i].credits.allows(&head);
        if !credited {
            self.starving(direction);
        }
        let allowed = credited && {
            let room = self.tx[i].retry.has_room(bytes, &self.config.replay);
            if !room {
                self.outcome.replay[i].buffer_full_waits += 1;
            }
            room
        };
        match (allowed, from_dma) {
            // The DMA engine's TLP goes straight out, or waits at the head of the queue.
            (true, true) => Some((head, bytes)),
            (true, false) => self.tx[i].tlps.pop_front().map(|tlp| (tlp, bytes)),
            (false, true) => {
                self.tx[i].tlps.push_back(head);
                None
            }
            (false, false) => None,
        }
    }

    /// Occupy the lanes of `direction` with `packet` of `bytes` from now (aligned to a lane
    /// that may start a packet) and schedule its arrival.
    #[inline(always)]
    fn put_on_lanes(&mut self, direction: Direction, packet: Packet, bytes: u64) {
        let align = self.ticks.lane_align;
        let start = (self.now + align - 1) & !(align - 1);
        let end = start + bytes;
        self.tx[direction.index()].free_at = end;
        self.note(direction, start, end, packet);
        self.count(direction, start, end, &packet, bytes);
        let arrival = end + self.ticks.wire;
        let corrupted = self.corrupts(direction, start, end, &packet, bytes);
        self.on_lanes[direction.index()].push_back((packet, corrupted));
        let tx = &mut self.tx[direction.index()];
        if self.fuse_events && arrival == end && !tx.woken {
            // The wake-up's key (time `end`, the next order) would come right after the arrival's.
            tx.woken = true;
            self.schedule(arrival, Event::ArriveAndFree(direction));
        } else {
            self.schedule(arrival, Event::Arrive(direction));
            self.wake(direction);
        }
    }

    fn note(&mut self, direction: Direction, start: u64, end: u64, packet: Packet) {
        let end_ns = self.phy.ns(end);
        let stats = &mut self.outcome.stats[direction.index()];
        stats.last_end_ns = stats.last_end_ns.max(end_ns);
        if self.config.record {
            let start_ns = self.phy.ns(start);
            self.outcome.record.push(Crossing { direction, start_ns, end_ns, packet });
        }
    }

    fn count(&mut self, direction: Direction, start: u64, end: u64, packet: &Packet, bytes: u64) {
        let stats = &mut self.outcome.stats[direction.index()];
        match packet {
            Packet::Tlp(tlp) => {
                stats.tlps += 1;
                stats.tlp_bytes += bytes;
                if tlp.kind != TlpKind::MemRead {
                    stats.payload_bytes += tlp.len_bytes;
                }
                if stats.first_tlp_start_ns.is_none() {
                    stats.first_tlp_start_ns = Some(self.phy.ns(start));
                }
                stats.last_tlp_end_ns = self.phy.ns(end);
            }
            Packet::Dllp(dllp) => {
                stats.dllp_bytes += bytes;
                match dllp {
                    Dllp::Ack { .. } => stats.acks += 1,
                    Dllp::UpdateFc { .. } => stats.update_fcs += 1,
                    Dllp::Nak { .. } => {}
                }
            }
            Packet::Skp | Packet::Flit(_) => {}
        }
    }
}

/// Crossings to reserve the record for at once: a growing record is copied as it doubles, and
/// each copy touches fresh pages. A TLP brings an Ack and an UpdateFC back at most (by the
/// default policies); SKP ordered sets go each way once per `skp_interval` ticks of the
/// transfer's lane time (its bytes and about 64 more per TLP; an idle link sends more, and the
/// record then grows). Capped where a record would be gigabytes.
fn record_capacity(config: &SimConfig, workload: &Workload, skp_interval: u64) -> usize {
    const MOST_CROSSINGS: u64 = 1 << 22;
    let tlps = workload.tlps_at_most(config);
    let lane_ticks = workload.bytes().saturating_add(tlps.saturating_mul(64));
    let skps = 2 * (lane_ticks / skp_interval.max(1)) + tlps / 2;
    tlps.saturating_mul(3).saturating_add(skps + 64).min(MOST_CROSSINGS) as usize
}

/// Refuse workloads the agents cannot issue.
fn validate_workload(config: &SimConfig, workload: &Workload) -> Result<(), InvalidInput> {
    let (bytes, limit, what) = match *workload {
        Workload::DmaWrite { bytes, .. } | Workload::DmaRead { bytes, .. } => (bytes, u64::MAX, "DMA transfer"),
        Workload::DmaBoth { write_bytes, read_bytes, .. } => {
            (write_bytes.min(read_bytes), u64::MAX, "DMA transfer (both directions: each)")
        }
        Workload::CpuWrites { bytes, spacing_ns: gap, .. } | Workload::CpuReads { bytes, gap_ns: gap, .. } => {
            if !(gap >= 0.0 && gap.is_finite()) {
                return Err(InvalidInput::new(format!("invalid CPU issue gap {gap} ns: must be 0 or more")));
            }
            (bytes, config.mps_bytes.min(config.mrrs_bytes), "CPU access")
        }
    };
    if bytes == 0 || bytes > limit {
        return Err(InvalidInput::new(format!("invalid {what} size {bytes} bytes: allowed 1 to {limit}")));
    }
    if let Workload::CpuWrites { addr, bytes, .. } | Workload::CpuReads { addr, bytes, .. } = *workload {
        if addr / transaction::ADDRESS_BOUNDARY_BYTES != (addr + bytes - 1) / transaction::ADDRESS_BOUNDARY_BYTES {
            return Err(InvalidInput::new("invalid CPU access: it would cross a 4 KiB boundary"));
        }
    }
    Ok(())
}

/// Receiving side: data link layer (Acks), flow control (UpdateFC) and the agents.
impl LinkSim {
    /// The oldest packet on the lanes of `direction` reached the far end.
    #[inline(always)]
    fn arrive_oldest(&mut self, direction: Direction) {
        match self.on_lanes[direction.index()].pop_front() {
            Some((packet, false)) => self.arrive(direction, packet),
            Some((packet, true)) => self.arrive_corrupted(direction, packet),
            None => {}
        }
    }

    #[inline(always)]
    fn arrive(&mut self, direction: Direction, packet: Packet) {
        match packet {
            Packet::Tlp(tlp) => self.receive_checked(direction, &tlp, false),
            Packet::Dllp(Dllp::Ack { seq }) => self.acknowledged(direction.opposite(), seq, false),
            Packet::Dllp(Dllp::Nak { seq }) => self.acknowledged(direction.opposite(), seq, true),
            Packet::Dllp(Dllp::UpdateFc { class, header, data }) => {
                // An UpdateFC travelling in `direction` returns credits to the opposite transmitter.
                self.tx[direction.opposite().index()].credits.update(class, header, data);
                self.wake(direction.opposite());
            }
            Packet::Flit(_) => self.flit_arrived(direction, false),
            Packet::Skp => {}
        }
    }

    /// Data link layer: acknowledge by the receiver's policy.
    fn receive_tlp(&mut self, direction: Direction, seq: u16) {
        let rx = &mut self.rx[direction.index()];
        rx.unacked += 1;
        rx.last_seq = seq;
        match rx.policy.ack {
            AckPolicy::Immediate => self.send_ack(direction),
            AckPolicy::EveryTlps(n) => {
                if rx.unacked >= n {
                    self.send_ack(direction);
                }
            }
            AckPolicy::Timer { delay_ns } => {
                if !rx.ack_timer {
                    rx.ack_timer = true;
                    let at = self.now + self.phy.ticks(delay_ns);
                    self.schedule(at, Event::AckTimer(direction));
                }
            }
        }
    }

    /// Queue an Ack for everything the receiver of `direction` has received.
    fn send_ack(&mut self, direction: Direction) {
        let rx = &mut self.rx[direction.index()];
        if rx.unacked == 0 {
            return;
        }
        rx.unacked = 0;
        let seq = rx.last_seq;
        self.tx[direction.opposite().index()].dllps.push_back(Dllp::Ack { seq });
        self.wake(direction.opposite());
    }

    /// Queue an UpdateFC for `class` if the receiver of `direction` freed any of it.
    fn send_update_fc(&mut self, direction: Direction, class: FcClass) {
        // The host's receiver may be withholding credits (an injected hold).
        if self.rx[direction.index()].credits.freed(class) == 0 || self.credits_held(direction) {
            return;
        }
        let (header, data) = self.rx[direction.index()].credits.update(class);
        self.tx[direction.opposite().index()].dllps.push_back(Dllp::UpdateFc { class, header, data });
        self.wake(direction.opposite());
    }

    /// Transaction layer: the receiver consumes the TLP, frees its credits and acts on it.
    fn consume(&mut self, direction: Direction, tlp: &Tlp) {
        self.delivered_tlps[direction.index()] += 1;
        let rx = &mut self.rx[direction.index()];
        rx.credits.free(tlp);
        let class = tlp.kind.class();
        match rx.policy.fc {
            FcPolicy::EveryTlps(n) => {
                if rx.credits.freed(class) >= n {
                    self.send_update_fc(direction, class);
                }
            }
            FcPolicy::Timer { delay_ns } => {
                if !rx.fc_timer {
                    rx.fc_timer = true;
                    let at = self.now + self.phy.ticks(delay_ns);
                    self.schedule(at, Event::FcTimer(direction));
                }
            }
        }
        match tlp.kind {
            TlpKind::MemWrite => self.data_arrived(direction),
            TlpKind::MemRead => {
                let at = self.served_from(direction) + self.ticks.completion_latency[direction.index()];
                self.requests[direction.opposite().index()].push_back(*tlp);
                self.schedule(at, Event::CompletionReady(direction.opposite()));
            }
            TlpKind::CompletionData => {
                self.delivered_completions[direction.index()] += 1;
                self.completion_arrived(direction, tlp);
            }
        }
    }

    fn data_arrived(&mut self, direction: Direction) {
        let now_ns = self.phy.ns(self.now);
        let i = direction.index();
        if self.outcome.arrived_ns[i] > 0.0 {
            self.outcome.payload_gaps[i].add(now_ns - self.outcome.arrived_ns[i], self.config.inject.threshold_ns);
        }
        self.outcome.done_ns = now_ns;
        self.outcome.arrived_ns[i] = now_ns;
    }

    /// A completion reached its requester: the DMA engine (upstream requests) or the CPU.
    fn completion_arrived(&mut self, direction: Direction, cpl: &Tlp) {
        self.data_arrived(direction);
        if direction == Direction::Downstream {
            if self.dma.as_mut().is_some_and(|dma| dma.complete(cpl)) {
                self.wake(Direction::Upstream);
            }
            return;
        }
        if let Some(cpu) = self.cpu.as_mut() {
            cpu.awaiting -= cpl.len_bytes;
            if cpu.awaiting == 0 && cpu.left > 0 {
                let at = self.now + cpu.gap_ticks;
                self.schedule(at, Event::CpuIssue);
            }
        }
    }

    /// The completer sends the data of `request` in completions at RCB and MaxPayload.
    fn complete_request(&mut self, direction: Direction, request: &Tlp) {
        let queue = &mut self.tx[direction.index()].tlps;
        for (addr, len) in transaction::completions(request.addr, request.len_bytes, self.config.mps_bytes, self.config.rcb_bytes) {
            queue.push_back(transaction::tlp(TlpKind::CompletionData, addr, len, request.tag));
        }
        self.wake(direction);
    }

    /// The CPU issues its next access; writes issue the one after on their own schedule.
    fn cpu_issue(&mut self) {
        let Some(cpu) = self.cpu.as_mut() else { return };
        let Some(tlp) = cpu.issue() else { return };
        if !cpu.reads && cpu.left > 0 {
            let at = self.now + cpu.gap_ticks;
            self.schedule(at, Event::CpuIssue);
        }
        self.tx[Direction::Downstream.index()].tlps.push_back(tlp);
        self.wake(Direction::Downstream);
    }

    /// Send the Acks and UpdateFCs still held back; true if any was queued.
    fn flush_receivers(&mut self) -> bool {
        let before = self.events.len();
        for direction in Direction::BOTH {
            self.send_ack(direction);
            for class in FcClass::ALL {
                self.send_update_fc(direction, class);
            }
        }
        self.events.len() > before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::config::{ClassCredits, Credits};

    /// Event by event, as a driver or the fast-forward steps: no fused events.
    fn stepped(config: &SimConfig, workload: &Workload) -> Outcome {
        let mut sim = LinkSim::new(config, workload).unwrap();
        while sim.step() {}
        sim.outcome
    }

    /// The record is reserved once (a growing one is copied at each doubling): what a run
    /// records fits what was reserved, and the TLPs it sends are within the estimate.
    #[test]
    fn the_record_fits_what_was_reserved() {
        let workloads = [
            Workload::DmaWrite { addr: 100, bytes: 1 << 20 },
            Workload::DmaRead { addr: 100, bytes: 1 << 20 },
            Workload::DmaBoth { write_addr: 0, write_bytes: 256 << 10, read_addr: 1 << 30, read_bytes: 256 << 10 },
            Workload::CpuWrites { addr: 0, bytes: 4, count: 1000, spacing_ns: 0.0 },
            Workload::CpuReads { addr: 0, bytes: 4, count: 100, gap_ns: 0.0 },
        ];
        for link in ["gen1x1", "gen3x16", "gen5x4"] {
            for (mps, mrrs) in [(128, 128), (256, 512), (4096, 4096)] {
                let mut config = SimConfig::for_link(link).unwrap();
                (config.mps_bytes, config.mrrs_bytes) = (mps, mrrs);
                for workload in &workloads {
                    let outcome = crate::link::simulate(&config, workload).unwrap();
                    let tlps: u64 = outcome.stats.iter().map(|s| s.tlps).sum();
                    let what = format!("{link} MPS {mps} MRRS {mrrs} {workload:?}");
                    assert!(tlps <= workload.tlps_at_most(&config), "{what}: {tlps} TLPs");
                    let skp_interval = Phy::new(config.link).skp_interval_ticks(config.skp_interval);
                    let reserved = record_capacity(&config, workload, skp_interval);
                    assert!(outcome.record.len() <= reserved, "{what}: {} crossings, {reserved} reserved", outcome.record.len());
                }
            }
        }
    }

    /// A whole run fuses events that would come out one after the other: every time, count
    /// and record must be those of stepping event by event.
    #[test]
    fn a_whole_run_equals_stepping_event_by_event() {
        let workloads = [
            Workload::DmaWrite { addr: 0, bytes: 256 << 10 },
            Workload::DmaRead { addr: 0, bytes: 256 << 10 },
            Workload::DmaBoth { write_addr: 0, write_bytes: 128 << 10, read_addr: 1 << 30, read_bytes: 128 << 10 },
            Workload::CpuWrites { addr: 0, bytes: 4, count: 300, spacing_ns: 0.0 },
            Workload::CpuReads { addr: 0, bytes: 4, count: 20, gap_ns: 100.0 },
        ];
        let (mut checked, mut starved) = (0, 0);
        for link in ["gen1x1", "gen3x16", "gen5x4"] {
            for variant in 0..6 {
                let mut config = SimConfig::for_link(link).unwrap();
                match variant {
                    0 => {}
                    1 => config.errors = crate::link::ErrorConfig { ber: 2e-5, seed: 7, corrupt: Vec::new() },
                    2 => {
                        let rx = Receiver { ack: AckPolicy::EveryTlps(4), fc: FcPolicy::Timer { delay_ns: 200.0 }, ..Receiver::immediate() };
                        (config.host_rx, config.device_rx) = (rx, rx);
                    }
                    3 => {
                        let class = ClassCredits::Finite { header: 8, data: 64 };
                        let credits = Credits { posted: class, non_posted: class, completion: ClassCredits::Infinite };
                        config.mps_bytes = 128;
                        config.host_rx.credits = credits;
                        config.device_rx.credits = credits;
                    }
                    4 => config.wire_delay_ns = 40.0,
                    // Credit holds: the host's UpdateFCs withheld, the device starving (the
                    // fast-forward steps a held link this way too).
                    _ => {
                        let class = ClassCredits::Finite { header: 16, data: 128 };
                        config.host_rx.credits = Credits { posted: class, non_posted: class, completion: ClassCredits::Infinite };
                        config.inject = crate::link::Injection { holds_per_s: 2e6, hold_min_ns: 300.0, hold_max_ns: 3_000.0, seed: 11, ..Default::default() };
                    }
                }
                for workload in &workloads {
                    let whole = crate::link::simulate(&config, workload).unwrap();
                    assert!(!whole.record.is_empty());
                    assert_eq!(whole, stepped(&config, workload), "{link} variant {variant} {workload:?}");
                    checked += 1;
                    starved += (variant == 5 && whole.starvation[Direction::Upstream.index()].count > 0) as u32;
                }
            }
        }
        assert_eq!(checked, 90);
        assert!(starved >= 6, "the holds starved the device in {starved} runs");
    }
}
