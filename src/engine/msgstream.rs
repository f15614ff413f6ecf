//! Message streaming through device files and FIFOs: the [`Streaming`] machinery that `chardev`,
//! `xillybus` and `xdma` (AXI-Stream) share.
//!
//! - **Producer (h2d: this process produces).** Every message carries a 16-byte stamp in its
//!   first bytes (document 003's per-message metadata): its sequence number and the host time it
//!   was written, little-endian u64s. A consumer finds drops from sequence gaps and end-to-end
//!   latency from the stamp. Writes are non-blocking; a write the node refuses (a full pipe) is
//!   waited on with poll(), and that wait is the message's bubble, caused by the consumer
//!   ([`WaitCause::NoFreeBuffer`]).
//! - **Consumer, byte stream (FIFO, `chardev`, `xillybus`).** A pipe is a byte stream: the
//!   consumer reads one message per read (one read in flight, so bytes stay in order), as a
//!   `dd bs=SIZE` reader does. Time spent waiting on an empty node is the producer's
//!   bubble ([`WaitCause::ProducerIdle`]).
//! - **Consumer, packets (XDMA AXI-Stream C2H).** One read returns at most one packet (the
//!   driver ends it at the stream's TLAST/EOP), so every completed read is one message of its
//!   own length. io_uring keeps up to [`MAX_READS_IN_FLIGHT`] reads in flight (the driver then
//!   always has a buffer to fill); without io_uring one read at a time, which the description says.
//!
//! Ring occupancy: on a pipe, the messages' worth of bytes waiting in it (FIONREAD) plus those
//! the consumer holds; on a packet node, completed reads not yet handed to the sink. Nothing here
//! has a device clock: `device_start_ns`/`device_done_ns` are the producer's times only when this
//! process is the producer (then on the host clock, the same as `host_seen_ns`), else None.

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use io_uring::{opcode, types, IoUring};

use super::devfile::{self, HostClock, Step};
use super::slice_alarm::SliceAlarm;
use super::ring::{Backpressure, MessageEvent, MessageSink, RingPlan, StreamDirection, StreamEnd, StreamStop, Transport, WaitCause};
use super::EngineError;
use crate::error::InvalidInput;

/// Bytes of the stamp a produced message starts with: sequence number, then produced time (ns).
pub const STAMP_BYTES: u32 = 16;

/// Reads kept in flight on a packet node (fewer when the plan has fewer host buffers).
pub const MAX_READS_IN_FLIGHT: u32 = 64;

/// A side that makes no progress for this long ends the stream with a timeout naming it.
pub const STALL_LIMIT: Duration = Duration::from_secs(5);

/// A pipe's unit of buffering (a page on Linux).
const PAGE_BYTES: usize = 4096;

/// How often a consumer that must not poll its FIFO looks for a writer that has not come yet.
const WRITER_LOOK: Duration = Duration::from_millis(1);

/// A producer that does not wait, and a consumer, read the occupancy at most this often (ns).
const OCCUPANCY_SAMPLE_NS: f64 = 1e6;

/// How long a signal-ended packet stream waits for the kernel to hand back cancelled reads.
const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// Write the stamp into the first [`STAMP_BYTES`] of `message`.
pub fn stamp(message: &mut [u8], sequence: u64, produced_ns: u64) {
    message[..8].copy_from_slice(&sequence.to_le_bytes());
    message[8..16].copy_from_slice(&produced_ns.to_le_bytes());
}

/// The stamp of a message this process produced: (sequence, produced ns).
pub fn read_stamp(message: &[u8]) -> Option<(u64, u64)> {
    let sequence = u64::from_le_bytes(message.get(..8)?.try_into().ok()?);
    let produced = u64::from_le_bytes(message.get(8..16)?.try_into().ok()?);
    Some((sequence, produced))
}

/// How a consumer's reads map onto messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Bytes in order, no boundaries (pipes, Xillybus): messages are cut at `message_bytes`.
    ByteStream,
    /// One read returns at most one packet (XDMA AXI-Stream C2H).
    Packets,
}

/// One node and the name messages use for it.
pub struct Node<'a> {
    pub file: &'a File,
    pub name: String,
}

/// `Streaming` for an engine whose streams run on its device nodes: it has an `info` field and a
/// `nodes()` method; `check` and `stream` are this module's.
macro_rules! streaming_on_nodes {
    ($engine:ty) => {
        impl $crate::engine::ring::Streaming for $engine {
            fn check(&self, plan: &$crate::engine::ring::RingPlan) -> Result<(), $crate::engine::EngineError> {
                $crate::engine::msgstream::check(&self.nodes(), plan)
            }

            fn stream(
                &mut self,
                plan: &$crate::engine::ring::RingPlan,
                sink: &mut dyn $crate::engine::ring::MessageSink,
            ) -> Result<$crate::engine::ring::StreamEnd, $crate::engine::EngineError> {
                $crate::engine::msgstream::run(&self.nodes(), plan, sink)
            }

            fn stream_both(
                &mut self,
                plan: &$crate::engine::ring::RingPlan,
                sinks: [&mut dyn $crate::engine::ring::MessageSink; 2],
            ) -> Result<[$crate::engine::ring::StreamEnd; 2], $crate::engine::EngineError> {
                $crate::engine::msgstream::run_both(&self.nodes(), plan, sinks)
            }

            fn info(&self) -> &$crate::engine::EngineInfo {
                &self.info
            }
        }
    };
}
pub(crate) use streaming_on_nodes;

/// What an engine streams through.
pub struct Nodes<'a> {
    /// Written by this process (h2d); None when the engine cannot write (why: `write_refused`).
    pub write: Option<Node<'a>>,
    pub read: Option<Node<'a>>,
    /// Why there is no write node (the write guard's refusal, a missing h2c channel).
    pub write_refused: Option<String>,
    /// In h2d, what is written comes back on the read node (a loopback design), and the
    /// consumer's events are reported; else the producer's own.
    pub loopback: bool,
    pub framing: Framing,
    /// Xillybus: a zero-length write sends a partly filled DMA buffer at once; done before
    /// every wait and at the end, so nothing written sits in the driver.
    pub flush_with_empty_write: bool,
    pub clock: HostClock,
}

