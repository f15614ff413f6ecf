//! `pcieperf model`: flags to a model document ([`crate::model::document`]) and the format
//! asked for; the views are `report::model`'s.

use clap::{Args, Subcommand, ValueEnum};

use crate::error::InvalidInput;
use crate::model::document::{self, LinkHeader, ModelDocument};
use crate::model::{explain, Accounting, Generation, HeaderFormat, Link, LinkParams};
use crate::report::view::{self, Document, Format, ViewOptions};
use crate::units::{self, RateUnit};
use super::values::named;

/// The link used when none is given.
const DEFAULT_LINK: &str = "gen3x8";
const DEFAULT_SIZES: &str = "64..4MiB:x4";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
#[command(after_help = "Examples:
  pcieperf model --link gen4x16 --sizes 64..4MiB:x4
  pcieperf model --gen 3 --width 8 --explain 4KiB
  pcieperf model fit --point 1MB=983 --point 2MB=992.8 --bus-MBps 2000
  pcieperf model status 0x90412100

Exit codes: 0 success, 2 bad input (a link, size or value outside what the spec allows).")]
pub struct ModelArgs {
    #[command(subcommand)]
    command: Option<ModelCommand>,
    #[command(flatten)]
    link: LinkArgs,
    /// Transfer sizes: a list (64,128,4KiB) or a range with a step rule (64..4MiB:x4, 4KiB..64KiB:+4KiB)
    #[arg(long, default_value = DEFAULT_SIZES)]
    sizes: String,
    /// Print the waterfall (raw signalling → … → application) for one transfer size
    #[arg(long, value_name = "SIZE", num_args = 0..=1, default_missing_value = "64KiB")]
    explain: Option<String>,
    #[command(flatten)]
    software: SoftwareArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Fit T(N) = N/(B·f) + m to measured (size, rate) points and predict other sizes (document 002)
    Fit(FitArgs),
    /// Single CPU-initiated MMIO accesses of 1, 2, 4, 8 bytes: write and read rates (document 000 §4)
    Mmio(MmioArgs),
    /// Sequential writes through 64-byte write-combining buffers (document 000 §4.16)
    #[command(name = "wc", alias = "write-combining")]
    WriteCombining(WcArgs),
    /// Decode the performance-demo PCI-Status word, e.g. 0x90412100 (document 001 §3)
    Status(StatusArgs),
    /// Throughput after a framework's per-message header and trailer (document 003 §3)
    Message(MessageArgs),
}

/// Overheads a user can leave out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Overhead {
    /// SKP ordered sets
    Skp,
    /// ACK and UpdateFC DLLPs
    Dllp,
}

#[derive(Debug, Clone, Args)]
struct LinkArgs {
    /// Link as genNxW, e.g. gen3x8 (default gen3x8)
    #[arg(long, conflicts_with_all = ["generation", "width"])]
    link: Option<String>,
    /// Generation 1–6 (with --width)
    #[arg(long = "gen", id = "generation", value_name = "N")]
    generation: Option<u32>,
    /// Width 1, 2, 4, 8, 12, 16, 32 (with --gen)
    #[arg(long)]
    width: Option<u32>,
    /// MaxPayload size in bytes (128–4096; default 256)
    #[arg(long)]
    mps: Option<u64>,
    /// MaxReadRequest size in bytes (128–4096; default 512)
    #[arg(long)]
    mrrs: Option<u64>,
    /// Read completion boundary in bytes (64 or 128; default 64)
    #[arg(long)]
    rcb: Option<u64>,
    /// Largest completion the completer sends, bytes (default MaxPayload; many root complexes send 64)
    #[arg(long)]
    completion_bytes: Option<u64>,
    /// TLP header of requests: 3dw (32-bit addresses) or 4dw (64-bit)
    #[arg(long, value_parser = named::<HeaderFormat>())]
    header: Option<HeaderFormat>,
    /// Add a 4-byte ECRC digest to every TLP
    #[arg(long)]
    ecrc: bool,
    /// Count only the bytes asked for, as the documents' tables do (default: whole DWs on the wire)
    #[arg(long)]
    byte_exact: bool,
    /// Time from a read request to its completion, ns (default 500)
    #[arg(long, allow_negative_numbers = true)]
    read_latency_ns: Option<f64>,
    /// Read requests outstanding at once (default 32)
    #[arg(long)]
    tags: Option<u32>,
    /// Leave link-level overhead out, as document 000 Table 1 does: skp, dllp
    #[arg(long, value_enum, value_delimiter = ',')]
    exclude: Vec<Overhead>,
    /// Start address of the transfers (decimal or 0x hex); only its offset in a 4 KiB page matters
    #[arg(long)]
    addr: Option<String>,
    /// One ACK and one UpdateFC DLLP per N TLPs (default: the spec's latency tables; 000 §3.5 uses 1)
    #[arg(long, value_name = "N")]
    dllp_every: Option<u32>,
    /// Transfers outstanding at once: 1 (default) is one isolated transfer; more is the steady
    /// state of back-to-back DMAs, where reads share the tags and overlap their latency
    #[arg(long, value_name = "N", default_value_t = 1)]
    in_flight: u32,
}

