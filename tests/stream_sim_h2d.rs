//! The simulated ring host to device, push (issue 21): the host writes into the device's few
//! buffers over the simulated link, the device consumes each after its `dwell_ns` and says
//! "done" with an upstream write. A slow device consumer makes the run consumer-bound, a fast
//! one producer-bound — the procedure's verdicts, over several seeds. Lossy, a host that cannot
//! wait drops what finds no free device buffer, and the report counts each drop exactly.

use pcieperf::bench::stream::{self, StreamOptions};
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};
use pcieperf::engine::sim::{SimConfig, SimEngine};

#[path = "support/sim_stream.rs"]
mod sim_stream;

const SEEDS: [u64; 3] = [1, 7, 2026];

fn plan(messages: u64) -> RingPlan {
    RingPlan {
        direction: StreamDirection::H2d,
        transport: Transport::Push,
        backpressure: Backpressure::Lossless,
        host_buffers: 200,
        device_buffers: 2,
        buffer_bytes: 16384,
        message_bytes: 16352,
        stop: StreamStop::Messages(messages),
    }
}

fn run(target: &str, seed: u64, plan: RingPlan) -> stream::StreamDocument {
    sim_stream::run(target, seed, plan).0
}

#[test]
fn a_slow_device_is_consumer_bound_and_a_fast_one_producer_bound() {
    for seed in SEEDS {
        let slow = run("doc003,dwell_ns=60000", seed, plan(300));
        let point = &slow.points[0];
        assert_eq!(point.verdict.limit, "consumer", "seed {seed}: {}", point.verdict.reason);
        assert_eq!(point.messages, 300);
        assert_eq!(point.dropped, 0);
        assert!(point.bubbles.iter().any(|b| b.cause == WaitCause::NoFreeBuffer));
        // 60 µs per message consumed, one after the other: the device's rate is the limit.
        let want_mbps = 16352.0 / 60_000.0 * 1e3;
        assert!((point.throughput.sustained_mbps - want_mbps).abs() <= 0.02 * want_mbps, "seed {seed}: {} MB/s, device {want_mbps}", point.throughput.sustained_mbps);

        let fast = run("doc003,dwell_ns=0", seed, plan(300));
        let point = &fast.points[0];
        assert_eq!(point.verdict.limit, "producer", "seed {seed}: {}", point.verdict.reason);
        assert!(fast.simulated);
    }
}

fn run_with_truth(target: &str, seed: u64, plan: RingPlan) -> (stream::StreamDocument, pcieperf::engine::sim::ring::RingTruth) {
    let config = SimConfig::parse(target).unwrap();
    let mut engine = SimEngine::new(&format!("sim:{target}"), config, seed);
    let options = StreamOptions { message_sizes: vec![plan.message_bytes], plan, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed };
    let doc = stream::run(&mut engine, &options).unwrap();
    (doc, engine.ring_truth().unwrap().clone())
}

/// A host producer that cannot wait (a sensor feed) and a device slower than it: per seed a
/// different pace, and credit holds on the link drawn from the seed.
const LOSSY_TARGETS: [&str; 3] = [
    "doc003,dwell_ns=60000,host_use_ns=20000",
    "doc003,dwell_ns=45000,host_use_ns=10000",
    "doc003,dwell_ns=50000,host_use_ns=15000,stalls_per_s=500,stall_min_ns=400000,stall_max_ns=800000",
];

#[test]
fn lossy_h2d_drops_are_counted_exactly() {
    for seed in SEEDS {
        for target in LOSSY_TARGETS {
            let mut lossy = plan(600);
            lossy.backpressure = Backpressure::Lossy;
            let (doc, truth) = run_with_truth(target, seed, lossy);
            let point = &doc.points[0];
            assert!(truth.dropped > 0, "{target} seed {seed}: a device slower than the host must make it drop");
            // Drops after the last message written leave no gap; every other one is a gap.
            assert_eq!(point.dropped, truth.dropped - truth.dropped_after_last, "{target} seed {seed}: drops from sequence gaps");
            assert_eq!(point.dropped_by_producer, Some(truth.dropped));
            assert_eq!(point.messages + truth.dropped, point.produced);
            assert_eq!(point.produced, 600);
            assert!(point.bubbles.iter().any(|b| b.cause == WaitCause::NoFreeBuffer), "{target} seed {seed}: time lost to drops is the full ring's");
            assert_eq!(point.verdict.limit, "consumer", "{target} seed {seed}: {}", point.verdict.reason);
        }
    }
}

#[test]
fn lossless_h2d_never_drops() {
    for seed in SEEDS {
        for target in LOSSY_TARGETS {
            let (doc, truth) = run_with_truth(target, seed, plan(300));
            let point = &doc.points[0];
            assert_eq!(truth.dropped, 0);
            assert_eq!((point.dropped, point.dropped_by_producer, point.messages), (0, Some(0), 300), "{target} seed {seed}");
        }
    }
}
