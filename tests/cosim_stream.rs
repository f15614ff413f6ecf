//! The `cosim` engine's streaming (`Engine::streaming`): the RTL core's streaming mode in Icarus
//! Verilog with the testbench's host consuming the ring, by message count and by duration on
//! the device clock, through the engine and from the command line. Needs iverilog, python3 with
//! cocotb, cocotbext-pcie and cocotbext-axi (.ci/run installs them); without them it prints
//! "skipped: ...".

use pcieperf::engine::cosim::{self, CosimEngine};
use pcieperf::engine::ring::{
    Backpressure, MessageEvent, MessageSink, RingPlan, StreamDirection, StreamEnd, StreamStop, Streaming, Transport, WaitCause,
};
use pcieperf::engine::{EngineError, OpenOptions};
use serde_json::Value;
use std::time::Duration;

/// Keeps every event; refuses more than `RECORDER_LIMIT`, so a stream that ignored its
/// duration ends (`stopped_early`) instead of co-simulating for hours.
struct Recorder(Vec<MessageEvent>);

const RECORDER_LIMIT: usize = 2000;

impl MessageSink for Recorder {
    fn message(&mut self, event: &MessageEvent) -> Result<(), EngineError> {
        if self.0.len() >= RECORDER_LIMIT {
            return Err(EngineError::Unsupported(format!("test recorder: more than {RECORDER_LIMIT} messages")));
        }
        self.0.push(*event);
        Ok(())
    }
}

fn open() -> Option<CosimEngine> {
    match cosim::open("cosim:gen1x4", "gen1x4", &OpenOptions { seed: 1, ..OpenOptions::default() }) {
        Ok(engine) => Some(engine),
        Err(error) if error.to_string().contains("prerequisites missing") || error.to_string().contains("cosim needs python3") => {
            println!("skipped: {error}");
            None
        }
        Err(error) => panic!("cosim:gen1x4: {error}"),
    }
}

fn plan(host_buffers: u32, message_bytes: u32, messages: u64, backpressure: Backpressure) -> RingPlan {
    RingPlan {
        direction: StreamDirection::D2h,
        transport: Transport::Push,
        backpressure,
        host_buffers,
        device_buffers: 2,
        buffer_bytes: 512,
        message_bytes,
        stop: StreamStop::Messages(messages),
    }
}

fn run(engine: &mut CosimEngine, plan: &RingPlan) -> (Vec<MessageEvent>, StreamEnd) {
    let mut recorder = Recorder(Vec::new());
    let end = Streaming::stream(engine, plan, &mut recorder).unwrap();
    (recorder.0, end)
}

/// Gen1 x4 model: 64-bit interface at 125 MHz.
const NS_PER_CYCLE: f64 = 8.0;

#[test]
fn a_short_stream_through_the_rtl_core() {
    let Some(mut engine) = open() else { return };

    // Lossless, a ring of 4: every message, in order, device and host times consistent.
    let (events, end) = run(&mut engine, &plan(4, 256, 12, Backpressure::Lossless));
    assert_eq!(events.len(), 12);
    assert_eq!(events.iter().map(|e| e.sequence).collect::<Vec<_>>(), (0..12).collect::<Vec<_>>());
    assert_eq!((end.produced, end.dropped_by_producer, end.stopped_early.as_deref()), (12, Some(0), None));
    for pair in events.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(b.device_start_ns.unwrap() > a.device_done_ns.unwrap(), "{a:?} {b:?}");
        assert!(b.host_seen_ns >= a.host_released_ns, "the consumer takes messages one at a time");
    }
    for e in &events {
        assert_eq!(e.bytes, 256);
        // 256 bytes at MPS 256 on 64 bits: at least 2 + 32 data beats, metadata, flag.
        assert!(e.device_done_ns.unwrap() - e.device_start_ns.unwrap() >= 34.0 * NS_PER_CYCLE, "{e:?}");
        assert!(e.host_released_ns >= e.host_seen_ns && (1..=4).contains(&e.ring_occupancy), "{e:?}");
    }
    assert_eq!(events[0].wait_cause, WaitCause::None);

    // A dwell of 3 cycles: every bubble is the core's one-cycle turnaround plus the dwell.
    engine.set_stream_dwell_cycles(3);
    let (events, _) = run(&mut engine, &plan(16, 64, 8, Backpressure::Lossless));
    for e in &events[1..] {
        assert_eq!((e.wait_before_ns, e.wait_cause), (4.0 * NS_PER_CYCLE, WaitCause::DeviceDwell), "{e:?}");
    }

    // Lossy with a slow host: drops found from sequence gaps equal the device's own count, and
    // the message after a drop names the full ring.
    engine.set_stream_dwell_cycles(40);
    engine.set_stream_release_delay_ns(700);
    let (events, end) = run(&mut engine, &plan(2, 64, 20, Backpressure::Lossy));
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    let gaps: u64 = sequences.windows(2).map(|w| w[1] - w[0] - 1).sum::<u64>() + sequences[0] + (19 - sequences.last().unwrap());
    let dropped = end.dropped_by_producer.unwrap();
    assert!(dropped > 0, "a 700 ns consumer with 2 buffers must drop");
    assert_eq!(gaps, dropped);
    assert_eq!(end.produced, 20);
    for pair in events.windows(2) {
        if pair[1].sequence > pair[0].sequence + 1 {
            assert_eq!(pair[1].wait_cause, WaitCause::NoFreeBuffer, "{:?}", pair[1]);
        }
    }

    // Plans the core cannot run are refused in one line before anything moves.
    let mut too_big = plan(4, 1024, 4, Backpressure::Lossless);
    assert!(Streaming::check(&engine, &too_big).unwrap_err().to_string().contains("does not fit"));
    too_big.message_bytes = 256;
    too_big.stop = StreamStop::Duration(Duration::ZERO);
    assert!(Streaming::check(&engine, &too_big).unwrap_err().to_string().contains("more than 0"));
    too_big.stop = StreamStop::Messages(4);
    too_big.direction = StreamDirection::H2d;
    assert!(Streaming::check(&engine, &too_big).is_err());
}

