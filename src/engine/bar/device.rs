//! A PCI function in sysfs as the `bar` and `vfio` engines need it: its driver, its BARs'
//! flags, memory decoding, its link, and the exact commands that bind it to another driver.
//!
//! pcieperf never rebinds a device: when a path needs a driver the device is not bound to, the
//! error prints the commands (`driver_override` + `drivers_probe`) for the user to run.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::engine::EngineError;
use crate::error::InvalidInput;
use crate::model::Conditions;
use crate::pci::address::Bdf;

/// `IORESOURCE_IO`, `IORESOURCE_MEM`, `IORESOURCE_PREFETCH` in a `resource` line's flags.
const IORESOURCE_IO: u64 = 0x100;
const IORESOURCE_MEM: u64 = 0x200;
const IORESOURCE_PREFETCH: u64 = 0x2000;

/// One PCI function's sysfs directory.
#[derive(Debug, Clone)]
pub struct PciFunction {
    pub bdf: Bdf,
    /// `<root>/bus/pci/devices/<bdf>`.
    pub dir: PathBuf,
    pub root: PathBuf,
}

/// A BAR as `resource` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarInfo {
    /// Bus address of the BAR's first byte.
    pub start: u64,
    pub size_bytes: u64,
    pub memory: bool,
    pub io: bool,
    pub prefetchable: bool,
}

impl PciFunction {
    /// The function at `bdf` under `root` (normally `/sys`), or a clear error when it is absent.
    pub fn find(root: &Path, bdf_text: &str) -> Result<PciFunction, EngineError> {
        let bdf: Bdf = bdf_text.parse().map_err(|e: InvalidInput| InvalidInput::new(format!("bar target '{bdf_text}': {e}")))?;
        let dir = root.join("bus/pci/devices").join(bdf.to_string());
        if !dir.exists() {
            return Err(EngineError::Unsupported(format!(
                "no PCI function {bdf} in {} (not present, removed or hot-unplugged; `lspci -D` lists what is there)",
                dir.parent().map_or(String::new(), |p| p.display().to_string())
            )));
        }
        Ok(PciFunction { bdf, dir, root: root.to_path_buf() })
    }