/// The plans these nodes can run, or one line saying why not.
pub fn check(nodes: &Nodes<'_>, plan: &RingPlan) -> Result<(), EngineError> {
    if plan.host_buffers == 0 || plan.device_buffers == 0 || plan.buffer_bytes == 0 {
        return Err(InvalidInput::new("a ring needs at least one buffer of at least one byte on each side").into());
    }
    if plan.message_bytes == 0 || plan.message_bytes > plan.buffer_bytes {
        return Err(InvalidInput::new(format!("a message of {} bytes does not fit a buffer of {} bytes", plan.message_bytes, plan.buffer_bytes)).into());
    }
    if plan.transport == Transport::Pull {
        return Err(EngineError::Unsupported("device files and FIFOs stream by push only (the producer writes); pull needs a device that reads host buffers".into()));
    }
    match plan.direction {
        StreamDirection::H2d => {
            if nodes.write.is_none() {
                return Err(EngineError::Unsupported(nodes.write_refused.clone().unwrap_or_else(|| "this target has no node to write (h2d)".into())));
            }
            if plan.message_bytes < STAMP_BYTES {
                return Err(InvalidInput::new(format!(
                    "messages this process produces start with a {STAMP_BYTES}-byte stamp (sequence number, time): use {STAMP_BYTES} bytes or more, not {}",
                    plan.message_bytes
                ))
                .into());
            }
            if plan.backpressure == Backpressure::Lossy {
                return Err(EngineError::Unsupported("this process produces losslessly: a pipe or driver makes the writer wait for room, it never drops".into()));
            }
            if nodes.loopback && nodes.read.is_none() {
                return Err(EngineError::Unsupported("a loopback needs a node to read back from".into()));
            }
        }
        StreamDirection::D2h => {
            if nodes.read.is_none() {
                return Err(EngineError::Unsupported("this target has no node to read (d2h)".into()));
            }
        }
    }
    Ok(())
}

/// Run `plan` through `nodes`, handing every message to `sink` in the consumer's order.
/// A closed peer or a stalled side ends with an error (the events so far are in the sink);
/// a signal or the sink's refusal ends early with `stopped_early` saying why.
pub fn run(nodes: &Nodes<'_>, plan: &RingPlan, sink: &mut dyn MessageSink) -> Result<StreamEnd, EngineError> {
    check(nodes, plan)?;
    let mut run = Run::new(nodes, plan);
    let outcome = match plan.direction {
        StreamDirection::H2d => run.produce(sink),
        StreamDirection::D2h if nodes.framing == Framing::Packets => match PacketReader::new(plan) {
            Ok(reader) => reader.consume(&mut run, sink),
            // Without io_uring: one read at a time, each still one packet.
            Err(_) => run.consume_by_read(sink),
        },
        StreamDirection::D2h => run.consume_by_read(sink),
    };
    run.flush();
    let stopped_early = match outcome {
        Ok(()) => None,
        Err(Stop::Early(why)) => Some(why),
        Err(Stop::Failed(error)) => return Err(error),
    };
    Ok(run.end(stopped_early))
}

/// Both directions at once (`--direction both`): this process writes the h2d stream to the
/// write node and reads the d2h stream from the read node in one loop, each its own stream
/// (`sinks[0]` d2h, `sinks[1]` h2d) with its own sequence numbers and bubbles, as each is alone
/// one way: the h2d events are the producer's (its waits for room: the consumer's bubbles), the
/// d2h events the consumer's (its waits on an empty node: the producer's). On a loopback target
/// the d2h messages carry the stamps this process wrote, so the d2h sequence is the stamps' and
/// a lost message is a gap; elsewhere the d2h messages are numbered as they arrive. Packet
/// nodes (XDMA) keep their reads and the one write in flight on io_uring (the driver's calls
/// block), byte streams wait in poll().
pub fn run_both(nodes: &Nodes<'_>, plan: &RingPlan, sinks: [&mut dyn MessageSink; 2]) -> Result<[StreamEnd; 2], EngineError> {
    if plan.transport == Transport::Pull || plan.backpressure == Backpressure::Lossy {
        return Err(InvalidInput::new("--direction both on device files and FIFOs is push and lossless only (this process writes and a pipe or driver never drops)").into());
    }
    if let (Some(write), Some(read)) = (&nodes.write, &nodes.read) {
        if write.file.as_raw_fd() == read.file.as_raw_fd() {
            return Err(InvalidInput::new(format!(
                "--direction both writes one node while reading another: {} is one node (give two, e.g. chardev:WRITE_PATH,READ_PATH)",
                write.name
            ))
            .into());
        }
    }
    let d2h_plan = RingPlan { direction: StreamDirection::D2h, ..plan.clone() };
    let h2d_plan = RingPlan { direction: StreamDirection::H2d, ..plan.clone() };
    check(nodes, &d2h_plan)?;
    check(nodes, &h2d_plan)?;
    let [d2h_sink, h2d_sink] = sinks;
    let mut producer = Run::new(nodes, &h2d_plan);
    let mut consumer = Run::new(nodes, &d2h_plan);
    if nodes.loopback {
        consumer.numbering = Numbering::Stamped;
    }
    let outcome = match nodes.framing {
        Framing::Packets => match PacketReader::new(plan) {
            Ok(reader) => reader.both(&mut producer, &mut consumer, d2h_sink, h2d_sink),
            Err(why) => Err(Stop::Failed(EngineError::Unsupported(format!(
                "--direction both on packet nodes needs io_uring (their reads and writes block): {why}"
            )))),
        },
        Framing::ByteStream => both_by_poll(&mut producer, &mut consumer, d2h_sink, h2d_sink),
    };
    producer.flush();
    let stopped_early = match outcome {
        Ok(()) => None,
        Err(Stop::Early(why)) => Some(why),
        Err(Stop::Failed(error)) => return Err(error),
    };
    Ok([consumer.end(stopped_early.clone()), producer.end(stopped_early)])
}

/// A signal during a both-ways stream: one line counting each direction's messages.
fn both_signalled(producer: &Run<'_, '_>, consumer: &Run<'_, '_>) -> Result<(), Stop> {
    if crate::cancel::requested() {
        return Err(Stop::Early(format!(
            "interrupted by a signal after {} d2h and {} h2d messages",
            consumer.delivered, producer.delivered
        )));
    }
    Ok(())
}

