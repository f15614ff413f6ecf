//! `pcieperf model`: the throughput theory of a link, as tables, JSON or CSV.
//!
//! Thin wiring over [`crate::model`]: parse flags into [`LinkParams`], call the library, render.

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};

use crate::error::{invalid, InvalidInput};
use crate::model::{
    self, bidir, explain, message, mmio, read, status, transfer, write, write_combining, Accounting, Generation, HeaderFormat,
    Link, LinkParams, Span, Throughput,
};
use crate::table::{Align, Table};
use crate::units::{self, format_size, RateUnit};
use super::values::named;

/// Version of the JSON documents `pcieperf model` writes (documented in docs/theory.md).
pub const SCHEMA: &str = "pcieperf.model/1";

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
    /// Print JSON (schema pcieperf.model/1, rates in MB/s whatever --unit says)
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
    match args.command {
        Some(ModelCommand::Fit(fit)) => run_fit(fit),
        Some(ModelCommand::Mmio(a)) => run_mmio(a),
        Some(ModelCommand::WriteCombining(a)) => run_wc(a),
        Some(ModelCommand::Status(a)) => run_status(a),
        Some(ModelCommand::Message(a)) => run_message(a),
        None => run_table(&args),
    }?;
    Ok(0)
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

    fn params(&self) -> Result<(LinkParams, bool), InvalidInput> {
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
        Ok((params, is_default))
    }
}

fn parse_u64(text: &str, what: &str) -> Result<u64, InvalidInput> {
    let text = text.trim();
    crate::units::parse_number(text).ok_or_else(|| InvalidInput::new(format!("invalid {what} '{text}': expected a decimal number or 0x followed by hex digits")))
}

/// One line naming every condition of the figures below it.
fn describe(params: &LinkParams, is_default: bool, unit: RateUnit) -> String {
    let link = params.link;
    let default = if is_default { " (default link; choose with --link)" } else { "" };
    let overhead = match (params.include_skp, params.include_dllp) {
        (true, true) => "SKP and DLLPs charged",
        (true, false) => "SKP charged, DLLPs excluded",
        (false, true) => "DLLPs charged, SKP excluded",
        (false, false) => "SKP and DLLPs excluded",
    };
    let dllp = match params.dllp_every_tlps {
        Some(n) if params.include_dllp => format!(" (one ACK + one UpdateFC per {n} TLP)"),
        _ => String::new(),
    };
    format!(
        "{link}{default}: {} GT/s, {}, {:.2} {} after encoding; MPS {}, MRRS {}, RCB {}{}, {} headers{}, {}, \
         read latency {} ns, {} tags, {overhead}{dllp}{}.\nRates in {} ({}).",
        link.generation.gts(),
        link.generation.encoding().name(),
        unit.from_mbps(link.encoded_mbps()),
        unit.label(),
        params.mps_bytes,
        params.mrrs_bytes,
        params.rcb_bytes,
        match params.completion_bytes {
            Some(bytes) => format!(", completions of {bytes} B"),
            None => String::new(),
        },
        match params.header {
            HeaderFormat::Dw3 => "3DW",
            HeaderFormat::Dw4 => "4DW",
        },
        if params.ecrc { " + ECRC" } else { "" },
        match params.accounting {
            Accounting::WireAccurate => "wire-accurate (whole DWs, 4 KiB boundaries)",
            Accounting::ByteExact => "byte-exact (the documents' convention)",
        },
        params.read_latency_ns,
        params.tags,
        [
            (!params.start_addr.is_multiple_of(4096)).then(|| format!(", start offset {} in its 4 KiB page", params.start_addr % 4096)),
            (params.in_flight > 1).then(|| format!(", {} transfers in flight (steady state of back-to-back DMAs)", params.in_flight)),
        ]
        .into_iter()
        .flatten()
        .collect::<String>(),
        unit.label(),
        unit.definition(),
    )
}

fn rate(unit: RateUnit, mbps: f64) -> String {
    match unit {
        RateUnit::MBps => format!("{:.2}", mbps),
        _ => format!("{:.4}", unit.from_mbps(mbps)),
    }
}

fn percent(fraction: f64) -> String {
    format!("{:.2}", fraction * 100.0)
}

