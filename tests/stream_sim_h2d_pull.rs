//! The simulated ring host to device in pull mode (issue 21; document 003: "Pull mode keeps one
//! read in flight"): the host fills its buffers and rings a doorbell, the device reads each
//! message out of host memory over the simulated link, frees the host buffer with a write to the
//! host's flag, and consumes its copy. The truth is what the simulator drew and saw
//! (`SimEngine::ring_truth`), never the report's own figures.

use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};
use pcieperf::engine::sim::SimConfig;

#[path = "support/sim_stream.rs"]
mod sim_stream;
use sim_stream::{ns_per_message, run};

const SEEDS: [u64; 3] = [1, 7, 2026];
const MESSAGE_BYTES: u32 = 16352;

fn plan(transport: Transport, host_buffers: u32, messages: u64, backpressure: Backpressure) -> RingPlan {
    RingPlan {
        direction: StreamDirection::H2d,
        transport,
        backpressure,
        host_buffers,
        device_buffers: 2,
        buffer_bytes: 16384,
        message_bytes: MESSAGE_BYTES,
        stop: StreamStop::Messages(messages),
    }
}

fn pull(messages: u64) -> RingPlan {
    plan(Transport::Pull, 200, messages, Backpressure::Lossless)
}

/// Nearest-rank percentile of the drawn delays.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[test]
fn injected_device_reactions_are_recovered_within_one_percent() {
    for seed in SEEDS {
        // The device reacts to each doorbell 20–30 µs late; the host is far ahead, the device's
        // consumer instant: the bubble before each read is the drawn reaction alone.
        let (doc, truth) = run("doc003,react_ns=20000,react_jitter_ns=10000", seed, pull(2000));
        let point = &doc.points[0];
        let dwell = point.bubbles.iter().find(|b| b.cause == WaitCause::DeviceDwell).expect("the device's reactions are bubbles");
        // The first message has no bubble before it.
        let mut drawn = truth.reactions_ns[1..].to_vec();
        assert_eq!(dwell.count, drawn.len() as u64, "seed {seed}: one bubble per message after the first");
        drawn.sort_by(f64::total_cmp);
        for (p, got) in [(0.5, dwell.latency.p50_ns), (0.9, dwell.latency.p90_ns), (0.99, dwell.latency.p99_ns), (0.999, dwell.latency.p99_9_ns), (1.0, dwell.latency.max_ns)] {
            let want = percentile(&drawn, p);
            assert!((got - want).abs() <= 0.01 * want, "seed {seed} p{p}: report {got} ns, injected {want} ns");
        }
        assert_eq!(point.dropped, 0);
    }
}

#[test]
fn a_slow_device_consumer_fills_its_buffers_and_the_report_sees_it() {
    for (seed, dwell_ns) in SEEDS.into_iter().zip([150_000.0, 90_000.0, 120_000.0]) {
        // The device's consumer is slower than the reads: its two buffers fill, the engine waits
        // for one, the host's buffers fill behind it.
        let (doc, truth) = run(&format!("doc003,dwell_ns={dwell_ns},react_ns=200,react_jitter_ns=400"), seed, pull(600));
        let point = &doc.points[0];
        let want = truth.full_ns / truth.span_ns;
        assert!(want > 0.05, "seed {seed}: the slow consumer must fill the device's buffers (truth {want})");
        assert!((point.ring.full_share - want).abs() <= 0.005, "seed {seed}: report {} full, truth {want}", point.ring.full_share);
        assert_eq!(point.verdict.limit, "consumer", "seed {seed}: {}", point.verdict.reason);
        assert!(point.bubbles.iter().any(|b| b.cause == WaitCause::NoFreeBuffer), "seed {seed}: the engine waited for a device buffer");
        // One message per dwell: the consumer's rate.
        let want_mbps = f64::from(MESSAGE_BYTES) / dwell_ns * 1e3;
        assert!((point.throughput.sustained_mbps - want_mbps).abs() <= 0.02 * want_mbps, "seed {seed}: {} MB/s, consumer {want_mbps}", point.throughput.sustained_mbps);
        let model = point.model.as_ref().unwrap();
        assert_eq!(model.tlp_accurate.limit, "device", "seed {seed}");
        assert_eq!(point.dropped, 0, "seed {seed}: lossless never drops");
    }
}

#[test]
fn a_slow_host_is_the_limit_at_its_injected_pace() {
    for (seed, stall_every) in SEEDS.into_iter().zip([4, 5, 3]) {
        // The host prepares each message 60 µs, every Nth 40 µs longer: slower than the reads
        // (~52 µs), so the device waits for its doorbells and the rate is the host's.
        let target = format!("doc003,host_use_ns=60000,host_stall_every={stall_every},host_stall_ns=40000,react_jitter_ns=300");
        let (doc, _) = run(&target, seed, pull(600));
        let point = &doc.points[0];
        let host_ns = 60_000.0 + 40_000.0 / f64::from(stall_every);
        let want_mbps = f64::from(MESSAGE_BYTES) / host_ns * 1e3;
        assert!((point.throughput.sustained_mbps - want_mbps).abs() <= 0.01 * want_mbps, "seed {seed}: {} MB/s, host {want_mbps}", point.throughput.sustained_mbps);
        assert_eq!(point.verdict.limit, "producer", "seed {seed}: {}", point.verdict.reason);
        assert!(point.verdict.reason.contains("host's own preparation"), "seed {seed}: {}", point.verdict.reason);
        assert!(point.bubbles.iter().any(|b| b.cause == WaitCause::ProducerIdle));
    }
}

