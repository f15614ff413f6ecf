//! The event loop's side of data link layer retry ([`crate::link::replay`]): injected errors
//! on the way, the receiver's Nak and duplicate Ack, the transmitter's replay, REPLAY_TIMER and
//! link retrain, and UpdateFCs repeated when one was lost.

use super::{Event, LinkSim};
use crate::link::errors::Checked;
use crate::link::packet::{Direction, Dllp, FcClass, Packet, Tlp, TlpKind};
use crate::link::record::Crossing;
use crate::link::replay::{spec_timeout_ns, Verdict};
use crate::link::phy::Phy;
use crate::link::{ClassCredits, SimConfig};

/// The REPLAY_TIMER limit in ticks: the configured one or the specification's.
pub(super) fn replay_timeout_ticks(config: &SimConfig, phy: &Phy) -> u64 {
    let symbol_ns = phy.ns(phy.symbol_ticks());
    let ns = config.replay.timeout_ns.unwrap_or_else(|| spec_timeout_ns(config.link, config.mps_bytes, symbol_ns));
    phy.ticks(ns).max(1)
}

/// A receiver must send UpdateFCs at least this often while credits are finite (§2.6.1.2);
/// the simulator only needs it when an UpdateFC was lost and the transmitter waits.
const FC_REFRESH_NS: f64 = 30_000.0;

impl LinkSim {
    /// Decide whether `packet` arrives with a bad CRC; keep it in the record if so.
    pub(super) fn corrupts(&mut self, direction: Direction, start: u64, end: u64, packet: &Packet, bytes: u64) -> bool {
        if !self.errors.enabled() {
            return false;
        }
        let checked = match *packet {
            Packet::Tlp(tlp) => Checked::Tlp { seq: tlp.seq },
            Packet::Dllp(Dllp::Ack { seq }) => Checked::Ack { seq },
            Packet::Dllp(_) => Checked::OtherDllp,
            Packet::Flit(flit) => Checked::Flit { seq: flit.seq },
            Packet::Skp => return false,
        };
        if !self.errors.corrupts(direction, checked, bytes) {
            return false;
        }
        if self.config.record {
            let (start_ns, end_ns) = (self.phy.ns(start), self.phy.ns(end));
            self.outcome.corrupted.push(Crossing { direction, start_ns, end_ns, packet: *packet });
        }
        true
    }

    pub(super) fn arrive_corrupted(&mut self, direction: Direction, packet: Packet) {
        match packet {
            Packet::Tlp(tlp) => self.receive_checked(direction, &tlp, true),
            Packet::Flit(_) => self.flit_arrived(direction, true),
            // A DLLP with a bad CRC is dropped: a later Ack or UpdateFC (cumulative) or the
            // REPLAY_TIMER makes up for it.
            _ => self.outcome.replay[direction.index()].corrupted_dllps += 1,
        }
    }

    /// Data link layer receive: pass on the expected TLP, Nak a bad one, Ack a duplicate.
    #[inline]
    pub(super) fn receive_checked(&mut self, direction: Direction, tlp: &Tlp, corrupted: bool) {
        if corrupted {
            self.outcome.replay[direction.index()].corrupted += 1;
        }
        self.check_sequence(direction, tlp.seq, corrupted, std::slice::from_ref(tlp));
    }

    /// The receiver's verdict on sequence number `seq` (a TLP's, or a flit's carrying `tlps`):
    /// pass the TLPs on when it is the expected one, Ack a duplicate, Nak a bad one.
    #[inline]
    pub(super) fn check_sequence(&mut self, direction: Direction, seq: u16, corrupted: bool, tlps: &[Tlp]) {
        match self.rx[direction.index()].sequence.check(seq, corrupted) {
            Verdict::Accept => {
                self.receive_tlp(direction, seq);
                for tlp in tlps {
                    self.consume(direction, tlp);
                    if self.config.record {
                        self.outcome.delivered.push((direction, *tlp));
                    }
                }
            }
            Verdict::Duplicate { ack } => self.queue_dllp(direction.opposite(), Dllp::Ack { seq: ack }),
            Verdict::Nak { seq } => self.queue_dllp(direction.opposite(), Dllp::Nak { seq }),
            Verdict::Discard => {}
        }
    }

    pub(super) fn queue_dllp(&mut self, direction: Direction, dllp: Dllp) {
        self.tx[direction.index()].dllps.push_back(dllp);
        self.wake(direction);
    }

    /// An Ack or Nak for the TLPs sent in `direction` arrived.
    #[inline]
    pub(super) fn acknowledged(&mut self, direction: Direction, seq: u16, nak: bool) {
        let i = direction.index();
        let purged = match &mut self.flits {
            Some(flits) => flits[i].buffer.acknowledge(seq).entries,
            None => self.tx[i].retry.acknowledge(seq).entries,
        };
        if nak {
            self.outcome.replay[i].naks += 1;
        }
        if purged == 0 && !nak {
            return;
        }
        // Forward progress restarts the timer; an empty buffer stops it.
        self.tx[i].timer.deadline = None;
        let empty = self.nothing_unacked(direction);
        if nak && !empty {
            self.initiate_replay(direction);
        } else if !empty {
            let deadline = self.now + self.ticks.replay_timeout;
            self.set_replay_deadline(direction, deadline);
        }
        if purged > 0 {
            self.wake(direction);
        }
    }

