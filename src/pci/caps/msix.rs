//! MSI-X capability (PCI Local Bus Spec 3.0 §6.8.2).

use serde::Serialize;

use super::flag;
use super::regs::*;
use crate::pci::config::ConfigSpace;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MsiX {
    pub offset: usize,
    pub enabled: bool,
    pub function_masked: bool,
    /// Table Size + 1.
    pub vectors: u32,
    /// BAR indicator and offset of the vector table and the pending bit array.
    pub table: Option<(u32, u32)>,
    pub pba: Option<(u32, u32)>,
}

pub fn decode(config: &ConfigSpace, offset: usize) -> Option<MsiX> {
    let control = config.u16_at(offset + PCI_MSIX_CTRL)?;
    let split = |v: u32| (v & PCI_MSIX_BIR, v & !PCI_MSIX_BIR);
    Some(MsiX {
        offset,
        enabled: is_set(control, PCI_MSIX_ENABLE),
        function_masked: is_set(control, PCI_MSIX_MASK),
        vectors: field(control, PCI_MSIX_TABSIZE) + 1,
        table: config.u32_at(offset + PCI_MSIX_TABLE).map(split),
        pba: config.u32_at(offset + PCI_MSIX_PBA).map(split),
    })
}

impl MsiX {
    /// The heading and, from `-vv` on, where the vector table and the pending bits live.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!("MSI-X: Enable{} Count={} Masked{}", flag(self.enabled), self.vectors, flag(self.function_masked))];
        if let (Some((bar, offset)), Some((pba_bar, pba_offset))) = (self.table, self.pba) {
            lines.push(format!("Vector table: BAR={bar} offset={offset:08x}"));
            lines.push(format!("PBA: BAR={pba_bar} offset={pba_offset:08x}"));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_size_is_n_minus_one() {
        let mut bytes = vec![0u8; 256];
        bytes[0x9a..0x9c].copy_from_slice(&0x8004u16.to_le_bytes());
        bytes[0x9c..0xa0].copy_from_slice(&0x8000u32.to_le_bytes());
        let msix = super::decode(&super::ConfigSpace::new(bytes), 0x98).unwrap();
        assert_eq!((msix.enabled, msix.vectors, msix.table), (true, 5, Some((0, 0x8000))));
    }
}
