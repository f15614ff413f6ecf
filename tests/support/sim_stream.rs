//! A stream on the simulated ring, as the sim stream tests run it: the results document and
//! the simulator's own truth to check it against. Included with `#[path]`.
#![allow(dead_code)]

use pcieperf::bench::stream::{self, StreamDocument, StreamOptions};
use pcieperf::engine::ring::RingPlan;
use pcieperf::engine::sim::ring::RingTruth;
use pcieperf::engine::sim::{SimConfig, SimEngine};

/// One stream of `plan` on `sim:TARGET` with `seed`; bubbles from 1 µs.
pub fn run(target: &str, seed: u64, plan: RingPlan) -> (StreamDocument, RingTruth) {
    let mut engine = SimEngine::new(&format!("sim:{target}"), SimConfig::parse(target).unwrap(), seed);
    let options = StreamOptions { message_sizes: vec![plan.message_bytes], plan, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed };
    let doc = stream::run(&mut engine, &options).unwrap();
    let truth = engine.ring_truth().unwrap().clone();
    (doc, truth)
}

/// The first point's simulated time per message.
pub fn ns_per_message(doc: &StreamDocument) -> f64 {
    let point = &doc.points[0];
    point.duration_ns / point.messages as f64
}
