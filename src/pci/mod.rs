//! PCI devices: addresses, config-space decoding, sysfs and lspci-dump input, pci.ids names, the
//! path to the root port and what limits it. Reads sysfs only; never writes to a device.
//!
//! Entry points: [`inspect`] (whole machine or dump, with machine-level notes),
//! [`inspect_machine`] (just the device reports) and [`inspect_device`] (one BDF).

pub mod address;
pub mod analysis;
pub mod caps;
pub mod conditions;
pub mod config;
pub mod nodes;
pub mod path_state;
pub mod path_summary;
pub mod device;
pub mod dump;
pub mod emulated;
pub mod health;
pub mod iommu;
pub mod filter;
pub mod ids;
pub mod lspci;
pub mod lspci_header;
pub mod lspci_machine;
pub mod modules;
pub mod report;
pub mod sysfs;
pub mod topology;
pub mod tree;
pub mod walk;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

pub use address::{Bdf, Selector};
pub use device::Device;
pub use report::{DeviceCeiling, DeviceReport, Inspection, LinkCeiling, LinkState, SCHEMA};

use crate::error::InvalidInput;

/// Where devices come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A sysfs tree: `/sys` for the live machine.
    Sysfs(PathBuf),
    /// An `lspci -x/-xxx/-xxxx` dump file.
    Dump(PathBuf),
}

/// What to inspect and how to name it.
#[derive(Debug, Clone)]
pub struct InspectOptions {
    pub source: Source,
    /// pci.ids to use; `None` tries the Debian locations, and a missing file means numeric IDs.
    pub pci_ids: Option<PathBuf>,
    /// Only report devices matching this (the path analysis still sees every device).
    pub selector: Option<Selector>,
    /// Only report devices with these IDs (lspci's `-d`).
    pub ids: Option<filter::IdFilter>,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions { source: Source::Sysfs(sysfs::default_root()), pci_ids: None, selector: None, ids: None }
    }
}

/// Every device of a source, decoded, keyed by address.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub devices: BTreeMap<Bdf, Device>,
    /// Devices that could not be read at all, and similar machine-level notes.
    pub notes: Vec<String>,
    pub live: bool,
    /// Some function of the source, loaded or not, has a non-zero PCI domain (lspci then prints
    /// every domain).
    pub domains: bool,
    /// (domain, secondary bus) → the bridge that opens that bus: finds a dump device's parent
    /// without scanning every device at every hop.
    bridge_to_bus: HashMap<(u32, u8), Bdf>,
}

impl Machine {
    /// Every function of `source`, decoded.
    pub fn load(source: &Source) -> anyhow::Result<Machine> {
        let (mut machine, others) = Machine::load_paths(source, |_, _| true)?;
        machine.devices.extend(others.into_values().map(|f| (f.bdf, f.decode())));
        Ok(machine)
    }

    /// Every function another one's path goes through (bridges; a live function's sysfs
    /// parent), decoded, and apart the other functions `keep` accepts, as read: a report
    /// decodes its own function when it is built, so the machine holds their bytes, not their
    /// decoded capabilities, and `-s`/`-d` keep only what their reports need. A dump is read as
    /// a stream: neither its text nor the bytes of a function not kept are held.
    pub fn load_paths(source: &Source, keep: impl Fn(&Bdf, &config::ConfigSpace) -> bool) -> anyhow::Result<(Machine, BTreeMap<Bdf, Function>)> {
        let mut machine = Machine::default();
        let mut others = BTreeMap::new();
        (machine.notes, machine.live) = match source {
            Source::Dump(_) => Functions::each(source, |f| {
                machine.domains |= f.bdf.domain != 0;
                let on_path = f.config.bridge_buses().is_some();
                if on_path || keep(&f.bdf, &f.config) {
                    place(f, on_path, &mut machine.devices, &mut others);
                }
            })?,
            Source::Sysfs(_) => {
                let read = Functions::read(source)?;
                machine.domains = read.list.iter().any(|f| f.bdf.domain != 0);
                let parents: std::collections::HashSet<Bdf> = read.list.iter().filter_map(|f| f.parent).collect();
                for f in read.list {
                    let on_path = parents.contains(&f.bdf) || f.config.bridge_buses().is_some();
                    if on_path || keep(&f.bdf, &f.config) {
                        place(f, on_path, &mut machine.devices, &mut others);
                    }
                }
                (read.notes, read.live)
            }
        };
        machine.index_bridges();
        Ok((machine, others))
    }

