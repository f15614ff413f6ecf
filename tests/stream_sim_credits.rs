//! Credit holds on the simulated rings (issue 21): with the target's flow-control stall keys
//! set, the ring's link withholds the host's UpdateFCs, the device's transmitter starves, and
//! the report's `credits` bubbles recover it — d2h push (they add up to the starvation the link
//! counted), pull and h2d (the flags and "done" writes starve), both directions at once — over
//! several seeds. The truth is the link's own starvation counter
//! (`RingTruth::credit_starvation`), never the report's figures.

use pcieperf::bench::stream::StreamDocument;
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};

#[path = "support/sim_stream.rs"]
mod sim_stream;
use sim_stream::{h2d_document, run, run_both};

const SEEDS: [u64; 3] = [1, 7, 2026];
/// Holds of 20–50 µs, 5000 per second: far longer than the credits the device holds cover.
const HOLDS: &str = "doc003,stalls_per_s=5000,stall_max_ns=50000,stall_min_ns=20000";

fn plan(message_bytes: u32, messages: u64, backpressure: Backpressure) -> RingPlan {
    RingPlan {
        direction: StreamDirection::D2h,
        transport: Transport::Push,
        backpressure,
        host_buffers: 200,
        device_buffers: 2,
        buffer_bytes: 16384,
        message_bytes,
        stop: StreamStop::Messages(messages),
    }
}

/// The report's `credits` bubbles: (count, total ns).
fn credit_bubbles(doc: &StreamDocument) -> (u64, f64) {
    doc.points[0].bubbles.iter().filter(|b| b.cause == WaitCause::Credits).fold((0, 0.0), |(n, t), b| (n + b.count, t + b.total_ns))
}

#[test]
fn credits_bubbles_add_up_to_the_links_starvation() {
    for seed in SEEDS {
        for (message_bytes, dwell) in [(16352, ""), (1024, ",dwell_ns=500")] {
            let target = format!("{HOLDS}{dwell}");
            let (doc, truth) = run(&target, seed, plan(message_bytes, 2000, Backpressure::Lossless));
            let starvation = truth.credit_starvation;
            assert!(starvation.count > 10, "seed {seed} {target}: the holds must starve the device ({starvation:?})");
            let (count, total_ns) = credit_bubbles(&doc);
            assert!(count > 0, "seed {seed} {target}: credits bubbles appear");
            // A message during which the transmitter starved twice has one bubble of both.
            assert!(count <= starvation.count, "seed {seed} {target}: {count} bubbles from {} starvations", starvation.count);
            // With a dwell, a credits bubble also holds the message's dwell before it (≤ 500 ns
            // each), and a starvation shorter than the dwell is a `device_dwell` bubble.
            assert!((total_ns - starvation.total_ns).abs() <= 0.03 * starvation.total_ns, "seed {seed} {target}: credits bubbles {total_ns} ns, link starved {} ns", starvation.total_ns);
            assert_eq!(doc.points[0].dropped, 0, "a lossless run never drops");
            assert_eq!(truth.fast_forwarded, 0, "no fast-forward over injected holds");
        }
    }
}

#[test]
fn holds_slow_the_stream_by_the_starvation() {
    let (clean, _) = run("doc003", 1, plan(16352, 2000, Backpressure::Lossless));
    let (held, truth) = run(HOLDS, 1, plan(16352, 2000, Backpressure::Lossless));
    let clean_span_ns = clean.points[0].messages as f64 * 16352.0 / clean.points[0].throughput.sustained_mbps * 1e3;
    let held_span_ns = held.points[0].messages as f64 * 16352.0 / held.points[0].throughput.sustained_mbps * 1e3;
    // The stream takes longer by what the transmitter starved (the rest of the link's time
    // is the same TLPs), within 2 %.
    let extra_ns = held_span_ns - clean_span_ns;
    let starved_ns = truth.credit_starvation.total_ns;
    assert!(starved_ns > 0.05 * clean_span_ns, "holds must cost something: {starved_ns} ns of {clean_span_ns}");
    assert!((extra_ns - starved_ns).abs() <= 0.02 * starved_ns, "stream {extra_ns} ns longer, link starved {starved_ns} ns");
}

#[test]
fn without_holds_there_are_no_credits_bubbles() {
    for seed in SEEDS {
        // The preset alone (its stall keys not set on the target), and the rate set to 0.
        for target in ["doc003", "doc003,stalls_per_s=0", "doc003,dwell_ns=500"] {
            let (doc, truth) = run(target, seed, plan(16352, 1000, Backpressure::Lossless));
            assert_eq!(credit_bubbles(&doc).0, 0, "seed {seed} {target}");
            assert_eq!(truth.credit_starvation.count, 0, "seed {seed} {target}: nothing starves without a hold");
        }
    }
}

