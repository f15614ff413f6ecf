//! A typed read-only view over configuration-space bytes (PCI Local Bus Spec 3.0 §6.1, PCIe Base
//! Spec §7.5.1): one accessor per header field. Reads beyond the bytes we have (64 for an
//! unprivileged sysfs read, 256 or 4096 as root) return `None` rather than a guess.

use serde::Serialize;

pub const VENDOR_ID: usize = 0x00;
pub const DEVICE_ID: usize = 0x02;
pub const COMMAND: usize = 0x04;
pub const STATUS: usize = 0x06;
pub const REVISION: usize = 0x08;
pub const CLASS_PROG: usize = 0x09;
pub const HEADER_TYPE: usize = 0x0e;
pub const BAR0: usize = 0x10;
pub const PRIMARY_BUS: usize = 0x18;
pub const SECONDARY_BUS: usize = 0x19;
pub const SUBORDINATE_BUS: usize = 0x1a;
pub const SUBSYSTEM_VENDOR_ID: usize = 0x2c;
pub const SUBSYSTEM_ID: usize = 0x2e;
pub const CAPABILITY_LIST: usize = 0x34;
pub const CARDBUS_CAPABILITY_LIST: usize = 0x14;

/// Status register bit 4: the capability list at 0x34 is valid.
pub const STATUS_CAP_LIST: u16 = 1 << 4;

/// Configuration space as far as we could read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSpace {
    bytes: Vec<u8>,
}

/// Header layouts (the low 7 bits of the Header Type register).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderType {
    /// Type 0: an endpoint function.
    Normal,
    /// Type 1: a PCI-to-PCI bridge (root port, switch port).
    Bridge,
    /// Type 2: a CardBus bridge.
    CardBus,
    Unknown(u8),
}

/// One Base Address Register as the header holds it (sizes come from sysfs `resource`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bar {
    pub index: usize,
    /// "memory" or "io".
    pub kind: &'static str,
    pub address: u64,
    pub is_64bit: bool,
    pub prefetchable: bool,
    /// From sysfs `resource` when live; `None` from a dump.
    pub size_bytes: Option<u64>,
}

impl ConfigSpace {
    pub fn new(bytes: Vec<u8>) -> Self {
        ConfigSpace { bytes }
    }

    /// Number of bytes available (64, 256 or 4096 normally).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// True when `len` bytes from `offset` are all available.
    /// Up to `len` bytes from `offset`, as many as were read.
    pub fn bytes_from(&self, offset: usize, len: usize) -> Vec<u8> {
        self.bytes.get(offset..).map_or_else(Vec::new, |rest| rest[..rest.len().min(len)].to_vec())
    }

