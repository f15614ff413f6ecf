//! The live machine through sysfs (`/sys/bus/pci/devices`, or another tree with
//! `--sysfs-root`): each device's `config` file and the attributes the kernel derives for it.
//! Only reads. A non-root reader gets 64 bytes of `config`; that is reported, not hidden.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::InvalidInput;

use super::address::Bdf;
use super::config::ConfigSpace;

/// AER counters from `aer_dev_correctable`, `aer_dev_nonfatal`, `aer_dev_fatal`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AerCounters {
    pub correctable: BTreeMap<String, u64>,
    pub nonfatal: BTreeMap<String, u64>,
    pub fatal: BTreeMap<String, u64>,
}

impl AerCounters {
    fn total(map: &BTreeMap<String, u64>) -> u64 {
        map.iter().find(|(k, _)| k.starts_with("TOTAL_")).map(|(_, v)| *v).unwrap_or_else(|| map.values().sum())
    }

    pub fn total_correctable(&self) -> u64 {
        Self::total(&self.correctable)
    }

    pub fn total_uncorrectable(&self) -> u64 {
        Self::total(&self.nonfatal) + Self::total(&self.fatal)
    }
}

/// The sysfs attributes pcieperf uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Attributes {
    pub current_link_speed_gts: Option<f64>,
    pub current_link_width: Option<u8>,
    pub max_link_speed_gts: Option<f64>,
    pub max_link_width: Option<u8>,
    pub aer: Option<AerCounters>,
    pub numa_node: Option<i32>,
    pub driver: Option<String>,
    /// `modalias` (`pci:v…d…sv…sd…bc…sc…i…`), what `Kernel modules:` is looked up by.
    pub modalias: Option<String>,
    /// `resource`'s lines for BARs 0–5 and the expansion ROM: the kernel's view, which lspci
    /// prints instead of the registers (`lib/sysfs.c`: `sysfs_get_resources`).
    pub resources: Vec<Resource>,
    /// `irq`: the interrupt the kernel routed, which lspci prints instead of Interrupt Line.
    pub irq: Option<u32>,
}

/// One line of sysfs `resource`: the kernel's start, end and `IORESOURCE_*` flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Resource {
    pub start: u64,
    pub end: u64,
    pub flags: u64,
}

impl Resource {
    pub fn size_bytes(&self) -> u64 {
        if self.end > self.start {
            self.end - self.start + 1
        } else {
            0
        }
    }
}

/// One device found in sysfs.
#[derive(Debug, Clone)]
pub struct SysfsDevice {
    pub bdf: Bdf,
    pub config: ConfigSpace,
    /// The bridge above it in `/sys/devices` (None under a host bridge).
    pub parent: Option<Bdf>,
    pub attributes: Attributes,
    /// What could not be read and why.
    pub notes: Vec<String>,
}

/// The result of a scan: devices in address order, and devices that could not be read at all.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub devices: Vec<SysfsDevice>,
    pub notes: Vec<String>,
}

/// `/sys` unless told otherwise.
pub fn default_root() -> PathBuf {
    PathBuf::from("/sys")
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Enumerate `<root>/bus/pci/devices`.
pub fn scan(root: &Path) -> anyhow::Result<Scan> {
    let dir = root.join("bus/pci/devices");
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| InvalidInput::new(format!("cannot list PCI devices in {}: {e} (is this a sysfs tree? see --sysfs-root)", dir.display())))?;
    let mut names: Vec<(Bdf, PathBuf)> = Vec::new();
    let mut scan = Scan::default();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        match name.parse::<Bdf>() {
            Ok(bdf) => names.push((bdf, entry.path())),
            Err(_) => scan.notes.push(format!("{}: not a PCI address, skipped", entry.path().display())),
        }
    }
    names.sort();
    for (bdf, path) in names {
        match read_device(bdf, &path) {
            Some(device) => scan.devices.push(device),
            None => scan.notes.push(format!("{bdf}: device vanished during the scan (removed or hot-unplugged)")),
        }
    }
    Ok(scan)
}

/// Read one device; `None` when its directory is gone.
pub fn read_device(bdf: Bdf, path: &Path) -> Option<SysfsDevice> {
    let canonical = std::fs::canonicalize(path).ok()?;
    let parent = canonical.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).and_then(|n| n.parse::<Bdf>().ok());
    let mut notes = Vec::new();
    let config = match read_config(&canonical.join("config")) {
        Ok(bytes) => ConfigSpace::new(bytes),
        Err(e) if e.kind() == ErrorKind::NotFound && !canonical.exists() => return None,
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            notes.push("config: permission denied (reading config space needs read access to sysfs; beyond 64 bytes it needs root)".into());
            ConfigSpace::new(Vec::new())
        }
        Err(e) => {
            notes.push(format!("config: {e}"));
            ConfigSpace::new(Vec::new())
        }
    };
    let attributes = read_attributes(&canonical, &mut notes);
    Some(SysfsDevice { bdf, config, parent, attributes, notes })
}

