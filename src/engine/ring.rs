//! Message streaming through ring buffers (document 003): the contract a streaming engine
//! implements, as [`super::Engine::transfer`] is the contract for bulk DMA.
//!
//! A producer moves fixed-size messages into a ring of the consumer's buffers; the consumer sees
//! each message complete (a flag, a read returning, an interrupt), uses it and releases the
//! buffer (a doorbell, the next read). The engine reports every message as one
//! [`MessageEvent`]; `bench::stream` turns the events into throughput, latency, ring occupancy,
//! bubbles and drops, and never asks which engine produced them. An engine offers streaming
//! through [`super::Engine::streaming`], as it offers registers through `mmio`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{EngineError, EngineInfo};

/// Who produces the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamDirection {
    /// The device produces, the host consumes (XDMA C2H, document 003's "from device").
    D2h,
    /// The host produces, the device consumes (XDMA H2C).
    H2d,
}

/// How a message crosses the link (document 003: OCDP's push and pull modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// The producer writes into the consumer's buffer (posted writes).
    Push,
    /// The consumer reads from the producer's buffer, one read in flight.
    Pull,
}

/// What the producer does when no buffer is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backpressure {
    /// Wait for a free buffer: nothing is ever lost.
    Lossless,
    /// Drop the message (its sequence number is skipped): a sensor that cannot wait.
    Lossy,
}

/// When a stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamStop {
    Messages(u64),
    /// On the engine's clock (virtual time for simulated engines).
    Duration(Duration),
}

/// One stream to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RingPlan {
    pub direction: StreamDirection,
    pub transport: Transport,
    pub backpressure: Backpressure,
    /// Buffers of the consumer's ring in host memory (document 003: 200).
    pub host_buffers: u32,
    /// Buffers on the device (document 003: 2).
    pub device_buffers: u32,
    pub buffer_bytes: u32,
    /// Payload of every message; at most `buffer_bytes`.
    pub message_bytes: u32,
    pub stop: StreamStop,
}

/// Why the producer was idle before a message started (a bubble), as far as the engine knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitCause {
    /// No bubble: the message started as soon as the previous one ended.
    None,
    /// Every buffer of the consumer was full: the consumer is the limit.
    NoFreeBuffer,
    /// The link's flow-control credits ran out.
    Credits,
    /// The producer's own pause between messages (OCDP's dwell).
    DeviceDwell,
    /// The consumer released the buffer late (its reaction time, not the ring's size).
    HostLate,
    /// The producer had nothing to send (an upstream source slower than the link).
    ProducerIdle,
    /// The engine cannot tell (a real device without device-side counters).
    Unknown,
}

/// One message as the engine saw it. Times are ns on the clock each field names.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MessageEvent {
    /// The producer's number for this message: a gap in the consumer's sequence is a drop.
    pub sequence: u64,
    pub bytes: u32,
    /// The producer started moving the message (device clock, where the engine has one).
    pub device_start_ns: Option<f64>,
    /// The producer finished (its flag write left), device clock.
    pub device_done_ns: Option<f64>,
    /// The consumer saw the message complete, host clock.
    pub host_seen_ns: f64,
    /// The consumer released the buffer, host clock.
    pub host_released_ns: f64,
    /// Full buffers in the consumer's ring just after this message landed.
    pub ring_occupancy: u32,
    /// How long the producer was idle between the previous message's end and this one's start.
    pub wait_before_ns: f64,
    pub wait_cause: WaitCause,
}

/// Where an engine hands its events: the procedure's recorder. `Err` from the sink stops the
/// stream (a full disk, a cancelled run); the engine returns what it has.
pub trait MessageSink {
    fn message(&mut self, event: &MessageEvent) -> Result<(), EngineError>;
}

/// How a stream ended, from the engine's side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEnd {
    /// Messages the producer numbered (delivered or dropped).
    pub produced: u64,
    /// Drops the producer itself counted, where it can (a lossy device ring); `bench::stream`
    /// also finds drops from sequence gaps, which the two must agree on.
    pub dropped_by_producer: Option<u64>,
    /// First message's start and the last one's release, host clock.
    pub start_ns: f64,
    pub end_ns: f64,
    /// The stream stopped early (a signal, the deadline, a closed peer): why, in one line.
    pub stopped_early: Option<String>,
    /// Messages of `produced` that the engine emitted as time-shifted copies of a simulated
    /// steady period (the sim ring's fast-forward); 0 where every message was simulated or
    /// measured.
    pub fast_forwarded: u64,
}

/// Message streaming, offered by engines that can (see [`super::Engine::streaming`]).
pub trait Streaming {
    /// The plans this engine refuses, in one line (a message larger than a buffer, a transport
    /// it lacks), before anything moves.
    fn check(&self, plan: &RingPlan) -> Result<(), EngineError>;

    /// Run one stream, handing every message to `sink` in the consumer's order. Must return
    /// within about [`crate::cancel::POLL_SLICE`] of a signal, with the events so far delivered.
    fn stream(&mut self, plan: &RingPlan, sink: &mut dyn MessageSink) -> Result<StreamEnd, EngineError>;

    /// The engine's description (the same as [`super::Engine::info`]).
    fn info(&self) -> &EngineInfo;

    /// Both directions at once on the same link (`--direction both`): the d2h ring of `plan`
    /// and the h2d ring of the same shape, each handing its messages to its own sink
    /// (`sinks[0]` d2h, `sinks[1]` h2d); ends in the same order. `plan.direction` is ignored.
    /// Engines without two rings at once refuse in one line (the default).
    fn stream_both(&mut self, plan: &RingPlan, sinks: [&mut dyn MessageSink; 2]) -> Result<[StreamEnd; 2], EngineError> {
        let _ = (plan, sinks);
        Err(crate::error::InvalidInput::new(format!(
            "--direction both: {} streams one direction at a time (two at once: targets sim, chardev, xillybus, xdma); run d2h and h2d one after the other",
            self.info().kind
        ))
        .into())
    }
}
