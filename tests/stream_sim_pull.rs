//! The simulated ring in pull mode (issue 21, document 003 "Pull mode keeps one read in
//! flight"): the host reads every message out of the device's buffers over the simulated link.
//! Times come from the link simulator, so a longer completion latency must slow every read, and
//! the device's few buffers must hold a fast source back (lossless) or drop exactly what the
//! simulator counted (lossy).

use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport};
use pcieperf::engine::sim::SimConfig;

#[path = "support/sim_stream.rs"]
mod sim_stream;
use sim_stream::{ns_per_message, run};

const SEEDS: [u64; 3] = [1, 7, 2026];
const MESSAGE_BYTES: u32 = 16352;

fn plan(transport: Transport, messages: u64, backpressure: Backpressure) -> RingPlan {
    RingPlan {
        direction: StreamDirection::D2h,
        transport,
        backpressure,
        host_buffers: 200,
        device_buffers: 2,
        buffer_bytes: 16384,
        message_bytes: MESSAGE_BYTES,
        stop: StreamStop::Messages(messages),
    }
}

#[test]
fn pull_is_slower_than_push_by_its_read_round_trips() {
    let messages = 300;
    let (push, _) = run("doc003", 1, plan(Transport::Push, messages, Backpressure::Lossless));
    let (pull, _) = run("doc003", 1, plan(Transport::Pull, messages, Backpressure::Lossless));
    assert_eq!(pull.points[0].messages, messages);
    assert!(ns_per_message(&pull) > 1.2 * ns_per_message(&push), "pull {} ns/message, push {} ns/message", ns_per_message(&pull), ns_per_message(&push));
    assert!(pull.simulated);
}

#[test]
fn every_read_waits_for_its_completions_on_the_link() {
    // One read in flight: each of a message's MRRS-sized reads pays the completer's latency
    // once, so 1000 ns more latency costs reads × 1000 ns more per message.
    let config = SimConfig::parse("doc003").unwrap();
    let mrrs = config.params.mrrs_bytes;
    let reads = u64::from(MESSAGE_BYTES).div_ceil(mrrs) as f64;
    let (fast, _) = run("doc003,latency_ns=500", 1, plan(Transport::Pull, 200, Backpressure::Lossless));
    let (slow, _) = run("doc003,latency_ns=1500", 1, plan(Transport::Pull, 200, Backpressure::Lossless));
    let grown_ns = ns_per_message(&slow) - ns_per_message(&fast);
    let want_ns = reads * 1000.0;
    assert!((grown_ns - want_ns).abs() <= 0.02 * want_ns, "per message grew {grown_ns} ns, {reads} reads × 1000 ns = {want_ns} ns");
}

#[test]
fn a_fast_source_waits_when_lossless() {
    for seed in SEEDS {
        // A source at 5000 MB/s, far faster than pulling: the two device buffers stay full.
        let (doc, truth) = run("doc003,source_mbps=5000,react_jitter_ns=300", seed, plan(Transport::Pull, 500, Backpressure::Lossless));
        let point = &doc.points[0];
        assert_eq!(truth.dropped, 0);
        assert_eq!(point.dropped, 0, "seed {seed}: a lossless run never drops");
        assert_eq!(point.messages, 500);
        assert!(point.bubbles.iter().any(|b| b.cause == pcieperf::engine::ring::WaitCause::HostLate), "seed {seed}: the reads are the limit");
    }
}

#[test]
fn a_fast_source_drops_exactly_what_was_counted_when_lossy() {
    for seed in SEEDS {
        let (doc, truth) = run("doc003,source_mbps=5000,react_jitter_ns=300", seed, plan(Transport::Pull, 500, Backpressure::Lossy));
        let point = &doc.points[0];
        assert!(truth.dropped > 0, "seed {seed}: the full device must drop");
        // The source keeps making (and dropping) messages while the host reads the last ones:
        // those drops follow the last delivered sequence number, so no gap shows them.
        assert_eq!(point.dropped, truth.dropped - truth.dropped_after_last, "seed {seed}: drops from sequence gaps");
        assert_eq!(point.dropped_by_producer, Some(truth.dropped));
        assert_eq!(point.messages + point.dropped + truth.dropped_after_last, point.produced);
        assert_eq!(point.produced, 500);
    }
}

#[test]
fn a_slow_source_is_the_limit() {
    // 100 MB/s is far below what pulling reaches: the reads wait for the source.
    let (doc, _) = run("doc003,source_mbps=100", 2, plan(Transport::Pull, 200, Backpressure::Lossy));
    let point = &doc.points[0];
    assert_eq!(point.dropped, 0);
    let mbps = point.throughput.sustained_mbps;
    assert!((mbps - 100.0).abs() <= 2.0, "sustained {mbps} MB/s, source 100 MB/s");
    assert!(point.bubbles.iter().any(|b| b.cause == pcieperf::engine::ring::WaitCause::ProducerIdle));
}
