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
    })
}

impl Msi {
    pub fn describe(&self) -> Vec<String> {
        vec![format!(
            "MSI: Enable{} Count={}/{} Maskable{} 64bit{}",
            flag(self.enabled),
            self.vectors_enabled,
            self.vectors_capable,
            flag(self.per_vector_masking),
            flag(self.is_64bit)
        )]
    }

    pub fn raw(&self) -> Vec<String> {
        match (self.address, self.data) {
            (Some(address), Some(data)) => vec![format!("MSI Address: {address:016x}  Data: {data:04x}")],
            _ => Vec::new(),
        }
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