    /// Index the bridges by the bus they open; the first in address order wins, as a scan would
    /// find it.
    fn index_bridges(&mut self) {
        for d in self.devices.values() {
            // A secondary bus at or below the bridge's own is unconfigured, not a parent.
            if let Some((_, secondary, _)) = d.config.bridge_buses().filter(|&(_, secondary, _)| secondary > d.bdf.bus) {
                self.bridge_to_bus.entry((d.bdf.domain, secondary)).or_insert(d.bdf);
            }
        }
    }

    /// The bridge above the decoded function `bdf` ([`Machine::parent_above`]).
    pub fn parent_of(&self, bdf: &Bdf) -> Option<&Device> {
        self.parent_above(bdf, self.devices.get(bdf)?.sysfs_parent)
    }

    /// The bridge above `bdf`: its sysfs parent when live, else the type 1 header whose
    /// secondary bus is `bdf`'s bus (how a dump from another machine is placed in its tree).
    pub fn parent_above(&self, bdf: &Bdf, sysfs_parent: Option<Bdf>) -> Option<&Device> {
        if let Some(parent) = sysfs_parent {
            return self.devices.get(&parent);
        }
        if self.live {
            return None;
        }
        self.bridge_to_bus.get(&(bdf.domain, bdf.bus)).and_then(|parent| self.devices.get(parent))
    }

    /// `bdf`'s upstream bridges, nearest first. A dump's parent is on a lower bus and sysfs is
    /// a directory tree, so no path has a cycle; the walk is bounded all the same (256 buses).
    pub fn upstream(&self, bdf: &Bdf) -> Vec<&Device> {
        let mut path: Vec<&Device> = Vec::new();
        let mut current = *bdf;
        while let Some(parent) = self.parent_of(&current).filter(|p| p.bdf != *bdf && path.len() <= 256) {
            path.push(parent);
            current = parent.bdf;
        }
        path
    }
}

/// A function as read from its source, not decoded.
#[derive(Clone)]
pub struct Function {
    pub bdf: Bdf,
    pub config: config::ConfigSpace,
    /// Parent bridge from sysfs.
    pub parent: Option<Bdf>,
    pub attributes: Option<sysfs::Attributes>,
    pub notes: Vec<String>,
}

impl Function {
    pub fn decode(self) -> Device {
        Device::decode(self.bdf, self.config, self.parent, self.attributes, self.notes)
    }
}

/// Keep `f` decoded in `devices` when paths go through it, else as read in `others`; a
/// duplicated address keeps the first (the dump reader warns).
fn place(f: Function, on_path: bool, devices: &mut BTreeMap<Bdf, Device>, others: &mut BTreeMap<Bdf, Function>) {
    if devices.contains_key(&f.bdf) || others.contains_key(&f.bdf) {
        return;
    }
    if on_path {
        devices.insert(f.bdf, f.decode());
    } else {
        others.insert(f.bdf, f);
    }
}

/// Every function of a source, in address order, once each: what `Machine` decodes, and all
/// that `-t` and `-P` need.
pub struct Functions {
    pub list: Vec<Function>,
    /// Devices that could not be read at all, dump oddities.
    pub notes: Vec<String>,
    pub live: bool,
}

impl Functions {
    pub fn read(source: &Source) -> anyhow::Result<Functions> {
        let mut list = Vec::new();
        let (notes, live) = Functions::each(source, |f| list.push(f))?;
        // A duplicated address: lspci lists both copies, the first is kept here (warned).
        list.sort_by_key(|f| f.bdf);
        list.dedup_by_key(|f| f.bdf);
        Ok(Functions { list, notes, live })
    }

    /// Every function of a source, in the source's order, handed to `each` as it is read (a
    /// dump is streamed: its text is never held whole); the source's notes and whether it is
    /// the live machine.
    pub fn each(source: &Source, mut each: impl FnMut(Function)) -> anyhow::Result<(Vec<String>, bool)> {
        match source {
            Source::Sysfs(root) => {
                let scan = sysfs::scan(root)?;
                for d in scan.devices {
                    each(Function { bdf: d.bdf, config: d.config, parent: d.parent, attributes: Some(d.attributes), notes: d.notes });
                }
                Ok((scan.notes, true))
            }
            Source::Dump(path) => {
                let mut read = 0usize;
                let warnings = dump::read_each(path, |d| {
                    read += 1;
                    each(Function { bdf: d.bdf, config: d.config, parent: None, attributes: None, notes: Vec::new() });
                })?;
                if read == 0 {
                    let oddities = warnings.first().map_or(String::new(), |w| format!(" ({w})"));
                    return Err(InvalidInput::new(format!("no device line (such as '01:00.0 …') in dump {}: lspci -F lists nothing from it either{oddities}", path.display())).into());
                }
                Ok((warnings.iter().map(|w| format!("dump: {w}")).collect(), false))
            }
        }
    }
}

