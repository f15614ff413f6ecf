//! Gen6 flit mode in the event loop ([`crate::link::flit`]): a transmitter sends 256-byte
//! flits back to back on a fixed grid (IDLE flits when nothing is pending, so new traffic waits
//! for the next flit boundary), packs TLPs across flit boundaries, carries Acks, Naks and
//! UpdateFCs in the DLP bytes, and replays flits. A receiver checks each flit (CRC after FEC),
//! takes the TLPs that end in a good in-sequence flit, and Naks a bad one.

use std::collections::VecDeque;

use super::{Event, LinkSim};
use crate::link::flit::{take_dlp, FlitContent, FlitSummary, FLIT_BYTES, FLIT_DLP_BYTES, FLIT_SEQ_MODULO, FLIT_TLP_BYTES};
use crate::link::packet::{Direction, Packet, Tlp};
use crate::link::replay::ReplayBuffer;

/// One direction's flit transmitter.
#[derive(Debug, Clone)]
pub(super) struct FlitTx {
    /// The TLP being packed: the TLP, its bytes still to place, the tick of its first byte.
    partial: Option<(Tlp, u64, u64)>,
    next_seq: u16,
    pub(super) buffer: ReplayBuffer<FlitContent>,
    /// Flits on their way to the far end, in order.
    in_flight: VecDeque<FlitContent>,
}

impl FlitTx {
    pub(super) fn new() -> Self {
        FlitTx { partial: None, next_seq: 0, buffer: ReplayBuffer::new(FLIT_SEQ_MODULO), in_flight: VecDeque::new() }
    }
}

impl LinkSim {
    fn flit_tx(&mut self, direction: Direction) -> &mut FlitTx {
        &mut self.flits.as_mut().expect("flit mode")[direction.index()]
    }

    /// The first flit boundary at or after now: flits (IDLE ones included) follow each other
    /// from the end of the last flit or SKP.
    fn flit_boundary(&self, direction: Direction) -> u64 {
        let free = self.tx[direction.index()].free_at;
        free + self.now.saturating_sub(free).div_ceil(FLIT_BYTES) * FLIT_BYTES
    }

    /// Anything that may need a flit: a replay, a TLP, a DLLP.
    fn flit_pending(&self, direction: Direction) -> bool {
        let i = direction.index();
        let flits = &self.flits.as_ref().expect("flit mode")[i];
        let dma_left = direction == Direction::Upstream && self.dma.as_ref().is_some_and(|dma| dma.bytes_left > 0);
        flits.partial.is_some() || flits.buffer.to_replay > 0 || !self.tx[i].tlps.is_empty() || !self.tx[i].dllps.is_empty() || dma_left
    }

    /// Flit mode's transmit: wait for the flit boundary, then send a replayed or a new flit.
    pub(super) fn transmit_flit(&mut self, direction: Direction) {
        let boundary = self.flit_boundary(direction);
        if boundary > self.now {
            if self.flit_pending(direction) {
                // IDLE flits until the boundary.
                self.tx[direction.index()].free_at = boundary;
                self.wake(direction);
            }
            return;
        }
        if let Some(content) = self.next_flit(direction) {
            self.send_flit(direction, content);
        }
    }

    /// The next flit's contents: the next one of a replay, or new TLP bytes; `None` when it
    /// would carry nothing (an IDLE flit).
    fn next_flit(&mut self, direction: Direction) -> Option<FlitContent> {
        let i = direction.index();
        if let Some((_, mut content, _)) = self.flit_tx(direction).buffer.next_replay() {
            content.summary.replay = true;
            content.dllps = take_dlp(&mut self.tx[i].dllps);
            return Some(content);
        }
        let seq = self.flit_tx(direction).next_seq;
        let mut content = FlitContent { summary: FlitSummary { seq: None, tlp_bytes: 0, replay: false }, ends: Vec::new(), dllps: Vec::new() };
        let room = self.flits.as_ref().expect("flit mode")[i].buffer.has_room(FLIT_BYTES, &self.config.replay);
        if room {
            self.fill_tlp_bytes(direction, seq, &mut content);
        } else if self.flit_pending(direction) {
            self.outcome.replay[i].buffer_full_waits += 1;
        }
        content.dllps = take_dlp(&mut self.tx[i].dllps);
        if content.summary.tlp_bytes == 0 {
            return (!content.dllps.is_empty()).then_some(content);
        }
        content.summary.seq = Some(seq);
        let flits = self.flit_tx(direction);
        flits.next_seq = (seq + 1) % FLIT_SEQ_MODULO;
        flits.buffer.push(seq, content.clone(), FLIT_BYTES);
        Some(content)
    }

