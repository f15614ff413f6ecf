//! Both directions at once on one simulated link (issue 21, `--direction both`): the d2h push
//! ring and the h2d push ring share the lanes, the Acks and the credits, so each comes out a
//! little slower than alone, and each keeps its own limits. Over several seeds.

use pcieperf::bench::stream::{self, StreamDocument, StreamOptions};
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};
use pcieperf::engine::sim::{SimConfig, SimEngine};

const SEEDS: [u64; 3] = [1, 7, 2026];
const MESSAGES: u64 = 300;

fn options(direction: StreamDirection, seed: u64) -> StreamOptions {
    let plan = RingPlan {
        direction,
        transport: Transport::Push,
        backpressure: Backpressure::Lossless,
        host_buffers: 200,
        device_buffers: 2,
        buffer_bytes: 16384,
        message_bytes: 16352,
        stop: StreamStop::Messages(MESSAGES),
    };
    StreamOptions { message_sizes: vec![plan.message_bytes], plan, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed }
}

fn engine(target: &str, seed: u64) -> SimEngine {
    SimEngine::new(&format!("sim:{target}"), SimConfig::parse(target).unwrap(), seed)
}

fn alone(target: &str, direction: StreamDirection, seed: u64) -> f64 {
    let doc = stream::run(&mut engine(target, seed), &options(direction, seed)).unwrap();
    doc.points[0].throughput.sustained_mbps
}

fn both(target: &str, seed: u64) -> StreamDocument {
    stream::run_both(&mut engine(target, seed), &options(StreamDirection::D2h, seed)).unwrap()
}

/// Each direction pays for the other's traffic on the shared lanes (its Acks, UpdateFCs and
/// "done"/doorbell writes), but only a little: rings on separate links would not slow down
/// (fails), rings one after the other would not overlap (the sum would not near twice one).
#[test]
fn each_direction_is_a_little_slower_than_alone_and_the_sum_nears_twice_one() {
    for seed in SEEDS {
        let d2h_alone = alone("doc003", StreamDirection::D2h, seed);
        let h2d_alone = alone("doc003", StreamDirection::H2d, seed);
        let doc = both("doc003", seed);
        let both = doc.both.as_ref().expect("both directions");
        let (d2h, h2d) = (&doc.points[0], &both.h2d_points[0]);
        for (name, point, alone) in [("d2h", d2h, d2h_alone), ("h2d", h2d, h2d_alone)] {
            assert_eq!(point.messages, MESSAGES, "seed {seed} {name}");
            assert_eq!(point.dropped, 0, "seed {seed} {name}");
            let ratio = point.throughput.sustained_mbps / alone;
            assert!((0.85..0.99).contains(&ratio), "seed {seed} {name}: {:.1} MB/s at once, {alone:.1} alone", point.throughput.sustained_mbps);
            assert_eq!(point.verdict.limit, "producer", "seed {seed} {name}: {}", point.verdict.reason);
        }
        let sum = &both.sum[0];
        assert_eq!(sum.sum_mbps, sum.d2h_mbps + sum.h2d_mbps);
        assert_eq!(sum.d2h_mbps, d2h.throughput.sustained_mbps);
        assert!(sum.sum_mbps > 1.7 * d2h_alone, "seed {seed}: sum {:.1} MB/s, d2h alone {d2h_alone:.1}", sum.sum_mbps);
        // The two streams overlap in time: each one's span covers most of the other's.
        let (d, h) = (d2h.duration_ns, h2d.duration_ns);
        assert!(d.min(h) / d.max(h) > 0.9, "seed {seed}: spans {d} and {h} ns");
    }
}

/// A slow device consumer limits only the h2d ring: consumer-bound at its consume time, with
/// no-free-buffer bubbles, while the d2h ring beside it is held only by the device's dwell.
#[test]
fn a_slow_device_consumer_limits_only_its_own_direction() {
    for seed in SEEDS {
        let doc = both("doc003,dwell_ns=60000", seed);
        let both = doc.both.as_ref().expect("both directions");
        let h2d = &both.h2d_points[0];
        assert_eq!(h2d.verdict.limit, "consumer", "seed {seed}: {}", h2d.verdict.reason);
        assert!(h2d.bubbles.iter().any(|b| b.cause == WaitCause::NoFreeBuffer), "seed {seed}");
        let consume_mbps = 16352.0 / 60_000.0 * 1e3;
        assert!((h2d.throughput.sustained_mbps / consume_mbps - 1.0).abs() < 0.02, "seed {seed}: {} MB/s", h2d.throughput.sustained_mbps);
        let d2h = &doc.points[0];
        assert_eq!(d2h.verdict.limit, "producer", "seed {seed}: {}", d2h.verdict.reason);
        assert!(d2h.bubbles.iter().any(|b| b.cause == WaitCause::DeviceDwell), "seed {seed}");
    }
}

#[test]
fn pull_and_lossy_are_refused_for_both() {
    for (transport, backpressure) in [(Transport::Pull, Backpressure::Lossless), (Transport::Push, Backpressure::Lossy)] {
        let mut options = options(StreamDirection::D2h, 1);
        options.plan.transport = transport;
        options.plan.backpressure = backpressure;
        let error = stream::run_both(&mut engine("doc003", 1), &options).unwrap_err();
        assert!(error.to_string().contains("lossless push only"), "{error}");
    }
}
