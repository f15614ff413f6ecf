//! The driven link's state modulo a time shift, for a driver that fast-forwards a schedule
//! that repeats (the `sim` engine's message ring, `engine/sim/ring/steady.rs`).
//!
//! Two moments whose keys are equal are the same state shifted in time: every pending time
//! (queued events, the transmitters' schedules, timers) is taken relative to now, every
//! sequence number relative to its transmitter's next one, every credit count relative to what
//! its transmitter has consumed. From equal states the simulation goes on identically, shifted,
//! so a driver may leave out whole periods ([`LinkSim::skip_period`]). Counters that only count
//! (totals, sequence numbers' absolute values, TLP addresses, which no time depends on) are
//! left out of the key.

use super::{Direction, LinkSim, Packet, SEQ_MODULO};
use crate::link::packet::Dllp;
use crate::link::record::DirectionStats;

/// What crossed the link between two moments: added once per period left out.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkCounts {
    pub stats: [DirectionStats; 2],
    pub delivered_tlps: [u64; 2],
    pub delivered_completions: [u64; 2],
}

impl LinkSim {
    /// Append the state's key to `key`; false (nothing appended that matters) when this link
    /// cannot repeat exactly: bit errors and injected events draw random numbers, flits pack
    /// TLPs across boundaries, a record keeps every packet, agents have their own schedules.
    pub fn periodic_key(&self, key: &mut Vec<u64>) -> bool {
        let config = &self.config;
        if config.record || config.errors.ber != 0.0 || !config.errors.corrupt.is_empty() || config.inject.enabled() {
            return false;
        }
        if self.flits.is_some() || self.dma.is_some() || self.cpu.is_some() {
            return false;
        }
        let now = self.now;
        let rel = |t: u64| t.wrapping_sub(now);
        let opt = |t: Option<u64>| t.map_or(u64::MAX, rel);
        key.push(self.events.len() as u64);
        for (time, event) in self.events.in_order() {
            key.extend([rel(time), event.code() as u64]);
        }
        for direction in Direction::BOTH {
            let i = direction.index();
            let (tx, rx) = (&self.tx[i], &self.rx[i]);
            let seq = |s: u16| u64::from(tx.next_seq.wrapping_sub(s) & (SEQ_MODULO - 1));
            key.extend([rel(tx.free_at), tx.woken as u64, rel(tx.next_skp), opt(tx.timer.deadline), opt(tx.timer.event_at)]);
            key.push(tx.dllps.len() as u64);
            for dllp in &tx.dllps {
                self.packet_key(direction, &Packet::Dllp(*dllp), key);
            }
            key.push(tx.tlps.len() as u64);
            for tlp in &tx.tlps {
                key.extend([tlp.kind as u64, tlp.len_bytes, tlp.data_bytes, u64::from(tlp.tag)]);
            }
            for ((limit, used), (allocated, freed)) in tx.credits.counters().into_iter().zip(rx.credits.counters()) {
                let headroom = |c: Option<(u64, u64)>| c.map_or([u64::MAX; 2], |(h, d)| [h.wrapping_sub(used.0), d.wrapping_sub(used.1)]);
                key.extend(headroom(limit));
                key.extend(headroom(allocated));
                key.push(u64::from(freed));
            }
            key.push(tx.retry.entries().count() as u64);
            for (s, bytes) in tx.retry.entries() {
                key.extend([seq(s), bytes]);
            }
            key.extend([tx.retry.to_replay as u64, u64::from(tx.retry.replay_num)]);
            key.extend([u64::from(rx.unacked), seq(rx.last_seq), rx.ack_timer as u64, rx.fc_timer as u64]);
            key.extend([seq(rx.sequence.last_good()), rx.sequence.nak_scheduled() as u64]);
            key.push(self.on_lanes[i].len() as u64);
            for (packet, corrupted) in &self.on_lanes[i] {
                self.packet_key(direction, packet, key);
                key.push(*corrupted as u64);
            }
            key.extend([self.requests[i].len() as u64, opt(self.inject.starving_since[i])]);
        }
        true
    }