/// `--duration` on the device clock (the core's STREAM_DURATION): every message starts within
/// the duration of the first one, the next one could not have, the last one is done within
/// one message of the duration, a lossless run drops nothing and a lossy one counts its drops.
#[test]
fn a_duration_ends_on_the_device_clock() {
    let Some(mut engine) = open() else { return };
    let duration_ns = 4000.0; // 500 cycles at 125 MHz: ~20 messages of 64 bytes
    let timed = |host_buffers, backpressure| RingPlan {
        stop: StreamStop::Duration(Duration::from_nanos(duration_ns as u64)),
        ..plan(host_buffers, 64, 1, backpressure)
    };

    // Lossless, a ring of 16 the host empties at once: the device clock alone ends the stream.
    let (events, end) = run(&mut engine, &timed(16, Backpressure::Lossless));
    let n = events.len() as u64;
    assert!(n > 5, "{n} messages in {duration_ns} ns");
    assert_eq!((end.produced, end.dropped_by_producer, end.stopped_early.as_deref()), (n, Some(0), None), "{end:?}");
    assert_eq!(events.iter().map(|e| e.sequence).collect::<Vec<_>>(), (0..n).collect::<Vec<_>>());
    let first = events[0].device_start_ns.unwrap();
    let last = events.last().unwrap();
    let (last_start, last_done) = (last.device_start_ns.unwrap() - first, last.device_done_ns.unwrap() - first);
    assert!(last_start < duration_ns, "the last message started {last_start} ns in");
    assert!(last_done <= duration_ns + (last_done - last_start), "done {last_done} ns in: more than one message past the duration");
    // No wait, no dwell: the next message would have started one cycle after the last one was
    // done, which is at or past the duration.
    assert!(events[1..].iter().all(|e| e.wait_cause == WaitCause::DeviceDwell), "the ring never filled");
    assert!(last_done + NS_PER_CYCLE >= duration_ns, "another message could start at {} ns", last_done + NS_PER_CYCLE);
    // The count is what the device clock allows: the duration over the message period, to one.
    let period_ns = last_start / (n - 1) as f64;
    assert!((n as f64 - duration_ns / period_ns).abs() <= 1.0, "{n} messages of {period_ns} ns in {duration_ns} ns");

    // Lossy with a slow host: drops are counted exactly and none after the deadline.
    engine.set_stream_dwell_cycles(10);
    engine.set_stream_release_delay_ns(400);
    let (events, end) = run(&mut engine, &timed(2, Backpressure::Lossy));
    let dropped = end.dropped_by_producer.unwrap();
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert!(dropped > 0 && end.stopped_early.is_none(), "{end:?}");
    let gaps = sequences.windows(2).map(|w| w[1] - w[0] - 1).sum::<u64>() + sequences[0] + (end.produced - 1 - sequences.last().unwrap());
    assert_eq!(gaps, dropped, "sequence gaps against the device's count");
    assert_eq!(end.produced, events.len() as u64 + dropped);
    let first = events[0].device_start_ns.unwrap();
    assert!(events.iter().all(|e| e.device_start_ns.unwrap() - first < duration_ns));
}