    fn nothing_unacked(&self, direction: Direction) -> bool {
        match &self.flits {
            Some(flits) => flits[direction.index()].buffer.is_empty(),
            None => self.tx[direction.index()].retry.is_empty(),
        }
    }

    /// The next TLP of a replay in progress, with its link bytes.
    pub(super) fn next_replay_tlp(&mut self, direction: Direction) -> Option<(Tlp, u64)> {
        let (_, tlp, bytes) = self.tx[direction.index()].retry.next_replay()?;
        Some((tlp, bytes))
    }

    /// Count a replayed TLP: lane time lost; its payload was already counted once.
    pub(super) fn replayed(&mut self, direction: Direction, tlp: &Tlp, bytes: u64) {
        let i = direction.index();
        let replay = &mut self.outcome.replay[i];
        replay.replayed += 1;
        replay.replayed_bytes += bytes;
        replay.lost_ns += self.phy.ns(bytes);
        if tlp.kind != TlpKind::MemRead {
            self.outcome.stats[i].payload_bytes -= tlp.len_bytes;
        }
    }

    /// Start the REPLAY_TIMER when a TLP's last symbol goes out, unless it runs already.
    pub(super) fn start_replay_timer(&mut self, direction: Direction) {
        let tx = &self.tx[direction.index()];
        if tx.timer.deadline.is_none() {
            let deadline = tx.free_at + self.ticks.replay_timeout;
            self.set_replay_deadline(direction, deadline);
        }
    }

    fn set_replay_deadline(&mut self, direction: Direction, deadline: u64) {
        let timer = &mut self.tx[direction.index()].timer;
        timer.deadline = Some(deadline);
        if timer.event_at.is_none() {
            timer.event_at = Some(deadline);
            self.schedule(deadline, Event::ReplayTimer(direction));
        }
    }

    /// `event` at `time` is a REPLAY_TIMER that runs out (not one whose deadline moved).
    pub(super) fn replay_timer_runs_out(&self, time: u64, event: Event) -> bool {
        match event {
            Event::ReplayTimer(direction) => self.tx[direction.index()].timer.deadline.is_some_and(|at| at <= time),
            _ => false,
        }
    }

    /// The timer's event: it ran out, or its deadline moved later (check again then).
    pub(super) fn replay_timer_event(&mut self, direction: Direction) {
        let i = direction.index();
        self.tx[i].timer.event_at = None;
        match self.tx[i].timer.deadline {
            None => {}
            Some(at) if at > self.now => self.set_replay_deadline(direction, at),
            Some(_) => {
                self.outcome.replay[i].timer_expiries += 1;
                self.tx[i].timer.deadline = None;
                if !self.nothing_unacked(direction) {
                    self.initiate_replay(direction);
                }
            }
        }
    }

    /// Replay everything unacknowledged; the fourth replay without progress retrains first.
    fn initiate_replay(&mut self, direction: Direction) {
        let i = direction.index();
        self.tx[i].timer.deadline = None;
        self.outcome.replay[i].replays += 1;
        let rolled_over = match &mut self.flits {
            Some(flits) => flits[i].buffer.start_replay(),
            None => self.tx[i].retry.start_replay(),
        };
        if rolled_over {
            self.retrain(direction);
        }
        self.wake(direction);
    }

    /// Link retrain (Recovery): both directions carry nothing for the retrain time; the SKP
    /// schedule starts again after it.
    fn retrain(&mut self, direction: Direction) {
        let ticks = self.phy.ticks(self.config.replay.retrain_ns);
        let replay = &mut self.outcome.replay[direction.index()];
        replay.retrains += 1;
        replay.lost_ns += self.phy.ns(ticks);
        let interval = self.ticks.skp_interval;
        for d in Direction::BOTH {
            let tx = &mut self.tx[d.index()];
            tx.free_at = tx.free_at.max(self.now) + ticks;
            tx.next_skp = tx.free_at + interval;
            self.wake(d);
        }
    }

    /// When a run would end with a transmitter waiting for credits (an UpdateFC was lost),
    /// its partner repeats its UpdateFCs after the specification's 30 µs. True if scheduled.
    pub(super) fn refresh_credits(&mut self) -> bool {
        if !self.errors.enabled() {
            return false;
        }
        let mut scheduled = false;
        for direction in Direction::BOTH {
            let tx = &self.tx[direction.index()];
            let Some(head) = tx.tlps.front() else { continue };
            if !tx.credits.allows(head) {
                let at = self.now + self.phy.ticks(FC_REFRESH_NS);
                self.schedule(at, Event::FcRefresh(direction));
                scheduled = true;
            }
        }
        scheduled
    }

    /// The receiver of `direction` sends an UpdateFC for every finite class.
    pub(super) fn repeat_update_fcs(&mut self, direction: Direction) {
        for class in FcClass::ALL {
            let rx = &mut self.rx[direction.index()];
            if let ClassCredits::Finite { .. } = rx.policy.credits.class(class) {
                let (header, data) = rx.credits.update(class);
                self.queue_dllp(direction.opposite(), Dllp::UpdateFc { class, header, data });
            }
        }
    }
}
