//! Both directions at once on one simulated link (issue 21, `--direction both`): the d2h ring
//! and the h2d ring, in the same mode, share the lanes, the Acks and the credits, so each comes
//! out a little slower than alone, and each keeps its own limits. Over several seeds. Pull and
//! lossy per side (injected delays, drops): `stream_sim_both_modes.rs`.

use pcieperf::bench::stream::StreamDocument;
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};

#[path = "support/sim_stream.rs"]
mod sim_stream;

const SEEDS: [u64; 3] = [1, 7, 2026];
const MESSAGES: u64 = 300;

fn plan(direction: StreamDirection) -> RingPlan {
    with_mode(direction, Transport::Push, Backpressure::Lossless)
}

fn with_mode(direction: StreamDirection, transport: Transport, backpressure: Backpressure) -> RingPlan {
    RingPlan {
        direction,
        transport,
        backpressure,
        host_buffers: 200,
        device_buffers: 2,
        buffer_bytes: 16384,
        message_bytes: 16352,
        stop: StreamStop::Messages(MESSAGES),
    }
}

fn alone(target: &str, direction: StreamDirection, seed: u64) -> f64 {
    sim_stream::run(target, seed, plan(direction)).0.points[0].throughput.sustained_mbps
}

/// Both directions at once, both rings in `plan`'s mode.
fn both_in(target: &str, seed: u64, plan: RingPlan) -> StreamDocument {
    sim_stream::run_both(target, seed, plan).0
}

fn both(target: &str, seed: u64) -> StreamDocument {
    both_in(target, seed, plan(StreamDirection::D2h))
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

/// Pull both ways (`--pull` applies to both rings): each side reads with one read in flight,
/// so each is held by the read round trips, far under push at once; the host's reads wait on
/// the device's completions (host_late bubbles), the device's reactions are its own pause.
/// Each side against itself alone, its drops and injected delays: `stream_sim_both_modes.rs`.
#[test]
fn pull_both_is_read_bound_on_each_side_and_slower_than_push_both() {
    for seed in SEEDS {
        let push = both("doc003", seed);
        let pull = both_in("doc003", seed, with_mode(StreamDirection::D2h, Transport::Pull, Backpressure::Lossless));
        let (push_h2d, pull_h2d) = (&push.both.as_ref().unwrap().h2d_points[0], &pull.both.as_ref().unwrap().h2d_points[0]);
        for (side, pulled, pushed) in [("d2h", &pull.points[0], &push.points[0]), ("h2d", pull_h2d, push_h2d)] {
            let (pull_mbps, push_mbps) = (pulled.throughput.sustained_mbps, pushed.throughput.sustained_mbps);
            assert_eq!(pulled.messages, MESSAGES, "seed {seed} {side}");
            assert!(pull_mbps < 0.6 * push_mbps, "seed {seed} {side}: pull {pull_mbps:.1} MB/s at once, push {push_mbps:.1}");
        }
        assert!(pull.points[0].bubbles.iter().any(|b| b.cause == WaitCause::HostLate), "seed {seed}");
        assert!(pull_h2d.bubbles.iter().any(|b| b.cause == WaitCause::DeviceDwell), "seed {seed}");
    }
}

/// Whatever the mode, no direction at once carries more than it does alone, nor more than
/// the line rate; the sum is never above the two alone.
#[test]
fn the_sum_is_never_above_the_link() {
    let seed = 7;
    let d2h_push_alone = alone("doc003", StreamDirection::D2h, seed);
    let h2d_alone = alone("doc003", StreamDirection::H2d, seed);
    for (transport, backpressure) in [(Transport::Push, Backpressure::Lossless), (Transport::Push, Backpressure::Lossy), (Transport::Pull, Backpressure::Lossless), (Transport::Pull, Backpressure::Lossy)] {
        let doc = both_in("doc003,source_mbps=2000", seed, with_mode(StreamDirection::D2h, transport, backpressure));
        let sum = &doc.both.as_ref().unwrap().sum[0];
        let what = format!("{transport:?} {backpressure:?}");
        assert!(sum.d2h_mbps <= d2h_push_alone * 1.001 && sum.d2h_mbps <= DOC003_LINE_MBPS, "{what}: d2h {:.1} MB/s", sum.d2h_mbps);
        assert!(sum.h2d_mbps <= h2d_alone * 1.001 && sum.h2d_mbps <= DOC003_LINE_MBPS, "{what}: h2d {:.1} MB/s", sum.h2d_mbps);
        assert!(sum.sum_mbps <= d2h_push_alone + h2d_alone, "{what}: sum {:.1} MB/s", sum.sum_mbps);
        assert_eq!(sum.sum_mbps, sum.d2h_mbps + sum.h2d_mbps);
    }
}
