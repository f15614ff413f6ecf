//! `pcieperf demo`: the performance-demo register flow of document 001 §4 against a target.

use std::time::Duration;

use clap::Args;
use serde::Serialize;

use crate::bench::demo::{self, run_demo, DemoOptions, DemoReport};
use crate::model::Mode;
use crate::engine::{open, EngineInfo, OpenOptions};
use crate::table::{Align, Table};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf demo                                  document 001's demo on its simulated board
  pcieperf demo --target sim:gen5x16 --write
  pcieperf demo --target sim:doc001 --json

Document 001 is named on docs/sources.md. Exit codes: 0 success, 1 engine error, 2 bad input.")]
pub struct DemoArgs {
    /// Target with the performance-demo endpoint's registers (see `pcieperf dma --help` for syntax).
    #[arg(long, default_value = "sim:doc001")]
    pub target: String,
    /// Run "Start Write" (device→host, d2h). Without --write/--read/--read-write all three run.
    #[arg(long)]
    pub write: bool,
    /// Run "Start Read" (host→device, h2d).
    #[arg(long)]
    pub read: bool,
    /// Run "Start Read/Write" (both at once).
    #[arg(long)]
    pub read_write: bool,
    /// Block amount (step 4): bytes per direction = 0x2000 × N. Default: the document's
    /// 0xA343C × link multiplier; co-simulated targets default to 8 (64 KiB), as simulating
    /// the document's gigabytes of RTL activity would take days. At least 1; at most 2^27
    /// (1 TiB per direction, pcieperf's largest transfer).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_BLOCK_AMOUNT))]
    pub block_amount: Option<u32>,
    /// Seed for simulated behaviour.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `pcieperf demo --json`, named as every pcieperf document is.
pub const SCHEMA: &str = "pcieperf.demo/1";

#[derive(Serialize)]
struct DemoOutput<'a> {
    schema: &'static str,
    pcieperf_version: &'static str,
    simulated: bool,
    engine: &'a EngineInfo,
    seed: u64,
    notes: &'a [String],
    demo: &'a DemoReport,
}

/// The largest block amount: 0x2000 bytes × 2^27 = 1 TiB per direction.
const MAX_BLOCK_AMOUNT: i64 = (crate::units::MAX_SIZE_BYTES / 0x2000) as i64;

/// Block amount of a co-simulated demo: 8 × 8 KiB = 64 KiB per direction.
const COSIM_BLOCK_AMOUNT: u32 = 8;

pub fn run(args: DemoArgs) -> anyhow::Result<i32> {
    let chosen: Vec<Mode> = [(args.write, Mode::D2h), (args.read, Mode::H2d), (args.read_write, Mode::Both)]
        .into_iter()
        .filter_map(|(on, mode)| on.then_some(mode))
        .collect();
    let mut options = DemoOptions {
        modes: if chosen.is_empty() { demo::MODES.to_vec() } else { chosen },
        block_amount: args.block_amount,
        ..DemoOptions::default()
    };
    let mut engine = open(&args.target, &OpenOptions { seed: args.seed, ..OpenOptions::default() })?;
    let info = engine.info().clone();
    let conditions = crate::bench::conditions::resolve(engine.as_ref())
        .map_err(|why| anyhow::anyhow!("{}: no link conditions ({why}); the block amount needs the link", args.target))?;
    options.device_clock_hz = info.device_clock_hz;
    let mut notes = Vec::new();
    if info.co_simulated {
        // Simulated time is expensive: a small block amount, and a poll every 5 µs instead of
        // the document's 30 s wait.
        options.block_amount = Some(args.block_amount.unwrap_or(COSIM_BLOCK_AMOUNT));
        options.wait = Duration::ZERO;
        options.poll_interval = Duration::from_micros(5);
        options.timeout = Duration::from_millis(100);
        notes.push(format!(
            "co-simulation: block amount {} ({} bytes per direction) instead of the document's 0xA343C × link multiplier; results polled every 5 µs of simulated time",
            options.block_amount.unwrap_or_default(),
            crate::bench::demo::demo_bytes(options.block_amount.unwrap_or_default())
        ));
    }
    let mmio = engine.mmio().ok_or_else(|| {
        anyhow::anyhow!("{}: this target has no registers; `pcieperf demo` needs the performance-demo endpoint (e.g. sim:doc001)", args.target)
    })?;
    let report = run_demo(mmio, &conditions, &options)?;
    if args.json {
        let output = DemoOutput { schema: SCHEMA, pcieperf_version: env!("CARGO_PKG_VERSION"), simulated: info.simulated, engine: &info, seed: args.seed, notes: &notes, demo: &report };
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        print!("{}", render(&info, &report));
        for note in &notes {
            println!("{note}");
        }
    }
    Ok(0)
}

