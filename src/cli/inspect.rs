//! `pcieperf inspect`: thin wiring over `crate::pci`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::engine::{self, Candidate};
use crate::pci::{self, report, InspectOptions, Selector, Source};

/// Every PCI device's link, limits and theoretical ceiling, from sysfs or an lspci hex dump.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Read devices from an `lspci -x/-xxx/-xxxx` dump instead of the live machine.
    #[arg(long, value_name = "FILE", conflicts_with = "sysfs_root")]
    pub dump: Option<PathBuf>,
    /// Root of the sysfs tree to read (default /sys).
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// pci.ids file for names (default /usr/share/misc/pci.ids or /usr/share/hwdata/pci.ids).
    #[arg(long, value_name = "PATH")]
    pub pci_ids: Option<PathBuf>,
    /// Only devices matching [[domain:]bus:][device][.function].
    #[arg(short = 's', value_name = "SELECTOR")]
    pub select: Option<Selector>,
    /// Details of every decoded field; twice adds raw registers.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// JSON (schema "pcieperf.inspect" version 1, see docs/inspect.md).
    #[arg(long)]
    pub json: bool,
    /// Exit with code 1 when any warning is found.
    #[arg(long)]
    pub strict: bool,
}

pub fn run(args: InspectArgs) -> anyhow::Result<i32> {
    let source = match (&args.dump, &args.sysfs_root) {
        (Some(dump), _) => Source::Dump(dump.clone()),
        (None, Some(root)) => Source::Sysfs(root.clone()),
        (None, None) => Source::Sysfs(pci::sysfs::default_root()),
    };
    let options = InspectOptions { source, pci_ids: args.pci_ids.clone(), selector: args.select };
    let inspection = pci::inspect(&options)?;
    if args.select.is_some() && inspection.devices.is_empty() {
        return crate::error::invalid("no PCI device matches the -s selector");
    }
    // Measurement targets exist only on the live machine, not in a dump from elsewhere.
    let targets = if args.dump.is_none() && args.sysfs_root.is_none() { engine::detect() } else { Vec::new() };
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut document = serde_json::to_value(&inspection)?;
        document["targets"] = serde_json::to_value(&targets)?;
        serde_json::to_writer_pretty(&mut out, &document)?;
        writeln!(out)?;
    } else if args.verbose == 0 {
        write!(out, "{}", report::render_table(&inspection.devices))?;
        writeln!(out, "GB/s = 10^9 B/s: model write ceiling at 4 MiB transfers, trained path / capable link. -v for details.")?;
    } else {
        for device in &inspection.devices {
            writeln!(out, "{}", report::render_verbose(device, args.verbose >= 2))?;
        }
    }
    if !args.json {
        write_targets(&mut out, &targets)?;
    }
    for note in &inspection.notes {
        eprintln!("pcieperf: note: {note}");
    }
    let limited = inspection.devices.iter().filter(|d| !d.unavailable.is_empty()).count();
    if limited > 0 && !args.json {
        let fix = if args.dump.is_some() { "a longer dump (lspci -xxxx as root)" } else { "root" };
        eprintln!("pcieperf: note: {limited} device(s) only partly decoded; {fix} is needed for MaxPayload, ASPM and AER (-v lists what is missing)");
    }
    let warned = inspection.devices.iter().any(|d| !d.warnings.is_empty());
    Ok(if args.strict && warned { 1 } else { 0 })
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
