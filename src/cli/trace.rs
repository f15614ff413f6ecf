//! `pcieperf trace`: flags → a simulated scenario → a trace writer (docs/trace.md).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::error::{invalid, InvalidInput};
use crate::link::{scenarios, SimConfig, Workload};
use crate::model::HeaderFormat;
use crate::report::output;
use crate::report::trace::{self, pcapng, text, vcd, Trace};

/// Write the first packets of a simulated link as an analyser shows them: text (document 000's
/// layout), VCD (GTKWave) or pcapng (Wireshark, with tools/wireshark/pcieperf.lua).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf trace --scenario doc000-example1 --count 12
  pcieperf trace --scenario read --link gen3x4 --bytes 16KiB --format vcd --out read.vcd
  pcieperf trace --scenario write --target sim:gen5x16 --format pcapng --count 10000 --out w.pcapng
  tshark -X lua_script:tools/wireshark/pcieperf.lua -r w.pcapng -V

Scenarios: write / read: a device DMA transfer of --bytes; doc000-example1: document 000 §3.5
Example 1 (100 writes of 4 bytes); doc000-reads: §3.5's record of three reads; doc000-test3: §4.6,
writes every 120 ns; doc000-test4: §4.7, three reads (the first read's latency and gap).
Limits: --count 1 to 2·10^6 packets, --symbols 1 to 2·10^6 symbol times. Formats and record layout:
docs/trace.md.
Exit codes: 0 written, 1 the output could not be written, 2 bad input (one line on stderr).")]
pub struct TraceArgs {
    #[arg(long, value_enum, default_value = "write")]
    pub scenario: Scenario,
    /// Link of the write and read scenarios, e.g. gen1x1 or gen4x16 (default gen1x1).
    #[arg(long, conflicts_with = "target")]
    pub link: Option<String>,
    /// Take the link, MPS, MRRS, header, tags and completion latency of a simulator target,
    /// e.g. sim:gen5x16 or sim:doc000,mps=256.
    #[arg(long)]
    pub target: Option<String>,
    /// Bytes the DMA transfer moves (write and read scenarios).
    #[arg(long, value_parser = parse_size, default_value = "4KiB")]
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
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Packets to write (TLPs, DLLPs and SKP ordered sets, in order of their start; default 200).
    #[arg(long, conflicts_with = "symbols")]
    pub count: Option<u64>,
    /// Symbol times to write instead: every packet that starts in them (text and VCD show each).
    #[arg(long)]
    pub symbols: Option<u64>,
    /// Output file, or - for standard output.
    #[arg(long, default_value = "-")]
    pub out: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    Write,
    Read,
    #[value(name = "doc000-example1")]
    Doc000Example1,
    #[value(name = "doc000-reads")]
    Doc000Reads,
    #[value(name = "doc000-test3")]
    Doc000Test3,
    #[value(name = "doc000-test4")]
    Doc000Test4,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Vcd,
    Pcapng,
}

/// Packets written when neither --count nor --symbols is given.
const DEFAULT_PACKETS: u64 = 200;

fn parse_size(text: &str) -> Result<u64, String> {
    crate::units::parse_size(text).map_err(|e| e.0)
}

fn parse_addr(text: &str) -> Result<u64, String> {
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
    digits.map_or_else(|| text.parse(), |hex| u64::from_str_radix(hex, 16)).map_err(|_| format!("invalid address '{text}': a number, hex with 0x"))
}

pub fn run(args: TraceArgs) -> anyhow::Result<i32> {
    output::check(&args.out, &[])?;
    // SAFETY: isatty only inspects the descriptor.
    if args.format == Format::Pcapng && output::is_stdout(&args.out) && unsafe { libc::isatty(1) } == 1 {
        return invalid("a pcapng trace is binary: pass --out FILE, or redirect standard output");
    }
    let (config, workload) = scenario(&args)?;
    let phy = crate::link::phy::Phy::new(config.link);
    if let Some(symbols) = args.symbols {
        trace::rows(&[], &phy, Some(symbols))?;
    }
    // Enough packets to fill --symbols when only that is given (a packet is 4 ticks or more).
    let from_symbols = args.symbols.map(|s| s.saturating_mul(phy.width) / 4 + 2).map(|p| p.min(trace::MAX_PACKETS));
    let packets = args.count.or(from_symbols).unwrap_or(DEFAULT_PACKETS);
    let record = trace::simulate_first(&config, workload, packets)?;
    let first = &record[..record.len().min(packets as usize)];
    if args.format == Format::Pcapng {
        let shown = args.symbols.map_or(first, |symbols| trace::within_rows(first, &phy, symbols));
        let trace = Trace { config: &config, record: shown, rows: 0 };
        return output::write_bytes(&args.out, &pcapng::render(&trace)).map(|()| 0);
    }
    let rows = trace::rows(first, &phy, args.symbols)?;
    let trace = Trace { config: &config, record: trace::within_rows(&record, &phy, rows), rows };
    let rendered = if args.format == Format::Vcd { vcd::render(&trace) } else { text::render(&trace) };
    output::write(&args.out, &rendered)?;
    Ok(0)
}

/// The simulator's inputs for the chosen scenario.
fn scenario(args: &TraceArgs) -> anyhow::Result<(SimConfig, Workload)> {
    let dma = matches!(args.scenario, Scenario::Write | Scenario::Read);
    let link_flags = args.link.is_some() || args.target.is_some() || args.mps.is_some() || args.mrrs.is_some() || args.header.is_some();
    if !dma && (link_flags || args.ecrc || args.tags.is_some()) {
        return invalid("document 000's scenarios set their own link: --link, --target, --mps, --mrrs, --header, --ecrc and --tags go with --scenario write or read");
    }
    let (config, workload) = match args.scenario {
        Scenario::Write => (dma_config(args)?, Workload::DmaWrite { addr: args.addr, bytes: args.bytes }),
        Scenario::Read => (dma_config(args)?, Workload::DmaRead { addr: args.addr, bytes: args.bytes }),
        Scenario::Doc000Example1 => scenarios::example_1(),
        Scenario::Doc000Reads => scenarios::three_reads(),
        Scenario::Doc000Test3 => scenarios::test_3_writes(),
        Scenario::Doc000Test4 => scenarios::test_4_reads(0),
    };
    if dma && (args.bytes == 0 || args.addr.checked_add(args.bytes).is_none()) {
        return invalid(format!("invalid DMA transfer of {} bytes at {:#x}: at least 1 byte, below 2^64", args.bytes, args.addr));
    }
    if dma && config.header == HeaderFormat::Dw3 && args.addr + args.bytes > 1 << 32 {
        return invalid("a transfer beyond 4 GiB needs 64-bit addresses: pass --header 4dw");
    }
    config.validate()?;
    Ok((config, workload))
}

/// The link of the DMA scenarios: --target's parameters or --link's, then the flags.
fn dma_config(args: &TraceArgs) -> Result<SimConfig, InvalidInput> {
    let mut config = match &args.target {
        Some(target) => {
            let Some(argument) = target.strip_prefix("sim:").or((target == "sim").then_some("")) else {
                return Err(InvalidInput::new(format!("invalid trace target '{target}': only simulator targets (sim:PRESET) describe a link to trace")));
            };
            let params = crate::engine::sim::config::SimConfig::parse(argument)?.params;
            let mut config = SimConfig::new(params.link);
            (config.mps_bytes, config.mrrs_bytes, config.rcb_bytes, config.header, config.ecrc) =
                (params.mps_bytes, params.mrrs_bytes, params.rcb_bytes, params.header, params.ecrc);
            (config.tags, config.host_completion_latency_ns) = (params.tags, params.read_latency_ns);
            config
        }
        None => SimConfig::new(args.link.as_deref().unwrap_or("gen1x1").parse()?),
    };
    config.mps_bytes = args.mps.unwrap_or(config.mps_bytes);
    config.mrrs_bytes = args.mrrs.unwrap_or(config.mrrs_bytes);
    config.header = args.header.unwrap_or(config.header);
    config.ecrc |= args.ecrc;
    config.tags = args.tags.unwrap_or(config.tags);
    Ok(config)
}
