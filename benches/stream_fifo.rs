//! The streaming engine against a plain dd-style loop on the same FIFO, in the same run:
//! messages/s through a FIFO (mkfifo) with 64-byte and 64 KiB messages, both ways.
//!
//! - h2d: the engine (`chardev:FIFO`, `Engine::streaming`) writes stamped messages, one write()
//!   each, and reports every one to a counting sink; the peer is a plain loop writing the same
//!   messages with `write_all`. On the other end the same reader thread reads one message per
//!   read(), as `dd bs=SIZE` does.
//! - d2h: a writer thread writes one message per write(); the engine reads them (a byte stream:
//!   everything waiting, cut into messages) and reports each; the peer is a plain loop reading
//!   one message per `read_exact`.
//!
//! Time runs from the start until the last message is through (the far end joined). The ratio
//! is engine ÷ plain loop in messages/s (goal ≥ 0.9: the tool is not the bottleneck).
//! `cargo bench --bench stream_fifo` runs it; under `cargo test` it runs once, small, as a smoke test.
//!
//! For profiling and placement: `STREAM_FIFO_ROW=TEXT` runs the rows whose label contains it
//! ("64 KiB d2h"), `STREAM_FIFO_SIDE=engine|loop` runs one side only (the other's rate reads 1),
//! `STREAM_FIFO_REPEATS=N` sets the repeats, and `STREAM_FIFO_PIN=same|split` pins the two
//! threads, the engine's and the loop's alike, to one CPU (`same`: CPU 1) or to one each
//! (`split`: the reader CPU 0, the writer CPU 1). Each repeat's rates go to stderr.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{header, repeats, Ratio, Row};
use pcieperf::engine::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamDirection, StreamStop, Transport};
use pcieperf::engine::{self, EngineError, OpenOptions};

/// Counts events and keeps the last sequence, as little work as a recorder can do.
#[derive(Default)]
struct Count {
    events: u64,
    last: u64,
}

impl MessageSink for Count {
    fn message(&mut self, event: &MessageEvent) -> Result<(), EngineError> {
        self.events += 1;
        self.last = event.sequence;
        Ok(())
    }
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// Which end of the pipe a thread is, for [`pin`].
#[derive(Clone, Copy)]
enum Role {
    Reader,
    Writer,
}

/// Pin the calling thread as `STREAM_FIFO_PIN` says (nothing when unset).
fn pin(role: Role) {
    let how = std::env::var("STREAM_FIFO_PIN").unwrap_or_default();
    let cpus: &[usize] = match (how.as_str(), role) {
        ("", _) => &[0, 1],
        ("same", _) => &[1],
        (_, Role::Reader) => &[0],
        (_, Role::Writer) => &[1],
    };
    // SAFETY: a zeroed cpu_set_t filled by CPU_SET, for the calling thread (0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// dd-style: one read of `bytes` per message (read_exact resumes a short one).
fn read_messages(path: PathBuf, bytes: usize, count: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        pin(Role::Reader);
        let mut input = File::open(path).unwrap();
        let mut buf = vec![0; bytes];
        for _ in 0..count {
            input.read_exact(&mut buf).unwrap();
        }
    })
}

/// dd-style: one write of `bytes` per message.
fn write_messages(path: PathBuf, bytes: usize, count: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        pin(Role::Writer);
        let mut output = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        let buf = vec![0x5a; bytes];
        for _ in 0..count {
            output.write_all(&buf).unwrap();
        }
    })
}

fn plan(direction: StreamDirection, bytes: u32, count: u64) -> RingPlan {
    RingPlan {
        direction,
        transport: Transport::Push,
        backpressure: Backpressure::Lossless,
        host_buffers: 200,
        device_buffers: 2,
        buffer_bytes: bytes,
        message_bytes: bytes,
        stop: StreamStop::Messages(count),
    }
}

/// Messages/s through the engine.
fn engine_rate(fifo: &Path, direction: StreamDirection, bytes: u32, count: u64) -> f64 {
    let mut engine = engine::open(&format!("chardev:{}", fifo.display()), &OpenOptions::default()).unwrap();
    let start = Instant::now();
    let far = match direction {
        StreamDirection::H2d => read_messages(fifo.to_path_buf(), bytes as usize, count),
        StreamDirection::D2h => write_messages(fifo.to_path_buf(), bytes as usize, count),
    };
    // On a thread of its own, as the loop's two sides are: the same thread set-up for both.
    let ours = std::thread::spawn(move || {
        pin(match direction {
            StreamDirection::H2d => Role::Writer,
            StreamDirection::D2h => Role::Reader,
        });
        let mut sink = Count::default();
        let end = engine.streaming().unwrap().stream(&plan(direction, bytes, count), &mut sink).unwrap();
        (end, sink)
    });
    let (end, sink) = ours.join().unwrap();
    far.join().unwrap();
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!((end.produced, sink.events, sink.last), (count, count, count - 1));
    count as f64 / seconds
}

/// Messages/s through the plain loop in the engine's place.
fn plain_rate(fifo: &Path, direction: StreamDirection, bytes: u32, count: u64) -> f64 {
    let start = Instant::now();
    let (ours, far) = match direction {
        StreamDirection::H2d => (write_messages(fifo.to_path_buf(), bytes as usize, count), read_messages(fifo.to_path_buf(), bytes as usize, count)),
        StreamDirection::D2h => (read_messages(fifo.to_path_buf(), bytes as usize, count), write_messages(fifo.to_path_buf(), bytes as usize, count)),
    };
    ours.join().unwrap();
    far.join().unwrap();
    count as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let full = common::full();
    let only_row = std::env::var("STREAM_FIFO_ROW").unwrap_or_default();
    let side = std::env::var("STREAM_FIFO_SIDE").unwrap_or_default();
    header();
    for (bytes, label, count) in [(64u32, "64 B", if full { 2_000_000 } else { 20_000 }), (65536, "64 KiB", if full { 40_000 } else { 200 })] {
        for (direction, way) in [(StreamDirection::H2d, "h2d (engine writes)"), (StreamDirection::D2h, "d2h (engine reads)")] {
            if !format!("{label} {way}").contains(&only_row) {
                continue;
            }
            let (mut ratios, mut ours, mut peer) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..repeats(std::env::var("STREAM_FIFO_REPEATS").ok().and_then(|v| v.parse().ok()).unwrap_or(5)) {
                let engine = if side == "loop" { 1.0 } else { engine_rate(&fifo, direction, bytes, count) };
                let plain = if side == "engine" { 1.0 } else { plain_rate(&fifo, direction, bytes, count) };
                eprintln!("{label} {way}: engine {engine:.0} loop {plain:.0} msg/s");
                ratios.push(engine / plain);
                ours.push(engine);
                peer.push(plain);
            }
            let median = |v: Vec<f64>| common::spread(v).0;
            Row {
                what: format!("FIFO stream, {label} messages, {way}, {count} messages"),
                ours: format!("{:.3} M msg/s", median(ours) / 1e6),
                peer: format!("{:.3} M msg/s (dd-style loop)", median(peer) / 1e6),
                ratio: Ratio::Rate,
                ratios,
                goal: "≥ 0.9".into(),
            }
            .print();
        }
    }
}