#[derive(Debug, Clone, Args)]
struct OutputArgs {
    /// Print JSON (schema pcieperf.model/2, rates in MB/s whatever --unit says)
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV
    #[arg(long)]
    csv: bool,
    /// Unit for printed rates
    #[arg(long, value_parser = named::<RateUnit>(), default_value = "MBps")]
    unit: RateUnit,
}

#[derive(Debug, Clone, Args)]
struct SoftwareArgs {
    /// Message payload bytes of a framework, for the last waterfall step (with --msg-overhead-bytes)
    #[arg(long, default_value_t = 0)]
    msg_bytes: u64,
    /// Header and trailer bytes per message
    #[arg(long, default_value_t = 0)]
    msg_overhead_bytes: u64,
    /// Fixed software time per transfer (interrupt, doorbell), µs
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    sw_overhead_us: f64,
}

#[derive(Debug, Args)]
struct FitArgs {
    /// Measured point SIZE=MBps, e.g. 1MB=983 (two or more)
    #[arg(long = "point", required = true)]
    points: Vec<String>,
    /// Bus rate B in MB/s (document 002: 250 MHz × 8 bytes = 2000)
    #[arg(long = "bus-MBps")]
    bus_mbps: f64,
    /// Sizes to predict, e.g. 4MB,8MB,128
    #[arg(long)]
    predict: Option<String>,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct MmioArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Also show a record of N back-to-back writes with the load they put on both directions,
    /// and of N reads one at a time (document 000 §3.5 Examples 1 and 2: 100)
    #[arg(long, value_name = "N")]
    record: Option<u64>,
    /// Access size for --record in bytes
    #[arg(long, default_value_t = 4)]
    access: u64,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
struct WcArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Sequential write sizes
    #[arg(long, default_value = "1..4096")]
    sizes: String,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
struct StatusArgs {
    /// The 32-bit word, hex (0x90412100) or decimal (2420187392)
    value: String,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct MessageArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Message payload bytes (document 003: 16352)
    #[arg(long, default_value_t = 16352)]
    message_bytes: u64,
    /// Header and trailer bytes per message (document 003: 4 DW metadata + 2 DW flag = 24)
    #[arg(long, default_value_t = 24)]
    overhead_bytes: u64,
    #[command(flatten)]
    output: OutputArgs,
}

pub fn run(args: ModelArgs) -> anyhow::Result<i32> {
    let json_only = |json| OutputArgs { json, csv: false, unit: RateUnit::MBps };
    let (document, output) = match args.command {
        Some(ModelCommand::Fit(a)) => (fit(&a)?, json_only(a.json)),
        Some(ModelCommand::Mmio(a)) => (document::mmio(a.link.header()?, a.record.map(|count| (a.access, count)))?, a.output),
        Some(ModelCommand::WriteCombining(a)) => {
            (document::write_combining(a.link.header()?, &units::parse_size_list(&a.sizes)?)?, a.output)
        }
        Some(ModelCommand::Status(a)) => (document::status(parse_status(&a.value)?), json_only(a.json)),
        Some(ModelCommand::Message(a)) => (document::message(a.link.header()?, a.message_bytes, a.overhead_bytes)?, a.output),
        None => (table(&args)?, args.output),
    };
    let format = if output.json { Format::Json } else if output.csv { Format::Csv } else { Format::Text };
    view::print(&Document::Model(document), format, &ViewOptions { unit: output.unit, ..ViewOptions::default() })?;
    Ok(0)
}

/// `pcieperf model` without a subcommand: the size table, or the waterfall of one size.
fn table(args: &ModelArgs) -> anyhow::Result<ModelDocument> {
    let header = args.link.header()?;
    let Some(size) = &args.explain else {
        return Ok(document::sizes(header, &units::parse_size_list(&args.sizes)?));
    };
    let sw = &args.software;
    let software =
        explain::Software { message_bytes: sw.msg_bytes, message_overhead_bytes: sw.msg_overhead_bytes, per_transfer_us: sw.sw_overhead_us };
    Ok(document::explain(header, units::parse_size(size)?, software)?)
}

impl LinkArgs {
    /// The link and whether it was the default.
    fn link(&self) -> Result<(Link, bool), InvalidInput> {
        if let Some(text) = &self.link {
            return Ok((text.parse()?, false));
        }
        let default: Link = DEFAULT_LINK.parse()?;
        if self.generation.is_none() && self.width.is_none() {
            return Ok((default, true));
        }
        let generation = match self.generation {
            Some(number) => Generation::from_number(number)?,
            None => default.generation,
        };
        Ok((Link::new(generation, self.width.unwrap_or(default.width))?, false))
    }