    pub fn has(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.bytes.len())
    }

    pub fn u8_at(&self, offset: usize) -> Option<u8> {
        self.bytes.get(offset).copied()
    }

    /// Little-endian, as configuration space is.
    pub fn u16_at(&self, offset: usize) -> Option<u16> {
        self.has(offset, 2).then(|| u16::from_le_bytes([self.bytes[offset], self.bytes[offset + 1]]))
    }

    pub fn u32_at(&self, offset: usize) -> Option<u32> {
        self.has(offset, 4).then(|| u32::from_le_bytes(self.bytes[offset..offset + 4].try_into().unwrap()))
    }

    pub fn vendor_id(&self) -> Option<u16> {
        self.u16_at(VENDOR_ID)
    }

    pub fn device_id(&self) -> Option<u16> {
        self.u16_at(DEVICE_ID)
    }

    pub fn command(&self) -> Option<u16> {
        self.u16_at(COMMAND)
    }

    pub fn status(&self) -> Option<u16> {
        self.u16_at(STATUS)
    }

    pub fn revision(&self) -> Option<u8> {
        self.u8_at(REVISION)
    }

    /// Class code as base class, sub-class, programming interface (24 bits).
    pub fn class_code(&self) -> Option<u32> {
        Some(u32::from(self.u8_at(CLASS_PROG + 2)?) << 16 | u32::from(self.u8_at(CLASS_PROG + 1)?) << 8 | u32::from(self.u8_at(CLASS_PROG)?))
    }

    pub fn header_type(&self) -> Option<HeaderType> {
        Some(match self.u8_at(HEADER_TYPE)? & 0x7f {
            0 => HeaderType::Normal,
            1 => HeaderType::Bridge,
            2 => HeaderType::CardBus,
            other => HeaderType::Unknown(other),
        })
    }

    /// Header Type bit 7.
    pub fn multi_function(&self) -> Option<bool> {
        Some(self.u8_at(HEADER_TYPE)? & 0x80 != 0)
    }

    pub fn has_capability_list(&self) -> bool {
        self.status().is_some_and(|s| s & STATUS_CAP_LIST != 0)
    }

    /// Where the capability pointer lives for this header type.
    pub fn capability_pointer_offset(&self) -> usize {
        if self.header_type() == Some(HeaderType::CardBus) { CARDBUS_CAPABILITY_LIST } else { CAPABILITY_LIST }
    }

    /// Subsystem IDs (type 0 only; bridges keep them in a capability).
    pub fn subsystem(&self) -> Option<(u16, u16)> {
        (self.header_type()? == HeaderType::Normal).then_some(())?;
        Some((self.u16_at(SUBSYSTEM_VENDOR_ID)?, self.u16_at(SUBSYSTEM_ID)?))
    }

    /// Primary, secondary and subordinate bus numbers of a type 1 header.
    pub fn bridge_buses(&self) -> Option<(u8, u8, u8)> {
        (self.header_type()? == HeaderType::Bridge).then_some(())?;
        Some((self.u8_at(PRIMARY_BUS)?, self.u8_at(SECONDARY_BUS)?, self.u8_at(SUBORDINATE_BUS)?))
    }

    /// Implemented BARs: 6 in a type 0 header, 2 in a type 1. A 64-bit BAR uses two slots.
    pub fn bars(&self) -> Vec<Bar> {
        let count = match self.header_type() {
            Some(HeaderType::Normal) => 6,
            Some(HeaderType::Bridge) => 2,
            _ => 0,
        };
        let mut bars = Vec::new();
        let mut index = 0;
        while index < count {
            let Some(low) = self.u32_at(BAR0 + 4 * index) else { break };
            if low & 1 == 1 {
                if low & !3 != 0 {
                    bars.push(Bar { index, kind: "io", address: u64::from(low & !3), is_64bit: false, prefetchable: false, size_bytes: None });
                }
                index += 1;
                continue;
            }
            let is_64bit = (low >> 1) & 3 == 2;
            let high = if is_64bit { self.u32_at(BAR0 + 4 * (index + 1)).unwrap_or(0) } else { 0 };
            let address = u64::from(high) << 32 | u64::from(low & !0xf);
            if address != 0 {
                bars.push(Bar { index, kind: "memory", address, is_64bit, prefetchable: low & 8 != 0, size_bytes: None });
            }
            index += if is_64bit { 2 } else { 1 };
        }
        bars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_and_bars() {
        let mut bytes = vec![0u8; 64];
        bytes[0..4].copy_from_slice(&[0x86, 0x80, 0x3c, 0x15]);
        bytes[6] = 0x10;
        bytes[0x0b] = 0x02;
        bytes[0x10..0x14].copy_from_slice(&0xfe00_000cu32.to_le_bytes());
        bytes[0x14..0x18].copy_from_slice(&0x0000_0001u32.to_le_bytes());
        bytes[0x18..0x1c].copy_from_slice(&0x0000_e001u32.to_le_bytes());
        let config = ConfigSpace::new(bytes);
        assert_eq!(config.vendor_id(), Some(0x8086));
        assert_eq!(config.device_id(), Some(0x153c));
        assert!(config.has_capability_list());
        assert_eq!(config.class_code(), Some(0x020000));
        let bars = config.bars();
        assert_eq!(bars.len(), 2);
        assert_eq!(bars[0].address, 0x1_fe00_0000);
        assert!(bars[0].is_64bit && bars[0].prefetchable);
        assert_eq!((bars[1].index, bars[1].kind, bars[1].address), (2, "io", 0xe000));
        assert_eq!(config.u32_at(62), None, "reads past the available bytes are None");
    }
}