/// Byte streams both ways: one non-blocking write and one read per turn, poll() on both nodes
/// when neither moved.
fn both_by_poll(producer: &mut Run<'_, '_>, consumer: &mut Run<'_, '_>, d2h_sink: &mut dyn MessageSink, h2d_sink: &mut dyn MessageSink) -> Result<(), Stop> {
    let nodes = producer.nodes;
    let (write, read) = (nodes.write.as_ref().expect("checked"), nodes.read.as_ref().expect("checked"));
    loop {
        both_signalled(producer, consumer)?;
        let producing = producer.producing();
        let consuming = !consumer.consumer_done(consumer.now_if_timed_ns());
        if !producing && !consuming {
            return Ok(());
        }
        let mut progressed = false;
        if producing {
            progressed |= producer.write_some(write, write.file.as_raw_fd(), true, h2d_sink)?;
        }
        if consuming {
            progressed |= consumer.read_some(read, read.file.as_raw_fd(), d2h_sink)?;
        }
        if progressed {
            continue;
        }
        producer.flush();
        let now = nodes.clock.now_ns();
        let mut fds = Vec::with_capacity(2);
        if producing {
            producer.check_waiting(now, || producer.stall(true, false))?;
            fds.push(libc::pollfd { fd: write.file.as_raw_fd(), events: libc::POLLOUT, revents: 0 });
        }
        if consuming {
            consumer.check_waiting(now, || consumer.stall(false, true))?;
            fds.push(libc::pollfd { fd: read.file.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        poll(&mut fds)?;
    }
}

/// Whether io_uring can keep reads in flight here; the description's words for the packet reader.
pub fn packet_reader_description() -> String {
    match uring(MAX_READS_IN_FLIGHT) {
        Ok(_) => format!("io_uring, up to {MAX_READS_IN_FLIGHT} packet reads in flight"),
        Err(why) => format!("one packet read at a time (io_uring unavailable: {why})"),
    }
}

enum Stop {
    /// A signal, the sink: the stream ends with what it has.
    Early(String),
    Failed(EngineError),
}

impl From<EngineError> for Stop {
    fn from(error: EngineError) -> Stop {
        Stop::Failed(error)
    }
}

/// How a consumer numbers the messages it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbering {
    /// In arrival order: the producer is not this process and its numbers are unknown.
    Arrival,
    /// From the stamp this process wrote (both ways on a loopback): a gap is a lost message.
    Stamped,
    /// From the stamp, matched with what this process wrote (h2d through a loopback): the
    /// message's event carries its producer's times.
    Returned,
}

/// A message written, waiting to come back through a loopback.
struct Written {
    sequence: u64,
    started_ns: f64,
    done_ns: f64,
    wait_ns: f64,
}

struct Run<'n, 'p> {
    nodes: &'n Nodes<'n>,
    plan: &'p RingPlan,
    message_bytes: usize,
    start_ns: f64,
    end_ns: Option<f64>,
    /// Producer: the next sequence number, the message being written and how far.
    next_sequence: u64,
    out: Vec<u8>,
    out_done: usize,
    out_started_ns: f64,
    /// When the producer found no room, while the current message had not started.
    blocked_since_ns: Option<f64>,
    /// One way, the clock read that ended the previous message's write: the next message starts
    /// then (between them only this process's own work: the sink, an occupancy sample every
    /// 4 KiB), so each message costs one clock read, not two.
    previous_done_ns: Option<f64>,
    /// The current message's bubble: how long the producer waited for room before it started.
    out_wait_ns: f64,
    /// When the producer last read the occupancy (FIONREAD), and what it read.
    sampled_ns: f64,
    last_occupancy: u32,
    in_loopback: VecDeque<Written>,
    /// Consumer: how it numbers what it reads, and the next number it expects from stamps.
    numbering: Numbering,
    next_stamped: u64,
    /// Consumer: bytes read not yet cut into messages.
    input: Vec<u8>,
    input_fill: usize,
    waiting_since_ns: Option<f64>,
    /// The last read of a FIFO found no writer yet (EOF without a hang-up).
    writer_absent: bool,
    /// The consumer waits in blocking reads and must never poll() its FIFO ([`KernelWait`]).
    never_poll: bool,
    delivered: u64,
    last_progress_ns: f64,
}

impl<'n, 'p> Run<'n, 'p> {
    fn new(nodes: &'n Nodes<'n>, plan: &'p RingPlan) -> Self {
        let message_bytes = plan.message_bytes as usize;
        let read_bytes = match nodes.framing {
            // One message per read, as a `dd bs=SIZE` reader: reading everything waiting empties
            // the pipe, and every small write then wakes a reader asleep in poll()
            // (performance.md, "Message streaming through a FIFO").
            Framing::ByteStream => message_bytes,
            Framing::Packets => plan.buffer_bytes as usize,
        };
        let now = nodes.clock.now_ns();
        let end_ns = match plan.stop {
            StreamStop::Duration(d) => Some(now + d.as_secs_f64() * 1e9),
            StreamStop::Messages(_) => None,
        };
        Run {
            nodes,
            plan,
            message_bytes,
            start_ns: now,
            end_ns,
            next_sequence: 0,
            out: vec![0x5a; message_bytes],
            out_done: 0,
            out_started_ns: 0.0,
            blocked_since_ns: None,
            previous_done_ns: None,
            out_wait_ns: 0.0,
            sampled_ns: f64::NEG_INFINITY,
            last_occupancy: 0,
            in_loopback: VecDeque::new(),
            numbering: if plan.direction == StreamDirection::H2d { Numbering::Returned } else { Numbering::Arrival },
            next_stamped: 0,
            input: vec![0; read_bytes],
            input_fill: 0,
            waiting_since_ns: None,
            writer_absent: false,
            never_poll: false,
            delivered: 0,
            last_progress_ns: now,
        }
    }

    /// How the stream ended, this side's view: what the producer numbered (h2d: this process;
    /// d2h from stamps: one past the highest number seen; else what arrived).
    fn end(&self, stopped_early: Option<String>) -> StreamEnd {
        let h2d = self.plan.direction == StreamDirection::H2d;
        StreamEnd {
            produced: match (h2d, self.numbering) {
                (true, _) => self.next_sequence,
                (false, Numbering::Stamped) => self.next_stamped,
                (false, _) => self.delivered,
            },
            dropped_by_producer: h2d.then_some(0),
            start_ns: self.start_ns,
            end_ns: self.nodes.clock.now_ns(),
            stopped_early,
            fast_forwarded: 0,
        }
    }

    /// The producer has a message to write: the plan wants more, or one is half written (the
    /// consumer frames by size, so it is finished whatever the plan says).
    fn producing(&self) -> bool {
        let more = self.limit().is_none_or(|n| self.next_sequence < n) && !self.time_is_up(self.now_if_timed_ns());
        more || self.out_done > 0
    }

    fn limit(&self) -> Option<u64> {
        match self.plan.stop {
            StreamStop::Messages(n) => Some(n),
            StreamStop::Duration(_) => None,
        }
    }

    fn time_is_up(&self, now_ns: f64) -> bool {
        self.end_ns.is_some_and(|end| now_ns >= end)
    }

    /// The clock for [`Run::time_is_up`], read only when the plan has a duration (a counted
    /// stream's loops do without the per-turn clock read).
    fn now_if_timed_ns(&self) -> f64 {
        if self.end_ns.is_some() { self.nodes.clock.now_ns() } else { 0.0 }
    }

    /// A signal: checked on every turn of a loop, busy or waiting (one atomic load).
    fn check_signal(&self) -> Result<(), Stop> {
        if crate::cancel::requested() {
            return Err(Stop::Early(format!("interrupted by a signal after {} messages", self.delivered)));
        }
        Ok(())
    }

    /// A signal, a stalled side: checked before every wait.
    fn check_waiting(&self, now_ns: f64, what: impl FnOnce() -> String) -> Result<(), Stop> {
        self.check_signal()?;
        if now_ns - self.last_progress_ns > STALL_LIMIT.as_secs_f64() * 1e9 {
            return Err(Stop::Failed(EngineError::Timeout { what: what(), after: STALL_LIMIT }));
        }
        Ok(())
    }

    fn hand(&mut self, sink: &mut dyn MessageSink, event: &MessageEvent) -> Result<(), Stop> {
        self.delivered += 1;
        sink.message(event).map_err(|e| Stop::Early(format!("the recorder stopped the stream: {e}")))
    }

    fn flush(&self) {
        if let (true, Some(write)) = (self.nodes.flush_with_empty_write, &self.nodes.write) {
            // SAFETY: a zero-length write reads nothing from the pointer.
            unsafe { libc::write(write.file.as_raw_fd(), self.out.as_ptr().cast(), 0) };
        }
    }

    /// h2d: write messages (and read them back through a loopback) until the plan's end.
    fn produce(&mut self, sink: &mut dyn MessageSink) -> Result<(), Stop> {
        let write = self.nodes.write.as_ref().expect("checked");
        let read = if self.nodes.loopback { self.nodes.read.as_ref() } else { None };
        // One way into a FIFO the producer waits in blocking writes and never polls
        // ([`KernelWait`]): the rest of a message a short write left, and a full pipe at a
        // message's start ([`Run::wait_for_room`]). With a loopback to read too, poll() waits
        // for either.
        let waiting_write = read.is_none().then(|| KernelWait::start(write.file, true)).flatten();
        loop {
            self.check_signal()?;
            let producing = self.producing();
            if !producing && (read.is_none() || self.in_loopback.is_empty()) {
                return Ok(());
            }
            let mut progressed = false;
            if producing {
                let step = match &waiting_write {
                    Some(wait) if self.out_done == 0 && self.blocked_since_ns.is_some() => self.wait_for_room(write, wait.blocking.as_raw_fd(), sink),
                    wait => self.write_some(write, KernelWait::fd(wait, write.file, self.out_done > 0), read.is_none(), sink),
                };
                match step {
                    Ok(moved) => progressed |= moved,
                    // The device went away: what it sent back before is still the run's.
                    Err(Stop::Failed(error)) if read.is_some() => {
                        let back = read.expect("loopback");
                        while let Ok(true) = self.read_some(back, back.file.as_raw_fd(), sink) {}
                        return Err(Stop::Failed(error));
                    }
                    Err(stop) => return Err(stop),
                }
            }
            if let Some(read) = read {
                progressed |= self.read_some(read, read.file.as_raw_fd(), sink)?;
            }
            if progressed {
                continue;
            }
            self.flush();
            self.check_waiting(self.nodes.clock.now_ns(), || self.stall(producing, read.is_some()))?;
            // Waiting in the kernel, the next turn's call waits; the FIFO is never polled.
            if waiting_write.is_some() {
                continue;
            }
            let mut fds = Vec::with_capacity(2);
            if producing {
                fds.push(libc::pollfd { fd: write.file.as_raw_fd(), events: libc::POLLOUT, revents: 0 });
            }
            if let Some(read) = read {
                fds.push(libc::pollfd { fd: read.file.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            }
            poll(&mut fds)?;
        }
    }

    fn stall(&self, producing: bool, reading: bool) -> String {
        let mut parts = Vec::new();
        if producing {
            let name = &self.nodes.write.as_ref().expect("producing").name;
            parts.push(format!("{name} accepted nothing (message {} of the stream)", self.next_sequence));
        }
        if reading {
            let name = &self.nodes.read.as_ref().expect("reading").name;
            parts.push(format!("nothing came back on {name} ({} messages so far, {} in flight)", self.delivered, self.in_loopback.len()));
        }
        parts.join("; ")
    }

    /// One write of the current message (stamped when it starts); true when bytes moved.
    /// `one_way`: nothing reads the messages back, so the producer's event is the message's.
    /// `fd` is the node's or, to wait in the write, a blocking description of it ([`KernelWait`]).
    fn write_some(&mut self, write: &Node<'_>, fd: RawFd, one_way: bool, sink: &mut dyn MessageSink) -> Result<bool, Stop> {
        let rest = self.next_write();
        // SAFETY: `rest` is a valid slice for the call. Interrupted (a slice alarm's tick in a
        // blocking write): as nothing yet.
        let step = devfile::interruptible_step(&write.name, || unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) })
            .map_err(|e| closed_on_write(e, &write.name))?
            .unwrap_or(Step::WouldBlock);
        let Step::Moved(n) = step else {
            if self.out_done == 0 && self.blocked_since_ns.is_none() {
                self.blocked_since_ns = Some(self.out_started_ns);
            }
            return Ok(false);
        };
        self.wrote(n, fd, one_way, sink)?;
        Ok(true)
    }

    /// The pipe was full at the message's start, and the producer waits in the kernel: a
    /// blocking write of the stamp's sequence number alone (8 bytes: a pipe takes it whole)
    /// returns once there is room. The message starts then — its stamp's time, the next 8 bytes
    /// and not written yet, is set to that moment — and the wait before it is its bubble, as
    /// poll() would have measured it. True when the bytes went in.
    fn wait_for_room(&mut self, write: &Node<'_>, fd: RawFd, sink: &mut dyn MessageSink) -> Result<bool, Stop> {
        let sequence = &self.out[..8];
        // SAFETY: `sequence` is a valid 8-byte slice for the call.
        let step = devfile::interruptible_step(&write.name, || unsafe { libc::write(fd, sequence.as_ptr().cast(), sequence.len()) })
            .map_err(|e| closed_on_write(e, &write.name))?
            .unwrap_or(Step::WouldBlock);
        let Step::Moved(n) = step else { return Ok(false) };
        let now = self.nodes.clock.now_ns();
        stamp(&mut self.out, self.next_sequence, now as u64);
        self.out_started_ns = now;
        self.wrote(n, fd, true, sink)?;
        Ok(true)
    }

    /// What the next write moves: the rest of the current message, stamped when it starts.
    fn next_write(&mut self) -> &[u8] {
        if self.out_done == 0 {
            let now = self.previous_done_ns.take().unwrap_or_else(|| self.nodes.clock.now_ns());
            stamp(&mut self.out, self.next_sequence, now as u64);
            self.out_started_ns = now;
        }
        &self.out[self.out_done..]
    }

    /// `n` bytes of the current message were written; a finished message is handed on (one
    /// way) or waits to come back (loopback).
    fn wrote(&mut self, n: usize, fd: RawFd, one_way: bool, sink: &mut dyn MessageSink) -> Result<(), Stop> {
        if self.out_done == 0 {
            self.out_wait_ns = self.blocked_since_ns.take().map_or(0.0, |since| self.out_started_ns - since);
        }
        self.out_done += n;
        let now = self.nodes.clock.now_ns();
        self.last_progress_ns = now;
        if self.out_done < self.message_bytes {
            return Ok(());
        }
        self.out_done = 0;
        let written = Written { sequence: self.next_sequence, started_ns: self.out_started_ns, done_ns: now, wait_ns: self.out_wait_ns };
        self.next_sequence += 1;
        if !one_way {
            self.in_loopback.push_back(written);
            return Ok(());
        }
        self.previous_done_ns = Some(now);
        // Read after every wait (the full pipe the verdict needs); messages between samples
        // carry the last one.
        self.sample_occupancy(fd, now, written.wait_ns > 0.0);
        let event = MessageEvent {
            sequence: written.sequence,
            bytes: self.message_bytes as u32,
            device_start_ns: Some(written.started_ns),
            device_done_ns: Some(written.done_ns),
            host_seen_ns: written.done_ns,
            host_released_ns: written.done_ns,
            ring_occupancy: self.last_occupancy,
            wait_before_ns: written.wait_ns,
            wait_cause: producer_cause(written.wait_ns),
        };
        self.hand(sink, &event)
    }

    /// The messages waiting in the pipe behind `fd`: read (FIONREAD) when `now_needed` or at
    /// most once per [`OCCUPANCY_SAMPLE_NS`], the last reading otherwise. FIONREAD takes the
    /// pipe's lock, which the other side holds while it copies.
    fn sample_occupancy(&mut self, fd: RawFd, now: f64, now_needed: bool) -> u32 {
        if now_needed || now - self.sampled_ns >= OCCUPANCY_SAMPLE_NS {
            self.sampled_ns = now;
            self.last_occupancy = messages_waiting(fd, self.message_bytes);
        }
        self.last_occupancy
    }

    /// One read from a byte stream (or one packet without io_uring), every whole message in it
    /// handed to the sink; true when bytes moved.
    /// `fd` is the node's or, to wait in the read, a blocking description of it ([`KernelWait`]).
    fn read_some(&mut self, read: &Node<'_>, fd: RawFd, sink: &mut dyn MessageSink) -> Result<bool, Stop> {
        let room = &mut self.input[self.input_fill..];
        let room_bytes = room.len();
        // SAFETY: `room` is a valid mutable slice for the call.
        // Interrupted (a slice alarm's tick in a blocking read): as nothing yet.
        let step = devfile::interruptible_step(&read.name, || unsafe { libc::read(fd, room.as_mut_ptr().cast(), room.len()) })?.unwrap_or(Step::WouldBlock);
        let n = match step {
            Step::Moved(n) => n,
            Step::WouldBlock => {
                self.waiting_since_ns.get_or_insert_with(|| self.nodes.clock.now_ns());
                return Ok(false);
            }
            // A FIFO whose writer has not come yet reads as EOF too, without a hang-up.
            Step::Eof if self.writer_may_come(fd) => {
                self.writer_absent = true;
                self.waiting_since_ns.get_or_insert_with(|| self.nodes.clock.now_ns());
                return Ok(false);
            }
            Step::Eof => return Err(Stop::Failed(self.closed_on_read(read))),
        };
        self.writer_absent = false;
        let seen_ns = self.nodes.clock.now_ns();
        self.last_progress_ns = seen_ns;
        // A pipe's read returns less than asked only once it is empty: the consumer waits from here.
        let drained = self.nodes.framing == Framing::ByteStream && n < room_bytes;
        self.input_fill += n;
        let (count, bytes) = match self.nodes.framing {
            Framing::ByteStream => (self.input_fill / self.message_bytes, self.message_bytes),
            Framing::Packets => (1, self.input_fill),
        };
        if count == 0 {
            if drained {
                self.waiting_since_ns.get_or_insert(seen_ns);
            }
            return Ok(!drained);
        }
        let looped = self.numbering == Numbering::Returned;
        let in_pipe = if looped || drained { 0 } else { self.sample_occupancy(fd, seen_ns, false) };
        let waited_since = if drained { self.waiting_since_ns.replace(seen_ns) } else { self.waiting_since_ns.take() };
        // The first message follows no other: the wait before it is the producer starting, not a bubble.
        let mut wait_ns = waited_since.filter(|since| *since < seen_ns && self.delivered > 0).map_or(0.0, |since| seen_ns - since);
        for index in 0..count {
            if self.consumer_done(seen_ns) {
                break;
            }
            let message = &self.input[index * bytes..(index + 1) * bytes];
            let event = if looped {
                let (sequence, produced_ns) = read_stamp(message).expect("checked: messages hold a stamp");
                self.returned(sequence, produced_ns as f64, bytes, seen_ns)
            } else {
                let occupancy = in_pipe.saturating_add((count - index) as u32);
                let sequence = self.consumed_sequence(read_stamp(message));
                let event = consumed(sequence, bytes, seen_ns, occupancy, wait_ns);
                wait_ns = 0.0;
                event
            };
            self.hand(sink, &event)?;
        }
        let used = count * bytes;
        self.input.copy_within(used..self.input_fill, 0);
        self.input_fill -= used;
        // Drained: the next read would find nothing, so the caller waits (poll) instead.
        Ok(!drained)
    }

    /// EOF on a FIFO: no writer yet (keep waiting) rather than the writer gone. poll() tells
    /// them apart (a hang-up); a consumer that must not poll ([`KernelWait`]) takes EOF before
    /// any byte for "not yet" — a writer that opens and closes without writing then ends the
    /// run at the stall limit, as a silent one does.
    fn writer_may_come(&self, fd: RawFd) -> bool {
        if self.never_poll {
            return self.delivered == 0 && self.input_fill == 0;
        }
        !hung_up(fd)
    }

    /// A message back from the loopback, with what the producer knew of it. The ring is
    /// everything between writing and reading back (the device's input, the device, the way
    /// back): its occupancy is the messages in flight, this one included.
    fn returned(&mut self, sequence: u64, produced_ns: f64, bytes: usize, seen_ns: f64) -> MessageEvent {
        // Written messages are numbered without gaps: the newest minus this one, plus this one.
        let occupancy = self.in_loopback.back().map_or(1, |newest| newest.sequence.saturating_sub(sequence) + 1) as u32;
        // Lossless: messages come back in order; anything older than this one did not come back.
        while self.in_loopback.front().is_some_and(|w| w.sequence < sequence) {
            self.in_loopback.pop_front();
        }
        let written = self.in_loopback.front().filter(|w| w.sequence == sequence).is_some().then(|| self.in_loopback.pop_front()).flatten();
        let wait_ns = written.as_ref().map_or(0.0, |w| w.wait_ns);
        MessageEvent {
            sequence,
            bytes: bytes as u32,
            device_start_ns: Some(produced_ns),
            device_done_ns: written.as_ref().map(|w| w.done_ns),
            host_seen_ns: seen_ns,
            host_released_ns: seen_ns,
            ring_occupancy: occupancy,
            wait_before_ns: wait_ns,
            wait_cause: producer_cause(wait_ns),
        }
    }

    /// The number of a message this consumer read (see [`Numbering`]).
    fn consumed_sequence(&mut self, stamp: Option<(u64, u64)>) -> u64 {
        match self.numbering {
            Numbering::Stamped => {
                let sequence = stamp.expect("checked: messages hold a stamp").0;
                self.next_stamped = self.next_stamped.max(sequence.saturating_add(1));
                sequence
            }
            Numbering::Arrival | Numbering::Returned => self.delivered,
        }
    }

    /// d2h: the plan's messages are in, or its time is up.
    /// Counted from stamps, the plan's messages are those the producer numbered, delivered or lost.
    fn consumer_done(&self, now_ns: f64) -> bool {
        let counted = if self.numbering == Numbering::Stamped { self.next_stamped } else { self.delivered };
        self.plan.direction == StreamDirection::D2h && (self.limit().is_some_and(|n| counted >= n) || self.time_is_up(now_ns))
    }

    fn closed_on_read(&self, read: &Node<'_>) -> EngineError {
        EngineError::Short {
            done: self.delivered,
            wanted: self.limit().unwrap_or(self.delivered.max(self.next_sequence)),
            why: format!("messages: read from {}: end of stream (the peer closed its end)", read.name),
        }
    }

    /// d2h: read whole messages (or packets, one read each) until the plan's end. From a FIFO
    /// the read itself waits, as `dd`'s does ([`KernelWait`]); elsewhere poll() waits.
    fn consume_by_read(&mut self, sink: &mut dyn MessageSink) -> Result<(), Stop> {
        let read = self.nodes.read.as_ref().expect("checked");
        let waiting_read = (self.nodes.framing == Framing::ByteStream).then(|| KernelWait::start(read.file, false)).flatten();
        self.never_poll = waiting_read.is_some();
        if self.never_poll && self.message_bytes >= PAGE_BYTES {
            // Room for two messages: a read that brings one (or less) has emptied the pipe, so
            // the next read may wait without another read to find that out — a read that, after
            // a message of a page or more, mostly meets the writer copying the next one in and
            // sleeps on the pipe's lock (a wake-up across CPUs per message). Small messages keep
            // one per read: reading two drains the pipe more often (measured, performance.md).
            self.input.resize(2 * self.message_bytes, 0);
        }
        let mut known_empty = false;
        loop {
            self.check_signal()?;
            if self.consumer_done(self.now_if_timed_ns()) {
                return Ok(());
            }
            known_empty = !self.read_some(read, KernelWait::fd(&waiting_read, read.file, known_empty), sink)?;
            if !known_empty {
                continue;
            }
            self.check_waiting(self.nodes.clock.now_ns(), || format!("nothing arrived on {} ({} messages so far)", read.name, self.delivered))?;
            // A blocking read of a FIFO without a writer returns at once: wait a little for one.
            if waiting_read.is_none() {
                poll(&mut [libc::pollfd { fd: read.file.as_raw_fd(), events: libc::POLLIN, revents: 0 }])?;
            } else if self.writer_absent {
                std::thread::sleep(WRITER_LOOK);
            }
        }
    }
}

/// A FIFO read or write that waits in the kernel, as a blocking `dd`'s does: once the pipe is
/// known empty (a read came back short or found nothing) or full (a write did), the next call
/// is a blocking one, one system call per wake-up instead of poll() then the call. Above all a
/// consumer that waits this way never polls its FIFO: Linux marks a pipe that was ever polled
/// (`poll_usage`) and from then on every write into it wakes the readers' wait queue, taking its
/// lock, even when the pipe was not empty — 12 % of a 64-byte stream's rate on one CPU
/// (performance.md, "Message streaming through a FIFO"). The blocking call goes through
/// a second open file description of the same FIFO (`/proc/self/fd/N`, O_NONBLOCK cleared), so
/// the node's own descriptor stays non-blocking for the call that cannot know whether it would
/// wait (and finds the wait's start, the bubble's); a [`SliceAlarm`] interrupts the blocking
/// call every slice so Ctrl-C, the deadline and a stalled peer are still seen. None (poll()
/// waits) for other nodes, whose drivers' blocking calls may not end on a signal, or when the
/// alarm or the second description cannot be had.
struct KernelWait {
    blocking: File,
    _alarm: SliceAlarm,
}

impl KernelWait {
    fn start(node: &File, write: bool) -> Option<Self> {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        if !node.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
            return None;
        }
        let alarm = SliceAlarm::start()?;
        let path = format!("/proc/self/fd/{}", node.as_raw_fd());
        // Non-blocking to open (a FIFO's open would wait for the other end), blocking to use.
        let blocking = std::fs::OpenOptions::new().read(!write).write(write).custom_flags(libc::O_NONBLOCK).open(path).ok()?;
        devfile::set_blocking(&blocking, true).ok()?;
        Some(KernelWait { blocking, _alarm: alarm })
    }

    /// The descriptor for the next call: the blocking one when it would wait.
    fn fd(wait: &Option<KernelWait>, node: &File, would_wait: bool) -> RawFd {
        match wait {
            Some(wait) if would_wait => wait.blocking.as_raw_fd(),
            _ => node.as_raw_fd(),
        }
    }
}

/// A message as a consumer that did not produce it sees it: numbered in arrival order.
fn consumed(sequence: u64, bytes: usize, seen_ns: f64, occupancy: u32, wait_ns: f64) -> MessageEvent {
    MessageEvent {
        sequence,
        bytes: bytes as u32,
        device_start_ns: None,
        device_done_ns: None,
        host_seen_ns: seen_ns,
        host_released_ns: seen_ns,
        ring_occupancy: occupancy,
        wait_before_ns: wait_ns,
        // The consumer found nothing to read: the producer had nothing to send.
        wait_cause: if wait_ns > 0.0 { WaitCause::ProducerIdle } else { WaitCause::None },
    }
}

/// The producer (this process) waited for room: the consumer had every buffer full.
fn producer_cause(wait_ns: f64) -> WaitCause {
    if wait_ns > 0.0 {
        WaitCause::NoFreeBuffer
    } else {
        WaitCause::None
    }
}

/// Messages' worth of bytes waiting in a pipe (a partly filled one counts); 0 where the node
/// does not say (a driver without FIONREAD).
fn messages_waiting(fd: RawFd, message_bytes: usize) -> u32 {
    let mut bytes: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int; nodes that do not know it fail with ENOTTY.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut bytes) };
    if rc == 0 && bytes > 0 {
        (bytes as usize).div_ceil(message_bytes) as u32
    } else {
        0
    }
}

