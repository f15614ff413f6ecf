//! Finding targets on this machine, and the PCI device behind a file or node (sysfs only).
//!
//! Detection lists directories, reads sysfs attributes and opens block devices read-only (no
//! data moves) to see whether they really open; XDMA and Xillybus nodes are only checked with
//! access(), since opening a stream node may start it. Candidates come sorted by preference — XDMA (a DMA test design), then Xillybus
//! loopbacks, then block devices for read-only use — and [`choose`] takes the first usable one.
//! Nothing destructive is ever chosen: block devices are offered read-only, and writes to them
//! need `--destructive`, which detection never implies.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{Candidate, LinkState};
use crate::model::{Generation, Link};

/// Targets under the real `/dev` and `/sys`.
pub fn detect() -> Vec<Candidate> {
    detect_in(Path::new("/dev"), Path::new("/sys"))
}

/// Targets under a given device and sysfs root, so tests can build a fake tree.
pub fn detect_in(dev_dir: &Path, sys_dir: &Path) -> Vec<Candidate> {
    let names: BTreeSet<String> = fs::read_dir(dev_dir)
        .map(|entries| entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let mut found = Vec::new();
    found.extend(xdma_candidates(dev_dir, sys_dir, &names));
    found.extend(xillybus_candidates(dev_dir, sys_dir, &names));
    found.extend(block_candidates(dev_dir, sys_dir));
    found
}

/// The candidate `pcieperf run` uses when the user names no target: the first usable one.
pub fn choose(candidates: &[Candidate]) -> Option<&Candidate> {
    candidates.iter().find(|c| c.usable)
}

fn xdma_candidates(dev_dir: &Path, sys_dir: &Path, names: &BTreeSet<String>) -> Vec<Candidate> {
    let mut devices = BTreeSet::new();
    for name in names {
        if let Some((device, _, _)) = super::xdma::parse_channel_name(name) {
            devices.insert(device);
        }
    }
    devices
        .into_iter()
        .map(|device| {
            let prefix = dev_dir.join(&device);
            let channels = super::xdma::discover_channels(&prefix);
            let nodes: Vec<PathBuf> = channels.all_paths();
            let (usable, access) = access_summary(&nodes, libc::R_OK | libc::W_OK);
            Candidate {
                target: format!("xdma:{}", prefix.display()),
                kind: "xdma".into(),
                pci_address: class_node_pci(sys_dir, &format!("{device}_user")),
                usable,
                reason: format!(
                    "Xilinx XDMA, {} h2c and {} c2h channel(s); {access}; h2c writes the card's memory at --card-addr \
                     (the test design's memory, never host or disk data)",
                    channels.h2c.len(),
                    channels.c2h.len()
                ),
            }
        })
        .collect()
}

fn xillybus_candidates(dev_dir: &Path, sys_dir: &Path, names: &BTreeSet<String>) -> Vec<Candidate> {
    names
        .iter()
        .filter_map(|name| {
            let suffix = name.strip_prefix("xillybus_write_")?;
            let read = format!("xillybus_read_{suffix}");
            let paired = names.contains(&read);
            let nodes = [dev_dir.join(name), dev_dir.join(&read)];
            let (accessible, access) = access_summary(&nodes[..if paired { 2 } else { 1 }], libc::R_OK | libc::W_OK);
            Some(Candidate {
                target: format!("xillybus:{}", dev_dir.join(name).display()),
                kind: "xillybus".into(),
                pci_address: class_node_pci(sys_dir, name),
                usable: paired && accessible,
                reason: if paired {
                    format!("Xillybus stream pair {name} → {read}, used as a loopback (write, read back, verify); {access}")
                } else {
                    format!("{name} has no {read} to read the loopback from")
                },
            })
        })
        .collect()
}

/// Whole disks with a PCI device behind them (loop, zram, RAM disks and partitions are skipped:
/// they measure no link).
fn block_candidates(dev_dir: &Path, sys_dir: &Path) -> Vec<Candidate> {
    let Ok(entries) = fs::read_dir(sys_dir.join("class/block")) else { return Vec::new() };
    let mut disks: Vec<(String, String)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().join("partition").exists() {
                return None;
            }
            let pci = pci_address_in_path(&fs::canonicalize(entry.path()).ok()?)?;
            Some((name, pci))
        })
        .collect();
    // NVMe first: it is the DMA engine most machines have, and the fastest.
    disks.sort_by_key(|(name, _)| (!name.starts_with("nvme"), name.clone()));
    disks
        .into_iter()
        .map(|(name, pci)| {
            let node = dev_dir.join(&name);
            let (usable, access) = match access_summary(std::slice::from_ref(&node), libc::R_OK) {
                (true, _) => opens_for_reading(&node),
                refused => refused,
            };
            let link = link_state(sys_dir, &pci).map(|l| format!(", link {}", l.link)).unwrap_or_default();
            Candidate {
                target: format!("block:{}", node.display()),
                kind: "block".into(),
                pci_address: Some(pci.clone()),
                usable,
                reason: format!("block device on PCI {pci}{link}: read-only (device→host DMA); writes need --destructive; {access}"),
            }
        })
        .collect()
}