    fn text(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(name)).ok().map(|t| t.trim().to_string())
    }

    /// `vendor:device` as four-digit hex each, e.g. `1234:11e8`.
    pub fn ids(&self) -> Option<(u16, u16)> {
        let hex = |name| self.text(name).and_then(|t| u16::from_str_radix(t.trim_start_matches("0x"), 16).ok());
        Some((hex("vendor")?, hex("device")?))
    }

    /// Name of the bound driver, if any.
    pub fn driver(&self) -> Option<String> {
        std::fs::read_link(self.dir.join("driver")).ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    }

    /// BAR `index` from the `resource` file (one `start end flags` line per resource).
    pub fn bar(&self, index: u8) -> Result<BarInfo, EngineError> {
        let text = self.text("resource").unwrap_or_default();
        let line = text.lines().nth(index as usize).filter(|_| index <= 5);
        let numbers: Vec<u64> =
            line.map(|l| l.split_whitespace().filter_map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok()).collect()).unwrap_or_default();
        let [start, end, flags] = numbers[..] else {
            return Err(InvalidInput::new(format!("{}: BAR{index} does not exist (BARs are 0–5)", self.bdf)).into());
        };
        let size_bytes = if end > start { end - start + 1 } else { 0 };
        Ok(BarInfo { start, size_bytes, memory: flags & IORESOURCE_MEM != 0, io: flags & IORESOURCE_IO != 0, prefetchable: flags & IORESOURCE_PREFETCH != 0 })
    }

    /// A memory BAR with a size, or why not.
    pub fn memory_bar(&self, index: u8) -> Result<BarInfo, EngineError> {
        let info = self.bar(index)?;
        if info.size_bytes == 0 {
            return Err(EngineError::Unsupported(format!("{}: BAR{index} is not implemented (size 0)", self.bdf)));
        }
        if !info.memory {
            let kind = if info.io { "an I/O-port BAR" } else { "not a memory BAR" };
            return Err(EngineError::Unsupported(format!("{}: BAR{index} is {kind}; pcieperf maps memory BARs only", self.bdf)));
        }
        Ok(info)
    }

    /// The Command register's Memory Space Enable bit, from the first bytes of config space
    /// (readable without root).
    pub fn memory_decoding(&self) -> Option<bool> {
        let config = std::fs::read(self.dir.join("config")).ok()?;
        let command = u16::from_le_bytes([*config.get(4)?, *config.get(5)?]);
        Some(command & 0x2 != 0)
    }

    /// Turn memory decoding on the way the kernel expects: writing 1 to `enable`
    /// (`pci_enable_device`). Without root this fails with what to run instead.
    pub fn enable_memory_decoding(&self) -> Result<Option<String>, EngineError> {
        if self.memory_decoding() != Some(false) {
            return Ok(None);
        }
        let enable = self.dir.join("enable");
        match std::fs::write(&enable, "1") {
            Ok(()) if self.memory_decoding() == Some(true) => Ok(Some(format!("memory decoding was off; enabled through {}", enable.display()))),
            Ok(()) => Err(EngineError::Unsupported(format!(
                "{}: memory decoding is off and stays off after writing 1 to {} (the device or its bridge refuses; check `lspci -vv -s {}`)",
                self.bdf,
                enable.display(),
                self.bdf
            ))),
            Err(e) => Err(EngineError::PermissionDenied {
                path: enable.display().to_string(),
                needed: format!(
                    "memory decoding of {} is off (Command register bit 1) and turning it on needs root: `echo 1 | sudo tee {}` ({e})",
                    self.bdf,
                    enable.display()
                ),
            }),
        }
    }

    /// The commands that bind this function to `driver`, for the user to run.
    pub fn bind_commands(&self, driver: &str, module: &str) -> String {
        let dev = self.dir.display();
        let mut steps = vec![format!("sudo modprobe {module}")];
        if self.driver().is_some() {
            steps.push(format!("echo {} | sudo tee {dev}/driver/unbind", self.bdf));
        }
        steps.push(format!("echo {driver} | sudo tee {dev}/driver_override"));
        steps.push(format!("echo {} | sudo tee {}/bus/pci/drivers_probe", self.bdf, self.root.display()));
        steps.join(" && ")
    }

    /// Refuse unless the function is bound to `driver`; the error says how to bind it.
    pub fn require_driver(&self, driver: &str, module: &str, path_name: &str) -> Result<(), EngineError> {
        match self.driver() {
            Some(bound) if bound == driver => Ok(()),
            bound => Err(EngineError::Unsupported(format!(
                "{}: {path_name} needs the device bound to {driver}, but it is {}; pcieperf never rebinds a device: to bind it, run: {}",
                self.bdf,
                bound.map_or("bound to no driver".to_string(), |d| format!("bound to {d}")),
                self.bind_commands(driver, module)
            ))),
        }
    }

    /// The link conditions of this function (`pci::conditions`). A conventional PCI function
    /// below a PCIe port (QEMU's edu and ivshmem behind a root port) has no link of its own: its
    /// TLPs cross the port's link, so the port's conditions stand in, and say so.
    pub fn conditions(&self) -> Option<Conditions> {
        let own = crate::pci::conditions::live(&self.root, &self.bdf.to_string());
        own.ok().or_else(|| {
            let parent = std::fs::canonicalize(&self.dir).ok()?.parent()?.file_name()?.to_str()?.to_string();
            let mut port = crate::pci::conditions::live(&self.root, &parent).ok()?;
            port.source = format!("{} has no PCIe link of its own: the link of the port above it, {}", self.bdf, port.source);
            Some(port)
        })
    }

    /// The `/dev/uioN` node of this function when bound to a UIO driver.
    pub fn uio_node(&self) -> Option<(String, PathBuf)> {
        let entries = std::fs::read_dir(self.dir.join("uio")).ok()?;
        let name = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).find(|n| n.starts_with("uio"))?;
        Some((name.clone(), self.dir.join("uio").join(name)))
    }

    /// The IOMMU group number, or None without an IOMMU.
    pub fn iommu_group(&self) -> Option<String> {
        std::fs::read_link(self.dir.join("iommu_group")).ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    }
}

/// Open a file, turning "permission denied" into what the user must do.
pub fn open_rw(path: &Path, needed: &str) -> Result<std::fs::File, EngineError> {
    std::fs::OpenOptions::new().read(true).write(true).open(path).map_err(|e| match e.kind() {
        ErrorKind::PermissionDenied => EngineError::PermissionDenied { path: path.display().to_string(), needed: needed.to_string() },
        ErrorKind::NotFound => EngineError::Unsupported(format!("{} does not exist", path.display())),
        _ => EngineError::Io { what: format!("cannot open {}", path.display()), source: e },
    })
}