/// A loaded source whose device reports are built one at a time, in address order: [`inspect`]
/// collects them, the command line prints each as it is built, so one report is alive at a time
/// whatever the size of the machine.
pub struct Inspector {
    /// The functions paths go through, decoded.
    machine: Machine,
    /// The other selected functions, decoded when their report is built.
    others: BTreeMap<Bdf, Function>,
    names: ids::PciIds,
    options: InspectOptions,
    notes: Vec<String>,
}

impl Inspector {
    /// Load the source of `options` (with `-s`/`-d`, only what the selected reports need) and
    /// the pci.ids names its devices use.
    pub fn load(options: &InspectOptions) -> anyhow::Result<Inspector> {
        let filtered = options.selector.is_some() || options.ids.is_some();
        let (machine, others) = Machine::load_paths(&options.source, |bdf, config| !filtered || options.selects_config(bdf, config))?;
        let names = names_for(machine.devices.values().map(|d| (&d.config, d.subsystem_capability())).chain(others.values().map(|f| (&f.config, None))), options)?;
        let mut notes = machine.notes.clone();
        notes.extend(unread_ids_note(options, &names));
        if let Source::Sysfs(root) = &options.source {
            if let Some(vm) = emulated::virtual_machine(root) {
                notes.push(format!(
                    "this machine is virtual ({vm}): functions its hypervisor emulates have nominal links and move data at the emulator's speed; \
                     those with a hypervisor's IDs are marked emulated, others may be emulated too (or passed through)"
                ));
            }
        }
        Ok(Inspector { machine, others, names, options: options.clone(), notes })
    }

    /// Machine-level notes (unreadable devices, dump oddities, pci.ids, virtual machine).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether lspci would print every slot with its domain.
    pub fn domains(&self) -> bool {
        self.machine.domains
    }

    /// The selected devices' reports, built as they are taken, in address order.
    pub fn reports(&self) -> impl Iterator<Item = DeviceReport> + '_ {
        let mut ceilings = report::Ceilings::default();
        let mut paths = path_summary::Summaries::new(&self.machine);
        let mut on_paths = self.machine.devices.values().filter(|d| self.options.selects(d)).peekable();
        let mut others = self.others.values().peekable();
        std::iter::from_fn(move || {
            let on_path_first = match (on_paths.peek(), others.peek()) {
                (Some(d), Some(f)) => d.bdf < f.bdf,
                (d, _) => d.is_some(),
            };
            let decoded;
            let device = match on_path_first {
                true => on_paths.next()?,
                false => {
                    decoded = others.next()?.clone().decode();
                    &decoded
                }
            };
            Some(report::build(&self.machine, device, paths.above(device), &self.names, &mut ceilings))
        })
    }

    /// The inspection document around `devices` (this inspector's reports).
    pub fn inspection(self, devices: Vec<DeviceReport>) -> Inspection {
        Inspection {
            schema: SCHEMA,
            source: match &self.options.source {
                Source::Sysfs(root) => format!("sysfs:{}", root.display()),
                Source::Dump(path) => format!("dump:{}", path.display()),
            },
            pci_ids: self.names.source.as_ref().map(|p| p.display().to_string()),
            privileged: self.machine.live && sysfs::is_root(),
            domains: self.machine.domains,
            devices,
            notes: self.notes,
        }
    }
}

/// Inspect a whole source: reports for the selected devices and machine-level notes.
pub fn inspect(options: &InspectOptions) -> anyhow::Result<Inspection> {
    let inspector = Inspector::load(options)?;
    let devices = inspector.reports().collect();
    Ok(inspector.inspection(devices))
}

/// A note when the pci.ids file the user named could not be read: devices go unnamed, and the
/// user should know why.
fn unread_ids_note(options: &InspectOptions, names: &ids::PciIds) -> Option<String> {
    let path = options.pci_ids.as_deref().filter(|_| names.source.is_none())?;
    let why = std::fs::metadata(path).err().map_or("unreadable".to_string(), |e| e.to_string());
    Some(format!("--pci-ids {}: cannot be read ({why}); devices are shown by number", path.display()))
}

/// The pci.ids entries of the vendors and subsystem vendors of `functions`: each a config space
/// and, decoded, its Subsystem ID capability's IDs (only a bridge's subsystem is there, and every
/// bridge long enough to have capabilities is decoded).
fn names_for<'a>(functions: impl Iterator<Item = (&'a config::ConfigSpace, Option<(u16, u16)>)>, options: &InspectOptions) -> anyhow::Result<ids::PciIds> {
    let vendors = functions.flat_map(|(config, capability)| [config.vendor_id(), lspci::subsystem_ids(config, capability).map(|ids| ids.0)]);
    names_of(vendors.flatten().collect(), options)
}