/// Whether the current user has `mode` access to every node, and a phrase saying so.
fn access_summary(nodes: &[PathBuf], mode: i32) -> (bool, String) {
    for node in nodes {
        // SAFETY: access() reads a NUL-terminated path.
        let ok = unsafe { libc::access(super::devfile::c_path(node).as_ptr(), mode) } == 0;
        if !ok {
            let why = if node.exists() { "no permission (run as root or join the node's group)" } else { "missing" };
            return (false, format!("{}: {why}", node.display()));
        }
    }
    (true, "accessible".into())
}

/// Whether a block device really opens read-only: permission bits are not the whole story
/// (a container's device cgroup refuses even root). Opening for reading moves no data.
fn opens_for_reading(node: &Path) -> (bool, String) {
    match super::devfile::open_node(node, super::devfile::Access::Read, libc::O_NONBLOCK, "") {
        Ok(_) => (true, "accessible".into()),
        Err(error) => (false, error.to_string()),
    }
}

/// The PCI device of a class device node, e.g. `/sys/class/xdma/xdma0_user/device`.
fn class_node_pci(sys_dir: &Path, node_name: &str) -> Option<String> {
    let classes = fs::read_dir(sys_dir.join("class")).ok()?;
    classes.flatten().find_map(|class| {
        let device = fs::canonicalize(class.path().join(node_name).join("device")).ok()?;
        pci_address_in_path(&device)
    })
}

/// The last `DDDD:BB:DD.F` component of a sysfs device path: the PCI function nearest to the
/// node (an NVMe controller, not the root port above it).
pub fn pci_address_in_path(path: &Path) -> Option<String> {
    path.components().filter_map(|c| c.as_os_str().to_str()).rfind(|c| is_pci_address(c)).map(str::to_string)
}

fn is_pci_address(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 12
        && bytes[4] == b':'
        && bytes[7] == b':'
        && bytes[10] == b'.'
        && bytes.iter().enumerate().all(|(i, b)| matches!(i, 4 | 7 | 10) || b.is_ascii_hexdigit())
}

/// The PCI device behind a file or block device: the device number (`st_rdev` for a block
/// device, `st_dev` of the filesystem for a regular file) → `/sys/dev/block/MAJ:MIN` → path.
pub fn pci_address_of(path: &Path, sys_dir: &Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = fs::metadata(path).ok()?;
    let devnum = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let (major, minor) = (libc::major(devnum), libc::minor(devnum));
    let node = fs::canonicalize(sys_dir.join(format!("dev/block/{major}:{minor}"))).ok()?;
    pci_address_in_path(&node)
}

/// Trained and capable link of a PCI function from sysfs, with MPS/MRRS from its PCI Express
/// capability. `None` for conventional PCI (virtio, no link attributes) or when the config space
/// beyond 64 bytes is unreadable (non-root).
pub fn link_state(sys_dir: &Path, pci: &str) -> Option<LinkState> {
    let device = sys_dir.join("bus/pci/devices").join(pci);
    let read_link = |speed: &str, width: &str| -> Option<Link> {
        let speed = fs::read_to_string(device.join(speed)).ok()?;
        let width: u32 = fs::read_to_string(device.join(width)).ok()?.trim().parse().ok()?;
        let gts: f64 = speed.split_whitespace().next()?.parse().ok()?;
        Link::new(Generation::from_gts(gts)?, width).ok()
    };
    let link = read_link("current_link_speed", "current_link_width")?;
    let capable = read_link("max_link_speed", "max_link_width");
    let (mps_bytes, mrrs_bytes) = payload_sizes(&fs::read(device.join("config")).ok()?)?;
    Some(LinkState { link, capable, mps_bytes, mrrs_bytes })
}

/// Max_Payload_Size and Max_Read_Request_Size from the Device Control register of the PCI
/// Express capability (ID 0x10), found by walking the capability list from offset 0x34.
pub fn payload_sizes(config: &[u8]) -> Option<(u64, u64)> {
    const CAP_ID_EXP: u8 = 0x10;
    let mut at = *config.get(0x34)? as usize & !3;
    for _ in 0..48 {
        if at < 0x40 || at + 10 > config.len() {
            return None;
        }
        if config[at] == CAP_ID_EXP {
            let devctl = u16::from_le_bytes([config[at + 8], config[at + 9]]);
            let mps = 128u64 << ((devctl >> 5) & 7);
            let mrrs = 128u64 << ((devctl >> 12) & 7);
            return Some((mps, mrrs));
        }
        at = config[at + 1] as usize & !3;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_address_is_the_last_function_in_the_path() {
        let path = Path::new("/sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1");
        assert_eq!(pci_address_in_path(path).as_deref(), Some("0000:3d:00.0"));
        assert_eq!(pci_address_in_path(Path::new("/sys/devices/virtual/block/loop0")), None);
        assert!(!is_pci_address("pci0000:00"));
    }

    #[test]
    fn payload_sizes_come_from_device_control() {
        let mut config = vec![0u8; 256];
        config[0x34] = 0x40;
        config[0x40] = 0x01; // power management, next 0x60
        config[0x41] = 0x60;
        config[0x60] = 0x10; // PCI Express
        // DevCtl: MPS code 1 (256 B) in bits 7:5, MRRS code 2 (512 B) in bits 14:12.
        let devctl: u16 = (1 << 5) | (2 << 12);
        config[0x68..0x6a].copy_from_slice(&devctl.to_le_bytes());
        assert_eq!(payload_sizes(&config), Some((256, 512)));
        config[0x60] = 0x05;
        assert_eq!(payload_sizes(&config), None);
    }
}