    /// The model's inputs from the flags, checked, with the link.
    fn header(&self) -> Result<LinkHeader, InvalidInput> {
        let (link, is_default) = self.link()?;
        let mut params = LinkParams::typical(link);
        params.mps_bytes = self.mps.unwrap_or(params.mps_bytes);
        params.mrrs_bytes = self.mrrs.unwrap_or(params.mrrs_bytes);
        params.rcb_bytes = self.rcb.unwrap_or(params.rcb_bytes);
        params.header = self.header.unwrap_or(params.header);
        params.ecrc = self.ecrc;
        if self.byte_exact {
            params.accounting = Accounting::ByteExact;
        }
        params.read_latency_ns = self.read_latency_ns.unwrap_or(params.read_latency_ns);
        params.tags = self.tags.unwrap_or(params.tags);
        params.include_skp = !self.exclude.contains(&Overhead::Skp);
        params.include_dllp = !self.exclude.contains(&Overhead::Dllp);
        if let Some(addr) = &self.addr {
            params.start_addr = parse_u64(addr, "address")?;
        }
        params.dllp_every_tlps = self.dllp_every;
        params.completion_bytes = self.completion_bytes;
        params.in_flight = self.in_flight;
        params.validate()?;
        Ok(LinkHeader::new(params, is_default))
    }
}

fn parse_u64(text: &str, what: &str) -> Result<u64, InvalidInput> {
    let text = text.trim();
    crate::units::parse_number(text).ok_or_else(|| InvalidInput::new(format!("invalid {what} '{text}': expected a decimal number or 0x followed by hex digits")))
}

fn parse_status(text: &str) -> Result<u32, InvalidInput> {
    let raw = parse_u64(text, "status word")?;
    u32::try_from(raw).map_err(|_| InvalidInput::new(format!("status word '{text}' does not fit in 32 bits")))
}

/// `--point SIZE=MBps` flags as (bytes, MB/s), then the fit.
fn fit(args: &FitArgs) -> anyhow::Result<ModelDocument> {
    let points = args
        .points
        .iter()
        .map(|p| {
            let (size, rate) = p
                .split_once('=')
                .ok_or_else(|| InvalidInput::new(format!("invalid point '{p}': expected SIZE=MBps, e.g. 1MB=983")))?;
            let rate: f64 = rate
                .trim()
                .parse()
                .map_err(|_| InvalidInput::new(format!("invalid rate in '{p}': expected a number of MB/s")))?;
            Ok((units::parse_size(size)? as f64, rate))
        })
        .collect::<Result<Vec<_>, InvalidInput>>()?;
    let predict = match &args.predict {
        Some(list) => units::parse_size_list(list)?,
        None => Vec::new(),
    };
    Ok(document::fit(args.bus_mbps, &points, &predict)?)
}
