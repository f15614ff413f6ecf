//! The simulator's queue of timed events, kept small so that stepping is cheap.
//!
//! An event is only *what* happens and *where*; the packets and requests it concerns wait in
//! per-direction FIFOs of the simulator (a direction's packets arrive in the order they were
//! sent, and a completer answers in the order requests arrived: one fixed latency per
//! direction). Each entry of the heap is then one `u128` — time, order of scheduling, event
//! code — compared in one instruction, instead of a 64-byte tuple carrying a packet.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::packet::Direction;

/// What happens at a time (the packet or request concerned waits in its FIFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A transmitter may start its next packet.
    TxFree(Direction),
    /// The oldest packet on the lanes of `Direction` reached the far end.
    Arrive(Direction),
    /// A completer has the data of the oldest waiting read request ready; completions go in
    /// `Direction`.
    CompletionReady(Direction),
    CpuIssue,
    /// The Ack timer of the receiver of `Direction` ran out.
    AckTimer(Direction),
    /// The UpdateFC timer of the receiver of `Direction` ran out.
    FcTimer(Direction),
    /// The REPLAY_TIMER of the transmitter of `Direction` may have run out.
    ReplayTimer(Direction),
    /// The receiver of `Direction` repeats its UpdateFCs (credits lost with a DLLP).
    FcRefresh(Direction),
}

const CODE_BITS: u32 = 4;
const ORDER_BITS: u32 = 60;

impl Event {
    fn code(self) -> u128 {
        let (kind, direction) = match self {
            Event::TxFree(d) => (0, d),
            Event::Arrive(d) => (1, d),
            Event::CompletionReady(d) => (2, d),
            Event::AckTimer(d) => (3, d),
            Event::FcTimer(d) => (4, d),
            Event::CpuIssue => (5, Direction::Downstream),
            Event::ReplayTimer(d) => (6, d),
            Event::FcRefresh(d) => (7, d),
        };
        kind << 1 | direction.index() as u128
    }

    fn from_code(code: u128) -> Event {
        let direction = if code & 1 == 0 { Direction::Downstream } else { Direction::Upstream };
        match code >> 1 {
            0 => Event::TxFree(direction),
            1 => Event::Arrive(direction),
            2 => Event::CompletionReady(direction),
            3 => Event::AckTimer(direction),
            4 => Event::FcTimer(direction),
            6 => Event::ReplayTimer(direction),
            7 => Event::FcRefresh(direction),
            _ => Event::CpuIssue,
        }
    }
}

fn decode(key: u128) -> (u64, Event) {
    ((key >> (ORDER_BITS + CODE_BITS)) as u64, Event::from_code(key & ((1 << CODE_BITS) - 1)))
}

/// Events by time, then by the order they were scheduled in.
#[derive(Debug, Clone, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<u128>>,
    order: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: u64, event: Event) {
        // 2^60 events would take years of wall time; wrapping would only reorder equal times.
        self.order = (self.order + 1) & ((1 << ORDER_BITS) - 1);
        let key = (time as u128) << (ORDER_BITS + CODE_BITS) | (self.order as u128) << CODE_BITS | event.code();
        self.heap.push(Reverse(key));
    }

    /// The earliest event and its time.
    pub fn pop(&mut self) -> Option<(u64, Event)> {
        let Reverse(key) = self.heap.pop()?;
        Some(decode(key))
    }

    /// The earliest event and its time, left in the queue.
    pub fn peek(&self) -> Option<(u64, Event)> {
        self.heap.peek().map(|&Reverse(key)| decode(key))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Every event `ticks` later, in the same order.
    pub fn delay_all(&mut self, ticks: u64) {
        let shift = (ticks as u128) << (ORDER_BITS + CODE_BITS);
        let keys = std::mem::take(&mut self.heap).into_vec();
        self.heap = keys.into_iter().map(|Reverse(key)| Reverse(key + shift)).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_order_and_keep_their_identity() {
        let mut queue = EventQueue::default();
        let all = [
            Event::TxFree(Direction::Upstream),
            Event::Arrive(Direction::Downstream),
            Event::CompletionReady(Direction::Upstream),
            Event::CpuIssue,
            Event::AckTimer(Direction::Downstream),
            Event::FcTimer(Direction::Upstream),
            Event::ReplayTimer(Direction::Downstream),
            Event::FcRefresh(Direction::Upstream),
        ];
        for (i, event) in all.iter().enumerate() {
            queue.push(100 - i as u64 % 2, *event);
        }
        queue.delay_all(1000);
        let popped: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
        let odd: Vec<_> = all.iter().skip(1).step_by(2).map(|e| (1099, *e)).collect();
        let even: Vec<_> = all.iter().step_by(2).map(|e| (1100, *e)).collect();
        assert_eq!(popped, [odd, even].concat());
        assert!(queue.is_empty());
    }
}