/// What the document's GUI prints, beside the model's ceiling.
fn render(info: &EngineInfo, report: &DemoReport) -> String {
    let sim = if info.simulated { format!(" ({})", info.label()) } else { String::new() };
    let status = &report.status;
    let mut out = format!("Performance-demo endpoint, document 001 §4 register flow{sim}\n");
    out += &format!("Target: {} — {}\n\n", info.target, info.description);
    out += "Card information\n";
    out += &format!(
        "  FPGA version:  {:02x}.{:02x}.{:02x}, REV={:02x} ({:08x}){}\n",
        report.version >> 24,
        report.version >> 16 & 0xFF,
        report.version >> 8 & 0xFF,
        report.version & 0xFF,
        report.version,
        if report.byte_swapped { ", registers read byte-swapped: values swapped" } else { "" }
    );
    out += &format!("  Link speed:    {}\n", status.link_speed_gts.map_or(format!("code {}", status.link_speed_code), |g| format!("{g} GT/s")));
    out += &format!("  Link width:    x{}\n", status.link_width);
    out += &format!("  Payload size:  {} (MaxReadRequest {})\n\n", size(status.max_payload_bytes), size(status.max_read_request_bytes));

    let mut columns: Vec<(String, Align)> = vec![(format!("result{sim}"), Align::Left)];
    columns.extend(report.results.iter().map(|r| (demo::label(r.mode), Align::Right)));
    let refs: Vec<(&str, Align)> = columns.iter().map(|(h, a)| (h.as_str(), *a)).collect();
    let mut table = Table::new(&refs);
    let mut row = |label: &str, cell: &dyn Fn(&crate::bench::demo::DemoResult) -> String| {
        let mut cells = vec![label.to_string()];
        cells.extend(report.results.iter().map(cell));
        table.row(cells);
    };
    row(&format!("usable bandwidth MB/s{sim}"), &|r| format!("{:.6}", r.mbps));
    row("model ceiling MB/s", &|r| format!("{:.2}", r.theory_mbps));
    row("reached", &|r| format!("{:.1} %", r.percent_of_theory));
    row("measurement time s", &|r| match r.device_cycles {
        Some(cycles) => format!("{:.9} ({cycles} device cycles)", r.time_s),
        None => format!("{:.3}", r.time_s),
    });
    row("bytes", &|r| r.bytes.to_string());
    row("maximum stall µs", &|r| format!("{:.3}", r.max_stall_us));
    row(&format!("stalls > {:.1} µs", report.threshold_us), &|r| r.stalls_over_threshold.to_string());
    row("max deadlock (raw)", &|r| format!("{} ({:08x})", r.max_stall_raw, r.max_stall_raw));
    row("num deadlock (raw)", &|r| format!("{} ({:08x})", r.stalls_over_threshold, r.stalls_over_threshold));
    row("retries/bit errors RX/TX", &|r| format!("{} / {}", r.rx_bit_errors, r.tx_bit_errors));
    out += &table.render();
    out += &format!(
        "\nPCI-Status {} ({:08x}): MaxPayload {}, MaxReadRequest {}, {}, x{}, extended tag {}, MSI {}, relaxed ordering {}, no snoop {}, error reporting {}\n",
        status.raw,
        status.raw,
        size(status.max_payload_bytes),
        size(status.max_read_request_bytes),
        status.link_speed_gts.map_or(format!("speed code {}", status.link_speed_code), |g| format!("{g} GT/s")),
        status.link_width,
        on_off(status.extended_tag),
        on_off(status.msi_enabled),
        on_off(status.relaxed_ordering),
        on_off(status.no_snoop),
        on_off(status.correctable_error_reporting || status.non_fatal_error_reporting || status.fatal_error_reporting || status.unsupported_request_reporting),
    );
    for finding in &report.findings {
        out += &format!("finding: {finding}\n");
    }
    out += &format!("model ceiling for: {}\n  from {}\n", report.conditions.summary(), report.conditions.source);
    for assumption in &report.conditions.assumed {
        out += &format!("  assumed: {assumption}\n");
    }
    out += "(1 MB = 10^6 bytes)\n";
    out
}

fn size(bytes: Option<u64>) -> String {
    bytes.map_or("reserved code".to_string(), |b| format!("{b} bytes"))
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}