    /// A packet travelling in `direction`: TLP sequence numbers relative to that direction's
    /// transmitter, Acks and UpdateFCs (which concern the opposite one) relative to it.
    fn packet_key(&self, direction: Direction, packet: &Packet, key: &mut Vec<u64>) {
        let own = &self.tx[direction.index()];
        let other = &self.tx[direction.opposite().index()];
        let seq = |tx: &super::Transmitter, s: u16| u64::from(tx.next_seq.wrapping_sub(s) & (SEQ_MODULO - 1));
        match packet {
            Packet::Tlp(tlp) => key.extend([0, tlp.kind as u64, tlp.len_bytes, tlp.data_bytes, u64::from(tlp.tag), seq(own, tlp.seq)]),
            Packet::Dllp(Dllp::Ack { seq: s }) => key.extend([1, seq(other, *s)]),
            Packet::Dllp(Dllp::Nak { seq: s }) => key.extend([2, seq(other, *s)]),
            Packet::Dllp(Dllp::UpdateFc { class, header, data }) => {
                let (_, used) = other.credits.counters()[class.index()];
                key.extend([3, class.index() as u64, header.wrapping_sub(used.0), data.wrapping_sub(used.1)]);
            }
            Packet::Skp => key.push(4),
            Packet::Flit(_) => key.push(5),
        }
    }

    /// What crossed the link so far (subtract two to get a period's).
    pub fn counts(&self) -> LinkCounts {
        LinkCounts { stats: self.outcome.stats, delivered_tlps: self.delivered_tlps, delivered_completions: self.delivered_completions }
    }

    /// Leave out `periods` repetitions of a period of `ticks` in which `counts` crossed: the
    /// state was found equal (by [`LinkSim::periodic_key`]) `ticks` apart, so it is now moved
    /// on as the full simulation would have moved it. Sequence numbers and credit counters
    /// continue from here as if the left-out TLPs had not been sent (only their differences
    /// matter); the starvation totals are not extrapolated.
    pub fn skip_periods(&mut self, ticks: u64, counts: &LinkCounts, periods: u64) {
        let total_ticks = ticks * periods;
        self.advance_clock(total_ticks);
        let shift_ns = self.phy.ns(total_ticks);
        for i in 0..2 {
            let (stats, per) = (&mut self.outcome.stats[i], &counts.stats[i]);
            stats.tlps += per.tlps * periods;
            stats.acks += per.acks * periods;
            stats.update_fcs += per.update_fcs * periods;
            stats.skps += per.skps * periods;
            stats.tlp_bytes += per.tlp_bytes * periods;
            stats.dllp_bytes += per.dllp_bytes * periods;
            stats.skp_ticks += per.skp_ticks * periods;
            stats.payload_bytes += per.payload_bytes * periods;
            stats.last_tlp_end_ns += shift_ns;
            stats.last_end_ns += shift_ns;
            self.delivered_tlps[i] += counts.delivered_tlps[i] * periods;
            self.delivered_completions[i] += counts.delivered_completions[i] * periods;
            if self.outcome.arrived_ns[i] > 0.0 {
                self.outcome.arrived_ns[i] += shift_ns;
            }
        }
        self.outcome.done_ns += shift_ns;
    }
}

impl LinkCounts {
    /// What crossed between `earlier` and `self`.
    pub fn since(&self, earlier: &LinkCounts) -> LinkCounts {
        let mut per = LinkCounts::default();
        for i in 0..2 {
            let (a, b) = (&earlier.stats[i], &self.stats[i]);
            per.stats[i] = DirectionStats {
                tlps: b.tlps - a.tlps,
                acks: b.acks - a.acks,
                update_fcs: b.update_fcs - a.update_fcs,
                skps: b.skps - a.skps,
                tlp_bytes: b.tlp_bytes - a.tlp_bytes,
                dllp_bytes: b.dllp_bytes - a.dllp_bytes,
                skp_ticks: b.skp_ticks - a.skp_ticks,
                payload_bytes: b.payload_bytes - a.payload_bytes,
                ..DirectionStats::default()
            };
            per.delivered_tlps[i] = self.delivered_tlps[i] - earlier.delivered_tlps[i];
            per.delivered_completions[i] = self.delivered_completions[i] - earlier.delivered_completions[i];
        }
        per
    }
}