/// The other end of `fd` was open and closed (POLLHUP).
fn hung_up(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no waiting.
    unsafe { libc::poll(&mut pfd, 1, 0) > 0 && pfd.revents & libc::POLLHUP != 0 }
}

fn closed_on_write(error: EngineError, name: &str) -> EngineError {
    match error {
        EngineError::Io { source, .. } if source.raw_os_error() == Some(libc::EPIPE) => {
            EngineError::Io { what: format!("write to {name}: the peer closed its end (EPIPE)"), source }
        }
        EngineError::Io { source, .. } => EngineError::Io { what: format!("write to {name}"), source },
        other => other,
    }
}

/// Wait up to one [`crate::cancel::POLL_SLICE`] for any of `fds`; the caller then retries and
/// looks at the signal flag. A hang-up shows as ready, so the next read or write reports it.
fn poll(fds: &mut [libc::pollfd]) -> Result<(), Stop> {
    let ms = crate::cancel::POLL_SLICE.as_millis() as i32;
    // SAFETY: `fds` is a valid array of pollfd.
    if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) } < 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(Stop::Failed(EngineError::Io { what: "poll".into(), source: error }));
        }
    }
    Ok(())
}

fn uring(depth: u32) -> Result<IoUring, String> {
    super::block::uring(depth as usize)
}

