//! One event loop for the ring's sides on a driven link: the h2d ring alone, the pull ring
//! alone, and any d2h ring beside the h2d ring (`--direction both`) are the same sides under the
//! same loop, so both directions at once follow exactly the rules of each alone.
//!
//! A side ([`Side`]) says when it acts next by its own clock (a producer starting a message, a
//! doorbell or a "done" write falling due, a host issuing a read), acts when the loop lets it,
//! and looks at the link's delivery counters after anything moved. Every TLP the sides queue is
//! numbered in its direction's order ([`Lanes`]); the link delivers each direction in order, so
//! "delivered ≥ its number" says a TLP arrived and "put on the lanes ≥ its number" that it left.

use crate::engine::ring::{StreamEnd, StreamStop, WaitCause};
use crate::engine::EngineError;
use crate::link::{transaction, Direction as LinkDirection, LinkSim, TlpKind};

use super::rules::Limits;
use super::RingTruth;

/// Starts between two looks at the cancel flag.
const CANCEL_EVERY: u64 = 64;

/// The driven link and the numbers of the TLPs queued on it, per direction.
pub struct Lanes {
    pub sim: LinkSim,
    queued: [u64; 2],
}

impl Lanes {
    pub fn new(sim: LinkSim) -> Self {
        Lanes { sim, queued: [0; 2] }
    }

    /// Queue one TLP in `direction`; returns its number there (the first is 1).
    pub fn send(&mut self, direction: LinkDirection, kind: TlpKind, addr: u64, len: u64) -> u64 {
        self.sim.send(direction, transaction::tlp(kind, addr, len, 0));
        self.queued[direction.index()] += 1;
        self.queued[direction.index()]
    }

    /// TLPs of those queued that the far side has received (the completions its completer
    /// sent back are not among them).
    pub fn delivered(&self, direction: LinkDirection) -> u64 {
        super::rules::delivered_writes(&self.sim, direction)
    }

    /// TLPs put on `direction`'s lanes so far, replays not counted again; the numbers hold
    /// where the far side sends no completions that way (a push producer's direction).
    pub fn left(&self, direction: LinkDirection) -> u64 {
        let i = direction.index();
        self.sim.outcome().stats[i].tlps - self.sim.outcome().replay[i].replayed
    }
}

/// When a side acts next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Next {
    pub at_ns: f64,
    /// Before the link's events at the same time (timers: a doorbell, a release, a read), or
    /// after them (a producer starting once what arrived by then is seen).
    pub before_link: bool,
    /// It starts a message (where a stop by signal takes effect).
    pub starts: bool,
}

impl Next {
    fn rank(&self) -> (f64, u8) {
        (self.at_ns, if self.before_link { 0 } else { 2 })
    }

    /// The one of two that comes first (`a` at a tie).
    pub fn first(a: Option<Next>, b: Option<Next>) -> Option<Next> {
        match (a, b) {
            (Some(x), Some(y)) => Some(if y.rank() < x.rank() { y } else { x }),
            (x, y) => x.or(y),
        }
    }
}

/// One ring direction's agents (device and host), driven by [`drive`].
pub trait Side {
    /// When it acts next by its own clock; None while it only waits for the link.
    fn next(&mut self, now_ns: f64) -> Option<Next>;
    /// Act at `at_ns` (the link stands there).
    fn act(&mut self, lanes: &mut Lanes, at_ns: f64);
    /// After the link stepped or anything was queued: what left, what arrived.
    fn observe(&mut self, lanes: &mut Lanes);
    /// Start no more messages (a signal).
    fn stop(&mut self);
    /// It still has messages to produce (at the end: nothing will ever free a buffer).
    fn unfinished(&self) -> bool;
    /// The sink's first error, taken.
    fn failed(&mut self) -> Option<EngineError>;
    /// After the loop: how the stream ended (`stopped_early`: why the loop stopped early) and
    /// what the simulator knows that the events do not say.
    fn finish(&mut self, stopped_early: Option<String>) -> (StreamEnd, RingTruth);
}

/// Run `sides` on `lanes` until none has anything left; returns why it stopped early (a signal).
/// At equal times: timers, then the link's events, then starts; `sides` in their order.
pub fn drive(lanes: &mut Lanes, sides: &mut [&mut dyn Side]) -> Result<Option<String>, EngineError> {
    let mut stopping = false;
    let mut starts = 0u64;
    loop {
        for side in sides.iter_mut() {
            if let Some(error) = side.failed() {
                return Err(error);
            }
        }
        let now_ns = lanes.sim.now_ns();
        // (time, rank: 0 before the link, 1 the link, 2 after), and which side.
        let mut best: Option<(f64, u8, Option<usize>)> = lanes.sim.next_event_ns().map(|t| (t, 1, None));
        let mut chosen = None;
        for (i, side) in sides.iter_mut().enumerate() {
            if let Some(next) = side.next(now_ns) {
                let (at_ns, rank) = next.rank();
                if best.is_none_or(|(t, r, _)| (at_ns, rank) < (t, r)) {
                    best = Some((at_ns, rank, Some(i)));
                    chosen = Some(next);
                }
            }
        }
        let Some((at_ns, _, who)) = best else { break };
        let Some(i) = who else {
            lanes.sim.step_event();
            observe(lanes, sides);
            continue;
        };
        if chosen.is_some_and(|n| n.starts) {
            if starts % CANCEL_EVERY == 0 && crate::cancel::requested() {
                stopping = true;
                sides.iter_mut().for_each(|side| side.stop());
                continue;
            }
            starts += 1;
        }
        lanes.sim.run_until_ns(at_ns);
        sides[i].act(lanes, lanes.sim.now_ns().max(at_ns));
        observe(lanes, sides);
    }
    for side in sides.iter_mut() {
        if let Some(error) = side.failed() {
            return Err(error);
        }
    }
    if !stopping && sides.iter().any(|side| side.unfinished()) {
        return Err(EngineError::Unsupported("simulated ring stalled: no buffer will ever be freed (a bug)".into()));
    }
    Ok(stopping.then(|| "interrupted".to_string()))
}