fn unit_suffix(unit: RateUnit) -> &'static str {
    match unit {
        RateUnit::MBps => "MBps",
        RateUnit::GBps => "GBps",
        RateUnit::Gbps => "Gbps",
    }
}

fn print_json(value: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Print one of the link-based JSON documents: the common envelope (schema, kind, unit, link,
/// whether the link was the default, the parameters) plus the kind's own fields.
fn print_link_json(kind: &str, params: &LinkParams, is_default: bool, fields: Value) -> anyhow::Result<()> {
    let mut document = json!({
        "schema": SCHEMA,
        "kind": kind,
        "unit": "MB/s = 10^6 bytes/s",
        "link": params.link.to_string(),
        "default_link": is_default,
        "params": params,
    });
    if let (Some(envelope), Value::Object(own)) = (document.as_object_mut(), fields) {
        envelope.extend(own);
    }
    print_json(&document)
}

struct Row {
    size_bytes: u64,
    write: Throughput,
    read: Throughput,
    both: bidir::Bidirectional,
    /// Rate of link bytes the writes put on the opposite direction (DLLPs), MB/s.
    write_opposite_mbps: f64,
    /// Rate of link bytes the reads put on the request direction (requests, ACKs), MB/s.
    read_opposite_mbps: f64,
}

/// Link bytes per time a flow puts on its opposite direction, MB/s.
fn opposite_mbps(flow: &model::Flow) -> f64 {
    units::mbps(flow.opposite.total_bytes(), flow.duration_ns)
}

fn run_table(args: &ModelArgs) -> anyhow::Result<()> {
    let (params, is_default) = args.link.params()?;
    let unit = args.output.unit;
    if let Some(size) = &args.explain {
        return run_explain(args, &params, is_default, units::parse_size(size)?);
    }
    let rows = table_rows(&params, &units::parse_size_list(&args.sizes)?);
    if args.output.json {
        return print_rows_json(&params, is_default, &rows);
    }
    if args.output.csv {
        print_rows_csv(unit, &rows);
        return Ok(());
    }
    print_rows_table(&params, is_default, unit, &rows);
    Ok(())
}

/// One row per size: writes, reads, both at once, and what each puts on its opposite direction.
fn table_rows(params: &LinkParams, sizes: &[u64]) -> Vec<Row> {
    sizes
        .iter()
        .map(|&size_bytes| {
            let writes = write::write_flow(params, size_bytes, Span::Steady);
            let reads = read::read_flow(params, size_bytes, Span::Steady);
            Row {
                size_bytes,
                write: writes.throughput,
                read: reads.throughput,
                both: bidir::bidirectional(params, size_bytes),
                write_opposite_mbps: opposite_mbps(&writes),
                read_opposite_mbps: opposite_mbps(&reads),
            }
        })
        .collect()
}

fn print_rows_json(params: &LinkParams, is_default: bool, rows: &[Row]) -> anyhow::Result<()> {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "size_bytes": r.size_bytes,
                "write_MBps": r.write.mbps,
                "write_efficiency": r.write.efficiency,
                "read_MBps": r.read.mbps,
                "read_efficiency": r.read.efficiency,
                "bidir_write_MBps": r.both.write.mbps,
                "bidir_read_MBps": r.both.read.mbps,
                "bidir_total_MBps": r.both.total_mbps(),
                "write_opposite_direction_MBps": r.write_opposite_mbps,
                "read_request_direction_MBps": r.read_opposite_mbps,
                "limit": {
                    "write": r.write.limit,
                    "read": r.read.limit,
                    "bidir_write": r.both.write.limit,
                    "bidir_read": r.both.read.limit,
                },
            })
        })
        .collect();
    print_link_json("sizes", params, is_default, json!({
        "encoded_MBps": params.link.encoded_mbps(),
        "read_latency_bound_MBps": finite_or_null(read::latency_bound_mbps(params)),
        "rows": rows,
    }))
}

