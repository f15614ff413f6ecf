//! `pcieperf inspect`: thin wiring over `crate::pci`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::engine::{self, Candidate};
use crate::error::InvalidInput;
use crate::pci::filter::IdFilter;
use crate::pci::lspci::{self, Naming};
use crate::pci::report::Style;
use crate::pci::{self, report, InspectOptions, Selector, Source};

/// Every PCI device's link, limits and theoretical ceiling, from sysfs or an lspci hex dump.
///
/// The flags lspci has mean what they mean in lspci: -s, -d, -n/-nn, -v/-vv/-vvv, -x/-xxx/-xxxx,
/// -F. The default view is one line per device with pcieperf's link analysis.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf inspect                          every device of this machine, one line each
  pcieperf inspect -vv -s 01:00.0           one device, lspci's fields and pcieperf's analysis
  pcieperf inspect -F examples/gen3x8-nic-at-x4.lspci -v
  lspci -vvxxxx | pcieperf inspect -F -     a dump from standard input
  pcieperf inspect -d 10ee: -n -xxxx        Xilinx devices as an lspci dump (reads back with -F)
  pcieperf inspect -tv                      the bus tree with names, as lspci -tv
  pcieperf inspect --metrics -              link health as Prometheus text

Exit codes: 0 done (also when -s/-d match nothing, as lspci), 1 --strict and a warning was found,
2 bad input (unreadable or malformed dump, bad selector).")]
pub struct InspectArgs {
    /// Read devices from an `lspci -x/-xxx/-xxxx` dump (`-` for standard input) instead of the
    /// live machine; as `lspci -F`.
    #[arg(short = 'F', long, value_name = "FILE", conflicts_with = "sysfs_root")]
    pub dump: Option<PathBuf>,
    /// Root of the sysfs tree to read (default /sys).
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// pci.ids file for names (default /usr/share/misc/pci.ids or /usr/share/hwdata/pci.ids).
    #[arg(long, value_name = "PATH")]
    pub pci_ids: Option<PathBuf>,
    /// Only devices in [[[domain]:][bus]:][device][.[function]], as lspci -s.
    #[arg(short = 's', value_name = "SELECTOR")]
    pub select: Option<Selector>,
    /// Only devices with these IDs: [vendor]:[device][:class[:prog_if]], as lspci -d.
    #[arg(short = 'd', value_name = "IDS")]
    pub ids: Option<IdFilter>,
    /// Numeric IDs (-n), or names and numbers (-nn), as lspci.
    #[arg(short = 'n', action = clap::ArgAction::Count)]
    pub numeric: u8,
    /// lspci's details: -v headings and pcieperf's analysis, -vv every decoded field, -vvv raw
    /// registers too.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Config space in hex as lspci prints it: -x 64 bytes, -xxx 256, -xxxx 4096 (reads back
    /// through --dump).
    #[arg(short = 'x', action = clap::ArgAction::Count)]
    pub hex: u8,
    /// The bus tree as lspci -t draws it (-tv with names; -n/-nn as lspci).
    #[arg(short = 't', conflicts_with_all = ["hex", "json", "metrics"])]
    pub tree: bool,
    /// JSON (schema "pcieperf.inspect/1", see docs/inspect.md).
    #[arg(long, conflicts_with_all = ["hex", "metrics"])]
    pub json: bool,
    /// Link health as Prometheus text to FILE (`-` for standard output; see docs/metrics.md).
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Exit with code 1 when any warning is found.
    #[arg(long)]
    pub strict: bool,
}

