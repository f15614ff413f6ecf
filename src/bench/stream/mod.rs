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
    /// `--direction both`: `points` are the d2h ring's, these the h2d ring's that ran at the
    /// same time on the same link, and their sum. Absent for one direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub both: Option<BothDirections>,
}

/// The h2d half of a `--direction both` run, and the two directions together.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BothDirections {
    /// One per message size, as `points` (the plan with direction h2d).
    pub h2d_points: Vec<Point>,
    pub sum: Vec<BothSum>,
}

/// One message size in both directions at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BothSum {
    pub message_bytes: u32,
    #[serde(rename = "d2h_MBps")]
    pub d2h_mbps: f64,
    #[serde(rename = "h2d_MBps")]
    pub h2d_mbps: f64,
    /// The two sustained rates added: payload the link carried per second, both ways.
    #[serde(rename = "sum_MBps")]
    pub sum_mbps: f64,
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
    let streaming = streaming(engine, &info)?;
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
    Ok(StreamDocument::new(info, link, options.plan.clone(), options.seed, points, overhead_fit, stopped_early, None))
}

/// Stream every message size of `options` in both directions at once: the d2h ring of its
/// plan and the h2d ring of the same shape and mode (push or pull, lossless or lossy), on the
/// same link. Engines without two rings at once (or without that mode) refuse in one line.
pub fn run_both(engine: &mut dyn Engine, options: &StreamOptions) -> Result<StreamDocument, EngineError> {
    use crate::engine::ring::StreamDirection;
    check(options)?;
    let mut d2h_options = options.clone();
    d2h_options.plan.direction = StreamDirection::D2h;
    let info = engine.info().clone();
    let link = engine.conditions();
    let params = link.as_ref().map(|c| &c.params);
    let streaming = streaming(engine, &info)?;
    let (mut points, mut h2d_points, mut sum) = (Vec::new(), Vec::new(), Vec::new());
    let mut stopped_early = None;
    for &size in &options.message_sizes {
        let plan = RingPlan { message_bytes: size, ..d2h_options.plan.clone() };
        let h2d_plan = RingPlan { direction: StreamDirection::H2d, ..plan.clone() };
        let mut d2h = recorder(&plan, options);
        let mut h2d = recorder(&h2d_plan, options);
        let [d2h_end, h2d_end] = streaming.stream_both(&plan, [&mut d2h, &mut h2d])?;
        d2h.finish();
        h2d.finish();
        let d2h_point = summary::point(&plan, &d2h, &d2h_end, params);
        let h2d_point = summary::point(&h2d_plan, &h2d, &h2d_end, params);
        let (d, h) = (d2h_point.throughput.sustained_mbps, h2d_point.throughput.sustained_mbps);
        sum.push(BothSum { message_bytes: size, d2h_mbps: d, h2d_mbps: h, sum_mbps: d + h });
        points.push(d2h_point);
        h2d_points.push(h2d_point);
        if d2h_end.stopped_early.is_some() {
            stopped_early = d2h_end.stopped_early;
            break;
        }
    }
    // Each direction's time per message includes the other's traffic: no overhead fit.
    let both = Some(BothDirections { h2d_points, sum });
    Ok(StreamDocument::new(info, link, d2h_options.plan, options.seed, points, None, stopped_early, both))
}

impl StreamDocument {
    /// The document of a run on `engine`, this build's schema and version.
    #[allow(clippy::too_many_arguments)]
    fn new(
        engine: EngineInfo,
        link: Option<crate::model::Conditions>,
        plan: RingPlan,
        seed: u64,
        points: Vec<Point>,
        overhead_fit: Option<fit::OverheadFit>,
        stopped_early: Option<String>,
        both: Option<BothDirections>,
    ) -> StreamDocument {
        StreamDocument {
            schema: SCHEMA.into(),
            target: engine.target.clone(),
            simulated: engine.simulated,
            engine,
            link,
            plan,
            seed,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            points,
            overhead_fit,
            stopped_early,
            both,
        }
    }
}

fn streaming<'e>(engine: &'e mut dyn Engine, info: &EngineInfo) -> Result<&'e mut dyn crate::engine::ring::Streaming, EngineError> {
    engine.streaming().ok_or_else(|| {
        EngineError::Unsupported(format!("{} cannot stream messages (no ring buffers); targets that can: sim, cosim, chardev, xillybus, xdma", info.kind))
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
    let mut recorder = recorder(plan, options);
    let end = streaming.stream(plan, &mut recorder)?;
    recorder.finish();
    Ok((summary::point(plan, &recorder, &end, link), end))
}

fn recorder(plan: &RingPlan, options: &StreamOptions) -> record::Recorder {
    record::Recorder::new(summary::occupancy_buffers(plan), window_messages(plan.stop), options.bubble_threshold_ns)
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
