//! `pcieperf stream`: messages through ring buffers (document 003), on any engine that offers
//! [`crate::engine::ring::Streaming`]. The engine hands every message to a [`record::Recorder`];
//! this module turns the record into the document: throughput, latency percentiles, the ring's
//! occupancy, bubbles by cause, drops, anomalies, and a verdict naming the limit.

pub mod fit;
pub mod record;
pub mod summary;

use serde::{Deserialize, Serialize};

use crate::engine::ring::{RingPlan, StreamEnd, StreamStop};
use crate::engine::{Engine, EngineError, EngineInfo};
use crate::error::InvalidInput;

pub use summary::{BubbleClass, Latency, Point, RingShare, Throughput, Verdict};

pub const SCHEMA: &str = "pcieperf.stream/1";

/// What to run: one plan per message size (one size, or a sweep).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamOptions {
    /// The plan; its `message_bytes` is replaced by each of `message_sizes`.
    pub plan: RingPlan,
    pub message_sizes: Vec<u32>,
    /// Bubbles longer than this are kept one by one.
    pub bubble_threshold_ns: f64,
    /// Host memory the ring may take at most (the machine's), bytes; `None`: not checked.
    pub host_memory_bytes: Option<u64>,
    pub seed: u64,
}

/// The stream's document (`pcieperf.stream/1`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamDocument {
    pub schema: String,
    pub target: String,
    /// The figures come from a simulation (virtual time), not from hardware.
    pub simulated: bool,
    pub engine: EngineInfo,
    /// The link the engine models, where it has one.
    pub link: Option<crate::model::Conditions>,
    pub plan: RingPlan,
    pub seed: u64,
    pub tool_version: String,
    /// One per message size, in the order run.
    pub points: Vec<Point>,
    /// A sweep's per-message overhead, fitted to the sawtooth at multiples of MPS.
    pub overhead_fit: Option<fit::OverheadFit>,
    /// Why the run stopped early, if it did (a signal: the points so far are complete).
    pub stopped_early: Option<String>,
}

/// The machine's memory (MemTotal), where Linux tells it.
pub fn host_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuse plans no engine could run, in one line each (exit 2 at the command line).
pub fn check(options: &StreamOptions) -> Result<(), InvalidInput> {
    let plan = &options.plan;
    if plan.host_buffers == 0 || plan.device_buffers == 0 {
        return Err(InvalidInput::new(format!(
            "invalid ring: {} host and {} device buffers; each needs at least 1",
            plan.host_buffers, plan.device_buffers
        )));
    }
    if plan.buffer_bytes == 0 {
        return Err(InvalidInput::new("invalid ring: buffers of 0 bytes"));
    }
    if options.message_sizes.is_empty() {
        return Err(InvalidInput::new("invalid stream: no message size"));
    }
    for &size in &options.message_sizes {
        if size == 0 || size > plan.buffer_bytes {
            return Err(InvalidInput::new(format!(
                "invalid message size {size} bytes: a message must fit one buffer of {} bytes (and be at least 1 byte)",
                plan.buffer_bytes
            )));
        }
    }
    let ring_bytes = u64::from(plan.host_buffers) * u64::from(plan.buffer_bytes);
    if let Some(memory) = options.host_memory_bytes {
        if ring_bytes > memory / 2 {
            return Err(InvalidInput::new(format!(
                "invalid ring: {} host buffers × {} bytes = {} bytes do not fit host memory ({} bytes; the ring may take half)",
                plan.host_buffers, plan.buffer_bytes, ring_bytes, memory
            )));
        }
    }
    match plan.stop {
        StreamStop::Messages(0) => Err(InvalidInput::new("invalid stream: 0 messages")),
        StreamStop::Duration(d) if d.is_zero() => Err(InvalidInput::new("invalid stream: a duration of 0")),
        _ => Ok(()),
    }
}

/// Stream every message size of `options` through `engine`.
pub fn run(engine: &mut dyn Engine, options: &StreamOptions) -> Result<StreamDocument, EngineError> {
    check(options)?;
    let info = engine.info().clone();
    let link = engine.conditions();
    let streaming = engine.streaming().ok_or_else(|| {
        EngineError::Unsupported(format!("{} cannot stream messages (no ring buffers); targets that can: sim, cosim, chardev, xillybus, xdma", info.kind))
    })?;
    let mut points = Vec::new();
    let mut stopped_early = None;
    for &size in &options.message_sizes {
        let plan = RingPlan { message_bytes: size, ..options.plan.clone() };
        streaming.check(&plan)?;
        let (point, end) = run_point(streaming, &plan, options, link.as_ref().map(|c| &c.params))?;
        points.push(point);
        if end.stopped_early.is_some() {
            stopped_early = end.stopped_early;
            break;
        }
    }
    let overhead_fit = link.as_ref().and_then(|c| fit::fit(&points, &c.params));
    Ok(StreamDocument {
        schema: SCHEMA.into(),
        target: info.target.clone(),
        simulated: info.simulated,
        engine: info,
        link,
        plan: options.plan.clone(),
        seed: options.seed,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        points,
        overhead_fit,
        stopped_early,
    })
}

/// Messages per throughput window: 64 windows over a counted stream, 1024 messages otherwise
/// (the recorder doubles them as the stream grows, keeping the count bounded).
fn window_messages(stop: StreamStop) -> u64 {
    match stop {
        StreamStop::Messages(n) => (n / 64).max(1),
        StreamStop::Duration(_) => 1024,
    }
}

fn run_point(
    streaming: &mut dyn crate::engine::ring::Streaming,
    plan: &RingPlan,
    options: &StreamOptions,
    link: Option<&crate::model::LinkParams>,
) -> Result<(Point, StreamEnd), EngineError> {
    let mut recorder = record::Recorder::new(plan.host_buffers, window_messages(plan.stop), options.bubble_threshold_ns);
    let end = streaming.stream(plan, &mut recorder)?;
    recorder.finish();
    // The model (`model::stream`) is of d2h push (document 003's OCDP): a pull or h2d run gets
    // no bounds rather than push bounds that would read as a shortfall.
    let modelled = plan.direction == crate::engine::ring::StreamDirection::D2h && plan.transport == crate::engine::ring::Transport::Push;
    Ok((summary::point(plan, &recorder, &end, link.filter(|_| modelled)), end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ring::{Backpressure, StreamDirection, Transport};

    fn options(sizes: Vec<u32>) -> StreamOptions {
        StreamOptions {
            plan: RingPlan {
                direction: StreamDirection::D2h,
                transport: Transport::Push,
                backpressure: Backpressure::Lossless,
                host_buffers: 200,
                device_buffers: 2,
                buffer_bytes: 16384,
                message_bytes: 16384,
                stop: StreamStop::Messages(10),
            },
            message_sizes: sizes,
            bubble_threshold_ns: 1000.0,
            host_memory_bytes: Some(1 << 30),
            seed: 1,
        }
    }

    #[test]
    fn bad_plans_are_one_line() {
        assert!(check(&options(vec![16384])).is_ok());
        assert!(check(&options(vec![16385])).unwrap_err().0.contains("fit one buffer"));
        let mut zero = options(vec![64]);
        zero.plan.host_buffers = 0;
        assert!(check(&zero).unwrap_err().0.contains("at least 1"));
        let mut huge = options(vec![64]);
        huge.plan.host_buffers = 1 << 20;
        assert!(check(&huge).unwrap_err().0.contains("host memory"));
    }
}
