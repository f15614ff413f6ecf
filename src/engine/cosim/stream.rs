//! The `cosim` engine's [`Streaming`]: the core's streaming mode (docs/hdl.md#streaming-mode)
//! with the testbench's host consuming the ring (`stream_start` / `stream_next`, docs/cosim.md).
//!
//! Device times come from the core: each message's metadata carries the device clock at its
//! start, its flag word the cycles to the flag write. Host times are the testbench's simulated
//! time: when the consumer took the message and rang the doorbell for it. A duration is the
//! core's own (STREAM_DURATION): it starts no message once the device clock has passed it.

use super::{CosimEngine, LABEL};
use crate::device::regmap::STREAM_DURATION_MASK;
use crate::engine::ring::{
    Backpressure, MessageEvent, MessageSink, RingPlan, StreamDirection, StreamEnd, StreamStop, Streaming, Transport, WaitCause,
};
use crate::engine::{EngineError, EngineInfo};
use crate::error::InvalidInput;

/// Most messages one co-simulated stream may take (each costs a few TLPs of Python models); a
/// duration run that reaches it first ends there, saying so.
pub const MAX_STREAM_MESSAGES: u64 = 100_000;
/// Most host memory the ring may take in the testbench.
pub const MAX_RING_BYTES: u64 = 16 << 20;
/// Messages per `stream_next`: a signal is noticed between two (about a second of simulation).
const CHUNK_MESSAGES: usize = 16;
/// The metadata's sequence number is 24 bits wide.
const SEQUENCE_BITS: u32 = 24;

/// One message as `stream_next` reports it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Record {
    sequence: u32,
    bytes: u32,
    start_cycles: u64,
    service_cycles: u64,
    seen_ns: f64,
    released_ns: f64,
    occupancy: u32,
    data_ok: bool,
}

fn parse_record(text: &str) -> Option<Record> {
    let f: Vec<&str> = text.split(',').collect();
    if f.len() != 9 {
        return None;
    }
    Some(Record {
        sequence: f[0].parse().ok()?,
        bytes: f[1].parse().ok()?,
        start_cycles: f[2].parse().ok()?,
        service_cycles: f[3].parse().ok()?,
        // f[4]: when the flag write reached host memory (the consumer may take it later).
        seen_ns: f[5].parse().ok()?,
        released_ns: f[6].parse().ok()?,
        occupancy: f[7].parse().ok()?,
        data_ok: f[8] == "1",
    })
}

/// Turns the core's records into events: unwraps the 24-bit sequence numbers, converts device
/// cycles to ns and names the cause of each bubble from what the device knows.
struct Events {
    ns_per_cycle: f64,
    /// Beats of the 1-DW flag write (its 4-DW descriptor + 1 DW): the core's service time stops
    /// when it queues the flag, the message is done when the flag's last beat leaves.
    flag_beats: u64,
    dwell_cycles: u64,
    last: Option<(u64, u64)>, // (sequence, device done cycle) of the previous message
}

/// Cycles between one message's done and the next one's start when nothing waits: the core
/// takes the next buffer one cycle after the flag's last beat (docs/hdl.md).
const TURNAROUND_CYCLES: u64 = 1;

impl Events {
    fn event(&mut self, record: &Record) -> MessageEvent {
        let sequence = match self.last {
            None => record.sequence as u64,
            Some((previous, _)) => {
                let mask = (1u64 << SEQUENCE_BITS) - 1;
                previous + ((record.sequence as u64).wrapping_sub(previous) & mask)
            }
        };
        let done_cycles = record.start_cycles + record.service_cycles + self.flag_beats;
        let (wait_cycles, wait_cause) = match self.last {
            None => (0, WaitCause::None),
            Some((previous, previous_done)) => {
                let gap = record.start_cycles.saturating_sub(previous_done);
                // A drop or a wait for a free buffer both mean the ring was full.
                let cause = if sequence > previous + 1 || gap > TURNAROUND_CYCLES + self.dwell_cycles {
                    WaitCause::NoFreeBuffer
                } else {
                    // The dwell and the core's own one-cycle turnaround: the producer's pause.
                    WaitCause::DeviceDwell
                };
                (gap, cause)
            }
        };
        self.last = Some((sequence, done_cycles));
        MessageEvent {
            sequence,
            bytes: record.bytes,
            device_start_ns: Some(record.start_cycles as f64 * self.ns_per_cycle),
            device_done_ns: Some(done_cycles as f64 * self.ns_per_cycle),
            host_seen_ns: record.seen_ns,
            host_released_ns: record.released_ns,
            ring_occupancy: record.occupancy,
            wait_before_ns: wait_cycles as f64 * self.ns_per_cycle,
            wait_cause,
        }
    }
}

