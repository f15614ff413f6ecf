//! A fake sysfs tree with one PCI function whose BAR0 is a regular file (tests of the `bar`
//! engine, `pio` and the write guard).
#![allow(dead_code)]

use std::path::PathBuf;

/// A fake sysfs tree with one function whose BAR0 is a regular file.
pub struct FakeDevice {
    pub _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub dev: PathBuf,
}

pub const BDF: &str = "0000:00:04.0";

pub fn fake(vendor: &str, device: &str, bar0_flags: u64, bar0_bytes: u64, decoding: bool) -> FakeDevice {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let dev = root.join("bus/pci/devices").join(BDF);
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("vendor"), format!("0x{vendor}\n")).unwrap();
    std::fs::write(dev.join("device"), format!("0x{device}\n")).unwrap();
    let mut resource = format!("0x00000000fe000000 0x{:016x} 0x{bar0_flags:016x}\n", 0xfe00_0000 + bar0_bytes - 1);
    resource += "0x00000000fd000000 0x00000000fd00ffff 0x0000000000042208\n"; // BAR1: prefetchable memory
    for _ in 2..7 {
        resource += "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
    }
    std::fs::write(dev.join("resource"), resource).unwrap();
    std::fs::File::create(dev.join("resource0")).unwrap().set_len(bar0_bytes).unwrap();
    let mut config = vec![0u8; 64];
    config[4] = if decoding { 0x02 } else { 0x00 };
    std::fs::write(dev.join("config"), config).unwrap();
    std::fs::write(dev.join("enable"), "0\n").unwrap();
    std::os::unix::fs::symlink("../../../kernel/iommu_groups/7", dev.join("iommu_group")).unwrap();
    FakeDevice { _dir: dir, root, dev }
}