/// `user_data` of the one write in flight (both ways); reads carry their slot's index.
const WRITE_TAG: u64 = u64::MAX - 1;

/// Packet reads kept in flight on io_uring, each into a buffer of its own; both ways, the
/// producer's one write in flight beside them.
struct PacketReader {
    ring: IoUring,
    slots: Vec<Vec<u8>>,
    /// Reads and the write submitted and not yet reaped.
    in_flight: usize,
    writing: bool,
    /// Completions of the last look: (user_data, result).
    done: Vec<(u64, i32)>,
}

impl PacketReader {
    fn new(plan: &RingPlan) -> Result<PacketReader, String> {
        let depth = plan.host_buffers.clamp(1, MAX_READS_IN_FLIGHT);
        // One entry more for the write of a both-ways stream.
        let ring = uring(depth + 1)?;
        let slots = (0..depth).map(|_| vec![0; plan.buffer_bytes as usize]).collect();
        Ok(PacketReader { ring, slots, in_flight: 0, writing: false, done: Vec::with_capacity(depth as usize + 1) })
    }

    fn submit(&mut self, fd: RawFd, slot: usize) {
        let buffer = &mut self.slots[slot];
        // Offset -1: the file's position where it has one (a stand-in file), ignored by streams.
        let read = opcode::Read::new(types::Fd(fd), buffer.as_mut_ptr(), buffer.len() as u32).offset(u64::MAX).build().user_data(slot as u64);
        // SAFETY: the buffer stays allocated until its completion is reaped (or is leaked, below).
        unsafe { self.ring.submission().push(&read) }.expect("the ring has an entry per slot");
        self.in_flight += 1;
    }