/// `key=value` of a `stream_next` answer.
fn value<'a>(words: &'a [String], key: &str) -> Option<&'a str> {
    words.iter().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

impl CosimEngine {
    /// How long the testbench's consumer holds each message before it rings the doorbell
    /// (default 0: at once); a slow host fills the ring.
    pub fn set_stream_release_delay_ns(&mut self, delay_ns: u64) {
        self.stream_release_delay_ns = delay_ns;
    }

    /// Idle device cycles after each message's flag write (OCDP's dwell; default 0).
    pub fn set_stream_dwell_cycles(&mut self, cycles: u32) {
        self.stream_dwell_cycles = cycles as u64;
    }

    /// What the core is programmed with to honour `plan.stop`.
    fn budget_of(&self, plan: &RingPlan) -> Result<Budget, EngineError> {
        match plan.stop {
            StreamStop::Messages(n) if (1..=MAX_STREAM_MESSAGES).contains(&n) => Ok(Budget { messages: n, duration_cycles: 0 }),
            StreamStop::Messages(n) => {
                Err(InvalidInput::new(format!("cosim stream of {n} messages: 1 to {MAX_STREAM_MESSAGES} (each is co-simulated TLP by TLP)")).into())
            }
            StreamStop::Duration(duration) => match duration_cycles(duration, self.clock_hz) {
                Some(cycles) => Ok(Budget { messages: MAX_STREAM_MESSAGES, duration_cycles: cycles }),
                None => Err(InvalidInput::new(format!(
                    "cosim stream of {duration:?}: a duration must be more than 0 and at most {STREAM_DURATION_MASK} device cycles (STREAM_DURATION)"
                ))
                .into()),
            },
        }
    }
}

/// How a stream ends on the core: STREAM_MESSAGES, and STREAM_DURATION (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Budget {
    messages: u64,
    duration_cycles: u64,
}

impl Budget {
    /// Why a finished duration run ended before its duration: the message cap, when the core
    /// numbered all it allows while its run (`cycles`, STREAM_CYCLES) was still inside the
    /// duration. The core's last S_NEXT cycle counts as one run cycle, so a stop by the
    /// duration always shows `cycles` > `duration_cycles`.
    fn capped(&self, produced: u64, cycles: u64) -> Option<String> {
        (self.duration_cycles > 0 && produced >= self.messages && cycles <= self.duration_cycles).then(|| {
            format!(
                "cosim: stopped at the cap of {} messages after {cycles} of {} device cycles (co-simulation is slow: shorten --duration)",
                self.messages, self.duration_cycles
            )
        })
    }
}

/// A duration in whole device cycles, rounded up: a message may start at cycle k after the
/// first one when k × the period < the duration. None for 0 or more than the register holds.
fn duration_cycles(duration: std::time::Duration, clock_hz: f64) -> Option<u64> {
    let hz = clock_hz.round() as u128;
    let cycles = (duration.as_nanos() * hz).div_ceil(1_000_000_000);
    (cycles > 0 && cycles <= u128::from(STREAM_DURATION_MASK)).then_some(cycles as u64)
}