fn observe(lanes: &mut Lanes, sides: &mut [&mut dyn Side]) {
    for side in sides.iter_mut() {
        side.observe(lanes);
    }
}

/// A push producer's progress (the d2h device beside the h2d ring, the h2d host): the message
/// it is sending (until its last TLP left), when it may start the next, the buffers it handed
/// over and got back.
pub struct Producer {
    limits: Limits,
    stopped: bool,
    /// Messages numbered (delivered or dropped).
    pub sequence: u64,
    /// The number of the message's last TLP while it is being sent.
    pub sending: Option<u64>,
    pub ready_ns: f64,
    /// When the last message's last TLP left, and the upstream starvation counted by then.
    pub last_done_ns: Option<f64>,
    pub starved_at_done_ns: f64,
    /// The last message's start to its ready time (its service and pause): a lossy source's
    /// next message after a drop comes this much later.
    pub period_ns: f64,
    pub first_start_ns: Option<f64>,
    /// Buffers handed to the consumer and buffers it has given back (as the producer sees them).
    pub committed: u64,
    pub freed: u64,
    pub last_freed_ns: f64,
    pub last_release_ns: f64,
    pub dropped: u64,
    /// Of those, the drops since the last message started: after the last one, no sequence
    /// gap can show them.
    pub dropped_after_last: u64,
}

impl Producer {
    pub fn new(stop: StreamStop) -> Self {
        Producer {
            limits: Limits::of(stop),
            stopped: false,
            sequence: 0,
            sending: None,
            ready_ns: 0.0,
            last_done_ns: None,
            starved_at_done_ns: 0.0,
            period_ns: 0.0,
            first_start_ns: None,
            committed: 0,
            freed: 0,
            last_freed_ns: 0.0,
            last_release_ns: 0.0,
            dropped: 0,
            dropped_after_last: 0,
        }
    }

    pub fn has_more(&self) -> bool {
        !self.stopped && self.limits.open(self.sequence, self.ready_ns)
    }

    pub fn stop(&mut self) {
        self.stopped = true;
    }

    pub fn buffer_free(&self, buffers: u64) -> bool {
        self.committed - self.freed < buffers
    }

    /// When it starts (or, lossy, drops) its next message, if it can without waiting for
    /// anything but time.
    pub fn next(&self, buffers: u64, lossy: bool) -> Option<Next> {
        (self.sending.is_none() && self.has_more() && (lossy || self.buffer_free(buffers))).then_some(Next { at_ns: self.ready_ns, before_link: false, starts: true })
    }

    /// The bubble before a message starting at `start_ns`: no free buffer when the buffer came
    /// back after the producer was ready, else `idle` (its own pause, if it has one).
    pub fn wait(&self, start_ns: f64, buffers: u64, idle: WaitCause) -> (f64, WaitCause) {
        let Some(last) = self.last_done_ns else { return (0.0, WaitCause::None) };
        let wait_ns = (start_ns - last).max(0.0);
        let freed_at = if self.committed >= buffers { self.last_freed_ns } else { 0.0 };
        let cause = if wait_ns <= 0.0 { WaitCause::None } else if freed_at > self.ready_ns { WaitCause::NoFreeBuffer } else { idle };
        (wait_ns, cause)
    }

    /// A message started at `start_ns`; `last_tlp` is its last TLP's number.
    pub fn started(&mut self, last_tlp: u64, start_ns: f64) {
        self.first_start_ns.get_or_insert(start_ns);
        self.dropped_after_last = 0;
        self.sending = Some(last_tlp);
        self.committed += 1;
        self.sequence += 1;
    }

    /// A free buffer among `buffers` for the next message; or, none free (lossy), the message
    /// is numbered and dropped, and false.
    pub fn admit(&mut self, buffers: u64) -> bool {
        if self.buffer_free(buffers) {
            return true;
        }
        self.drop_one();
        false
    }

    /// A lossy source found no free buffer: the message is numbered and dropped.
    pub fn drop_one(&mut self) {
        self.dropped += 1;
        self.dropped_after_last += 1;
        self.sequence += 1;
        self.ready_ns = super::rules::ready_after_drop(self.ready_ns, self.period_ns);
    }

    /// Its last TLP left at `done_ns`; it may start the next `pause_ns` later.
    pub fn sent(&mut self, start_ns: f64, done_ns: f64, pause_ns: f64, starved_ns: f64) {
        self.sending = None;
        self.last_done_ns = Some(done_ns);
        self.starved_at_done_ns = starved_ns;
        self.ready_ns = done_ns + pause_ns;
        self.period_ns = self.ready_ns - start_ns;
    }

    /// A buffer came back at `now_ns`.
    pub fn freed_one(&mut self, now_ns: f64) {
        self.freed += 1;
        self.last_freed_ns = now_ns;
    }

    pub fn end(&self, stopped_early: Option<String>) -> StreamEnd {
        StreamEnd {
            produced: self.sequence,
            dropped_by_producer: Some(self.dropped),
            start_ns: self.first_start_ns.unwrap_or(0.0),
            end_ns: self.last_release_ns,
            stopped_early,
            fast_forwarded: 0,
        }
    }
}
