//! The simulator's queue of timed events, kept small so that stepping is cheap.
//!
//! An event is only *what* happens and *where*; the packets and requests it concerns wait in
//! per-direction FIFOs of the simulator (a direction's packets arrive in the order they were
//! sent, and a completer answers in the order requests arrived: one fixed latency per
//! direction). Each event is one `u128` key — time, order of scheduling, event code — and
//! events come out by time, then by the order they were scheduled in.
//!
//! The queue is one vector of keys sorted latest first, so the next event is its last element.
//! A new event is usually among the earliest (a packet's end, a transmitter free now), so its
//! place is found scanning from that end in a step or two, and inserting moves only the few
//! keys after it; a binary heap's sift, with its unpredictable branches, took a fifth of the
//! run. Where many events wait (long wires, many read requests) the scan gives way to a
//! binary search after a few steps.

use super::packet::Direction;

/// What happens at a time (the packet or request concerned waits in its FIFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A transmitter may start its next packet.
    TxFree(Direction),
    /// The oldest packet on the lanes of `Direction` reached the far end.
    Arrive(Direction),
    /// `Arrive`, then `TxFree`, of `Direction` at one tick: with no wire delay a packet arrives
    /// as its transmitter frees, and the two keys would come out one right after the other.
    ArriveAndFree(Direction),
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

const CODE_BITS: u32 = 5;
const ORDER_BITS: u32 = 59;

impl Event {
    pub(super) fn code(self) -> u128 {
        let (kind, direction) = match self {
            Event::TxFree(d) => (0, d),
            Event::Arrive(d) => (1, d),
            Event::CompletionReady(d) => (2, d),
            Event::AckTimer(d) => (3, d),
            Event::FcTimer(d) => (4, d),
            Event::CpuIssue => (5, Direction::Downstream),
            Event::ReplayTimer(d) => (6, d),
            Event::FcRefresh(d) => (7, d),
            Event::ArriveAndFree(d) => (8, d),
        };
        kind << 1 | direction.index() as u128
    }

    /// The event of `code` (its kind, then its direction): a load from a table, not a jump on
    /// the kind, once per event popped.
    fn from_code(code: u128) -> Event {
        EVENT_BY_CODE[code as usize]
    }
}

/// [`Event::code`] inverted: index = code, every code below 2^CODE_BITS (unused ones: CpuIssue).
const EVENT_BY_CODE: [Event; 1 << CODE_BITS] = {
    let mut table = [Event::CpuIssue; 1 << CODE_BITS];
    let mut code = 0;
    while code < table.len() {
        let direction = if code & 1 == 0 { Direction::Downstream } else { Direction::Upstream };
        table[code] = match code >> 1 {
            0 => Event::TxFree(direction),
            1 => Event::Arrive(direction),
            2 => Event::CompletionReady(direction),
            3 => Event::AckTimer(direction),
            4 => Event::FcTimer(direction),
            6 => Event::ReplayTimer(direction),
            7 => Event::FcRefresh(direction),
            8 => Event::ArriveAndFree(direction),
            _ => Event::CpuIssue,
        };
        code += 1;
    }
    table
};

/// Keys a new event is compared with from the earliest end before a binary search.
const SCAN_STEPS: usize = 8;

fn decode(key: u128) -> (u64, Event) {
    ((key >> (ORDER_BITS + CODE_BITS)) as u64, Event::from_code(key & ((1 << CODE_BITS) - 1)))
}

/// Events by time, then by the order they were scheduled in.
#[derive(Debug, Clone, Default)]
pub struct EventQueue {
    /// Every pending key, latest first (the next event is the last).
    keys: Vec<u128>,
    order: u64,
    last_popped: Option<u128>,
}

impl EventQueue {
    #[inline(always)]
    pub fn push(&mut self, time: u64, event: Event) {
        // 2^59 events would take years of wall time; wrapping would only reorder equal times.
        self.order = (self.order + 1) & ((1 << ORDER_BITS) - 1);
        let key = (time as u128) << (ORDER_BITS + CODE_BITS) | (self.order as u128) << CODE_BITS | event.code();
        self.insert(key);
    }