impl Streaming for CosimEngine {
    fn check(&self, plan: &RingPlan) -> Result<(), EngineError> {
        if plan.direction != StreamDirection::D2h || plan.transport != Transport::Push {
            return Err(EngineError::Unsupported(
                "cosim: the core's streaming mode pushes device-to-host messages (d2h, push) only".into(),
            ));
        }
        let refuse = |why: String| -> Result<(), EngineError> { Err(InvalidInput::new(format!("cosim stream: {why}")).into()) };
        if plan.host_buffers == 0 {
            return refuse("the ring needs at least one host buffer".into());
        }
        if plan.message_bytes == 0 || plan.message_bytes % 4 != 0 || plan.buffer_bytes % 4 != 0 {
            return refuse(format!(
                "message ({} bytes) and buffer ({} bytes) sizes must be multiples of 4, the message at least 4",
                plan.message_bytes, plan.buffer_bytes
            ));
        }
        if plan.message_bytes > plan.buffer_bytes {
            return refuse(format!("a {}-byte message does not fit a {}-byte buffer", plan.message_bytes, plan.buffer_bytes));
        }
        let ring_bytes = plan.host_buffers as u64 * plan.buffer_bytes as u64;
        if ring_bytes > MAX_RING_BYTES {
            return refuse(format!("a ring of {ring_bytes} bytes exceeds the testbench's {MAX_RING_BYTES} bytes of host memory"));
        }
        self.budget_of(plan).map(drop)
    }

    fn stream(&mut self, plan: &RingPlan, sink: &mut dyn MessageSink) -> Result<StreamEnd, EngineError> {
        Streaming::check(self, plan)?;
        let budget = self.budget_of(plan)?;
        let lanes = (self.data_width_bits / 32).max(1);
        let dwell_cycles = self.stream_dwell_cycles;
        let lossy = plan.backpressure == Backpressure::Lossy;
        let start_ns = self.now_ns;
        self.call(&format!(
            "stream_start {} {} {} {} {dwell_cycles} {} {} {}",
            budget.messages,
            plan.message_bytes,
            plan.host_buffers,
            plan.buffer_bytes,
            u8::from(lossy),
            self.stream_release_delay_ns,
            budget.duration_cycles
        ))?;
        let mut events = Events { ns_per_cycle: 1e9 / self.clock_hz, flag_beats: 5u64.div_ceil(lanes), dwell_cycles, last: None };
        let mut end_ns = start_ns;
        loop {
            if crate::cancel::requested() {
                return Ok(StreamEnd {
                    produced: events.last.map_or(0, |(s, _)| s + 1),
                    dropped_by_producer: None,
                    start_ns,
                    end_ns,
                    stopped_early: Some("interrupted".into()),
                    fast_forwarded: 0,
                });
            }
            let words = self.call(&format!("stream_next {CHUNK_MESSAGES}"))?;
            let records = value(&words, "messages").unwrap_or("");
            for text in records.split(';').filter(|t| !t.is_empty()) {
                let record = parse_record(text)
                    .ok_or_else(|| EngineError::Unsupported(format!("cosim testbench: bad stream record '{text}' (protocol docs/cosim.md)")))?;
                if !record.data_ok {
                    return Err(EngineError::Unsupported(format!(
                        "{LABEL} core: message {} arrived with wrong data or flag (a core bug)",
                        record.sequence
                    )));
                }
                let event = events.event(&record);
                end_ns = event.host_released_ns;
                if let Err(error) = sink.message(&event) {
                    return Ok(StreamEnd {
                        produced: event.sequence + 1,
                        dropped_by_producer: None,
                        start_ns,
                        end_ns,
                        stopped_early: Some(error.to_string()),
                        fast_forwarded: 0,
                    });
                }
            }
            if value(&words, "done") == Some("1") {
                let number = |key: &str| value(&words, key).and_then(|v| v.parse::<u64>().ok());
                let produced = number("produced").ok_or_else(|| {
                    EngineError::Unsupported(format!("cosim testbench: a finished stream without its counters (protocol docs/cosim.md): {words:?}"))
                })?;
                return Ok(StreamEnd {
                    produced,
                    dropped_by_producer: number("dropped"),
                    start_ns,
                    end_ns,
                    stopped_early: budget.capped(produced, number("cycles").unwrap_or(0)),
                    fast_forwarded: 0,
                });
            }
        }
    }