pub fn run(args: InspectArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.metrics {
        let inputs: Vec<PathBuf> = [args.dump.clone(), args.pci_ids.clone()].into_iter().flatten().collect();
        crate::report::output::check_all(&[path], &inputs)?;
    }
    let source = match (&args.dump, &args.sysfs_root) {
        (Some(dump), _) => Source::Dump(dump.clone()),
        (None, Some(root)) => Source::Sysfs(root.clone()),
        (None, None) => Source::Sysfs(pci::sysfs::default_root()),
    };
    let options = InspectOptions { source, pci_ids: args.pci_ids.clone(), selector: args.select, ids: args.ids };
    if args.tree {
        let (tree, notes) = pci::tree(&options, args.verbose > 0, Naming::from_count(args.numeric))?;
        notes.iter().for_each(super::note);
        write!(std::io::stdout().lock(), "{tree}")?;
        return Ok(0);
    }
    let inspection = pci::inspect(&options)?;
    for note in &inspection.notes {
        super::note(note);
    }
    if (args.select.is_some() || args.ids.is_some()) && inspection.devices.is_empty() {
        // As lspci: a selector that matches nothing prints nothing and is not an error.
        super::note("no PCI device matches -s/-d");
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    let style = Style { verbose: args.verbose, naming: Naming::from_count(args.numeric), domains: inspection.domains };
    if let Some(path) = &args.metrics {
        let text = crate::report::metrics::inspection(&inspection, std::time::SystemTime::now());
        crate::report::output::write_or_keep(path, &text, "metrics").map_err(InvalidInput::new)?;
    } else if args.json {
        // Measurement targets exist only on the live machine, not in a dump from elsewhere.
        let targets = if args.dump.is_none() && args.sysfs_root.is_none() { engine::detect() } else { Vec::new() };
        let mut document = serde_json::to_value(&inspection)?;
        document["targets"] = serde_json::to_value(&targets)?;
        serde_json::to_writer_pretty(&mut out, &document)?;
        writeln!(out)?;
    } else if args.verbose > 0 || args.hex > 0 {
        write_lspci_style(&mut out, &inspection, style, args.hex)?;
    } else {
        write!(out, "{}", report::render_table(&inspection.devices, style.naming))?;
        writeln!(out, "GB/s = 10^9 B/s: model write ceiling at 4 MiB transfers, path as trained / capable; -v: details")?;
        if args.dump.is_none() && args.sysfs_root.is_none() {
            write_targets(&mut out, &engine::detect())?;
        }
    }
    let limited = inspection.devices.iter().filter(|d| !d.unavailable.is_empty()).count();
    if limited > 0 && !args.json && args.hex == 0 {
        let fix = if args.dump.is_some() { "a longer dump (lspci -xxxx as root)" } else { "root" };
        super::note(format!("{limited} device(s) only partly decoded; {fix} is needed for MaxPayload, ASPM and AER (-v lists what is missing)"));
    }
    let warned = inspection.devices.iter().any(|d| !d.warnings.is_empty());
    Ok(if args.strict && warned { 1 } else { 0 })
}

/// `-v` and `-x` views: one block per device, each ended by a blank line, as lspci prints them.
fn write_lspci_style(out: &mut impl Write, inspection: &pci::Inspection, style: Style, hex: u8) -> std::io::Result<()> {
    for device in &inspection.devices {
        if style.verbose > 0 {
            write!(out, "{}", report::render_verbose(device, style))?;
        } else {
            writeln!(out, "{}", lspci::device_line(&device.identity(), style.naming, style.domains, false))?;
        }
        if hex > 0 {
            write!(out, "{}", lspci::hex_dump(&device.config, hex))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The measurement targets found, and which one `pcieperf run` would use unasked.
fn write_targets(out: &mut impl Write, targets: &[Candidate]) -> std::io::Result<()> {
    if targets.is_empty() {
        return Ok(());
    }
    let choice = engine::choose(None, targets);
    let chosen = targets.iter().any(|t| t.target == choice.target).then_some(choice.target.as_str());
    writeln!(out, "\nMeasurement targets (pcieperf dma --target …):")?;
    for target in targets {
        let mark = if Some(target.target.as_str()) == chosen { "run would use" } else if target.usable { "usable" } else { "not usable" };
        writeln!(out, "  {} [{mark}]: {}", target.target, target.reason)?;
    }
    if chosen.is_none() {
        writeln!(out, "  none usable unasked: pcieperf run measures the simulated endpoint `sim`")?;
    }
    Ok(())
}