    /// Pack TLPs into the flit's 236 TLP bytes; a TLP that does not fit goes on in the next
    /// flit. A TLP is recorded from its first byte to the end of the flit holding its last.
    fn fill_tlp_bytes(&mut self, direction: Direction, seq: u16, content: &mut FlitContent) {
        let start = self.now;
        let flit_end = start + FLIT_BYTES;
        let mut used = 0;
        while used < FLIT_TLP_BYTES {
            if self.flit_tx(direction).partial.is_none() {
                let Some((tlp, bytes)) = self.next_tlp(direction) else { break };
                self.tx[direction.index()].credits.consume(&tlp);
                self.flit_tx(direction).partial = Some((tlp, bytes, start + used));
            }
            let (mut tlp, left, first) = self.flit_tx(direction).partial.take().expect("a TLP in progress");
            let placed = left.min(FLIT_TLP_BYTES - used);
            used += placed;
            if placed < left {
                self.flit_tx(direction).partial = Some((tlp, left - placed, first));
                continue;
            }
            tlp.seq = seq;
            content.ends.push(tlp);
            let bytes = self.wire_bytes(&tlp);
            self.note(direction, first, flit_end, Packet::Tlp(tlp));
            self.count(direction, first, flit_end, &Packet::Tlp(tlp), bytes);
        }
        content.summary.tlp_bytes = used as u16;
    }

    /// Put a flit on the lanes from now: record it and its DLP contents, decide whether it
    /// arrives corrupted, and start the REPLAY_TIMER for a flit with TLP bytes.
    fn send_flit(&mut self, direction: Direction, content: FlitContent) {
        let i = direction.index();
        let (start, end) = (self.now, self.now + FLIT_BYTES);
        self.tx[i].free_at = end;
        let packet = Packet::Flit(content.summary);
        self.note(direction, start, end, packet);
        let dlp_start = start + FLIT_TLP_BYTES;
        for dllp in content.dllps.iter().map(|d| Packet::Dllp(*d)) {
            self.note(direction, dlp_start, dlp_start + FLIT_DLP_BYTES, dllp);
            self.count(direction, dlp_start, dlp_start, &dllp, 0);
        }
        if content.summary.replay {
            let replay = &mut self.outcome.replay[i];
            replay.replayed += 1;
            replay.replayed_bytes += FLIT_BYTES;
            replay.lost_ns += self.phy.ns(FLIT_BYTES);
        }
        let corrupted = self.corrupts(direction, start, end, &packet, FLIT_BYTES);
        let payload = content.summary.seq.is_some();
        self.flit_tx(direction).in_flight.push_back(content);
        let arrival = end + self.ticks.wire;
        self.on_lanes[i].push_back((packet, corrupted));
        self.schedule(arrival, Event::Arrive(direction));
        if payload {
            self.start_replay_timer(direction);
        }
        self.wake(direction);
    }

    /// A flit reached the far end of `direction`. A bad one loses its DLP contents too, and
    /// the receiver cannot tell whether it held TLP bytes: it Naks.
    pub(super) fn flit_arrived(&mut self, direction: Direction, corrupted: bool) {
        let i = direction.index();
        let content = self.flit_tx(direction).in_flight.pop_front().expect("a flit on its way");
        if corrupted {
            self.outcome.replay[i].corrupted += 1;
            self.outcome.replay[i].corrupted_dllps += content.dllps.len() as u64;
        } else {
            for dllp in &content.dllps {
                self.arrive(direction, Packet::Dllp(*dllp));
            }
        }
        let seq = match (content.summary.seq, corrupted) {
            (Some(seq), _) => seq,
            (None, true) => 0,
            (None, false) => return,
        };
        self.check_sequence(direction, seq, corrupted, &content.ends);
    }
}