fn print_rows_csv(unit: RateUnit, rows: &[Row]) {
    let u = unit_suffix(unit);
    println!("size_bytes,write_{u},write_efficiency,write_limit,read_{u},read_efficiency,read_limit,bidir_write_{u},bidir_read_{u},bidir_total_{u},write_opposite_direction_{u},read_request_direction_{u}");
    for r in rows {
        println!(
            "{},{},{:.6},{},{},{:.6},{},{},{},{},{},{}",
            r.size_bytes,
            unit.from_mbps(r.write.mbps),
            r.write.efficiency,
            r.write.limit.name(),
            unit.from_mbps(r.read.mbps),
            r.read.efficiency,
            r.read.limit.name(),
            unit.from_mbps(r.both.write.mbps),
            unit.from_mbps(r.both.read.mbps),
            unit.from_mbps(r.both.total_mbps()),
            unit.from_mbps(r.write_opposite_mbps),
            unit.from_mbps(r.read_opposite_mbps),
        );
    }
}

fn print_rows_table(params: &LinkParams, is_default: bool, unit: RateUnit, rows: &[Row]) {
    let label = unit.label();
    let headers = [
        ("size".to_string(), Align::Right),
        (format!("write {label}"), Align::Right),
        ("write %".to_string(), Align::Right),
        ("write limit".to_string(), Align::Left),
        ("back %".to_string(), Align::Right),
        (format!("read {label}"), Align::Right),
        ("read %".to_string(), Align::Right),
        ("read limit".to_string(), Align::Left),
        (format!("both: write {label}"), Align::Right),
        (format!("both: read {label}"), Align::Right),
    ];
    let columns: Vec<(&str, Align)> = headers.iter().map(|(h, a)| (h.as_str(), *a)).collect();
    let mut table = Table::new(&columns);
    for r in rows {
        table.row(vec![
            format_size(r.size_bytes),
            rate(unit, r.write.mbps),
            percent(r.write.efficiency),
            r.write.limit.name().to_string(),
            percent(r.write_opposite_mbps / params.link.encoded_mbps()),
            rate(unit, r.read.mbps),
            percent(r.read.efficiency),
            r.read.limit.name().to_string(),
            rate(unit, r.both.write.mbps),
            rate(unit, r.both.read.mbps),
        ]);
    }
    println!("{}", describe(params, is_default, unit));
    println!("% = payload rate / rate after encoding. both: writes and reads at the same time.");
    println!("back %: share of the opposite direction the writes' ACK/UpdateFC DLLPs take.\n");
    print!("{}", table.render());
}

fn finite_or_null(value: f64) -> Value {
    if value.is_finite() { json!(value) } else { Value::Null }
}

fn run_explain(args: &ModelArgs, params: &LinkParams, is_default: bool, size_bytes: u64) -> anyhow::Result<()> {
    if size_bytes == 0 {
        return invalid("a size of 0 bytes moves nothing: --explain needs at least 1 byte");
    }
    let sw = &args.software;
    if !(sw.sw_overhead_us >= 0.0 && sw.sw_overhead_us.is_finite()) {
        return invalid(format!("invalid software overhead {} µs: must be 0 or more", sw.sw_overhead_us));
    }
    let software = explain::Software {
        message_bytes: sw.msg_bytes,
        message_overhead_bytes: sw.msg_overhead_bytes,
        per_transfer_us: sw.sw_overhead_us,
    };
    let waterfalls =
        [explain::write_waterfall(params, size_bytes, software), explain::read_waterfall(params, size_bytes, software)];
    if args.output.json {
        return print_link_json("explain", &params, is_default, json!({
            "software": software,
            "waterfalls": waterfalls,
        }));
    }
    let unit = args.output.unit;
    if args.output.csv {
        println!("kind,size_bytes,step,bytes,{},percent_of_raw", unit_suffix(unit));
        for w in &waterfalls {
            for s in &w.steps {
                println!("{},{},\"{}\",{},{},{}", w.kind, w.size_bytes, s.name, s.bytes, unit.from_mbps(s.mbps), s.percent_of_raw);
            }
        }
        return Ok(());
    }
    println!("{}", describe(params, is_default, unit));
    for w in &waterfalls {
        let direction = if w.kind == "write" { "posted writes, write direction" } else { "reads, completion direction" };
        println!(
            "\n{} of {} ({direction}), {:.1} ns on the link; bytes = what is left within that time:",
            w.kind,
            format_size(w.size_bytes),
            w.duration_ns
        );
        let label = unit.label().to_string();
        let mut table =
            Table::new(&[("step", Align::Left), ("bytes", Align::Right), (label.as_str(), Align::Right), ("% of raw", Align::Right)]);
        for s in &w.steps {
            table.row(vec![s.name.clone(), format!("{:.1}", s.bytes), rate(unit, s.mbps), format!("{:.2}", s.percent_of_raw)]);
        }
        print!("{}", table.render());
        let o = &w.opposite;
        println!(
            "opposite direction: {:.1} request TLPs + {:.1} DLLPs + {:.1} SKPs = {:.1} B = {} {} ({:.2} % of it after encoding)",
            o.tlps,
            o.dllps,
            o.skps,
            o.total_bytes(),
            rate(unit, w.opposite_mbps),
            unit.label(),
            100.0 * w.opposite_mbps / params.link.encoded_mbps()
        );
    }
    Ok(())
}

