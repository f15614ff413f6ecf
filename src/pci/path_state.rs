//! The link state of every hop on a device's path to its root port, read from the attributes
//! the kernel keeps in sysfs (`current_link_speed`, `current_link_width`, `max_link_speed`,
//! `max_link_width`). Reading them costs no config-space access and needs no root, so a run can
//! read them every ~100 ms while it measures (`bench::link_watch`): a GPU trains down to
//! 2.5 GT/s when idle, so the state before a run says little about the state during it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::address::Bdf;
use super::sysfs::parse_speed;
use super::topology::kernel_lane_mbits;

/// One function on the path with the link its sysfs attributes report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopState {
    pub bdf: String,
    pub speed_gts: Option<f64>,
    pub width: Option<u8>,
    pub max_speed_gts: Option<f64>,
    pub max_width: Option<u8>,
}

impl HopState {
    /// The hop's rate after encoding in Mb/s, as the kernel computes it (0 when unknown).
    pub fn mbits(&self) -> u32 {
        u32::from(self.width.unwrap_or(0)) * kernel_lane_mbits(self.speed_gts)
    }

    /// What the hop could carry at its own maximum speed and width (0 when unknown).
    pub fn max_mbits(&self) -> u32 {
        u32::from(self.max_width.unwrap_or(0)) * kernel_lane_mbits(self.max_speed_gts)
    }

    /// Trained slower or narrower than the hop itself can go.
    pub fn below_capability(&self) -> bool {
        let slower = matches!((self.speed_gts, self.max_speed_gts), (Some(now), Some(max)) if now < max);
        let narrower = matches!((self.width, self.max_width), (Some(now), Some(max)) if now < max);
        slower || narrower
    }

    /// `8 GT/s x4` (`? GT/s` for what sysfs did not say).
    pub fn link_text(&self) -> String {
        link_text(self.speed_gts, self.width)
    }
}

/// `S GT/s xW`.
pub fn link_text(speed_gts: Option<f64>, width: Option<u8>) -> String {
    let speed = speed_gts.map_or("?".to_string(), |s| format!("{s}"));
    let width = width.map_or("?".to_string(), |w| w.to_string());
    format!("{speed} GT/s x{width}")
}

/// The device first, then each bridge above it up to the root port, each with the link it
/// reports; functions without link attributes (a host bridge's children of conventional PCI)
/// are left out. `None` when the device is not in `<sys_root>/bus/pci/devices` or no function
/// on the path reports a link.
pub fn read(sys_root: &Path, bdf: &str) -> Option<Vec<HopState>> {
    let mut dir = std::fs::canonicalize(sys_root.join("bus/pci/devices").join(bdf)).ok()?;
    let mut hops = Vec::new();
    while let Some(name) = dir.file_name().and_then(|n| n.to_str()).filter(|n| n.parse::<Bdf>().is_ok()) {
        let text = |file: &str| std::fs::read_to_string(dir.join(file)).ok().map(|t| t.trim().to_string());
        let hop = HopState {
            bdf: name.to_string(),
            speed_gts: text("current_link_speed").as_deref().and_then(parse_speed),
            width: text("current_link_width").and_then(|t| t.parse().ok()).filter(|&w| w > 0),
            max_speed_gts: text("max_link_speed").as_deref().and_then(parse_speed),
            max_width: text("max_link_width").and_then(|t| t.parse().ok()).filter(|&w| w > 0),
        };
        if hop.speed_gts.is_some() || hop.width.is_some() {
            hops.push(hop);
        }
        dir.pop();
    }
    (!hops.is_empty()).then_some(hops)
}

/// The hop that limits the path, as the kernel's `pcie_bandwidth_available()` picks it: the
/// lowest rate, ties to the upstream hop.
pub fn narrowest(hops: &[HopState]) -> Option<&HopState> {
    hops.iter().fold(None, |best: Option<&HopState>, hop| match best {
        Some(b) if hop.mbits() > b.mbits() => Some(b),
        _ => Some(hop),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device under a switch (downstream port, upstream port) under a root port.
    fn tree(root: &Path) {
        let base = root.join("devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("bus/pci/devices/0000:03:00.0")).unwrap();
        let links = [
            ("0000:00:01.0", "16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"),
            ("0000:01:00.0", "16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"),
            ("0000:02:00.0", "16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16"),
            ("0000:03:00.0", "2.5 GT/s PCIe", "16", "16.0 GT/s PCIe", "16"),
        ];
        let mut dir = root.join("devices/pci0000:00");
        for (bdf, speed, width, max_speed, max_width) in links {
            dir = dir.join(bdf);
            for (file, value) in [("current_link_speed", speed), ("current_link_width", width), ("max_link_speed", max_speed), ("max_link_width", max_width)] {
                std::fs::write(dir.join(file), format!("{value}\n")).unwrap();
            }
        }
    }

    #[test]
    fn reads_every_hop_from_the_device_up_and_finds_the_narrowest() {
        let root = tempfile::tempdir().unwrap();
        tree(root.path());
        let hops = read(root.path(), "0000:03:00.0").unwrap();
        let names: Vec<&str> = hops.iter().map(|h| h.bdf.as_str()).collect();
        assert_eq!(names, ["0000:03:00.0", "0000:02:00.0", "0000:01:00.0", "0000:00:01.0"]);
        assert_eq!((hops[0].speed_gts, hops[0].width, hops[0].max_speed_gts), (Some(2.5), Some(16), Some(16.0)));
        assert!(hops[0].below_capability() && !hops[1].below_capability() && hops[2].below_capability());
        // Gen1 x16 (32 Gb/s) is below Gen4 x8 (126 Gb/s): the device's own link limits.
        assert_eq!(narrowest(&hops).unwrap().bdf, "0000:03:00.0");
        std::fs::write(root.path().join("devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/current_link_speed"), "16.0 GT/s PCIe").unwrap();
        // At Gen4 the x8 uplink limits; of its two equal ends the upstream one is named.
        let hops = read(root.path(), "0000:03:00.0").unwrap();
        assert_eq!(narrowest(&hops).unwrap().bdf, "0000:00:01.0");
        assert_eq!(hops[3].link_text(), "16 GT/s x8");
        assert_eq!(read(root.path(), "0000:09:00.0"), None);
    }
}
