//! `bar`: CPU-initiated access to a memory BAR of a PCI function (document 000 §4).
//!
//! Target: `bar:BDF[,bar=N][,via=sysfs|uio|vfio][,wc]`.
//! - `via=sysfs` (default): `/sys/bus/pci/devices/BDF/resourceN` (`resourceN_wc` with `wc`, for a
//!   prefetchable BAR); memory decoding is turned on through `enable` when off; mapping needs root.
//! - `via=uio`: the device bound to `uio_pci_generic`; the BAR through `/dev/uioN`'s maps when the
//!   UIO driver exports them, else through `resourceN` (uio_pci_generic exports none: it gives
//!   interrupts only), interrupts counted from the UIO device's event counter.
//! - `via=vfio`: the device bound to `vfio-pci`; the BAR through `VFIO_DEVICE_GET_REGION_INFO` +
//!   mmap, interrupts through an eventfd ([`crate::engine::vfio`]).
//!
//! The engine moves no data by DMA: it offers [`Mmio`] for `pio` and `demo`. BARs other than the
//! one named are mapped on first use. See [`region`] for why each access is exactly one TLP.

pub mod device;
pub mod profile;
pub mod region;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::guard::WriteGuard;
use crate::engine::devfile::HostClock;

use crate::engine::vfio::{IommuMode, VfioDevice, NOIOMMU_WARNING};
use crate::engine::{DataModel, Engine, EngineError, EngineInfo, Io, Mmio, OpenOptions, Transfer, Width};
use crate::error::InvalidInput;
use crate::model::Conditions;

use device::PciFunction;
use profile::Profile;
use region::Region;

/// How the BAR is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    Sysfs,
    Uio,
    Vfio,
}

/// A parsed `bar:` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BarTarget {
    pub bdf: String,
    pub bar: u8,
    pub via: Via,
    pub wc: bool,
}

impl BarTarget {
    pub fn parse(argument: &str) -> Result<BarTarget, InvalidInput> {
        let mut parts = argument.split(',');
        let bdf = parts.next().filter(|b| !b.is_empty()).ok_or_else(|| InvalidInput::new("bar target needs a PCI address: bar:BDF[,bar=N][,via=sysfs|uio|vfio][,wc]"))?;
        let mut target = BarTarget { bdf: bdf.to_string(), bar: 0, via: Via::Sysfs, wc: false };
        for part in parts {
            match part.split_once('=') {
                Some(("bar", n)) => {
                    target.bar = n.parse().ok().filter(|&b: &u8| b <= 5).ok_or_else(|| InvalidInput::new(format!("bar={n}: BARs are 0–5")))?
                }
                Some(("via", "sysfs")) => target.via = Via::Sysfs,
                Some(("via", "uio")) => target.via = Via::Uio,
                Some(("via", "vfio")) => target.via = Via::Vfio,
                Some(("via", other)) => return Err(InvalidInput::new(format!("via={other}: use sysfs, uio or vfio"))),
                None if part == "wc" => target.wc = true,
                _ => return Err(InvalidInput::new(format!("bar target option '{part}': known are bar=N, via=sysfs|uio|vfio, wc"))),
            }
        }
        if target.wc && target.via != Via::Sysfs {
            return Err(InvalidInput::new("wc maps resourceN_wc: it goes with via=sysfs"));
        }
        Ok(target)
    }
}

/// The `bar` engine in the engine table.
pub const ENTRY: crate::engine::EngineEntry = crate::engine::EngineEntry {
    name: "bar",
    argument: "BDF[,bar=N][,via=sysfs|uio|vfio][,wc]",
    about: "CPU-initiated access to a memory BAR (sysfs resourceN, UIO, VFIO) for pio and demo; moves no data by DMA",
    options: &[],
    flags: &[],
    open: |o| Ok(Box::new(BarEngine::open(o.argument, o.options)?)),
    detect: None,
};

/// A PCI function's memory BARs, mapped into this process.
pub struct BarEngine {
    info: EngineInfo,
    target: BarTarget,
    function: PciFunction,
    profile: Option<Profile>,
    regions: [Option<Region>; 6],
    vfio: Option<VfioDevice>,
    /// UIO `event` attribute and its value when the engine opened.
    uio_event: Option<(PathBuf, u64)>,
    /// What the engine did or found that the user should know (decoding enabled, no-IOMMU …).
    pub notes: Vec<String>,
    clock: HostClock,
    /// A `resourceN` that is a user's file (not sysfs, not the `--sysfs-root` tree) is written
    /// only with consent.
    guard: WriteGuard,
}

const NEEDS_ROOT: &str = "mapping a BAR through sysfs needs root (CAP_SYS_ADMIN); run pcieperf with sudo, or use via=vfio with the group's device node given to your user";

