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
    pub fn load(source: &Source) -> anyhow::Result<Machine> {
        Machine::load_only(source, |_, _| true)
    }

    /// Load the functions `keep` accepts, and every function another one's path goes through
    /// (bridges; a live function's sysfs parent): `-s`/`-d` decode only what their reports need.
    pub fn load_only(source: &Source, keep: impl Fn(&Bdf, &config::ConfigSpace) -> bool) -> anyhow::Result<Machine> {
        let read = Functions::read(source)?;
        let mut machine = Machine { notes: read.notes, live: read.live, domains: read.list.iter().any(|f| f.bdf.domain != 0), ..Machine::default() };
        let parents: std::collections::HashSet<Bdf> = read.list.iter().filter_map(|f| f.parent).collect();
        for f in read.list.into_iter().filter(|f| keep(&f.bdf, &f.config) || parents.contains(&f.bdf) || f.config.bridge_buses().is_some()) {
            machine.devices.insert(f.bdf, Device::decode(f.bdf, f.config, f.parent, f.attributes, f.notes));
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

    /// Every loaded function's parent, found once: paths walked from it cost one lookup a hop,
    /// whatever the depth of the tree.
    pub fn parents(&self) -> HashMap<Bdf, &Device> {
        self.devices.keys().filter_map(|bdf| Some((*bdf, self.parent_of(bdf)?))).collect()
    }
}

/// A function as read from its source, not decoded.
pub struct Function {
    pub bdf: Bdf,
    pub config: config::ConfigSpace,
    /// Parent bridge from sysfs.
    pub parent: Option<Bdf>,
    pub attributes: Option<sysfs::Attributes>,
    pub notes: Vec<String>,
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
        match source {
            Source::Sysfs(root) => {
                let scan = sysfs::scan(root)?;
                let list = scan.devices.into_iter().map(|d| Function { bdf: d.bdf, config: d.config, parent: d.parent, attributes: Some(d.attributes), notes: d.notes }).collect();
                Ok(Functions { list, notes: scan.notes, live: true })
            }
            Source::Dump(path) => {
                let dump = dump::read(path)?;
                if dump.devices.is_empty() {
                    let oddities = dump.warnings.first().map_or(String::new(), |w| format!(" ({w})"));
                    return Err(InvalidInput::new(format!("no device line (such as '01:00.0 …') in dump {}: lspci -F lists nothing from it either{oddities}", path.display())).into());
                }
                // A duplicated address: lspci lists both copies, the first is kept here (warned).
                let mut by_address = BTreeMap::new();
                for d in dump.devices {
                    by_address.entry(d.bdf).or_insert(Function { bdf: d.bdf, config: d.config, parent: None, attributes: None, notes: Vec::new() });
                }
                Ok(Functions { list: by_address.into_values().collect(), notes: dump.warnings.iter().map(|w| format!("dump: {w}")).collect(), live: false })
            }
        }
    }
}

/// A loaded source whose device reports are built one at a time, in address order: [`inspect`]
/// collects them, the command line prints each as it is built, so one report is alive at a time
/// whatever the size of the machine.
pub struct Inspector {
    machine: Machine,
    names: ids::PciIds,
    options: InspectOptions,
    notes: Vec<String>,
}

impl Inspector {
    /// Load the source of `options` (with `-s`/`-d`, only what the selected reports need) and
    /// the pci.ids names its devices use.
    pub fn load(options: &InspectOptions) -> anyhow::Result<Inspector> {
        let filtered = options.selector.is_some() || options.ids.is_some();
        let machine = Machine::load_only(&options.source, |bdf, config| !filtered || options.selects_config(bdf, config))?;
        let names = names_for(&machine, options)?;
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
        Ok(Inspector { machine, names, options: options.clone(), notes })
    }

    /// Machine-level notes (unreadable devices, dump oddities, pci.ids, virtual machine).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether lspci would print every slot with its domain.
    pub fn domains(&self) -> bool {
        self.machine.domains
    }

    /// The selected devices' reports, built as they are taken.
    pub fn reports(&self) -> impl Iterator<Item = DeviceReport> + '_ {
        let parents = self.machine.parents();
        let mut ceilings = report::Ceilings::default();
        let mut upstream: Vec<&Device> = Vec::new();
        let mut path = path_summary::PathSummary::default();
        self.machine.devices.values().filter(|d| self.options.selects(d)).map(move |device| {
            // Functions in address order share their parent with the one before (a bus's
            // functions are consecutive): its path is walked and summarised once, not once a
            // function, and each function's analysis reads the summary.
            let parent = parents.get(&device.bdf).map(|p| p.bdf);
            if parent != upstream.first().map(|p| p.bdf) {
                upstream.clear();
                let mut at = device.bdf;
                while let Some(parent) = parents.get(&at).filter(|p| p.bdf != device.bdf && upstream.len() <= 256) {
                    upstream.push(parent);
                    at = parent.bdf;
                }
                path = path_summary::PathSummary::of(&upstream);
            }
            report::build(&self.machine, device, &path, &self.names, &mut ceilings)
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

/// The pci.ids entries of the vendors and subsystem vendors of `machine`'s devices.
fn names_for(machine: &Machine, options: &InspectOptions) -> anyhow::Result<ids::PciIds> {
    let subsystem_vendor = |d: &Device| lspci::subsystem_ids(&d.config, d.subsystem_capability()).map(|ids| ids.0);
    names_of(machine.devices.values().flat_map(|d| [d.config.vendor_id(), subsystem_vendor(d)]).flatten().collect(), options)
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
/// `-tv`), devices outside `-s`/`-d` pruned as lspci prunes them; with the source's notes.
/// Needs bus numbers and IDs only: nothing is decoded, names are loaded only for `-tv`.
pub fn tree(options: &InspectOptions, verbose: bool, naming: lspci::Naming) -> anyhow::Result<(String, Vec<String>)> {
    let read = Functions::read(&options.source)?;
    let named = verbose && naming.names;
    let vendors = if named { read.list.iter().filter_map(|f| f.config.vendor_id()).collect() } else { Default::default() };
    let names = names_of(vendors, options)?;
    let devices = tree_devices(&read, options, |config| {
        if !verbose {
            return String::new();
        }
        lspci::fit(names.named(config.vendor_id().unwrap_or(0xffff), config.device_id().unwrap_or(0xffff), naming), lspci::LONG_NAME_BYTES)
    });
    let notes = read.notes.into_iter().chain(unread_ids_note(options, &names).filter(|_| named)).collect();
    Ok((tree::render(&devices, verbose, options.selector.is_some() || options.ids.is_some()), notes))
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
