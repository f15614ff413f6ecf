//! Both directions at once in every mode one direction has (issue 21, `--direction both` with
//! `--pull` and/or `--lossy`): the flags apply to both rings, so beside the d2h ring the h2d ring
//! is pulled by the device (one read in flight: its MRd go upstream among the d2h ring's traffic,
//! its completions downstream) or drops when lossy. Each side recovers what was injected into it,
//! counts its own drops exactly, and is no faster than alone. The truth is the simulator's
//! (`SimEngine::ring_truth`, the h2d ring's beside the d2h ring's), never the report's figures.

use pcieperf::bench::stream::{Point, StreamDocument};
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};
use pcieperf::engine::sim::ring::RingTruth;

#[path = "support/sim_stream.rs"]
mod sim_stream;
use sim_stream::{h2d_document, run, run_both};

const SEEDS: [u64; 3] = [1, 7, 2026];
const MESSAGE_BYTES: u32 = 16352;

fn plan(transport: Transport, backpressure: Backpressure, host_buffers: u32, stop: StreamStop) -> RingPlan {
    RingPlan { direction: StreamDirection::D2h, transport, backpressure, host_buffers, device_buffers: 2, buffer_bytes: 16384, message_bytes: MESSAGE_BYTES, stop }
}

fn pull(messages: u64) -> RingPlan {
    plan(Transport::Pull, Backpressure::Lossless, 200, StreamStop::Messages(messages))
}

/// Nearest-rank percentile of the drawn delays.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The h2d side pulls: its device reacts to each doorbell 20–30 µs late (drawn per message), and
/// the report finds each reaction as the bubble before that message's first read, percentiles
/// within 1 %, while the d2h host's read requests and flags share the link. The d2h side's
/// host keeps each buffer for its injected use (every 7th 20 µs longer): the report's per-message
/// host hold is that, within 1 %. A sink mixing the two sides' events fails both.
#[test]
fn pull_both_recovers_the_device_reactions_and_the_host_delays_per_side() {
    let messages = 700;
    for seed in SEEDS {
        let target = "doc003,react_ns=20000,react_jitter_ns=10000,host_use_ns=5000,host_stall_every=7,host_stall_ns=20000";
        let (doc, _, h2d_truth) = run_both(target, seed, pull(messages));
        let h2d = &doc.both.as_ref().unwrap().h2d_points[0];
        assert_eq!((h2d.messages, h2d.dropped), (messages, 0), "seed {seed}");
        let reactions = h2d.bubbles.iter().find(|b| b.cause == WaitCause::DeviceDwell).expect("the device's reactions are bubbles");
        // The first message has no bubble before it.
        let mut drawn = h2d_truth.reactions_ns[1..].to_vec();
        assert_eq!(reactions.count, drawn.len() as u64, "seed {seed}: one bubble per message after the first");
        drawn.sort_by(f64::total_cmp);
        for (p, got) in [(0.5, reactions.latency.p50_ns), (0.9, reactions.latency.p90_ns), (0.99, reactions.latency.p99_ns), (0.999, reactions.latency.p99_9_ns), (1.0, reactions.latency.max_ns)] {
            let want = percentile(&drawn, p);
            assert!((got - want).abs() <= 0.01 * want, "seed {seed} h2d p{p}: report {got} ns, injected {want} ns");
        }
        let d2h = &doc.points[0];
        assert_eq!((d2h.messages, d2h.dropped), (messages, 0), "seed {seed}");
        let stalls = messages / 7;
        let want_hold_ns = 5000.0 + stalls as f64 * 20_000.0 / messages as f64;
        let hold_ns = d2h.model.as_ref().unwrap().shape.host_hold_ns;
        assert!((hold_ns - want_hold_ns).abs() <= 0.01 * want_hold_ns, "seed {seed} d2h: host hold {hold_ns} ns, injected {want_hold_ns} ns");
    }
}

/// A device consumer slower than the h2d reads fills the device's two buffers: the h2d side's
/// full share is the simulator's within 0.5 percentage points, consumer-bound at one message per
/// dwell, while the d2h side beside it (its host reading the device's buffers) keeps its pace.
#[test]
fn pull_both_sees_a_slow_device_consumer_fill_the_h2d_buffers() {
    for (seed, dwell_ns) in SEEDS.into_iter().zip([150_000.0, 90_000.0, 120_000.0]) {
        let (doc, _, h2d_truth) = run_both(&format!("doc003,dwell_ns={dwell_ns},react_ns=200,react_jitter_ns=400"), seed, pull(600));
        let h2d = &doc.both.as_ref().unwrap().h2d_points[0];
        let want = h2d_truth.full_ns / h2d_truth.span_ns;
        assert!(want > 0.05, "seed {seed}: the slow consumer must fill the device's buffers (truth {want})");
        assert!((h2d.ring.full_share - want).abs() <= 0.005, "seed {seed}: report {} full, truth {want}", h2d.ring.full_share);
        assert_eq!(h2d.verdict.limit, "consumer", "seed {seed}: {}", h2d.verdict.reason);
        assert!(h2d.bubbles.iter().any(|b| b.cause == WaitCause::NoFreeBuffer), "seed {seed}: the engine waited for a device buffer");
        let want_mbps = f64::from(MESSAGE_BYTES) / dwell_ns * 1e3;
        assert!((h2d.throughput.sustained_mbps / want_mbps - 1.0).abs() <= 0.02, "seed {seed}: {} MB/s, consumer {want_mbps}", h2d.throughput.sustained_mbps);
        let d2h = &doc.points[0];
        assert!(d2h.bubbles.iter().all(|b| b.cause != WaitCause::NoFreeBuffer), "seed {seed}: the d2h source never waited");
        assert!(d2h.throughput.sustained_mbps > 1.5 * h2d.throughput.sustained_mbps, "seed {seed}: d2h {} MB/s", d2h.throughput.sustained_mbps);
    }
}

