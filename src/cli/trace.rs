//! `pcieperf trace`: flags → a simulated scenario → a trace writer (docs/trace.md).

use std::path::PathBuf;

use clap::Args;

use crate::bench::trace::{self as bench, Scenario};
use crate::error::invalid;
use crate::link::SteadyOptions;
use crate::model::HeaderFormat;
use crate::report::output;
use crate::report::trace::{self, Format};

/// Write the first packets of a simulated link as an analyser shows them: text (document 000's
/// layout), VCD (GTKWave) or pcapng (Wireshark, with tools/wireshark/pcieperf.lua).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf trace --scenario doc000-example1 --count 12
  pcieperf trace --scenario read --link gen3x4 --bytes 16KiB --format vcd --out read.vcd
  pcieperf trace --scenario write --target sim:gen5x16 --format pcapng --count 10000 --out w.pcapng
  tshark -X lua_script:tools/wireshark/pcieperf.lua -r w.pcapng -V
  pcieperf trace --scenario write --link gen3x8 --bytes 64MiB --fast-forward --count 100000 --out w.txt

Scenarios: write / read: a device DMA transfer of --bytes; doc000-example1: document 000 §3.5
Example 1 (100 writes of 4 bytes); doc000-reads: §3.5's record of three reads; doc000-test3: §4.6,
writes every 120 ns; doc000-test4: §4.7, three reads (the first read's latency and gap).
Limits: --count 1 to 2·10^6 packets, --symbols 1 to 2·10^6 symbol times. Formats and record layout:
docs/trace.md.
Exit codes: 0 written, 1 the output could not be written, 2 bad input (one line on stderr).")]
pub struct TraceArgs {
    #[arg(long, value_parser = crate::cli::values::named::<Scenario>(), default_value = "write")]
    pub scenario: Scenario,
    /// Link of the write and read scenarios, e.g. gen1x1 or gen4x16 (default gen1x1).
    #[arg(long, conflicts_with = "target")]
    pub link: Option<String>,
    /// Take the link, MPS, MRRS, header, tags and completion latency of a simulator target,
    /// e.g. sim:gen5x16 or sim:doc000,mps=256.
    #[arg(long)]
    pub target: Option<String>,
    /// Bytes the DMA transfer moves (write and read scenarios).
    #[arg(long, value_parser = super::values::size, default_value = "4KiB")]
    pub bytes: u64,
    /// Start address of the DMA transfer (hex with 0x).
    #[arg(long, value_parser = parse_addr, default_value = "0x10000000")]
    pub addr: u64,
    /// MaxPayload bytes.
    #[arg(long)]
    pub mps: Option<u64>,
    /// MaxReadRequest bytes.
    #[arg(long)]
    pub mrrs: Option<u64>,
    /// Request headers: 3dw (32-bit addresses) or 4dw.
    #[arg(long, value_parser = crate::cli::values::named::<HeaderFormat>())]
    pub header: Option<HeaderFormat>,
    /// Add an ECRC to every TLP.
    #[arg(long)]
    pub ecrc: bool,
    /// Outstanding read requests (tags).
    #[arg(long)]
    pub tags: Option<u32>,
    #[arg(long, value_parser = crate::cli::values::named::<Format>(), default_value = "text")]
    pub format: Format,
    /// Packets to write (TLPs, DLLPs and SKP ordered sets, in order of their start; default 200).
    #[arg(long, conflicts_with = "symbols")]
    pub count: Option<u64>,
    /// Symbol times to write instead: every packet that starts in them (text and VCD show each).
    #[arg(long)]
    pub symbols: Option<u64>,
    /// Simulate the whole transfer with the steady-state fast-forward (as `sim` does) and mark
    /// each stretch it left out where it left it out (write and read scenarios).
    #[arg(long)]
    pub fast_forward: bool,
    /// Output file, or - for standard output.
    #[arg(long, default_value = "-")]
    pub out: PathBuf,
}

fn parse_addr(text: &str) -> Result<u64, String> {
    crate::units::parse_number(text).ok_or_else(|| format!("invalid address '{text}': a number, hex with 0x"))
}

pub fn run(args: TraceArgs) -> anyhow::Result<i32> {
    output::check(&args.out, &[])?;
    // SAFETY: isatty only inspects the descriptor.
    if args.format == Format::Pcapng && output::is_stdout(&args.out) && unsafe { libc::isatty(1) } == 1 {
        return invalid("a pcapng trace is binary: pass --out FILE, or redirect standard output");
    }
    let dma = bench::DmaOptions {
        link: args.link,
        target: args.target,
        bytes: args.bytes,
        addr: args.addr,
        mps_bytes: args.mps,
        mrrs_bytes: args.mrrs,
        header: args.header,
        ecrc: args.ecrc,
        tags: args.tags,
    };
    if args.fast_forward && !matches!(args.scenario, Scenario::Write | Scenario::Read) {
        return invalid("--fast-forward goes with --scenario write or read (document 000's records are short and simulated whole)");
    }
    let (config, workload) = bench::scenario(args.scenario, &dma)?;
    let fast_forward = args.fast_forward.then(SteadyOptions::default);
    output::write_bytes(&args.out, &trace::render(&config, workload, args.format, args.count, args.symbols, fast_forward.as_ref())?)?;
    Ok(0)
}
