//! The model beside pull and h2d runs (issue 21): `model::stream::pull_model` and
//! `h2d_push_model` count the link's TLPs (never the simulator), and the simulated runs come out
//! within a few % of them where the link or the ring is the limit, naming the same limit. And
//! the ring each direction reports: h2d's is the device's buffers, so a slow device consumer is
//! consumer-bound and a slow host producer producer-bound. Over several seeds.

use pcieperf::bench::stream::{self, Point, StreamOptions};
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport};
use pcieperf::engine::sim::{SimConfig, SimEngine};

const SEEDS: [u64; 3] = [1, 7, 2026];

fn run(target: &str, seed: u64, direction: StreamDirection, transport: Transport) -> Point {
    let plan = RingPlan {
        direction,
        transport,
        backpressure: Backpressure::Lossless,
        host_buffers: 200,
        device_buffers: 2,
        buffer_bytes: 16384,
        message_bytes: 16352,
        stop: StreamStop::Messages(300),
    };
    let mut engine = SimEngine::new(&format!("sim:{target}"), SimConfig::parse(target).unwrap(), seed);
    let options = StreamOptions { message_sizes: vec![plan.message_bytes], plan, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed };
    stream::run(&mut engine, &options).unwrap().points.remove(0)
}

/// The simulated rate within `tolerance` of the model's, and the model's limit named.
fn near_model(point: &Point, limit: &str, tolerance: f64, what: &str) {
    let model = point.model.as_ref().unwrap_or_else(|| panic!("{what}: no model"));
    assert_eq!(model.tlp_accurate.limit, limit, "{what}: {:?}", model.tlp_accurate.bounds);
    assert!((model.reached - 1.0).abs() < tolerance, "{what}: {:.1} MB/s simulated, model {:.1}", point.throughput.sustained_mbps, model.tlp_accurate.mbps);
}

/// Pull at doc003: 32 reads of 512 bytes, one in flight, each a round trip with the
/// completer's 1 µs latency; the host's reads are the limit and the run is consumer-bound.
/// Fails if the model leaves out the latency (it would be 2.6× too fast) or counts reads in
/// parallel.
#[test]
fn pull_comes_out_at_its_model() {
    for seed in SEEDS {
        let point = run("doc003", seed, StreamDirection::D2h, Transport::Pull);
        near_model(&point, "host", 0.02, &format!("pull seed {seed}"));
        assert_eq!(point.verdict.limit, "consumer", "seed {seed}: {}", point.verdict.reason);
        let slow = run("doc003,source_mbps=100", seed, StreamDirection::D2h, Transport::Pull);
        assert_eq!(slow.verdict.limit, "producer", "seed {seed}: {}", slow.verdict.reason);
    }
}

/// h2d push: a fast device leaves the host's writes as the limit; a 60 µs consume time makes
/// the device the limit; a host that prepares each message for 60 µs is the limit itself.
#[test]
fn h2d_comes_out_at_its_model_with_the_right_limit() {
    for seed in SEEDS {
        let fast = run("doc003", seed, StreamDirection::H2d, Transport::Push);
        near_model(&fast, "producer", 0.02, &format!("h2d seed {seed}"));
        let slow_device = run("doc003,dwell_ns=60000", seed, StreamDirection::H2d, Transport::Push);
        near_model(&slow_device, "device", 0.02, &format!("h2d slow device seed {seed}"));
        let slow_host = run("doc003,host_use_ns=60000", seed, StreamDirection::H2d, Transport::Push);
        near_model(&slow_host, "producer", 0.02, &format!("h2d slow host seed {seed}"));
    }
}

/// h2d's ring is the device's buffers: a slow device consumer keeps them full (not the 0 %
/// that counting the host's 200 buffers gave), a slow host producer keeps them empty.
#[test]
fn h2d_occupancy_is_of_the_device_buffers() {
    for seed in SEEDS {
        let slow_device = run("doc003,dwell_ns=60000", seed, StreamDirection::H2d, Transport::Push);
        assert_eq!(slow_device.verdict.limit, "consumer", "seed {seed}: {}", slow_device.verdict.reason);
        assert!(slow_device.ring.full_share > 0.5, "seed {seed}: full {}", slow_device.ring.full_share);
        assert!(slow_device.ring.mean_occupancy > 1.0 && slow_device.ring.mean_occupancy <= 2.0, "seed {seed}: mean {}", slow_device.ring.mean_occupancy);
        assert!(slow_device.verdict.reason.contains("the device releases"), "{}", slow_device.verdict.reason);
        let slow_host = run("doc003,host_use_ns=60000", seed, StreamDirection::H2d, Transport::Push);
        assert_eq!(slow_host.verdict.limit, "producer", "seed {seed}: {}", slow_host.verdict.reason);
        assert!(slow_host.ring.empty_share > 0.5, "seed {seed}: empty {}", slow_host.ring.empty_share);
        assert!(slow_host.verdict.reason.contains("host's own preparation"), "{}", slow_host.verdict.reason);
    }
}
