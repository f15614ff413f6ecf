//! A stream on the simulated ring, as the sim stream tests run it: the results document and
//! the simulator's own truth to check it against. Included with `#[path]`.
#![allow(dead_code)]

use pcieperf::bench::stream::{self, StreamDocument, StreamOptions};
use pcieperf::engine::ring::RingPlan;
use pcieperf::engine::sim::ring::RingTruth;
use pcieperf::engine::sim::{SimConfig, SimEngine};

/// The simulated endpoint `sim:TARGET` seeded with `seed`.
pub fn engine(target: &str, seed: u64) -> SimEngine {
    SimEngine::new(&format!("sim:{target}"), SimConfig::parse(target).unwrap(), seed)
}

/// `plan` at its one message size; bubbles from 1 µs.
pub fn options(seed: u64, plan: RingPlan) -> StreamOptions {
    StreamOptions { message_sizes: vec![plan.message_bytes], plan, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed }
}

/// One stream of `plan` on `sim:TARGET` with `seed`.
pub fn run(target: &str, seed: u64, plan: RingPlan) -> (StreamDocument, RingTruth) {
    let mut engine = engine(target, seed);
    let doc = stream::run(&mut engine, &options(seed, plan)).unwrap();
    let truth = engine.ring_truth().unwrap().clone();
    (doc, truth)
}

/// Both directions at once (`--direction both`) in `plan`'s mode: the document, the d2h ring's
/// truth and the h2d ring's.
pub fn run_both(target: &str, seed: u64, plan: RingPlan) -> (StreamDocument, RingTruth, RingTruth) {
    let mut engine = engine(target, seed);
    let doc = stream::run_both(&mut engine, &options(seed, plan)).unwrap();
    let mut truth = engine.ring_truth().expect("both directions keep their truth").clone();
    let h2d = *truth.h2d.take().expect("both directions keep the h2d ring's truth");
    (doc, truth, h2d)
}

/// The h2d ring's points of a both-directions document, as a document of their own.
pub fn h2d_document(doc: &StreamDocument) -> StreamDocument {
    StreamDocument { points: doc.both.as_ref().expect("both directions").h2d_points.clone(), both: None, ..doc.clone() }
}

/// The first point's simulated time per message.
pub fn ns_per_message(doc: &StreamDocument) -> f64 {
    let point = &doc.points[0];
    point.duration_ns / point.messages as f64
}