/// Read `len` bytes from `offset` onto `bytes`, stopping early at the end of the file (an
/// unprivileged reader sees 64 bytes).
fn read_more(file: &std::fs::File, bytes: &mut Vec<u8>, len: usize) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let start = bytes.len();
    bytes.resize(start + len, 0);
    let mut done = 0;
    while done < len {
        match file.read_at(&mut bytes[start + done..], (start + done) as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                bytes.truncate(start + done);
                return Err(e);
            }
        }
    }
    bytes.truncate(start + done);
    Ok(())
}

/// The whole configuration space the kernel gives, as lspci reads it for `-xxxx`: 64 bytes to
/// an ordinary user, 256 for a conventional function, 4096 for PCI Express and PCI-X (the
/// sysfs file's size says which; reading past it returns nothing).
pub fn read_config(path: &Path) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::with_capacity(4096);
    read_more(&file, &mut bytes, 4096)?;
    Ok(bytes)
}

fn read_text(dir: &Path, name: &str, notes: &mut Vec<String>) -> Option<String> {
    match std::fs::read_to_string(dir.join(name)) {
        Ok(text) => Some(text.trim().to_string()),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => {
            notes.push(format!("{name}: {e}"));
            None
        }
    }
}

/// "8.0 GT/s PCIe", "8 GT/s", "Unknown" → GT/s.
pub fn parse_speed(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse::<f64>().ok().filter(|v| *v > 0.0)
}

/// Lines of "NAME count".
pub fn parse_counters(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (name, value) = line.trim().rsplit_once(' ')?;
            Some((name.trim().to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// `resource`: "start end flags" per line, BARs 0–5 first, then the expansion ROM.
pub fn parse_resources(text: &str) -> Vec<Resource> {
    text.lines()
        .take(7)
        .map(|line| {
            let fields: Vec<u64> =
                line.split_whitespace().filter_map(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok()).collect();
            match fields.as_slice() {
                [start, end, flags, ..] => Resource { start: *start, end: *end, flags: *flags },
                _ => Resource::default(),
            }
        })
        .collect()
}

fn read_attributes(dir: &Path, notes: &mut Vec<String>) -> Attributes {
    let mut text = |name: &str| read_text(dir, name, notes);
    let current_link_speed_gts = text("current_link_speed").as_deref().and_then(parse_speed);
    let current_link_width = text("current_link_width").and_then(|t| t.parse().ok());
    let max_link_speed_gts = text("max_link_speed").as_deref().and_then(parse_speed);
    let max_link_width = text("max_link_width").and_then(|t| t.parse().ok());
    let numa_node = text("numa_node").and_then(|t| t.parse().ok());
    let correctable = text("aer_dev_correctable");
    let nonfatal = text("aer_dev_nonfatal");
    let fatal = text("aer_dev_fatal");
    let modalias = text("modalias");
    let resources = text("resource").map(|t| parse_resources(&t)).unwrap_or_default();
    let irq = text("irq").and_then(|t| t.trim().parse().ok());
    let aer = (correctable.is_some() || nonfatal.is_some() || fatal.is_some()).then(|| AerCounters {
        correctable: parse_counters(correctable.as_deref().unwrap_or("")),
        nonfatal: parse_counters(nonfatal.as_deref().unwrap_or("")),
        fatal: parse_counters(fatal.as_deref().unwrap_or("")),
    });
    let driver = std::fs::read_link(dir.join("driver")).ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    Attributes {
        current_link_speed_gts,
        current_link_width,
        max_link_speed_gts,
        max_link_width,
        aer,
        numa_node,
        driver,
        modalias,
        resources,
        irq,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_attribute_formats() {
        assert_eq!(parse_speed("8.0 GT/s PCIe"), Some(8.0));
        assert_eq!(parse_speed("2.5 GT/s"), Some(2.5));
        assert_eq!(parse_speed("Unknown"), None);
        let counters = parse_counters("RxErr 3\nBadTLP 0\nTOTAL_ERR_COR 3\n");
        assert_eq!(counters["RxErr"], 3);
        let aer = AerCounters { correctable: counters, ..Default::default() };
        assert_eq!(aer.total_correctable(), 3);
        let resources = parse_resources("0x00000000fe000000 0x00000000fe7fffff 0x0000000000040200\n0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
        assert_eq!(resources.iter().map(Resource::size_bytes).collect::<Vec<_>>(), vec![0x80_0000, 0]);
        assert_eq!(resources[0].flags, 0x40200);
    }
}
