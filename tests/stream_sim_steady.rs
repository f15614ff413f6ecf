//! The simulated ring's steady-state fast-forward (issue 21, `engine/sim/ring/steady.rs`) gives
//! the stream full simulation gives: the same events in the same order, each time within
//! 0.1 % (float rounding of shifted times), identical sequence numbers, sizes, occupancies,
//! wait causes and drops; and it does leave messages out (else the comparison proves nothing).

use std::time::Duration;

use pcieperf::engine::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamDirection, StreamEnd, StreamStop, Transport};
use pcieperf::engine::sim::ring::RingTruth;
use pcieperf::engine::sim::{SimConfig, SimEngine};
use pcieperf::engine::{Engine, EngineError};

#[derive(Default)]
struct Collect(Vec<MessageEvent>);

impl MessageSink for Collect {
    fn message(&mut self, event: &MessageEvent) -> Result<(), EngineError> {
        self.0.push(*event);
        Ok(())
    }
}

fn plan(message_bytes: u32, buffer_bytes: u32, host_buffers: u32, backpressure: Backpressure, stop: StreamStop) -> RingPlan {
    RingPlan { direction: StreamDirection::D2h, transport: Transport::Push, backpressure, host_buffers, device_buffers: 2, buffer_bytes, message_bytes, stop }
}

fn stream(target: &str, plan: &RingPlan) -> (Vec<MessageEvent>, StreamEnd, RingTruth) {
    let mut engine = SimEngine::new(&format!("sim:{target}"), SimConfig::parse(target).unwrap(), 1);
    let mut sink = Collect::default();
    let end = engine.streaming().unwrap().stream(plan, &mut sink).unwrap();
    let truth = engine.ring_truth().unwrap().clone();
    (sink.0, end, truth)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-3 * a.abs().max(b.abs()).max(1.0)
}

/// Fast-forwarded and full streams of `target` agree; returns how many messages were left out.
fn compare(target: &str, plan: &RingPlan) -> u64 {
    let (fast, fast_end, fast_truth) = stream(target, plan);
    let (full, full_end, full_truth) = stream(&format!("{target},fast_forward=0"), plan);
    assert_eq!(full_truth.fast_forwarded, 0, "{target}: fast_forward=0 still left messages out");
    assert_eq!(fast.len(), full.len(), "{target}: message counts differ");
    for (i, (a, b)) in fast.iter().zip(&full).enumerate() {
        let same = a.sequence == b.sequence
            && a.bytes == b.bytes
            && a.ring_occupancy == b.ring_occupancy
            && a.wait_cause == b.wait_cause
            && close(a.device_start_ns.unwrap(), b.device_start_ns.unwrap())
            && close(a.device_done_ns.unwrap(), b.device_done_ns.unwrap())
            && close(a.host_seen_ns, b.host_seen_ns)
            && close(a.host_released_ns, b.host_released_ns)
            && close(a.wait_before_ns, b.wait_before_ns);
        assert!(same, "{target}: message {i} differs:\n fast {a:?}\n full {b:?}");
    }
    assert_eq!(fast_end.produced, full_end.produced, "{target}: produced");
    assert_eq!((fast_end.fast_forwarded, full_end.fast_forwarded), (fast_truth.fast_forwarded, 0), "{target}: the stream's end reports what was fast-forwarded");
    assert_eq!(fast_end.dropped_by_producer, full_end.dropped_by_producer, "{target}: drops");
    assert!(close(fast_end.end_ns, full_end.end_ns), "{target}: end {} vs {}", fast_end.end_ns, full_end.end_ns);
    assert!(close(fast_truth.full_ns, full_truth.full_ns), "{target}: full time {} vs {}", fast_truth.full_ns, full_truth.full_ns);
    fast_truth.fast_forwarded
}

#[test]
fn push_d2h_fast_forward_matches_full_simulation() {
    let plan = plan(64, 64, 200, Backpressure::Lossless, StreamStop::Messages(100_000));
    let skipped = compare("doc003", &plan);
    assert!(skipped > 50_000, "only {skipped} of 100000 messages fast-forwarded");
}

#[test]
fn a_slow_host_and_a_dwell_fast_forward_exactly() {
    let plan = plan(4096, 4096, 16, Backpressure::Lossless, StreamStop::Messages(60_000));
    assert!(compare("doc003,host_use_ns=3000", &plan) > 30_000);
    assert!(compare("doc003,dwell_ns=700", &plan) > 20_000);
}

#[test]
fn lossy_with_drops_fast_forwards_exactly() {
    let plan = plan(1024, 1024, 8, Backpressure::Lossy, StreamStop::Messages(50_000));
    let (_, end, _) = stream("doc003,host_use_ns=2000", &plan);
    assert!(end.dropped_by_producer.unwrap() > 1000, "the case must drop: {:?}", end.dropped_by_producer);
    assert!(compare("doc003,host_use_ns=2000", &plan) > 20_000);
}

#[test]
fn injected_host_stalls_fast_forward_exactly() {
    let plan = plan(2048, 2048, 32, Backpressure::Lossless, StreamStop::Messages(20_000));
    assert!(compare("doc003,host_stall_every=50,host_stall_ns=30000", &plan) > 5000);
    let lossy = self::plan(2048, 2048, 32, Backpressure::Lossy, StreamStop::Messages(20_000));
    assert!(compare("doc003,host_stall_every=50,host_stall_ns=30000", &lossy) > 5000);
}

#[test]
fn a_timed_stream_fast_forwards_to_the_same_end() {
    let plan = plan(64, 64, 200, Backpressure::Lossless, StreamStop::Duration(Duration::from_millis(20)));
    assert!(compare("doc003", &plan) > 50_000);
}

#[test]
fn jitter_turns_it_off() {
    let plan = plan(64, 64, 200, Backpressure::Lossless, StreamStop::Messages(2000));
    let (_, _, truth) = stream("doc003,react_jitter_ns=100", &plan);
    assert_eq!(truth.fast_forwarded, 0);
}