fn run_fit(args: FitArgs) -> anyhow::Result<()> {
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
    let fitted = transfer::fit(args.bus_mbps, &points)?;
    let predict = match &args.predict {
        Some(list) => units::parse_size_list(list)?,
        None => Vec::new(),
    };
    let residuals = transfer::residuals(&fitted, &points);
    if args.json {
        let predictions: Vec<Value> =
            predict.iter().map(|&n| json!({"size_bytes": n, "MBps": fitted.rate_mbps(n as f64)})).collect();
        let measured: Vec<Value> = points
            .iter()
            .zip(&residuals)
            .map(|(&(n, r), res)| json!({"size_bytes": n as u64, "MBps": r, "residual": res}))
            .collect();
        return print_json(&json!({
            "schema": SCHEMA,
            "kind": "fit",
            "unit": "MB/s = 10^6 bytes/s",
            "model": "T(N) = N/(B·f) + m",
            "bus_MBps": fitted.bus_mbps,
            "f": fitted.f,
            "m_us": fitted.m_us,
            "asymptotic_MBps": fitted.asymptotic_mbps(),
            "n_half_bytes": fitted.n_half_bytes(),
            "points": measured,
            "predictions": predictions,
        }));
    }
    println!("T(N) = N/(B·f) + m with B = {} MB/s (1 MB/s = 10^6 bytes/s)", fitted.bus_mbps);
    println!("f = {:.10}   m = {:.6} µs   B·f = {:.4} MB/s   N½ = {:.0} bytes", fitted.f, fitted.m_us, fitted.asymptotic_mbps(), fitted.n_half_bytes());
    let mut table = Table::new(&[("size", Align::Right), ("MB/s", Align::Right), ("", Align::Left)]);
    for (&(n, r), res) in points.iter().zip(&residuals) {
        table.row(vec![format_size(n as u64), format!("{r:.4}"), format!("measured, residual {:+.3} %", res * 100.0)]);
    }
    for &n in &predict {
        table.row(vec![format_size(n), format!("{:.4}", fitted.rate_mbps(n as f64)), "predicted".to_string()]);
    }
    print!("\n{}", table.render());
    Ok(())
}

/// Most accesses `--record` counts: far beyond any trace, and small enough that bytes and
/// times stay exact.
const MAX_RECORD_ACCESSES: u64 = 1_000_000_000;

fn run_mmio(args: MmioArgs) -> anyhow::Result<()> {
    let (params, is_default) = args.link.params()?;
    let unit = args.output.unit;
    let rows: Vec<mmio::SingleAccess> = mmio::ACCESS_SIZES.iter().map(|&n| mmio::single_access(&params, n)).collect();
    let record = mmio_records(&args, &params)?;
    if args.output.json {
        return print_link_json("mmio", &params, is_default, json!({
            "rows": rows.iter().map(|r| json!({
                "size_bytes": r.access_bytes,
                "write_MBps": r.write.mbps,
                "write_efficiency": r.write.efficiency,
                "read_MBps": r.read.mbps,
                "read_efficiency": r.read.efficiency,
                "limit": {"write": r.write.limit, "read": r.read.limit},
            })).collect::<Vec<_>>(),
            "record": record.map(|(w, _)| w),
            "read_record": record.map(|(_, r)| r),
        }));
    }
    let u = unit_suffix(unit);
    if args.output.csv {
        println!("size_bytes,write_{u},write_efficiency,read_{u},read_efficiency,read_limit");
        for r in &rows {
            println!("{},{},{:.6},{},{:.6},{}", r.access_bytes, unit.from_mbps(r.write.mbps), r.write.efficiency, unit.from_mbps(r.read.mbps), r.read.efficiency, r.read.limit.name());
        }
        return Ok(());
    }
    println!("{}", describe(&params, is_default, unit));
    println!("Single CPU accesses: back-to-back posted writes; reads one at a time (the CPU waits for each).\n");
    print!("{}", single_access_table(unit, &rows).render());
    if let Some((writes, reads)) = record {
        print_mmio_records(unit, &writes, &reads);
    }
    Ok(())
}