    fn info(&self) -> &EngineInfo {
        &self.info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(sequence: u32, start_cycles: u64, service_cycles: u64) -> Record {
        Record { sequence, bytes: 64, start_cycles, service_cycles, seen_ns: 0.0, released_ns: 0.0, occupancy: 1, data_ok: true }
    }

    fn events(dwell_cycles: u64) -> Events {
        Events { ns_per_cycle: 8.0, flag_beats: 3, dwell_cycles, last: None }
    }

    #[test]
    fn bubbles_are_the_gap_after_the_flag_and_name_their_cause() {
        let mut e = events(0);
        let first = e.event(&record(0, 100, 20));
        assert_eq!((first.wait_before_ns, first.wait_cause), (0.0, WaitCause::None));
        assert_eq!(first.device_done_ns, Some((100 + 20 + 3) as f64 * 8.0));
        // Done at 123; the next start one cycle later is the core's turnaround.
        let next = e.event(&record(1, 124, 20));
        assert_eq!((next.wait_before_ns, next.wait_cause), (8.0, WaitCause::DeviceDwell));
        // Done at 147; 10 cycles later with no dwell configured: it waited for a buffer.
        let waited = e.event(&record(2, 157, 20));
        assert_eq!((waited.wait_before_ns, waited.wait_cause), (80.0, WaitCause::NoFreeBuffer));
        // A skipped sequence number is a drop: the ring was full.
        let after_drop = e.event(&record(4, 181, 20));
        assert_eq!((after_drop.sequence, after_drop.wait_cause), (4, WaitCause::NoFreeBuffer));
    }

    #[test]
    fn a_dwell_is_the_producer_s_own_pause() {
        let mut e = events(5);
        e.event(&record(0, 0, 10));
        let next = e.event(&record(1, 10 + 3 + 1 + 5, 10));
        assert_eq!((next.wait_before_ns, next.wait_cause), (48.0, WaitCause::DeviceDwell));
    }

    #[test]
    fn sequence_numbers_unwrap_past_24_bits() {
        let mut e = events(0);
        e.event(&record((1 << 24) - 1, 0, 10));
        assert_eq!(e.event(&record(0, 20, 10)).sequence, 1 << 24);
        assert_eq!(e.event(&record(2, 40, 10)).sequence, (1 << 24) + 2);
    }

    #[test]
    fn a_duration_is_whole_device_cycles_rounded_up() {
        let ns = std::time::Duration::from_nanos;
        // 125 MHz: 8 ns a cycle. 800 ns: starts at cycles 0..=99 are inside; 801 ns: also 100.
        assert_eq!(duration_cycles(ns(800), 125e6), Some(100));
        assert_eq!(duration_cycles(ns(801), 125e6), Some(101));
        assert_eq!(duration_cycles(ns(1), 250e6), Some(1));
        assert_eq!(duration_cycles(ns(0), 250e6), None);
        // 48 bits of cycles at 250 MHz: about 13 days.
        assert_eq!(duration_cycles(std::time::Duration::from_secs(14 * 86_400), 250e6), None);
    }

    #[test]
    fn only_a_duration_run_inside_its_duration_was_capped() {
        let run = Budget { messages: 100, duration_cycles: 1000 };
        assert!(run.capped(100, 1000).is_some_and(|why| why.contains("cap of 100 messages")));
        assert_eq!(run.capped(100, 1001), None, "the duration ended it");
        assert_eq!(run.capped(40, 1001), None);
        assert_eq!(Budget { messages: 100, duration_cycles: 0 }.capped(100, 50), None, "a counted run ends at its count");
    }

    #[test]
    fn records_parse_and_refuse_garbage() {
        let r = parse_record("7,64,1000,25,12.000,13.500,20.250,2,1").unwrap();
        assert_eq!((r.sequence, r.start_cycles, r.service_cycles, r.occupancy, r.data_ok), (7, 1000, 25, 2, true));
        assert_eq!((r.seen_ns, r.released_ns), (13.5, 20.25));
        assert!(parse_record("7,64,1000").is_none());
        assert!(parse_record("x,64,1000,25,12,13,20,2,1").is_none());
    }
}
