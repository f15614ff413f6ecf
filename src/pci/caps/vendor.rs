//! Vendor-Specific capability (PCI Local Bus Spec 3.0 §6.8): lspci decodes only VirtIO's (Red
//! Hat's virtio devices 1af4:1000–107f, VirtIO 1.x §4.1.4); others show their length. The
//! Vendor-Specific Extended Capability (PCIe Base Spec §7.9.5) shows its header's ID, revision
//! and length.

use serde::Serialize;

use crate::pci::config::ConfigSpace;

/// Capability Length (byte 2) and, for VirtIO, cfg_type (byte 3), BAR (4), offset (8), length (12)
/// and the notify capability's multiplier (16).
const VNDR_LENGTH: usize = 2;
const VIRTIO_CFG_TYPE: usize = 3;
const VIRTIO_BAR: usize = 4;
const VIRTIO_OFFSET: usize = 8;
const VIRTIO_LENGTH: usize = 12;
const VIRTIO_NOTIFY_MULTIPLIER: usize = 16;
const VIRTIO_PCI_CAP_NOTIFY_CFG: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VendorSpecific {
    pub offset: usize,
    /// lspci's heading: `Vendor Specific Information: VirtIO: Notify` or `…: Len=14 <?>`.
    pub heading: String,
    /// `-vv`'s line of a VirtIO capability: which BAR, where, how big.
    pub virtio: Option<String>,
}

pub fn decode(config: &ConfigSpace, offset: usize) -> VendorSpecific {
    let length = config.u8_at(offset + VNDR_LENGTH).unwrap_or(0);
    let virtio = config.vendor_id() == Some(0x1af4) && config.device_id().is_some_and(|d| (0x1000..=0x107f).contains(&d));
    let heading = if virtio && length >= 16 && config.has(offset, usize::from(length)) {
        let kind = match config.u8_at(offset + VIRTIO_CFG_TYPE) {
            Some(1) => "CommonCfg",
            Some(2) => "Notify",
            Some(3) => "ISR",
            Some(4) => "DeviceCfg",
            _ => "<unknown>",
        };
        format!("Vendor Specific Information: VirtIO: {kind}")
    } else {
        format!("Vendor Specific Information: Len={length:02x} <?>")
    };
    let virtio = if heading.contains("VirtIO") { virtio_details(config, offset, length) } else { None };
    VendorSpecific { offset, heading, virtio }
}

fn virtio_details(config: &ConfigSpace, at: usize, length: u8) -> Option<String> {
    let bar = config.u8_at(at + VIRTIO_BAR)?;
    let mut line = format!("BAR={bar} offset={:08x} size={:08x}", config.u32_at(at + VIRTIO_OFFSET)?, config.u32_at(at + VIRTIO_LENGTH)?);
    if config.u8_at(at + VIRTIO_CFG_TYPE) == Some(VIRTIO_PCI_CAP_NOTIFY_CFG) && length >= 20 {
        line += &format!(" multiplier={:08x}", config.u32_at(at + VIRTIO_NOTIFY_MULTIPLIER)?);
    }
    Some(line)
}

impl VendorSpecific {
    pub fn describe(&self) -> Vec<String> {
        std::iter::once(self.heading.clone()).chain(self.virtio.clone()).collect()
    }
}

/// VSEC ID, revision and length: the dword after an extended capability's header.
const EVNDR_HEADER: usize = 4;

/// lspci's `cap_evendor`: `Vendor Specific Information: ID=0001 Rev=1 Len=014 <?>`.
pub fn extended_heading(config: &ConfigSpace, offset: usize) -> String {
    match config.has(offset + EVNDR_HEADER, 4).then(|| config.u32_at(offset + EVNDR_HEADER)).flatten() {
        Some(header) => format!("Vendor Specific Information: ID={:04x} Rev={} Len={:03x} <?>", header & 0xffff, header >> 16 & 0xf, header >> 20),
        None => "Vendor Specific Information: <unreadable>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtio_only_on_virtio_devices() {
        let mut bytes = vec![0u8; 256];
        bytes[0..4].copy_from_slice(&[0xf4, 0x1a, 0x41, 0x10]);
        bytes[0x40..0x54].copy_from_slice(&[0x09, 0, 20, 2, 4, 0, 0, 0, 0, 0x30, 0, 0, 0, 0x10, 0, 0, 4, 0, 0, 0]);
        let cap = decode(&ConfigSpace::new(bytes.clone()), 0x40);
        assert_eq!(cap.heading, "Vendor Specific Information: VirtIO: Notify");
        assert_eq!(cap.virtio.as_deref(), Some("BAR=4 offset=00003000 size=00001000 multiplier=00000004"));
        bytes[0] = 0x86;
        let other = decode(&ConfigSpace::new(bytes), 0x40);
        assert_eq!((other.heading.as_str(), other.virtio), ("Vendor Specific Information: Len=14 <?>", None));
    }
}
