//! The `cosim` engine's streaming (`Engine::streaming`): the RTL core's streaming mode in Icarus
//! Verilog with the testbench's host consuming the ring. Needs iverilog, python3 with cocotb,
//! cocotbext-pcie and cocotbext-axi (.ci/run installs them); without them it prints "skipped: ...".

use pcieperf::engine::cosim::{self, CosimEngine};
use pcieperf::engine::ring::{
    Backpressure, MessageEvent, MessageSink, RingPlan, StreamDirection, StreamEnd, StreamStop, Streaming, Transport, WaitCause,
};
use pcieperf::engine::{EngineError, OpenOptions};

struct Recorder(Vec<MessageEvent>);

impl MessageSink for Recorder {
    fn message(&mut self, event: &MessageEvent) -> Result<(), EngineError> {
        self.0.push(*event);
        Ok(())
    }
}

fn open() -> Option<CosimEngine> {
    match cosim::open("cosim:gen1x4", "gen1x4", &OpenOptions { seed: 1, ..OpenOptions::default() }) {
        Ok(engine) => Some(engine),
        Err(error) if error.to_string().contains("prerequisites missing") || error.to_string().contains("cosim needs python3") => {
            println!("skipped: {error}");
            None
        }
        Err(error) => panic!("cosim:gen1x4: {error}"),
    }
}

fn plan(host_buffers: u32, message_bytes: u32, messages: u64, backpressure: Backpressure) -> RingPlan {
    RingPlan {
        direction: StreamDirection::D2h,
        transport: Transport::Push,
        backpressure,
        host_buffers,
        device_buffers: 2,
        buffer_bytes: 512,
        message_bytes,
        stop: StreamStop::Messages(messages),
    }
}

fn run(engine: &mut CosimEngine, plan: &RingPlan) -> (Vec<MessageEvent>, StreamEnd) {
    let mut recorder = Recorder(Vec::new());
    let end = Streaming::stream(engine, plan, &mut recorder).unwrap();
    (recorder.0, end)
}

/// Gen1 x4 model: 64-bit interface at 125 MHz.
const NS_PER_CYCLE: f64 = 8.0;

#[test]
fn a_short_stream_through_the_rtl_core() {
    let Some(mut engine) = open() else { return };

    // Lossless, a ring of 4: every message, in order, device and host times consistent.
    let (events, end) = run(&mut engine, &plan(4, 256, 12, Backpressure::Lossless));
    assert_eq!(events.len(), 12);
    assert_eq!(events.iter().map(|e| e.sequence).collect::<Vec<_>>(), (0..12).collect::<Vec<_>>());
    assert_eq!((end.produced, end.dropped_by_producer, end.stopped_early.as_deref()), (12, Some(0), None));
    for pair in events.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(b.device_start_ns.unwrap() > a.device_done_ns.unwrap(), "{a:?} {b:?}");
        assert!(b.host_seen_ns >= a.host_released_ns, "the consumer takes messages one at a time");
    }
    for e in &events {
        assert_eq!(e.bytes, 256);
        // 256 bytes at MPS 256 on 64 bits: at least 2 + 32 data beats, metadata, flag.
        assert!(e.device_done_ns.unwrap() - e.device_start_ns.unwrap() >= 34.0 * NS_PER_CYCLE, "{e:?}");
        assert!(e.host_released_ns >= e.host_seen_ns && (1..=4).contains(&e.ring_occupancy), "{e:?}");
    }
    assert_eq!(events[0].wait_cause, WaitCause::None);

    // A dwell of 3 cycles: every bubble is the core's one-cycle turnaround plus the dwell.
    engine.set_stream_dwell_cycles(3);
    let (events, _) = run(&mut engine, &plan(16, 64, 8, Backpressure::Lossless));
    for e in &events[1..] {
        assert_eq!((e.wait_before_ns, e.wait_cause), (4.0 * NS_PER_CYCLE, WaitCause::DeviceDwell), "{e:?}");
    }

    // Lossy with a slow host: drops found from sequence gaps equal the device's own count, and
    // the message after a drop names the full ring.
    engine.set_stream_dwell_cycles(40);
    engine.set_stream_release_delay_ns(700);
    let (events, end) = run(&mut engine, &plan(2, 64, 20, Backpressure::Lossy));
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    let gaps: u64 = sequences.windows(2).map(|w| w[1] - w[0] - 1).sum::<u64>() + sequences[0] + (19 - sequences.last().unwrap());
    let dropped = end.dropped_by_producer.unwrap();
    assert!(dropped > 0, "a 700 ns consumer with 2 buffers must drop");
    assert_eq!(gaps, dropped);
    assert_eq!(end.produced, 20);
    for pair in events.windows(2) {
        if pair[1].sequence > pair[0].sequence + 1 {
            assert_eq!(pair[1].wait_cause, WaitCause::NoFreeBuffer, "{:?}", pair[1]);
        }
    }

    // Plans the core cannot run are refused in one line before anything moves.
    let mut too_big = plan(4, 1024, 4, Backpressure::Lossless);
    assert!(Streaming::check(&engine, &too_big).unwrap_err().to_string().contains("does not fit"));
    too_big.message_bytes = 256;
    too_big.stop = StreamStop::Duration(std::time::Duration::from_millis(1));
    assert!(Streaming::check(&engine, &too_big).unwrap_err().to_string().contains("number of messages"));
    too_big.stop = StreamStop::Messages(4);
    too_big.direction = StreamDirection::H2d;
    assert!(Streaming::check(&engine, &too_big).is_err());
}