/// Per side, a lossy producer's drops: every drop the producer counted, from sequence gaps save
/// those after its last message; `produced` is the plan's count.
fn assert_drops_counted(point: &Point, truth: &RingTruth, messages: u64, what: &str) {
    assert!(truth.dropped > 0, "{what}: the full ring must make the producer drop");
    assert_eq!(point.dropped, truth.dropped - truth.dropped_after_last, "{what}: drops from sequence gaps");
    assert_eq!(point.dropped_by_producer, Some(truth.dropped), "{what}");
    assert_eq!(point.messages + truth.dropped, point.produced, "{what}");
    assert_eq!(point.produced, messages, "{what}: the producer numbers the plan's messages");
}

/// Lossy, both producers drop when their ring is full (push: the d2h device when the host,
/// away every 5th message, holds all four host buffers, the h2d host when the slow device holds
/// both of its; pull: the d2h source faster than the host's reads, the h2d host faster than the
/// device's consumer with four host buffers), and each side's report counts its own exactly.
/// Lossless, the same run never drops on either side.
#[test]
fn lossy_both_counts_each_sides_drops_exactly_and_lossless_never_drops() {
    let messages = 400;
    let cases = [
        (Transport::Push, "doc003,dwell_ns=60000,host_use_ns=20000,host_stall_every=5,host_stall_ns=400000"),
        (Transport::Pull, "doc003,dwell_ns=80000,host_use_ns=30000,react_jitter_ns=300,source_mbps=2000"),
    ];
    for seed in SEEDS {
        for (transport, target) in cases {
            let lossy = plan(transport, Backpressure::Lossy, 4, StreamStop::Messages(messages));
            let (doc, truth, h2d_truth) = run_both(target, seed, lossy.clone());
            let what = |side| format!("{transport:?} seed {seed} {side}");
            assert_drops_counted(&doc.points[0], &truth, messages, &what("d2h"));
            assert_drops_counted(&doc.both.as_ref().unwrap().h2d_points[0], &h2d_truth, messages, &what("h2d"));
            let lossless = RingPlan { backpressure: Backpressure::Lossless, ..lossy };
            let (doc, truth, h2d_truth) = run_both(target, seed, lossless);
            for (point, truth, side) in [(&doc.points[0], &truth, "d2h"), (&doc.both.as_ref().unwrap().h2d_points[0], &h2d_truth, "h2d")] {
                assert_eq!((truth.dropped, point.dropped, point.dropped_by_producer, point.messages), (0, 0, Some(0), messages), "{} lossless", what(side));
            }
        }
    }
}

/// Pull both ways: each side pays for the other's reads on the shared lanes, so each is a
/// little slower than alone (never faster), and both run the whole time (the two rates are close: a count each keeps
/// them overlapping; a duration would not, as the h2d device drains the host's 200 buffers
/// after the host stops at the deadline); each side's model
/// names its own limit as alone (one read in flight: the h2d device's `reads`; the d2h host's
/// reads and its use of each message, `host`), and the simulated rate stays within it.
#[test]
fn pull_both_is_no_faster_per_side_than_alone_and_each_model_names_its_limit() {
    let timed = pull(400);
    for seed in SEEDS {
        let d2h_alone = run("doc003", seed, timed.clone()).0.points[0].throughput.sustained_mbps;
        let h2d_alone = run("doc003", seed, RingPlan { direction: StreamDirection::H2d, ..timed.clone() }).0.points[0].throughput.sustained_mbps;
        let (doc, _, _) = run_both("doc003", seed, timed.clone());
        let h2d_doc: StreamDocument = h2d_document(&doc);
        for (side, point, alone, limit) in [("h2d", &h2d_doc.points[0], h2d_alone, "reads"), ("d2h", &doc.points[0], d2h_alone, "host")] {
            let mbps = point.throughput.sustained_mbps;
            eprintln!("simulated, seed {seed} {side} pull: {mbps:.1} MB/s at once, {alone:.1} MB/s alone");
            // Strictly slower: rings on separate links would run as alone.
            assert!(mbps < alone * 0.999 && mbps > 0.5 * alone, "seed {seed} {side}: {mbps:.1} MB/s at once, {alone:.1} alone");
            let model = &point.model.as_ref().expect("the simulated endpoint states its link").tlp_accurate;
            assert_eq!(model.limit, limit, "seed {seed} {side}: {:?}", model.bounds);
            assert!(mbps <= model.mbps * 1.005, "seed {seed} {side}: sim {mbps:.1} MB/s above the model's {:.1}", model.mbps);
            assert!(point.messages > 100, "seed {seed} {side}");
        }
        // Both run all the time: their spans agree.
        let (d, h) = (doc.points[0].duration_ns, h2d_doc.points[0].duration_ns);
        assert!(d.min(h) / d.max(h) > 0.95, "seed {seed}: spans {d} and {h} ns");
    }
}