impl BarEngine {
    pub fn open(argument: &str, options: &OpenOptions) -> Result<BarEngine, EngineError> {
        let target = BarTarget::parse(argument)?;
        let root = options.sysfs_root.clone().unwrap_or_else(crate::pci::sysfs::default_root);
        let function = PciFunction::find(&root, &target.bdf)?;
        let profile = function.ids().and_then(|(v, d)| Profile::find(v, d));
        let mut notes = Vec::new();
        let (vfio, uio_event) = match target.via {
            Via::Sysfs => {
                if let Some(driver) = function.driver() {
                    notes.push(format!("the {driver} driver also owns {}: its accesses and pcieperf's interleave", function.bdf));
                }
                (None, None)
            }
            Via::Uio => {
                function.require_driver("uio_pci_generic", "uio_pci_generic", "via=uio")?;
                let (name, dir) = function.uio_node().ok_or_else(|| EngineError::Unsupported(format!("{}: bound to uio_pci_generic but no uio node in {}/uio", function.bdf, function.dir.display())))?;
                let event = dir.join("event");
                let start = read_count(&event).unwrap_or(0);
                notes.push(format!("UIO /dev/{name}: interrupts counted from {}", event.display()));
                (None, Some((event, start)))
            }
            Via::Vfio => {
                let mut device = VfioDevice::open(function.clone())?;
                if device.mode == IommuMode::NoIommu {
                    eprintln!("pcieperf: WARNING: {NOIOMMU_WARNING}");
                    notes.push(NOIOMMU_WARNING.to_string());
                }
                device.enable_bus_master()?;
                if let Err(e) = device.enable_interrupts() {
                    notes.push(format!("device interrupts not counted: {e}"));
                }
                (Some(device), None)
            }
        };
        let description = format!(
            "BAR{} of {}{} via {}{}",
            target.bar,
            function.bdf,
            profile.map_or(String::new(), |p| format!(" ({})", p.name)),
            format!("{:?}", target.via).to_lowercase(),
            if target.wc { ", write-combining" } else { "" }
        ) + &crate::pci::emulated::emulator_of(&root, &function.bdf.to_string())
            .map_or(String::new(), |e| format!("; emulated ({e}): timings are the emulator's, not PCIe"));
        let info = EngineInfo {
            kind: "bar".into(),
            target: format!("bar:{argument}"),
            simulated: false,
            co_simulated: false,
            description,
            pci_address: Some(function.bdf.to_string()),
            in_flight: 1,
            copies_per_transfer: 1,
            device_clock_hz: None,
            directions: Vec::new(),
            concurrent: false,
            alignment_bytes: 1,
            max_transfer_bytes: 8,
            capacity_bytes: None,
            data_model: DataModel::Opaque,
        };
        let mut engine = BarEngine { info, target, function, profile, regions: Default::default(), vfio, uio_event, notes, clock: HostClock::start(), guard: options.write_guard() };
        let bar = engine.target.bar;
        engine.region(bar)?;
        for note in &engine.notes {
            eprintln!("pcieperf: note: {note}");
        }
        engine.info.capacity_bytes = engine.regions[bar as usize].as_ref().map(Region::size_bytes);
        Ok(engine)
    }

    /// The write guard for BAR `bar`'s sysfs resource file (UIO and VFIO maps are device nodes).
    fn guard_bar(&self, bar: u8) -> Result<(), EngineError> {
        if self.target.via != Via::Sysfs {
            return Ok(());
        }
        let wc = if self.target.wc && bar == self.target.bar { "_wc" } else { "" };
        self.guard.check(&self.function.dir.join(format!("resource{bar}{wc}")))
    }

    pub fn profile(&self) -> Option<Profile> {
        self.profile
    }

    /// Record a note; once the engine is open, say it at once (a BAR mapped on first use).
    fn note(&mut self, note: String) {
        if self.regions.iter().any(Option::is_some) {
            eprintln!("pcieperf: note: {note}");
        }
        self.notes.push(note);
    }

    /// The mapping of BAR `bar`, made on first use.
    fn region(&mut self, bar: u8) -> Result<&Region, EngineError> {
        if bar > 5 {
            return Err(InvalidInput::new(format!("BAR{bar}: BARs are 0–5")).into());
        }
        if self.regions[bar as usize].is_none() {
            let region = self.map(bar)?;
            self.regions[bar as usize] = Some(region);
        }
        Ok(self.regions[bar as usize].as_ref().expect("mapped above"))
    }

