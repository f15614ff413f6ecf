//! `pcieperf stream`: flags → a ring plan → `bench::stream` → the view table.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::bench::stream::{self, StreamOptions};
use crate::engine::ring::{Backpressure, RingPlan, StreamDirection, StreamStop, Transport};
use crate::engine::OpenOptions;
use crate::error::InvalidInput;
use crate::report::output;
use crate::report::view::{self, Document, Format, ViewOptions};

/// Stream messages through ring buffers (document 003): throughput, per-message latency, ring
/// occupancy, bubbles, drops, and the model beside them.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf stream                                   # sim:doc003, document 003's ring, 2000 messages
  pcieperf stream --target sim:doc003,host_use_ns=40000 --host-bufs 16
  pcieperf stream --msg-size 64..64KiB --messages 500 --csv
  pcieperf stream --target sim:doc003,host_stall_every=50,host_stall_ns=300000 --lossy --html s.html

The simulated endpoint's ring behaviour is set on its target: dwell_ns, react_ns, react_jitter_ns,
host_use_ns, host_stall_every, host_stall_ns (see docs/stream.md). Exit codes: 0 done, 1 the
engine failed or an output could not be written, 2 bad input (one line on stderr), 130 interrupted
(the messages so far are written).")]
pub struct StreamArgs {
    /// The engine and its device, e.g. sim:doc003.
    #[arg(long, default_value = "sim:doc003")]
    pub target: String,
    /// A named configuration: doc003 (Gen1 x4, MPS 128, 16 KiB buffers, 200 host / 2 device
    /// buffers, 16352-byte messages) on the simulated endpoint, unless --target is given.
    #[arg(long, value_parser = ["doc003"])]
    pub preset: Option<String>,
    /// Buffers in the host's ring.
    #[arg(long, default_value_t = 200)]
    pub host_bufs: u32,
    /// Buffers on the device.
    #[arg(long, default_value_t = 2)]
    pub dev_bufs: u32,
    /// Bytes per buffer.
    #[arg(long, value_parser = super::values::size, default_value = "16KiB")]
    pub buf_size: u64,
    /// Message payload: one size (16352, 4KiB) or a sweep (64..64KiB, 64,128,4KiB).
    #[arg(long, default_value = "16352")]
    pub msg_size: String,
    /// The consumer reads from the producer's buffers (one read in flight) instead of the
    /// producer writing into the consumer's; with --direction both, on both rings.
    #[arg(long, conflicts_with = "push")]
    pub pull: bool,
    /// The producer writes into the consumer's buffers (the default).
    #[arg(long)]
    pub push: bool,
    /// Drop messages when no buffer is free instead of waiting; with --direction both, both
    /// producers (the d2h device and the h2d host).
    #[arg(long)]
    pub lossy: bool,
    /// d2h (device produces), h2d (host produces), or both at once on the same link.
    #[arg(long, default_value = "d2h", value_parser = ["d2h", "h2d", "both"])]
    pub direction: String,
    /// Messages per size.
    #[arg(long, conflicts_with = "duration")]
    pub messages: Option<u64>,
    /// Time per size on the engine's clock (virtual time for simulators), e.g. 10ms.
    #[arg(long)]
    pub duration: Option<String>,
    /// Bubbles longer than this are listed one by one, e.g. 2us.
    #[arg(long, default_value = "1us")]
    pub bubble_threshold: String,
    /// Print the pcieperf.stream/1 JSON document on stdout.
    #[arg(long, conflicts_with_all = ["csv", "metrics"])]
    pub json: bool,
    /// Print one CSV row per message size.
    #[arg(long, conflicts_with = "metrics")]
    pub csv: bool,
    /// Print Prometheus metrics.
    #[arg(long)]
    pub metrics: bool,
    /// Write the JSON document to this file.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Write an HTML report (occupancy over time, latency CDF, bubble histogram) to this file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Seed for simulated behaviour.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Messages per size when neither --messages nor --duration is given.
pub const DEFAULT_MESSAGES: u64 = 2000;

fn options(args: &StreamArgs) -> Result<StreamOptions, InvalidInput> {
    // `both` runs the d2h plan and its h2d twin, in the same mode, at once (`stream::run_both`).
    let direction = if args.direction == "h2d" { StreamDirection::H2d } else { StreamDirection::D2h };
    let buffer_bytes = u32::try_from(args.buf_size).map_err(|_| InvalidInput::new(format!("invalid --buf-size {}: at most 4 GiB − 1", args.buf_size)))?;
    let sizes = crate::units::parse_size_list(&args.msg_size)?;
    let message_sizes = sizes
        .iter()
        .map(|&s| u32::try_from(s).map_err(|_| InvalidInput::new(format!("invalid message size {s} bytes: a message must fit one buffer of {buffer_bytes} bytes"))))
        .collect::<Result<Vec<u32>, _>>()?;
    let stop = match (&args.duration, args.messages) {
        (Some(text), _) => StreamStop::Duration(crate::units::parse_duration(text)?),
        (None, Some(n)) => StreamStop::Messages(n),
        (None, None) => StreamStop::Messages(DEFAULT_MESSAGES),
    };
    let bubble_threshold: Duration = crate::units::parse_duration(&args.bubble_threshold)?;
    Ok(StreamOptions {
        plan: RingPlan {
            direction,
            transport: if args.pull { Transport::Pull } else { Transport::Push },
            backpressure: if args.lossy { Backpressure::Lossy } else { Backpressure::Lossless },
            host_buffers: args.host_bufs,
            device_buffers: args.dev_bufs,
            buffer_bytes,
            message_bytes: message_sizes[0],
            stop,
        },
        message_sizes,
        bubble_threshold_ns: bubble_threshold.as_secs_f64() * 1e9,
        host_memory_bytes: stream::host_memory_bytes(),
        seed: args.seed,
    })
}

pub fn run(args: StreamArgs) -> anyhow::Result<i32> {
    let outputs: Vec<&std::path::Path> = [args.out.as_deref(), args.html.as_deref()].into_iter().flatten().collect();
    output::check_all(&outputs, &[])?;
    let options = options(&args)?;
    stream::check(&options)?;
    let target = match (&args.preset, args.target.as_str()) {
        (Some(preset), "sim:doc003") => format!("sim:{preset}"),
        _ => args.target.clone(),
    };
    let mut engine = crate::engine::open(&target, &OpenOptions { seed: args.seed, ..OpenOptions::default() })?;
    let document = match args.direction.as_str() {
        "both" => stream::run_both(engine.as_mut(), &options)?,
        _ => stream::run(engine.as_mut(), &options)?,
    };
    super::engine_notes(engine.as_ref());
    let document = Document::Stream(document);
    let interrupted = matches!(&document, Document::Stream(d) if d.stopped_early.is_some());
    let view_options = ViewOptions::default();
    if let Some(path) = &args.out {
        output::write(path, &view::render(&document, Format::Json, &view_options)?)?;
    }
    if let Some(path) = &args.html {
        output::write(path, &view::render(&document, Format::Html, &view_options)?)?;
        output::written("HTML report", path);
    }
    let format = if args.json { Format::Json } else if args.csv { Format::Csv } else if args.metrics { Format::Metrics } else { Format::Text };
    view::print(&document, format, &view_options)?;
    Ok(if interrupted { crate::cancel::EXIT_INTERRUPTED } else { 0 })
}
