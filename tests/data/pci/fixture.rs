//! Test fixtures shared by tests/inspect_*.rs (included with `#[path]`): configuration spaces
//! with a PCI Express capability at 0x40 and AER at 0x100, and fake sysfs trees laid out as the
//! kernel lays them out (`devices/pci0000:00/<port>/<device>`, `bus/pci/devices/*` symlinks).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// PCIe registers a fixture sets; codes as in the registers (speed 1 = 2.5 GT/s … 5 = 32 GT/s,
/// payload 0 = 128 … 5 = 4096).
#[derive(Clone, Copy)]
pub struct Pcie {
    pub port_type: u16,
    pub mps_supported: u32,
    pub mps: u16,
    pub mrrs: u16,
    pub cap_speed: u32,
    pub cap_width: u32,
    pub speed: u16,
    pub width: u16,
    pub aspm_control: u16,
    pub relaxed_ordering: bool,
    /// Bridges: primary, secondary, subordinate bus.
    pub buses: Option<(u8, u8, u8)>,
}

pub const ENDPOINT: u16 = 0;
pub const ROOT_PORT: u16 = 4;
pub const UPSTREAM: u16 = 5;
pub const DOWNSTREAM: u16 = 6;

impl Pcie {
    pub fn new(port_type: u16, speed: u32, width: u32) -> Self {
        Pcie {
            port_type,
            mps_supported: 1,
            mps: 1,
            mrrs: 2,
            cap_speed: speed,
            cap_width: width,
            speed: speed as u16,
            width: width as u16,
            aspm_control: 0,
            relaxed_ordering: true,
            buses: None,
        }
    }

    pub fn trained(mut self, speed: u16, width: u16) -> Self {
        self.speed = speed;
        self.width = width;
        self
    }

    pub fn bridge(mut self, primary: u8, secondary: u8, subordinate: u8) -> Self {
        self.buses = Some((primary, secondary, subordinate));
        self
    }
}

fn put(bytes: &mut [u8], at: usize, data: &[u8]) {
    bytes[at..at + data.len()].copy_from_slice(data);
}

/// A 4096-byte configuration space (cut it to 64 or 256 to mimic shorter reads).
pub fn config(vendor: u16, device: u16, p: &Pcie, correctable_status: u32) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    put(&mut b, 0, &vendor.to_le_bytes());
    put(&mut b, 2, &device.to_le_bytes());
    put(&mut b, 4, &0x0406u16.to_le_bytes());
    put(&mut b, 6, &0x0010u16.to_le_bytes());
    if let Some((primary, secondary, subordinate)) = p.buses {
        b[0x0e] = 1;
        put(&mut b, 0x09, &[0x00, 0x04, 0x06]);
        put(&mut b, 0x18, &[primary, secondary, subordinate]);
    } else {
        put(&mut b, 0x09, &[0x00, 0x80, 0x12]);
        put(&mut b, 0x10, &0xf000_000cu32.to_le_bytes());
    }
    b[0x34] = 0x40;
    b[0x40] = 0x10;
    put(&mut b, 0x42, &(2u16 | p.port_type << 4).to_le_bytes());
    put(&mut b, 0x44, &(p.mps_supported | 1 << 5).to_le_bytes());
    let devctl = p.mps << 5 | p.mrrs << 12 | u16::from(p.relaxed_ordering) << 4 | 1 << 8;
    put(&mut b, 0x48, &devctl.to_le_bytes());
    // LnkCap2's Supported Link Speeds Vector is what the kernel reads for the capable speed.
    put(&mut b, 0x4c, &(p.cap_speed | p.cap_width << 4 | 3 << 10).to_le_bytes());
    put(&mut b, 0x50, &p.aspm_control.to_le_bytes());
    put(&mut b, 0x52, &(p.speed | p.width << 4 | 1 << 13).to_le_bytes());
    let vector: u32 = (1 << p.cap_speed) - 1;
    put(&mut b, 0x6c, &(vector << 1).to_le_bytes());
    put(&mut b, 0x70, &(p.cap_speed as u16).to_le_bytes());
    put(&mut b, 0x100, &(0x0001u32 | 2 << 16).to_le_bytes());
    put(&mut b, 0x110, &correctable_status.to_le_bytes());
    b
}

/// A fake `/sys`.
pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Tree {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bus/pci/devices")).unwrap();
        std::fs::create_dir_all(dir.path().join("devices/pci0000:00")).unwrap();
        Tree { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Add the device at the end of `chain` (BDFs from the root port down) with its config bytes
    /// and attributes; returns its directory.
    pub fn add(&self, chain: &[&str], config: &[u8], attributes: &[(&str, &str)]) -> PathBuf {
        let relative: PathBuf = std::iter::once("devices/pci0000:00").chain(chain.iter().copied()).collect();
        let dir = self.root().join(&relative);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config"), config).unwrap();
        for (name, value) in attributes {
            std::fs::write(dir.join(name), format!("{value}\n")).unwrap();
        }
        let link = self.root().join("bus/pci/devices").join(chain.last().unwrap());
        std::os::unix::fs::symlink(Path::new("../../..").join(&relative), link).unwrap();
        dir
    }
}
