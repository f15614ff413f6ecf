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
pub mod device;
pub mod dump;
pub mod emulated;
pub mod health;
pub mod filter;
pub mod ids;
pub mod lspci;
pub mod lspci_header;
pub mod lspci_machine;
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
    /// (domain, secondary bus) → the bridge that opens that bus: finds a dump device's parent
    /// without scanning every device at every hop.
    bridge_to_bus: HashMap<(u32, u8), Bdf>,
}

impl Machine {
    pub fn load(source: &Source) -> anyhow::Result<Machine> {
        let mut machine = Machine::default();
        match source {
            Source::Sysfs(root) => {
                let scan = sysfs::scan(root)?;
                machine.live = true;
                machine.notes = scan.notes;
                for d in scan.devices {
                    machine.devices.insert(d.bdf, Device::decode(d.bdf, d.config, d.parent, Some(d.attributes), d.notes));
                }
            }
            Source::Dump(path) => {
                let dump = dump::read(path)?;
                if dump.devices.is_empty() {
                    let oddities = dump.warnings.first().map_or(String::new(), |w| format!(" ({w})"));
                    return Err(InvalidInput::new(format!("no device line (such as '01:00.0 …') in dump {}: lspci -F lists nothing from it either{oddities}", path.display())).into());
                }
                machine.notes = dump.warnings.iter().map(|w| format!("dump: {w}")).collect();
                for d in dump.devices {
                    // A duplicated address: lspci lists both copies, the first is kept here (warned).
                    machine.devices.entry(d.bdf).or_insert_with(|| Device::decode(d.bdf, d.config, None, None, Vec::new()));
                }
            }
        }
        machine.index_bridges();
        Ok(machine)
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

    /// The bridge above `bdf`: from sysfs, else the type 1 header whose secondary bus is
    /// `bdf`'s bus (how a dump from another machine is placed in its tree).
    pub fn parent_of(&self, bdf: &Bdf) -> Option<&Device> {
        let device = self.devices.get(bdf)?;
        if let Some(parent) = device.sysfs_parent {
            return self.devices.get(&parent);
        }
        if self.live {
            return None;
        }
        self.bridge_to_bus.get(&(bdf.domain, bdf.bus)).and_then(|parent| self.devices.get(parent))
    }

    /// `bdf`'s upstream bridges, nearest first (bounded: a cycle in bad input ends the walk).
    pub fn upstream(&self, bdf: &Bdf) -> Vec<&Device> {
        let mut path: Vec<&Device> = Vec::new();
        let mut current = *bdf;
        while let Some(parent) = self.parent_of(&current) {
            if parent.bdf == *bdf || path.iter().any(|d| d.bdf == parent.bdf) || path.len() > 256 {
                break;
            }
            path.push(parent);
            current = parent.bdf;
        }
        path
    }
}

/// Inspect a whole source: reports for the selected devices and machine-level notes.
pub fn inspect(options: &InspectOptions) -> anyhow::Result<Inspection> {
    let machine = Machine::load(&options.source)?;
    let names = names_for(&machine, options)?;
    let devices = machine.devices.values().filter(|d| options.selects(d)).map(|d| report::build(&machine, &d.bdf, &names)).collect();
    let mut notes = machine.notes;
    notes.extend(unread_ids_note(options, &names));
    if let Source::Sysfs(root) = &options.source {
        if let Some(vm) = emulated::virtual_machine(root) {
            notes.push(format!(
                "this machine is virtual ({vm}): functions its hypervisor emulates have nominal links and move data at the emulator's speed; \
                 those with a hypervisor's IDs are marked emulated, others may be emulated too (or passed through)"
            ));
        }
    }
    Ok(Inspection {
        schema: SCHEMA,
        source: match &options.source {
            Source::Sysfs(root) => format!("sysfs:{}", root.display()),
            Source::Dump(path) => format!("dump:{}", path.display()),
        },
        pci_ids: names.source.as_ref().map(|p| p.display().to_string()),
        privileged: machine.live && sysfs::is_root(),
        domains: machine.devices.keys().any(|bdf| bdf.domain != 0),
        devices,
        notes,
    })
}

/// A note when the pci.ids file the user named could not be read: devices go unnamed, and the
/// user should know why.
fn unread_ids_note(options: &InspectOptions, names: &ids::PciIds) -> Option<String> {
    let path = options.pci_ids.as_deref().filter(|_| names.source.is_none())?;
    let why = std::fs::metadata(path).err().map_or("unreadable".to_string(), |e| e.to_string());
    Some(format!("--pci-ids {}: cannot be read ({why}); devices are shown by number", path.display()))
}

/// The pci.ids entries of the vendors and subsystem vendors of `machine`'s devices.
fn names_for(machine: &Machine, options: &InspectOptions) -> anyhow::Result<ids::PciIds> {
    let subsystem_vendor = |d: &Device| lspci::subsystem_ids(&d.config, d.subsystem_capability()).map(|ids| ids.0);
    let vendors = machine.devices.values().flat_map(|d| [d.config.vendor_id(), subsystem_vendor(d)]).flatten().collect();
    // A named pci.ids that exists must be a regular file within the limit (a missing one leaves
    // devices unnamed, as before).
    if let Some(path) = options.pci_ids.as_deref().filter(|p| p.exists()) {
        crate::bounded::check_file(path, crate::bounded::PCI_IDS)?;
    }
    Ok(ids::PciIds::load_for(options.pci_ids.as_deref(), &vendors))
}

/// `-t`: the bus tree of the whole source as `lspci -t` draws it (`verbose`: with names, as
/// `-tv`), devices outside `-s`/`-d` pruned as lspci prunes them; with the source's notes.
pub fn tree(options: &InspectOptions, verbose: bool, naming: lspci::Naming) -> anyhow::Result<(String, Vec<String>)> {
    let machine = Machine::load(&options.source)?;
    let names = names_for(&machine, options)?;
    let devices = tree_devices(&machine, options, |d| lspci::fit(names.named(d.config.vendor_id().unwrap_or(0xffff), d.config.device_id().unwrap_or(0xffff), naming), lspci::LONG_NAME_BYTES));
    let notes = machine.notes.into_iter().chain(unread_ids_note(options, &names)).collect();
    Ok((tree::render(&devices, verbose, options.selector.is_some() || options.ids.is_some()), notes))
}

/// Every device of the source with the bridges above it as lspci places them (nearest first):
/// what `-P`/`-PP` name slots by.
pub fn lspci_paths(options: &InspectOptions) -> anyhow::Result<HashMap<Bdf, Vec<Bdf>>> {
    let machine = Machine::load(&options.source)?;
    let devices = tree_devices(&machine, options, |_| String::new());
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

fn tree_devices(machine: &Machine, options: &InspectOptions, name: impl Fn(&Device) -> String) -> Vec<tree::TreeDevice> {
    machine
        .devices
        .values()
        .map(|d| tree::TreeDevice { bdf: d.bdf, bridge_buses: tree::bridge_buses(&d.config), parent: d.sysfs_parent, name: name(d), selected: options.selects(d) })
        .collect()
}

impl InspectOptions {
    /// Whether `-s` and `-d` keep this device.
    pub fn selects(&self, device: &Device) -> bool {
        self.selector.is_none_or(|s| s.matches(&device.bdf)) && self.ids.is_none_or(|f| f.matches(&device.config))
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