fn pcieperf() -> std::process::Command {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("pcieperf"))
}

/// The prerequisites' line when cosim cannot run here (then the test prints "skipped").
fn cosim_missing(stderr: &str) -> bool {
    if stderr.contains("prerequisites missing") || stderr.contains("cosim needs python3") {
        println!("skipped: {}", stderr.trim());
        return true;
    }
    false
}

#[test]
fn a_cosim_duration_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.json");
    let run = pcieperf()
        .args(["stream", "--target", "cosim:gen1x4", "--msg-size", "64,256", "--buf-size", "256", "--host-bufs", "16", "--duration", "3us", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if cosim_missing(&stderr) {
        return;
    }
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("CO-SIMULATED") || text.contains("co-simulated"), "{text}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(doc["stopped_early"].is_null(), "{}", doc["stopped_early"]);
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "one duration per message size");
    // 3 µs of the device clock: fewer 256-byte messages than 64-byte ones, none dropped.
    let messages: Vec<u64> = points.iter().map(|p| p["messages"].as_u64().unwrap()).collect();
    assert!(messages[0] > messages[1] && messages[1] > 1, "{messages:?}");
    for p in points {
        assert_eq!((p["dropped"].as_u64(), p["produced"].as_u64()), (Some(0), p["messages"].as_u64()), "{p}");
    }
}

/// One interrupted duration run: the signal `after` the start; the exit status, how long it
/// took to end after the signal, and the JSON written; None when cosim cannot run here.
fn interrupted_duration_run(after: Duration) -> Option<(Option<i32>, Duration, Value)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.json");
    let log = dir.path().join("stderr");
    // A second of the device clock would take hours to co-simulate.
    let mut child = pcieperf()
        .args(["stream", "--target", "cosim:gen1x4", "--msg-size", "64", "--buf-size", "64", "--duration", "1s", "-o"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while started.elapsed() < after {
        if let Some(status) = child.try_wait().unwrap() {
            let stderr = std::fs::read_to_string(&log).unwrap();
            if cosim_missing(&stderr) {
                return None;
            }
            panic!("ended before the signal: {status}: {stderr}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let signalled = std::time::Instant::now();
    let status = child.wait().unwrap();
    let waited = signalled.elapsed();
    let doc = serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON after the signal ({e}): {}", std::fs::read_to_string(&log).unwrap()));
    Some((status.code(), waited, doc))
}

#[test]
fn ctrl_c_ends_a_cosim_duration_with_the_messages_so_far() {
    // The testbench takes seconds to start (more on a loaded machine): a signal before the first
    // messages rightly leaves none, so wait longer until some came.
    for after_s in [8, 20, 45] {
        let Some((code, waited, doc)) = interrupted_duration_run(Duration::from_secs(after_s)) else { return };
        println!("signal after {after_s} s: ended {waited:?} later with {} messages", doc["points"][0]["messages"]);
        assert!(waited < Duration::from_secs(15), "ended {waited:?} after the signal");
        assert_eq!(code, Some(130));
        assert_eq!(doc["stopped_early"], "interrupted");
        let point = &doc["points"][0];
        if point["messages"].as_u64().unwrap() > 0 {
            assert_eq!(point["dropped"], 0, "a lossless stream cut short drops nothing");
            return;
        }
    }
    panic!("no message was co-simulated within 45 s");
}

#[test]
fn bad_durations_are_one_line_and_exit_2() {
    // Values pcieperf reads: one line.
    for args in [&["--duration", "0"][..], &["--duration", "0s"], &["--duration=-1us"], &["--duration", "soon"]] {
        let run = pcieperf().args(["stream", "--target", "cosim:gen1x4"]).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("invalid duration"), "{args:?}: {stderr}");
    }
    // Usage errors clap finds (a duration and a count; a value that looks like an option): its
    // first line names them, then its usage line.
    for (args, says) in [(&["--duration", "5us", "--messages", "10"][..], "cannot be used with"), (&["--duration", "-1us"], "unexpected argument")] {
        let run = pcieperf().args(["stream", "--target", "cosim:gen1x4"]).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.lines().next().unwrap_or("").contains(says) && !stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
