//! The simulated ring host to device, push (issue 21): the host writes into the device's few
//! buffers over the simulated link, the device consumes each after its `dwell_ns` and says
//! "done" with an upstream write. A slow device consumer makes the run consumer-bound, a fast
//! one producer-bound — the procedure's verdicts, over several seeds.

use pcieperf::bench::stream::{self, StreamOptions};
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};
use pcieperf::engine::sim::{SimConfig, SimEngine};

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
    let config = SimConfig::parse(target).unwrap();
    let mut engine = SimEngine::new(&format!("sim:{target}"), config, seed);
    let options = StreamOptions { message_sizes: vec![plan.message_bytes], plan, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed };
    stream::run(&mut engine, &options).unwrap()
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

#[test]
fn h2d_lossy_and_pull_are_refused() {
    let config = SimConfig::parse("doc003").unwrap();
    let mut engine = SimEngine::new("sim:doc003", config, 1);
    let mut lossy = plan(10);
    lossy.backpressure = Backpressure::Lossy;
    let options = StreamOptions { message_sizes: vec![lossy.message_bytes], plan: lossy, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed: 1 };
    assert!(stream::run(&mut engine, &options).is_err());
    let mut pull = plan(10);
    pull.transport = Transport::Pull;
    let options = StreamOptions { message_sizes: vec![pull.message_bytes], plan: pull, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed: 1 };
    assert!(stream::run(&mut engine, &options).is_err());
}