#[test]
fn pull_is_slower_than_push_and_within_the_models_bound() {
    let (push, _) = run("doc003", 1, plan(Transport::Push, 200, 300, Backpressure::Lossless));
    let (pulled, _) = run("doc003", 1, pull(300));
    assert_eq!(pulled.points[0].messages, 300);
    // One read in flight: 32 round trips per message against the host's posted writes.
    assert!(ns_per_message(&pulled) > 1.2 * ns_per_message(&push), "pull {} ns/message, push {} ns/message", ns_per_message(&pulled), ns_per_message(&push));
    let point = &pulled.points[0];
    let model = &point.model.as_ref().expect("the simulated endpoint states its link").tlp_accurate;
    assert_eq!(model.limit, "reads", "{:?}", model.bounds);
    assert!(point.throughput.sustained_mbps <= model.mbps * 1.005, "sim {} MB/s above the model's {}", point.throughput.sustained_mbps, model.mbps);
    assert!(point.throughput.sustained_mbps >= model.mbps * 0.98, "sim {} MB/s, model {}", point.throughput.sustained_mbps, model.mbps);
    assert!(pulled.simulated);
}

#[test]
fn every_read_waits_for_its_completions_on_the_link() {
    // One read in flight: each of a message's MRRS-sized reads pays the host memory's latency
    // once, so 1000 ns more latency costs reads × 1000 ns more per message.
    let config = SimConfig::parse("doc003").unwrap();
    let reads = u64::from(MESSAGE_BYTES).div_ceil(config.params.mrrs_bytes) as f64;
    let (fast, _) = run("doc003,latency_ns=500", 1, pull(200));
    let (slow, _) = run("doc003,latency_ns=1500", 1, pull(200));
    let grown_ns = ns_per_message(&slow) - ns_per_message(&fast);
    let want_ns = reads * 1000.0;
    assert!((grown_ns - want_ns).abs() <= 0.02 * want_ns, "per message grew {grown_ns} ns, {reads} reads × 1000 ns = {want_ns} ns");
}

#[test]
fn one_host_buffer_makes_the_ring_the_limit() {
    // With one host buffer the host refills it only once the device's free write has landed,
    // and the device reads it only once the doorbell has: the ring's turnaround sets the rate.
    let (one, _) = run("doc003", 1, plan(Transport::Pull, 1, 300, Backpressure::Lossless));
    let (many, _) = run("doc003", 1, pull(300));
    let point = &one.points[0];
    let model = &point.model.as_ref().unwrap().tlp_accurate;
    assert_eq!(model.limit, "ring", "{:?}", model.bounds);
    assert!((point.throughput.sustained_mbps / model.mbps - 1.0).abs() <= 0.01, "sim {} MB/s, model {}", point.throughput.sustained_mbps, model.mbps);
    assert!(ns_per_message(&one) > ns_per_message(&many) + 20.0, "one buffer {} ns/message, 200 buffers {}", ns_per_message(&one), ns_per_message(&many));
}

/// A host producer that cannot wait, a device consumer slower than it, four host buffers.
const LOSSY_TARGET: &str = "doc003,dwell_ns=80000,host_use_ns=30000,react_jitter_ns=300";

#[test]
fn lossy_pull_drops_are_counted_exactly() {
    for seed in SEEDS {
        let (doc, truth) = run(LOSSY_TARGET, seed, plan(Transport::Pull, 4, 600, Backpressure::Lossy));
        let point = &doc.points[0];
        assert!(truth.dropped > 0, "seed {seed}: the full host ring must drop");
        assert_eq!(point.dropped, truth.dropped - truth.dropped_after_last, "seed {seed}: drops from sequence gaps");
        assert_eq!(point.dropped_by_producer, Some(truth.dropped));
        assert_eq!(point.messages + truth.dropped, point.produced);
        assert_eq!(point.produced, 600);
    }
}

#[test]
fn lossless_pull_never_drops() {
    for seed in SEEDS {
        let (doc, truth) = run(LOSSY_TARGET, seed, plan(Transport::Pull, 4, 300, Backpressure::Lossless));
        let point = &doc.points[0];
        assert_eq!(truth.dropped, 0);
        assert_eq!((point.dropped, point.dropped_by_producer, point.messages), (0, Some(0), 300), "seed {seed}");
    }
}