    /// Every slot's read in flight, handed to the kernel.
    fn start_reads(&mut self, fd: RawFd) -> Result<(), Stop> {
        for slot in 0..self.slots.len() {
            self.submit(fd, slot);
        }
        self.flush()
    }

    fn flush(&mut self) -> Result<(), Stop> {
        self.ring.submit().map(drop).map_err(|source| Stop::Failed(EngineError::Io { what: "io_uring_enter".into(), source }))
    }

    /// Wait up to one [`crate::cancel::POLL_SLICE`] for a completion.
    fn wait(&mut self) -> Result<(), Stop> {
        let ts = types::Timespec::from(crate::cancel::POLL_SLICE);
        match self.ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts)) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)) => Ok(()),
            Err(source) => Err(Stop::Failed(EngineError::Io { what: "io_uring_enter".into(), source })),
        }
    }

    /// Collect the completions there are; true when there were any.
    fn look(&mut self) -> bool {
        self.done.clear();
        self.done.extend(self.ring.completion().map(|cqe| (cqe.user_data(), cqe.result())));
        self.in_flight -= self.done.len();
        !self.done.is_empty()
    }

    fn consume(mut self, run: &mut Run<'_, '_>, sink: &mut dyn MessageSink) -> Result<(), Stop> {
        let read = run.nodes.read.as_ref().expect("checked");
        let outcome = self.start_reads(read.file.as_raw_fd()).and_then(|()| self.reap(run, read, sink));
        self.cancel_in_flight();
        outcome
    }

    fn reap(&mut self, run: &mut Run<'_, '_>, read: &Node<'_>, sink: &mut dyn MessageSink) -> Result<(), Stop> {
        loop {
            run.check_signal()?;
            if run.consumer_done(run.nodes.clock.now_ns()) {
                return Ok(());
            }
            if !self.look() {
                let now = run.nodes.clock.now_ns();
                run.waiting_since_ns.get_or_insert(now);
                run.check_waiting(now, || format!("no packet arrived on {} ({} messages so far)", read.name, run.delivered))?;
                self.wait()?;
                continue;
            }
            self.take_reads(run, read, sink)?;
            self.flush()?;
        }
    }

    /// The completed reads of the last look: each packet one message to the sink, its slot's
    /// read put back in flight (not yet handed to the kernel: [`PacketReader::flush`]).
    fn take_reads(&mut self, run: &mut Run<'_, '_>, read: &Node<'_>, sink: &mut dyn MessageSink) -> Result<(), Stop> {
        let fd = read.file.as_raw_fd();
        let reads = self.done.iter().filter(|(tag, _)| *tag != WRITE_TAG).count();
        if reads == 0 {
            return Ok(());
        }
        let seen_ns = run.nodes.clock.now_ns();
        run.last_progress_ns = seen_ns;
        let mut wait_ns = run.waiting_since_ns.take().filter(|_| run.delivered > 0).map_or(0.0, |since| seen_ns - since);
        for index in 0..self.done.len() {
            let (tag, result) = self.done[index];
            if tag == WRITE_TAG {
                continue;
            }
            let slot = tag as usize;
            if result == -libc::EINTR || result == -libc::EAGAIN {
                self.submit(fd, slot);
                continue;
            }
            if result < 0 {
                let source = std::io::Error::from_raw_os_error(-result);
                return Err(Stop::Failed(EngineError::Io { what: format!("read from {}", read.name), source }));
            }
            if result == 0 {
                return Err(Stop::Failed(run.closed_on_read(read)));
            }
            if run.consumer_done(seen_ns) {
                return Ok(());
            }
            let packet = &self.slots[slot][..result as usize];
            let sequence = run.consumed_sequence(read_stamp(packet));
            let left = self.done[index..].iter().filter(|(tag, _)| *tag != WRITE_TAG).count();
            let event = consumed(sequence, packet.len(), seen_ns, left as u32, wait_ns);
            wait_ns = 0.0;
            run.hand(sink, &event)?;
            self.submit(fd, slot);
        }
        Ok(())
    }

    /// Both ways on packet nodes: the reads in flight as [`PacketReader::consume`] keeps them,
    /// and the producer's messages written one write in flight (an XDMA h2c write blocks in the
    /// driver until its descriptors are done, so it is the message's time; a partial write is
    /// resumed). All waiting is one io_uring wait.
    fn both(mut self, producer: &mut Run<'_, '_>, consumer: &mut Run<'_, '_>, d2h_sink: &mut dyn MessageSink, h2d_sink: &mut dyn MessageSink) -> Result<(), Stop> {
        let read = consumer.nodes.read.as_ref().expect("checked");
        let outcome = self.start_reads(read.file.as_raw_fd()).and_then(|()| self.both_loop(producer, consumer, d2h_sink, h2d_sink));
        if !self.cancel_in_flight() {
            // The write the kernel kept still points at the message: never freed under it.
            std::mem::forget(std::mem::take(&mut producer.out));
        }
        outcome
    }

    fn both_loop(&mut self, producer: &mut Run<'_, '_>, consumer: &mut Run<'_, '_>, d2h_sink: &mut dyn MessageSink, h2d_sink: &mut dyn MessageSink) -> Result<(), Stop> {
        let (write, read) = (producer.nodes.write.as_ref().expect("checked"), consumer.nodes.read.as_ref().expect("checked"));
        let write_fd = write.file.as_raw_fd();
        loop {
            both_signalled(producer, consumer)?;
            if !self.writing && producer.producing() {
                let rest = producer.next_write();
                let entry = opcode::Write::new(types::Fd(write_fd), rest.as_ptr(), rest.len() as u32).offset(u64::MAX).build().user_data(WRITE_TAG);
                // SAFETY: the producer's message buffer outlives the write: it is reaped, or
                // cancelled before `producer` is dropped, or kept by the kernel and then leaked.
                unsafe { self.ring.submission().push(&entry) }.expect("the ring has an entry for the write");
                self.in_flight += 1;
                self.writing = true;
                self.flush()?;
            }
            let consuming = !consumer.consumer_done(consumer.now_if_timed_ns());
            if !consuming && !self.writing {
                return Ok(());
            }
            if !self.look() {
                let now = producer.nodes.clock.now_ns();
                if self.writing {
                    producer.check_waiting(now, || producer.stall(true, false))?;
                }
                if consuming {
                    consumer.waiting_since_ns.get_or_insert(now);
                    consumer.check_waiting(now, || format!("no packet arrived on {} ({} messages so far)", read.name, consumer.delivered))?;
                }
                self.wait()?;
                continue;
            }
            if let Some(&(_, result)) = self.done.iter().find(|(tag, _)| *tag == WRITE_TAG) {
                self.writing = false;
                match result {
                    n if n > 0 => producer.wrote(n as usize, write_fd, true, h2d_sink)?,
                    n if n == 0 || n == -libc::EINTR || n == -libc::EAGAIN => {}
                    n => {
                        let source = std::io::Error::from_raw_os_error(-n);
                        return Err(Stop::Failed(closed_on_write(EngineError::Io { what: String::new(), source }, &write.name)));
                    }
                }
            }
            if consuming {
                self.take_reads(consumer, read, d2h_sink)?;
            }
            self.flush()?;
        }
    }

    /// Cancel the reads still in flight and collect them; reads the kernel will not give back
    /// (a hung driver) keep their buffers: the ring and its buffers are then leaked, never freed
    /// under the kernel's feet.
    /// False when something stayed with the kernel (then the caller leaks what it references).
    fn cancel_in_flight(mut self) -> bool {
        if self.in_flight == 0 {
            return true;
        }
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any()).build().user_data(u64::MAX);
        // SAFETY: a cancel request references no buffer.
        let _ = unsafe { self.ring.submission().push(&cancel) };
        let end = std::time::Instant::now() + CANCEL_GRACE;
        while self.in_flight > 0 {
            let Some(left) = end.checked_duration_since(std::time::Instant::now()).filter(|l| !l.is_zero()) else { break };
            let ts = types::Timespec::from(left);
            let _ = self.ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
            let returned = self.ring.completion().filter(|cqe| cqe.user_data() != u64::MAX).count();
            self.in_flight = self.in_flight.saturating_sub(returned);
        }
        if self.in_flight > 0 {
            std::mem::forget(self);
            return false;
        }
        true
    }
}
