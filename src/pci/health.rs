//! Link health around a measurement: every AER counter the kernel keeps for a device and for
//! each bridge on its path to the root — `aer_dev_correctable`, `aer_dev_nonfatal`,
//! `aer_dev_fatal` and a root port's `aer_rootport_total_err_cor|nonfatal|fatal` — read before
//! and after, so errors that happened while measuring are seen. Reads sysfs only.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::address::Bdf;
use super::sysfs::parse_counters;

const DEVICE_FILES: [&str; 3] = ["aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"];
const ROOT_PORT_FILES: [&str; 3] = ["aer_rootport_total_err_cor", "aer_rootport_total_err_nonfatal", "aer_rootport_total_err_fatal"];

/// One function's counters, keyed `FILE/NAME` (`aer_dev_fatal/DLP`) or `FILE` for a root port's
/// totals (`aer_rootport_total_err_fatal`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionAer {
    pub bdf: String,
    pub counters: BTreeMap<String, u64>,
}

/// The device first, then its path to the root port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AerSnapshot {
    pub functions: Vec<FunctionAer>,
}

/// A counter that moved between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AerChange {
    pub bdf: String,
    pub counter: String,
    pub before: u64,
    pub after: u64,
}

impl AerChange {
    /// Correctable errors cost replays; the others may have lost or corrupted data.
    pub fn is_correctable(&self) -> bool {
        self.counter.starts_with("aer_dev_correctable") || self.counter.ends_with("_cor")
    }

    /// `TOTAL_ERR_*` lines repeat the sum of their file's other counters.
    pub fn is_total(&self) -> bool {
        self.counter.contains("/TOTAL_")
    }
}

fn read_counters(dir: &Path) -> BTreeMap<String, u64> {
    let mut counters = BTreeMap::new();
    for file in DEVICE_FILES {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else { continue };
        counters.extend(parse_counters(&text).into_iter().map(|(name, count)| (format!("{file}/{name}"), count)));
    }
    for file in ROOT_PORT_FILES {
        if let Some(count) = std::fs::read_to_string(dir.join(file)).ok().and_then(|t| t.trim().parse().ok()) {
            counters.insert(file.to_string(), count);
        }
    }
    counters
}

/// The AER counters of `bdf` and every PCI function above it in `<sys_root>/devices`; `None`
/// when the device is not in sysfs (a file, a simulated target, a device already gone) or the
/// kernel keeps no AER counters for any of them.
pub fn snapshot(sys_root: &Path, bdf: &str) -> Option<AerSnapshot> {
    let mut dir = std::fs::canonicalize(sys_root.join("bus/pci/devices").join(bdf)).ok()?;
    let mut functions = Vec::new();
    while let Some(name) = dir.file_name().and_then(|n| n.to_str()).filter(|n| n.parse::<Bdf>().is_ok()) {
        functions.push(FunctionAer { bdf: name.to_string(), counters: read_counters(&dir) });
        dir.pop();
    }
    functions.iter().any(|f| !f.counters.is_empty()).then_some(AerSnapshot { functions })
}

impl AerSnapshot {
    /// Counters that differ in `after`, for functions present in both (a removed function is
    /// not an error count).
    pub fn changes(&self, after: &AerSnapshot) -> Vec<AerChange> {
        let mut changes = Vec::new();
        for then in &self.functions {
            let Some(now) = after.functions.iter().find(|f| f.bdf == then.bdf) else { continue };
            for (counter, &count) in &now.counters {
                let before = then.counters.get(counter).copied().unwrap_or(0);
                if count != before {
                    changes.push(AerChange { bdf: now.bdf.clone(), counter: counter.clone(), before, after: count });
                }
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let port = root.path().join("devices/pci0000:00/0000:00:02.0");
        let device = port.join("0000:01:00.0");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::create_dir_all(root.path().join("bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(&device, root.path().join("bus/pci/devices/0000:01:00.0")).unwrap();
        std::fs::write(device.join("aer_dev_correctable"), "RxErr 0\nBadTLP 0\nTOTAL_ERR_COR 0\n").unwrap();
        std::fs::write(device.join("aer_dev_fatal"), "DLP 0\nTOTAL_ERR_FATAL 0\n").unwrap();
        std::fs::write(port.join("aer_dev_correctable"), "RxErr 0\nTOTAL_ERR_COR 0\n").unwrap();
        std::fs::write(port.join("aer_rootport_total_err_cor"), "0\n").unwrap();
        root
    }

    #[test]
    fn counters_of_the_device_and_its_path_and_what_changed() {
        let root = tree();
        let before = snapshot(root.path(), "0000:01:00.0").unwrap();
        assert_eq!(before.functions.iter().map(|f| f.bdf.as_str()).collect::<Vec<_>>(), ["0000:01:00.0", "0000:00:02.0"]);
        assert_eq!(before.functions[0].counters["aer_dev_fatal/DLP"], 0);
        assert_eq!(before.functions[1].counters["aer_rootport_total_err_cor"], 0);
        let port = root.path().join("devices/pci0000:00/0000:00:02.0");
        std::fs::write(port.join("aer_dev_correctable"), "RxErr 2\nTOTAL_ERR_COR 2\n").unwrap();
        std::fs::write(port.join("aer_rootport_total_err_cor"), "2\n").unwrap();
        let after = snapshot(root.path(), "0000:01:00.0").unwrap();
        let changes = before.changes(&after);
        let names: Vec<(&str, &str, u64, u64)> = changes.iter().map(|c| (c.bdf.as_str(), c.counter.as_str(), c.before, c.after)).collect();
        assert_eq!(
            names,
            [
                ("0000:00:02.0", "aer_dev_correctable/RxErr", 0, 2),
                ("0000:00:02.0", "aer_dev_correctable/TOTAL_ERR_COR", 0, 2),
                ("0000:00:02.0", "aer_rootport_total_err_cor", 0, 2)
            ]
        );
        assert!(changes.iter().all(AerChange::is_correctable));
        assert!(changes[1].is_total() && !changes[0].is_total());
        assert!(before.changes(&before).is_empty());
        assert_eq!(snapshot(root.path(), "0000:05:00.0"), None);
    }
}
