//! `pcieperf inspect`: thin wiring over `crate::pci`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::bench::inspect_run::{self, PartlyDecoded};
use crate::error::InvalidInput;
use crate::pci::filter::IdFilter;
use crate::pci::lspci::Naming;
use crate::pci::{self, InspectOptions, Selector, Source};
use crate::report::inspect::Detail;
use crate::report::output;
use crate::report::view::{self, Document, Format, ViewOptions};

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
    /// pci.ids file for names (default /usr/share/misc/pci.ids or /usr/share/hwdata/pci.ids);
    /// `-i` as lspci.
    #[arg(long, short = 'i', value_name = "PATH")]
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
    /// lspci's details, in lspci's text (pcieperf's own lines start with `pcieperf:`): -v
    /// headings, -vv every field, -vvv disabled bridge windows' addresses too.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Config space in hex as lspci prints it: -x 64 bytes, -xxx 256, -xxxx 4096 (reads back
    /// through --dump).
    #[arg(short = 'x', action = clap::ArgAction::Count)]
    pub hex: u8,
    /// Machine-readable output as lspci prints it: -m (backward-compatible) or -mm one quoted
    /// line per device, -vmm tagged blocks.
    #[arg(short = 'm', action = clap::ArgAction::Count, conflicts_with_all = ["hex", "json", "metrics"])]
    pub machine: u8,
    /// Slots named by their path through the bridges above (-P), with every hop's bus (-PP),
    /// as lspci.
    #[arg(short = 'P', action = clap::ArgAction::Count)]
    pub path: u8,
    /// Every slot with its PCI domain, as lspci -D.
    #[arg(short = 'D')]
    pub domains: bool,
    /// The kernel driver in use (from sysfs), as lspci -k.
    #[arg(short = 'k')]
    pub kernel: bool,
    /// Bus-centric view, as lspci -b: addresses and IRQ as the card sees them (its registers).
    /// Without it, sizes from the kernel's resources are added to the registers' addresses.
    #[arg(short = 'b')]
    pub bus_centric: bool,
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
        output::check_all(&[path], &inputs)?;
    }
    let live = args.dump.is_none() && args.sysfs_root.is_none();
    let source = match (&args.dump, &args.sysfs_root) {
        (Some(dump), _) => Source::Dump(dump.clone()),
        (None, Some(root)) => Source::Sysfs(root.clone()),
        (None, None) => Source::Sysfs(pci::sysfs::default_root()),
    };
    let options = InspectOptions { source, pci_ids: args.pci_ids.clone(), selector: args.select, ids: args.ids };
    let view_options = ViewOptions { detail: Detail {
            verbose: args.verbose,
            numeric: args.numeric,
            hex: args.hex,
            machine: args.machine,
            path: args.path,
            domains: args.domains,
            kernel: args.kernel,
            bus_centric: args.bus_centric,
        }, ..ViewOptions::default() };
    if args.tree {
        let mut out = std::io::stdout().lock();
        let notes = pci::tree(&options, args.verbose > 0, Naming::from_count(args.numeric), &mut out)?;
        out.flush()?;
        notes.iter().for_each(super::note);
        return Ok(0);
    }
    if view_options.detail.per_device() && !args.json && args.metrics.is_none() {
        return stream(&options, view_options.detail, args.dump.is_some(), args.strict);
    }
    // Measurement targets exist only on the live machine, and only the table and JSON show them.
    let shows_targets = args.json || (args.verbose == 0 && args.hex == 0 && args.machine == 0 && !args.kernel && args.metrics.is_none());
    let document = inspect_run::run(&options, live && shows_targets)?;
    document.inspection.notes.iter().for_each(super::note);
    if (args.select.is_some() || args.ids.is_some()) && document.inspection.devices.is_empty() {
        // As lspci: a selector that matches nothing prints nothing and is not an error.
        super::note("no PCI device matches -s/-d");
        return Ok(0);
    }
    let mut document = document;
    if args.path > 0 {
        let mut paths = pci::lspci_paths(&options)?;
        for device in &mut document.inspection.devices {
            device.lspci_path = paths.remove(&device.bdf).unwrap_or_default();
        }
    }
    let (partly_decoded, warned) = (document.partly_decoded_note(args.dump.is_some()), document.warned());
    let document = Document::Inspect(document);
    if let Some(path) = &args.metrics {
        output::write_or_keep(path, &view::render(&document, Format::Metrics, &view_options)?, "metrics").map_err(InvalidInput::new)?;
    } else {
        view::print(&document, if args.json { Format::Json } else { Format::Text }, &view_options)?;
    }
    if let Some(note) = partly_decoded.filter(|_| !args.json && args.hex == 0 && args.machine == 0) {
        super::note(note);
    }
    Ok(if args.strict && warned { 1 } else { 0 })
}

/// The module aliases when the view shows `Kernel modules:` (`-k`, `-v`, as lspci) of sysfs
/// devices (a dump has no modalias). With `-k`, a file that cannot be read is said once, as
/// lspci says it ("Unable to load libkmod resources").
fn module_aliases(options: &InspectOptions, detail: Detail) -> Option<pci::modules::Aliases> {
    if !matches!(options.source, Source::Sysfs(_)) || !(detail.kernel || detail.verbose > 0) {
        return None;
    }
    let loaded = pci::modules::default_dir()
        .ok_or_else(|| "the running kernel's release is unknown (/proc/sys/kernel/osrelease)".to_string())
        .and_then(|dir| pci::modules::Aliases::load(&dir));
    match loaded {
        Ok(aliases) => Some(aliases),
        Err(why) => {
            if detail.kernel {
                super::note(format!("kernel modules not shown: {why}"));
            }
            None
        }
    }
}

/// The `-v`/`-x`/`-m`/`-k` views, each device printed as soon as it is inspected: memory stays
/// that of the machine's registers, not of every report and the whole text.
fn stream(options: &InspectOptions, detail: Detail, from_dump: bool, strict: bool) -> anyhow::Result<i32> {
    let inspector = pci::Inspector::load(options)?;
    inspector.notes().iter().for_each(super::note);
    let mut paths = if detail.path > 0 { pci::lspci_paths(options)? } else { Default::default() };
    let style = detail.style(inspector.domains());
    let aliases = module_aliases(options, detail);
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let (mut shown, mut warned, mut partly) = (0usize, false, PartlyDecoded::default());
    for mut device in inspector.reports() {
        if crate::cancel::requested() {
            out.flush()?;
            super::note(format!("interrupted after {shown} device(s)"));
            return Ok(130);
        }
        device.lspci_path = paths.remove(&device.bdf).unwrap_or_default();
        if let (Some(aliases), Some(modalias)) = (&aliases, &device.modalias) {
            device.kernel_modules = aliases.modules_for(modalias);
        }
        out.write_all(crate::report::inspect::device_text(&device, style, detail).as_bytes())?;
        (shown, warned) = (shown + 1, warned || !device.warnings.is_empty());
        partly.add(&device);
    }
    out.flush()?;
    if shown == 0 && (options.selector.is_some() || options.ids.is_some()) {
        // As lspci: a selector that matches nothing prints nothing and is not an error.
        super::note("no PCI device matches -s/-d");
    }
    if let Some(note) = partly.note(from_dump).filter(|_| detail.hex == 0 && detail.machine == 0) {
        super::note(note);
    }
    Ok(if strict && warned { 1 } else { 0 })
}