/// The `--record` streams of writes and of reads, after checking the count and the access size.
fn mmio_records(args: &MmioArgs, params: &LinkParams) -> anyhow::Result<Option<(mmio::WriteRecord, mmio::ReadRecord)>> {
    match args.record {
        Some(0) => invalid("--record needs at least 1 access"),
        Some(count) if count > MAX_RECORD_ACCESSES => invalid(format!("--record {count}: at most {MAX_RECORD_ACCESSES} accesses (10^9)")),
        Some(count) => {
            if !(1..=4096).contains(&args.access) {
                return invalid(format!("invalid access size {}: allowed 1 to 4096 bytes", args.access));
            }
            Ok(Some((mmio::write_record(params, args.access, count), mmio::read_record(params, args.access, count))))
        }
        None => Ok(None),
    }
}

fn single_access_table(unit: RateUnit, rows: &[mmio::SingleAccess]) -> Table {
    let (w, r) = (format!("write {}", unit.label()), format!("read {}", unit.label()));
    let mut table = Table::new(&[
        ("access", Align::Right),
        (w.as_str(), Align::Right),
        ("write %", Align::Right),
        (r.as_str(), Align::Right),
        ("read %", Align::Right),
        ("read limit", Align::Left),
    ]);
    for row in rows {
        table.row(vec![
            format!("{} B", row.access_bytes),
            rate(unit, row.write.mbps),
            percent(row.write.efficiency),
            rate(unit, row.read.mbps),
            percent(row.read.efficiency),
            row.read.limit.name().to_string(),
        ]);
    }
    table
}

fn print_mmio_records(unit: RateUnit, rec: &mmio::WriteRecord, reads: &mmio::ReadRecord) {
    println!(
        "\nRecord of {} writes of {} B: {:.0} ns ({} TLPs, {} SKPs); payload {} {label}",
        rec.count,
        rec.access_bytes,
        rec.duration_ns,
        rec.data.tlps,
        rec.data.skps,
        rate(unit, rec.payload_mbps),
        label = unit.label()
    );
    println!(
        "  write direction allocated: {:.0} B = {} {label} ({:.1} %)",
        rec.data.total_bytes(),
        rate(unit, rec.data_allocated_mbps),
        rec.data_allocated_fraction * 100.0,
        label = unit.label()
    );
    println!(
        "  opposite direction allocated by {} DLLPs: {:.0} B = {} {label} ({:.1} %)",
        rec.opposite.dllps,
        rec.opposite.dllp_bytes,
        rate(unit, rec.opposite_allocated_mbps),
        rec.opposite_allocated_fraction * 100.0,
        label = unit.label()
    );
    println!(
        "Record of {} reads of {} B, one at a time: {:.0} ns each, {:.0} ns; payload {} {label}",
        reads.count,
        reads.access_bytes,
        reads.per_read_ns,
        reads.duration_ns,
        rate(unit, reads.payload_mbps),
        label = unit.label()
    );
}

