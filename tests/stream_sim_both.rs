//! Both directions at once on one simulated link (issue 21, `--direction both`): the d2h push
//! ring and the h2d push ring share the lanes, the Acks and the credits, so each comes out a
//! little slower than alone, and each keeps its own limits. Over several seeds.

use pcieperf::bench::stream::{self, StreamDocument, StreamOptions};
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};
use pcieperf::engine::sim::ring::RingTruth;
use pcieperf::engine::sim::{SimConfig, SimEngine};

const SEEDS: [u64; 3] = [1, 7, 2026];
const MESSAGES: u64 = 300;

fn options(direction: StreamDirection, seed: u64) -> StreamOptions {
    with_mode(direction, Transport::Push, Backpressure::Lossless, seed)
}

fn with_mode(direction: StreamDirection, transport: Transport, backpressure: Backpressure, seed: u64) -> StreamOptions {
    let plan = RingPlan {
        direction,
        transport,
        backpressure,
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

/// Both directions with the d2h ring in `transport`/`backpressure`; the document and the d2h
/// ring's truth.
fn both_in(target: &str, seed: u64, options: &StreamOptions) -> (StreamDocument, RingTruth) {
    let mut engine = engine(target, seed);
    let doc = stream::run_both(&mut engine, options).unwrap();
    let truth = engine.ring_truth().expect("both directions keep the d2h ring's truth").clone();
    (doc, truth)
}

/// Gen1 x4 (doc003): 2.5 GT/s × 4 lanes × 8/10 (8b/10b) ÷ 8 bits = 1000 MB/s each way, before
/// any TLP overhead: no direction may carry more payload.
const DOC003_LINE_MBPS: f64 = 1000.0;

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

/// Lossy d2h beside the lossless h2d ring: a small host ring and a host away now and then make
/// the device drop; the report's sequence gaps are exactly the drops the device counted (those
/// after the last delivered message leave no gap), and the h2d host, which waits, drops nothing.
#[test]
fn lossy_both_counts_the_devices_drops_exactly() {
    for seed in SEEDS {
        let mut options = with_mode(StreamDirection::D2h, Transport::Push, Backpressure::Lossy, seed);
        options.plan.host_buffers = 4;
        let (doc, truth) = both_in("doc003,host_stall_every=25,host_stall_ns=200000", seed, &options);
        let d2h = &doc.points[0];
        let h2d = &doc.both.as_ref().unwrap().h2d_points[0];
        assert!(truth.dropped > 20, "seed {seed}: the stalls must make drops ({})", truth.dropped);
        assert_eq!(d2h.dropped_by_producer, Some(truth.dropped), "seed {seed}");
        assert_eq!(d2h.dropped, truth.dropped - truth.dropped_after_last, "seed {seed}: drops from sequence gaps");
        assert_eq!(d2h.messages + d2h.dropped + truth.dropped_after_last, d2h.produced, "seed {seed}");
        assert_eq!(d2h.produced, MESSAGES, "seed {seed}: the producer numbers the plan's messages");
        assert_eq!((h2d.dropped, h2d.messages), (0, MESSAGES), "seed {seed}: the h2d host waits");
        // Lossless, the same stalls only slow the device: nothing dropped.
        let mut lossless = options.clone();
        lossless.plan.backpressure = Backpressure::Lossless;
        let (doc, truth) = both_in("doc003,host_stall_every=25,host_stall_ns=200000", seed, &lossless);
        assert_eq!((truth.dropped, doc.points[0].dropped, doc.points[0].messages), (0, 0, MESSAGES), "seed {seed}");
    }
}

/// Pull d2h beside h2d push: the host reads each message with one read in flight, so its d2h
/// is held by the read round trips, far under push at once. Each read request also waits behind
/// the h2d data the host queued before it (a read may not pass posted writes), so pull at once
/// is slower than alone (10 ms, seed 1: 221.3 against 314.1 MB/s), while the h2d ring beside it keeps
/// near its rate alone.
#[test]
fn pull_both_is_read_bound_and_slower_than_push_both() {
    // A time, not a count: both rings stream for all of it (h2d's 300 messages would end first).
    let timed = |transport| {
        let mut options = with_mode(StreamDirection::D2h, transport, Backpressure::Lossless, 1);
        options.plan.stop = StreamStop::Duration(std::time::Duration::from_millis(10));
        options
    };
    for seed in SEEDS {
        let with_seed = |transport| StreamOptions { seed, ..timed(transport) };
        let pull_alone = stream::run(&mut engine("doc003", seed), &with_seed(Transport::Pull)).unwrap().points[0].throughput.sustained_mbps;
        let h2d_alone = stream::run(&mut engine("doc003", seed), &StreamOptions { plan: RingPlan { direction: StreamDirection::H2d, ..with_seed(Transport::Push).plan }, ..with_seed(Transport::Push) }).unwrap().points[0].throughput.sustained_mbps;
        let (push, _) = both_in("doc003", seed, &with_seed(Transport::Push));
        let (pull, _) = both_in("doc003", seed, &with_seed(Transport::Pull));
        let (pull_d2h, push_d2h) = (pull.points[0].throughput.sustained_mbps, push.points[0].throughput.sustained_mbps);
        assert!(pull.points[0].messages > 100, "seed {seed}");
        assert!(pull_d2h < 0.6 * push_d2h, "seed {seed}: pull d2h {pull_d2h:.1} MB/s at once, push {push_d2h:.1}");
        assert!(pull_d2h < pull_alone * 0.95 && pull_d2h > 0.6 * pull_alone, "seed {seed}: pull d2h {pull_d2h:.1} MB/s at once, {pull_alone:.1} alone");
        let h2d = pull.both.as_ref().unwrap().h2d_points[0].throughput.sustained_mbps;
        assert!(h2d <= h2d_alone * 1.001 && h2d > 0.85 * h2d_alone, "seed {seed}: h2d {h2d:.1} MB/s beside pull, {h2d_alone:.1} alone");
        // The host's reads wait on the device's completions: host_late bubbles, none for a buffer.
        assert!(pull.points[0].bubbles.iter().any(|b| b.cause == WaitCause::HostLate), "seed {seed}");
        // Both run all the time: their spans agree.
        let (d, h) = (pull.points[0].duration_ns, pull.both.as_ref().unwrap().h2d_points[0].duration_ns);
        assert!(d.min(h) / d.max(h) > 0.95, "seed {seed}: spans {d} and {h} ns");
    }
}

/// Whatever the d2h mode, no direction at once carries more than it does alone, nor more than
/// the line rate; the sum is never above the two alone.
#[test]
fn the_sum_is_never_above_the_link() {
    let seed = 7;
    let d2h_push_alone = alone("doc003", StreamDirection::D2h, seed);
    let h2d_alone = alone("doc003", StreamDirection::H2d, seed);
    for (transport, backpressure) in [(Transport::Push, Backpressure::Lossless), (Transport::Push, Backpressure::Lossy), (Transport::Pull, Backpressure::Lossless), (Transport::Pull, Backpressure::Lossy)] {
        let (doc, _) = both_in("doc003,source_mbps=2000", seed, &with_mode(StreamDirection::D2h, transport, backpressure, seed));
        let sum = &doc.both.as_ref().unwrap().sum[0];
        let what = format!("{transport:?} {backpressure:?}");
        assert!(sum.d2h_mbps <= d2h_push_alone * 1.001 && sum.d2h_mbps <= DOC003_LINE_MBPS, "{what}: d2h {:.1} MB/s", sum.d2h_mbps);
        assert!(sum.h2d_mbps <= h2d_alone * 1.001 && sum.h2d_mbps <= DOC003_LINE_MBPS, "{what}: h2d {:.1} MB/s", sum.h2d_mbps);
        assert!(sum.sum_mbps <= d2h_push_alone + h2d_alone, "{what}: sum {:.1} MB/s", sum.sum_mbps);
        assert_eq!(sum.sum_mbps, sum.d2h_mbps + sum.h2d_mbps);
    }
}