    fn map(&mut self, bar: u8) -> Result<Region, EngineError> {
        if let Some(vfio) = &self.vfio {
            return vfio.map_bar(bar);
        }
        let info = self.function.memory_bar(bar)?;
        if let Some(note) = self.function.enable_memory_decoding()? {
            self.note(note);
        }
        let wc = self.target.wc && bar == self.target.bar;
        if wc && !info.prefetchable {
            return Err(EngineError::Unsupported(format!("{}: BAR{bar} is not prefetchable, so the kernel offers no resource{bar}_wc", self.function.bdf)));
        }
        if let Some(region) = self.uio_map(bar, &info)? {
            return Ok(region);
        }
        let path = self.function.dir.join(format!("resource{bar}{}", if wc { "_wc" } else { "" }));
        let file = device::open_rw(&path, NEEDS_ROOT)?;
        Region::map(&file, 0, info.size_bytes, bar, path.display().to_string(), wc).map_err(|e| match e {
            EngineError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                EngineError::PermissionDenied { path: path.display().to_string(), needed: format!("{NEEDS_ROOT} (or the kernel is locked down: {source})") }
            }
            other => other,
        })
    }

    /// BAR `bar` through the `/dev/uioN` map whose address is the BAR's, when the UIO driver
    /// exports one (uio_pci_generic exports non-prefetchable memory BARs since Linux 5.x, numbered
    /// in order, not by BAR index; mapping N is at file offset N pages).
    fn uio_map(&mut self, bar: u8, info: &device::BarInfo) -> Result<Option<Region>, EngineError> {
        let Some((name, dir)) = self.uio_event.as_ref().and_then(|_| self.function.uio_node()) else { return Ok(None) };
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        let found = (0..5u64).find_map(|n| {
            let map = dir.join(format!("maps/map{n}"));
            (read_count(&map.join("addr"))? == info.start & !(page - 1)).then(|| (n, read_count(&map.join("size")), read_count(&map.join("offset")).unwrap_or(0)))
        });
        let Some((n, Some(size), 0)) = found else {
            self.note(format!("/dev/{name} exports no page-aligned map of BAR{bar}: mapped through resource{bar}"));
            return Ok(None);
        };
        let node = Path::new("/dev").join(&name);
        let file = device::open_rw(&node, "UIO needs read/write access to the /dev/uioN node (root, or a udev rule)")?;
        self.note(format!("BAR{bar} mapped through {} map{n}", node.display()));
        Region::map(&file, n * page, size.min(info.size_bytes), bar, format!("{} map{n}", node.display()), false).map(Some)
    }
}

/// A decimal or 0x-hex number in a sysfs attribute.
fn read_count(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    crate::units::parse_number(text.trim())
}

impl Engine for BarEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn conditions(&self) -> Option<Conditions> {
        self.function.conditions()
    }

    fn transfer(&mut self, _io: Io<'_>, _device_offset: u64, _deadline: Duration) -> Result<Transfer, EngineError> {
        Err(EngineError::Unsupported(format!(
            "{}: the bar engine moves no data by DMA; use `pcieperf pio` or `pcieperf demo` on it (vfio:BDF,personality=NAME for a device's DMA engine)",
            self.info.target
        )))
    }

    fn now_ns(&self) -> f64 {
        self.clock.now_ns()
    }

    fn mmio(&mut self) -> Option<&mut dyn Mmio> {
        Some(self)
    }
}

impl Mmio for BarEngine {
    fn read32(&mut self, bar: u8, offset: u64) -> Result<u32, EngineError> {
        self.read(bar, offset, Width::B4).map(|v| v as u32)
    }

    fn write32(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError> {
        self.write(bar, offset, Width::B4, value.into())
    }

    fn read(&mut self, bar: u8, offset: u64, width: Width) -> Result<u64, EngineError> {
        self.region(bar)?.read(offset, width)
    }

    fn write(&mut self, bar: u8, offset: u64, width: Width, value: u64) -> Result<(), EngineError> {
        self.guard_bar(bar)?;
        self.region(bar)?.write(offset, width, value)
    }

    fn write_combined(&mut self, bar: u8, offset: u64, data: &[u8]) -> Result<(), EngineError> {
        self.guard_bar(bar)?;
        let region = self.region(bar)?;
        if !region.write_combining {
            return Err(EngineError::Unsupported(format!(
                "{} is mapped uncached: write combining needs the target's wc option on a prefetchable BAR (bar:BDF,bar=N,wc)",
                region.source
            )));
        }
        region.write_combined(offset, data)
    }

    fn bar_bytes(&mut self, bar: u8) -> Option<u64> {
        self.region(bar).ok().map(Region::size_bytes)
    }

    fn default_bar(&self) -> u8 {
        self.target.bar
    }

    fn is_scratch(&self, bar: u8, offset: u64, bytes: u64) -> bool {
        self.guard_bar(bar).is_ok() && self.profile.is_some_and(|p| p.is_scratch(bar, offset, bytes))
    }

    fn interrupts(&mut self) -> Option<u64> {
        if let Some(vfio) = &mut self.vfio {
            return vfio.interrupts();
        }
        let (event, start) = self.uio_event.as_ref()?;
        read_count(event).map(|now| now.saturating_sub(*start))
    }
}