/// The pci.ids entries of `vendors`.
fn names_of(vendors: std::collections::BTreeSet<u16>, options: &InspectOptions) -> anyhow::Result<ids::PciIds> {
    // A named pci.ids that exists must be a regular file within the limit (a missing one leaves
    // devices unnamed, as before).
    if let Some(path) = options.pci_ids.as_deref().filter(|p| p.exists()) {
        crate::bounded::check_file(path, crate::bounded::PCI_IDS)?;
    }
    Ok(ids::PciIds::load_for(options.pci_ids.as_deref(), &vendors))
}

/// `-t`: the bus tree of the whole source as `lspci -t` draws it (`verbose`: with names, as
/// `-tv`), devices outside `-s`/`-d` pruned as lspci prunes them, written to `out` as it is
/// drawn; the source's notes. Needs bus numbers and IDs only: nothing is decoded, names are
/// loaded only for `-tv`.
pub fn tree(options: &InspectOptions, verbose: bool, naming: lspci::Naming, out: &mut dyn std::io::Write) -> anyhow::Result<Vec<String>> {
    let read = Functions::read(&options.source)?;
    let named = verbose && naming.names;
    // Without names pci.ids is not read at all (lspci -t does not read it either).
    let names = if named { names_of(read.list.iter().filter_map(|f| f.config.vendor_id()).collect(), options)? } else { ids::PciIds::default() };
    let devices = tree_devices(&read, options, |config| {
        if !verbose {
            return String::new();
        }
        lspci::fit(names.named(config.vendor_id().unwrap_or(0xffff), config.device_id().unwrap_or(0xffff), naming), lspci::LONG_NAME_BYTES)
    });
    drop(read.list);
    tree::write(&devices, verbose, options.selector.is_some() || options.ids.is_some(), out)?;
    Ok(read.notes.into_iter().chain(unread_ids_note(options, &names).filter(|_| named)).collect())
}

/// Every device of the source with the bridges above it as lspci places them (nearest first):
/// what `-P`/`-PP` name slots by.
pub fn lspci_paths(options: &InspectOptions) -> anyhow::Result<HashMap<Bdf, Vec<Bdf>>> {
    let devices = tree_devices(&Functions::read(&options.source)?, options, |_| String::new());
    let parents = tree::parents(&devices);
    let chain = |mut at: usize| {
        let mut up = Vec::new();
        while let Some(parent) = parents[at].filter(|p| up.len() <= devices.len() && *p != at) {
            up.push(devices[parent].bdf);
            at = parent;
        }
        up
    };
    Ok(devices.iter().enumerate().map(|(at, d)| (d.bdf, chain(at))).collect())
}

fn tree_devices(read: &Functions, options: &InspectOptions, name: impl Fn(&config::ConfigSpace) -> String) -> Vec<tree::TreeDevice> {
    read.list
        .iter()
        .map(|f| tree::TreeDevice { bdf: f.bdf, bridge_buses: tree::bridge_buses(&f.config), parent: f.parent, name: name(&f.config), selected: options.selects_config(&f.bdf, &f.config) })
        .collect()
}

impl InspectOptions {
    /// Whether `-s` and `-d` keep this device.
    pub fn selects(&self, device: &Device) -> bool {
        self.selects_config(&device.bdf, &device.config)
    }

    /// [`Self::selects`] on a function's address and bytes, before it is decoded.
    pub fn selects_config(&self, bdf: &Bdf, config: &config::ConfigSpace) -> bool {
        self.selector.is_none_or(|s| s.matches(bdf)) && self.ids.is_none_or(|f| f.matches(config))
    }
}

/// Reports for every selected device of the machine (or dump) in `options`.
pub fn inspect_machine(options: &InspectOptions) -> anyhow::Result<Vec<DeviceReport>> {
    Ok(inspect(options)?.devices)
}

/// The report for one device; an unknown address is bad input (exit code 2).
pub fn inspect_device(bdf: &Bdf, options: &InspectOptions) -> anyhow::Result<DeviceReport> {
    let selector = Selector { domain: Some(bdf.domain), bus: Some(bdf.bus), device: Some(bdf.device), function: Some(bdf.function) };
    let options = InspectOptions { selector: Some(selector), ..options.clone() };
    inspect_machine(&options)?
        .into_iter()
        .next()
        .ok_or_else(|| InvalidInput::new(format!("no PCI device {bdf}")).into())
}