    /// Put `key` in its place: after every later key, before every earlier one. The earlier
    /// keys it passes move up one as it goes (no call to move memory for one or two). Inlined
    /// into each scheduling site (a call's saving of registers cost as much as the scan); the
    /// rare binary search is not.
    #[inline(always)]
    fn insert(&mut self, key: u128) {
        let keys = &mut self.keys;
        keys.push(key);
        let mut at = keys.len() - 1;
        let mut steps = 0;
        while at > 0 && keys[at - 1] < key {
            if steps == SCAN_STEPS {
                at = Self::insert_far(keys, at, key);
                break;
            }
            keys[at] = keys[at - 1];
            at -= 1;
            steps += 1;
        }
        keys[at] = key;
    }

    /// Where `key` goes among `keys[..at]` (all later than the keys after them), found by a
    /// binary search; those after the place move up one.
    #[cold]
    #[inline(never)]
    fn insert_far(keys: &mut [u128], at: usize, key: u128) -> usize {
        let place = keys[..at].partition_point(|&k| k > key);
        keys.copy_within(place..at, place + 1);
        place
    }

    /// The earliest event and its time.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(u64, Event)> {
        let key = self.keys.pop()?;
        self.last_popped = Some(key);
        Some(decode(key))
    }

    /// Put the event [`pop`](Self::pop) just returned back, where it was (same time and order).
    pub fn unpop(&mut self) {
        if let Some(key) = self.last_popped.take() {
            self.insert(key);
        }
    }

    /// The earliest event and its time, left in the queue.
    pub fn peek(&self) -> Option<(u64, Event)> {
        self.keys.last().map(|&key| decode(key))
    }

    /// Time of the earliest event.
    pub fn next_time(&self) -> Option<u64> {
        self.keys.last().map(|&key| (key >> (ORDER_BITS + CODE_BITS)) as u64)
    }

    /// The queued events in the order they will be handled, with their times.
    pub fn in_order(&self) -> impl Iterator<Item = (u64, Event)> + '_ {
        self.keys.iter().rev().map(|&key| decode(key))
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Every event `ticks` later, in the same order.
    pub fn delay_all(&mut self, ticks: u64) {
        let shift = (ticks as u128) << (ORDER_BITS + CODE_BITS);
        self.keys.iter_mut().for_each(|key| *key += shift);
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
            Event::ArriveAndFree(Direction::Downstream),
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

    #[test]
    fn many_events_in_any_time_order_come_out_by_time_then_order() {
        // Pseudo-random times, many pending (the binary search after the scan), pops between
        // pushes: the queue must give exactly what sorting by (time, order of scheduling) gives.
        let mut queue = EventQueue::default();
        let mut expected = Vec::new();
        let mut state = 12345u64;
        let kinds = [Event::TxFree, Event::Arrive, Event::CompletionReady, Event::ReplayTimer];
        for order in 0..2000u64 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let time = (state >> 33) % 50;
            let direction = if state >> 20 & 1 == 0 { Direction::Downstream } else { Direction::Upstream };
            let event = kinds[(state >> 40) as usize % kinds.len()](direction);
            queue.push(time, event);
            expected.push((time, order, event));
            if order % 7 == 0 {
                // Interleave pops (each the least so far) with the pushes.
                expected.sort_by_key(|&(t, o, _)| (t, o));
                let (t, _, e) = expected.remove(0);
                assert_eq!(queue.pop(), Some((t, e)));
                if order % 14 == 0 {
                    queue.unpop();
                    expected.insert(0, (t, 0, e));
                }
            }
        }
        expected.sort_by_key(|&(t, o, _)| (t, o));
        assert_eq!(queue.len(), expected.len());
        let popped: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(popped, expected.iter().map(|&(t, _, e)| (t, e)).collect::<Vec<_>>());
    }
}