#[test]
fn holds_the_devices_credits_cover_cost_nothing() {
    // 0.5–1 µs holds: the device's posted credits last longer, so it never starves.
    let (doc, truth) = run("doc003,stalls_per_s=20000,stall_max_ns=1000,stall_min_ns=500", 1, plan(16352, 1000, Backpressure::Lossless));
    let (clean, _) = run("doc003", 1, plan(16352, 1000, Backpressure::Lossless));
    assert_eq!((truth.credit_starvation.count, credit_bubbles(&doc).0), (0, 0));
    assert_eq!(doc.points[0].throughput.sustained_mbps, clean.points[0].throughput.sustained_mbps);
}

#[test]
fn lossy_ring_with_holds_counts_its_drops() {
    // A small ring and a host stalling now and then, plus holds: drops and credits bubbles.
    let target = format!("{HOLDS},host_stall_every=25,host_stall_ns=200000");
    let (doc, truth) = run(&target, 7, RingPlan { host_buffers: 4, ..plan(16352, 1500, Backpressure::Lossy) });
    let point = &doc.points[0];
    assert!(truth.dropped > 0 && credit_bubbles(&doc).0 > 0, "drops {} and credits bubbles", truth.dropped);
    assert_eq!(point.dropped, truth.dropped);
}

/// Holds of 0.4–0.8 ms, 500 per second: pull and h2d send one small upstream write per
/// message (a flag, a "done"), so only holds longer than the device's posted credits last at
/// that pace make them starve.
const LONG_HOLDS: &str = "doc003,stalls_per_s=500,stall_min_ns=400000,stall_max_ns=800000";

fn pull_or_h2d(which: &str) -> RingPlan {
    match which {
        "pull" => RingPlan { transport: Transport::Pull, ..plan(16352, 1000, Backpressure::Lossless) },
        _ => RingPlan { direction: StreamDirection::H2d, ..plan(16352, 2000, Backpressure::Lossless) },
    }
}

/// Pull and h2d: with long holds the flags ("done" writes) starve, and the bubbles they cause are
/// `credits`: as many as the link's starvations at most, their total at most the starvation
/// plus a reaction and a write's flight each (a starvation starts before the bubble it causes,
/// while the message before is still read or written). Without holds, none.
#[test]
fn pull_and_h2d_bubbles_recover_the_holds() {
    for seed in SEEDS {
        for which in ["pull", "h2d"] {
            let (doc, truth) = run(LONG_HOLDS, seed, pull_or_h2d(which));
            let starvation = truth.credit_starvation;
            assert!(starvation.count > 0, "seed {seed} {which}: the holds must starve the device ({starvation:?})");
            let (count, total_ns) = credit_bubbles(&doc);
            assert!(count > 0, "seed {seed} {which}: credits bubbles appear");
            assert!(count <= starvation.count, "seed {seed} {which}: {count} bubbles from {} starvations", starvation.count);
            assert!(total_ns <= starvation.total_ns + count as f64 * 2_000.0, "seed {seed} {which}: credits bubbles {total_ns} ns, link starved {} ns", starvation.total_ns);
            assert_eq!(doc.points[0].dropped, 0, "a lossless run never drops");
            let (clean, clean_truth) = run("doc003", seed, pull_or_h2d(which));
            assert_eq!((credit_bubbles(&clean).0, clean_truth.credit_starvation.count), (0, 0), "seed {seed} {which}: no holds, no credits");
            assert!(doc.points[0].throughput.sustained_mbps < clean.points[0].throughput.sustained_mbps, "seed {seed} {which}: holds cost");
        }
    }
}

/// Both directions at once: the d2h push device starves as alone (its credits bubbles within
/// 3 % of the link's starvation), and the h2d ring's "done" writes wait behind it; without holds
/// neither has a credits bubble.
#[test]
fn both_directions_recover_the_holds() {
    for seed in SEEDS {
        let (doc, truth, _) = run_both(HOLDS, seed, plan(16352, 1000, Backpressure::Lossless));
        let starvation = truth.credit_starvation;
        assert!(starvation.count > 10, "seed {seed}: {starvation:?}");
        let (count, total_ns) = credit_bubbles(&doc);
        assert!(count > 0 && count <= starvation.count, "seed {seed}: {count} d2h credits bubbles, {} starvations", starvation.count);
        assert!(total_ns <= starvation.total_ns * 1.001, "seed {seed}: d2h credits bubbles {total_ns} ns, link starved {} ns", starvation.total_ns);
        let h2d = h2d_document(&doc);
        assert!(credit_bubbles(&h2d).0 > 0, "seed {seed}: the h2d ring's done writes wait behind the starving device");
        let (clean, clean_truth, _) = run_both("doc003", seed, plan(16352, 1000, Backpressure::Lossless));
        let clean_h2d = h2d_document(&clean);
        assert_eq!((credit_bubbles(&clean).0, credit_bubbles(&clean_h2d).0, clean_truth.credit_starvation.count), (0, 0, 0), "seed {seed}");
    }
}