fn run_wc(args: WcArgs) -> anyhow::Result<()> {
    let (params, is_default) = args.link.params()?;
    let unit = args.output.unit;
    let sizes = units::parse_size_list(&args.sizes)?;
    if let Some(&too_big) = sizes.iter().find(|&&s| s > 1 << 20) {
        return invalid(format!("write-combining size {too_big} too large: allowed 1 byte to 1 MiB"));
    }
    let rows: Vec<write_combining::WcRow> = sizes.iter().map(|&s| write_combining::row(&params, s)).collect();
    if args.output.json {
        return print_link_json("write_combining", &params, is_default, json!({
            "rows": rows,
        }));
    }
    let tlp_text = |row: &write_combining::WcRow| {
        row.tlps.iter().map(|(len, n)| format!("{n} × {len} B")).collect::<Vec<_>>().join(" + ")
    };
    let u = unit_suffix(unit);
    if args.output.csv {
        println!("size_bytes,one_tlp_{u},tlps,write_combining_{u}");
        for r in &rows {
            println!("{},{},\"{}\",{}", r.size_bytes, unit.from_mbps(r.one_tlp_mbps), tlp_text(r), unit.from_mbps(r.wc_mbps));
        }
        return Ok(());
    }
    println!("{}", describe(&params, is_default, unit));
    println!("Sequential writes through 64-byte write-combining buffers: a full buffer leaves as one 64-byte TLP,");
    println!("a partial one in 8-byte chunks. 'one TLP' is the whole write as a single TLP (document 000's column).\n");
    let (one, wc) = (format!("one TLP {}", unit.label()), format!("write combining {}", unit.label()));
    let mut table =
        Table::new(&[("size", Align::Right), (one.as_str(), Align::Right), ("TLPs", Align::Left), (wc.as_str(), Align::Right)]);
    for r in &rows {
        table.row(vec![format!("{} B", r.size_bytes), rate(unit, r.one_tlp_mbps), tlp_text(r), rate(unit, r.wc_mbps)]);
    }
    print!("{}", table.render());
    Ok(())
}

fn run_status(args: StatusArgs) -> anyhow::Result<()> {
    let raw = parse_u64(&args.value, "status word")?;
    let raw = u32::try_from(raw).map_err(|_| InvalidInput::new(format!("status word '{}' does not fit in 32 bits", args.value)))?;
    let word = status::decode_status(raw);
    if args.json {
        return print_json(&json!({"schema": SCHEMA, "kind": "status", "status": word}));
    }
    print!("{word}");
    Ok(())
}

fn run_message(args: MessageArgs) -> anyhow::Result<()> {
    let (params, is_default) = args.link.params()?;
    if args.message_bytes == 0 {
        return invalid("invalid --message-bytes 0: a message needs at least 1 byte of payload");
    }
    for (flag, bytes) in [("--message-bytes", args.message_bytes), ("--overhead-bytes", args.overhead_bytes)] {
        if bytes > crate::units::MAX_SIZE_BYTES {
            return invalid(format!("invalid {flag} {bytes}: at most 1 TiB ({} bytes)", crate::units::MAX_SIZE_BYTES));
        }
    }
    let unit = args.output.unit;
    let result = message::message_throughput(&params, args.message_bytes, args.overhead_bytes);
    let link_overhead = 1.0 - result.link_mbps / params.link.encoded_mbps();
    if args.output.json {
        return print_link_json("message", &params, is_default, json!({
            "encoded_MBps": params.link.encoded_mbps(),
            "link_overhead": link_overhead,
            "result": result,
            "Gbps": result.gbps(),
        }));
    }
    if args.output.csv {
        let u = unit_suffix(unit);
        println!("message_bytes,overhead_bytes,encoded_{u},link_{u},message_efficiency,{u}");
        println!(
            "{},{},{},{},{:.6},{}",
            result.message_bytes,
            result.overhead_bytes,
            unit.from_mbps(params.link.encoded_mbps()),
            unit.from_mbps(result.link_mbps),
            result.message_efficiency,
            unit.from_mbps(result.mbps)
        );
        return Ok(());
    }
    println!("{}", describe(&params, is_default, unit));
    let label = unit.label();
    println!("\nlink after encoding:            {} {label}", rate(unit, params.link.encoded_mbps()));
    println!("after TLP/link overhead:        {} {label} (overhead {:.2} %)", rate(unit, result.link_mbps), link_overhead * 100.0);
    println!(
        "after message overhead:         {} {label} ({} B per {} B message: {:.3} %) = {:.3} Gb/s",
        rate(unit, result.mbps),
        result.overhead_bytes,
        result.message_bytes,
        (1.0 - result.message_efficiency) * 100.0,
        result.gbps()
    );
    Ok(())
}
