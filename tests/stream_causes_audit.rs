//! The findings audit for `pcieperf stream`'s bubble causes (docs/findings.md): each cause the
//! simulated ring names, in a run where it must appear and one where it must not. Simulated runs
//! of a few hundred messages (virtual time); the truth is the simulator's own knobs.

use pcieperf::bench::stream::{self, Point, StreamOptions};
use pcieperf::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport, WaitCause};
use pcieperf::engine::sim::{SimConfig, SimEngine};

fn run(target: &str, direction: StreamDirection, transport: Transport) -> Point {
    let plan = RingPlan {
        direction,
        transport,
        backpressure: Backpressure::Lossless,
        host_buffers: 16,
        device_buffers: 2,
        buffer_bytes: 16384,
        message_bytes: 16352,
        stop: StreamStop::Messages(300),
    };
    let config = SimConfig::parse(target).unwrap();
    let mut engine = SimEngine::new(&format!("sim:{target}"), config, 1);
    let options = StreamOptions { message_sizes: vec![plan.message_bytes], plan, bubble_threshold_ns: 1_000.0, host_memory_bytes: None, seed: 1 };
    let mut doc = stream::run(&mut engine, &options).unwrap();
    let point = doc.points.remove(0);
    // No scenario here leaves a wait without its cause, nor a cause the engine cannot tell.
    for b in &point.bubbles {
        assert!(!matches!(b.cause, WaitCause::None | WaitCause::Unknown), "{target}: a bubble class {:?}", b.cause);
    }
    point
}

fn share(point: &Point, cause: WaitCause) -> f64 {
    point.bubbles.iter().find(|b| b.cause == cause).map_or(0.0, |b| b.share)
}

const D2H: StreamDirection = StreamDirection::D2h;
const H2D: StreamDirection = StreamDirection::H2d;
const PUSH: Transport = Transport::Push;
const PULL: Transport = Transport::Pull;

#[test]
fn device_dwell_appears_only_when_the_device_pauses() {
    let dwelling = run("doc003,dwell_ns=12000", D2H, PUSH);
    assert!(share(&dwelling, WaitCause::DeviceDwell) > 0.1, "{:?}", dwelling.bubbles);
    let steady = run("doc003", D2H, PUSH);
    assert_eq!(share(&steady, WaitCause::DeviceDwell), 0.0, "{:?}", steady.bubbles);
}

#[test]
fn no_free_buffer_appears_only_when_the_consumer_is_slower() {
    let slow_host = run("doc003,host_use_ns=60000", D2H, PUSH);
    assert!(share(&slow_host, WaitCause::NoFreeBuffer) > 0.25, "{:?}", slow_host.bubbles);
    let fast_host = run("doc003", D2H, PUSH);
    assert_eq!(share(&fast_host, WaitCause::NoFreeBuffer), 0.0, "{:?}", fast_host.bubbles);
}

#[test]
fn producer_idle_appears_only_when_the_producer_has_nothing_to_send() {
    let slow_source = run("doc003,source_mbps=100", D2H, PULL);
    assert!(share(&slow_source, WaitCause::ProducerIdle) > 0.5, "{:?}", slow_source.bubbles);
    let preparing = run("doc003,host_use_ns=20000", H2D, PUSH);
    assert!(share(&preparing, WaitCause::ProducerIdle) > 0.1, "h2d: the host prepares each message: {:?}", preparing.bubbles);
    let ready = run("doc003,host_use_ns=0", H2D, PUSH);
    assert_eq!(share(&ready, WaitCause::ProducerIdle), 0.0, "{:?}", ready.bubbles);
}

#[test]
fn host_late_appears_only_when_the_reads_are_the_limit() {
    let fast_source = run("doc003,source_mbps=5000", D2H, PULL);
    assert!(share(&fast_source, WaitCause::HostLate) > 0.0, "{:?}", fast_source.bubbles);
    let slow_source = run("doc003,source_mbps=100", D2H, PULL);
    assert!(share(&slow_source, WaitCause::HostLate) < 0.01 * share(&slow_source, WaitCause::ProducerIdle), "{:?}", slow_source.bubbles);
}

#[test]
fn a_message_that_did_not_wait_is_in_no_bubble_class() {
    // A steady d2h ring: most messages start at once (cause `none`), and `run` checks that no
    // class is `none`; the classes count only the messages that waited.
    let steady = run("doc003", D2H, PUSH);
    let waited: u64 = steady.bubbles.iter().map(|b| b.count).sum();
    assert!(waited < steady.messages, "{waited} of {} messages waited", steady.messages);
    let dwelling = run("doc003,dwell_ns=12000", D2H, PUSH);
    assert!(dwelling.bubbles.iter().map(|b| b.count).sum::<u64>() > 0);
}
