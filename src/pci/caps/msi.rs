//! MSI capability (PCI Local Bus Spec 3.0 §6.8.1).

use serde::Serialize;

use super::flag;
use super::regs::*;
use crate::pci::config::ConfigSpace;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Msi {
    pub offset: usize,
    pub enabled: bool,
    /// Vectors enabled (Multiple Message Enable) and requested (Multiple Message Capable).
    pub vectors_enabled: u32,
    pub vectors_capable: u32,
    pub per_vector_masking: bool,
    pub is_64bit: bool,
    pub address: Option<u64>,
    pub data: Option<u16>,
    /// Mask and Pending Bits, with per-vector masking.
    #[serde(skip)]
    pub masking: Option<(u32, u32)>,
}

pub fn decode(config: &ConfigSpace, offset: usize) -> Option<Msi> {
    let control = config.u16_at(offset + PCI_MSI_FLAGS)?;
    let is_64bit = is_set(control, PCI_MSI_FLAGS_64BIT);
    let (address, data) = if is_64bit {
        let low = config.u32_at(offset + PCI_MSI_ADDRESS_LO);
        let high = config.u32_at(offset + PCI_MSI_ADDRESS_HI);
        (low.zip(high).map(|(l, h)| u64::from(h) << 32 | u64::from(l)), config.u16_at(offset + PCI_MSI_DATA_64))
    } else {
        (config.u32_at(offset + PCI_MSI_ADDRESS_LO).map(u64::from), config.u16_at(offset + PCI_MSI_DATA_32))
    };
    Some(Msi {
        offset,
        enabled: is_set(control, PCI_MSI_FLAGS_ENABLE),
        vectors_enabled: 1 << field(control, PCI_MSI_FLAGS_QSIZE),
        vectors_capable: 1 << field(control, PCI_MSI_FLAGS_QMASK),
        per_vector_masking: is_set(control, PCI_MSI_FLAGS_MASK_BIT),
        is_64bit,
        address,
        data,
        masking: if is_set(control, PCI_MSI_FLAGS_MASK_BIT) {
            let at = offset + if is_64bit { 0x10 } else { 0x0c };
            config.has(at, 8).then(|| (config.u32_at(at).unwrap_or(0), config.u32_at(at + 4).unwrap_or(0)))
        } else {
            None
        },
    })
}

impl Msi {
    /// The heading and, from `-vv` on, the message address and data and the mask bits
    /// (`ls-caps.c`: `cap_msi`).
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "MSI: Enable{} Count={}/{} Maskable{} 64bit{}",
            flag(self.enabled),
            self.vectors_enabled,
            self.vectors_capable,
            flag(self.per_vector_masking),
            flag(self.is_64bit)
        )];
        let (Some(address), Some(data)) = (self.address, self.data) else { return lines };
        let width = if self.is_64bit { 16 } else { 8 };
        lines.push(format!("Address: {address:0width$x}  Data: {data:04x}"));
        if let Some((mask, pending)) = self.masking {
            lines.push(format!("Masking: {mask:08x}  Pending: {pending:08x}"));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_vectors() {
        let mut bytes = vec![0u8; 256];
        bytes[0x52..0x54].copy_from_slice(&(1u16 | 3 << 1 | 2 << 4 | 0x80).to_le_bytes());
        let msi = super::decode(&super::ConfigSpace::new(bytes), 0x50).unwrap();
        assert_eq!((msi.enabled, msi.vectors_enabled, msi.vectors_capable, msi.is_64bit), (true, 4, 8, true));
    }
}
