//! Advanced Error Reporting extended capability (PCIe Base Spec §7.8.4): uncorrectable and
//! correctable error status, masks and severity, with lspci's bit names.

use serde::Serialize;

use super::regs::*;
use crate::pci::config::ConfigSpace;

/// Uncorrectable error bits lspci names, in its order.
pub const UNCORRECTABLE_BITS: [(u32, &str); 12] = [
    (4, "DLP"),
    (5, "SDES"),
    (12, "TLP"),
    (13, "FCP"),
    (14, "CmpltTO"),
    (15, "CmpltAbrt"),
    (16, "UnxCmplt"),
    (17, "RxOF"),
    (18, "MalfTLP"),
    (19, "ECRC"),
    (20, "UnsupReq"),
    (21, "ACSViol"),
];

/// Correctable error bits lspci names, in its order.
pub const CORRECTABLE_BITS: [(u32, &str); 6] =
    [(0, "RxErr"), (6, "BadTLP"), (7, "BadDLLP"), (8, "Rollover"), (12, "Timeout"), (13, "AdvNonFatalErr")];

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Aer {
    pub offset: usize,
    pub uncorrectable_status: u32,
    pub uncorrectable_mask: u32,
    pub uncorrectable_severity: u32,
    pub correctable_status: u32,
    pub correctable_mask: u32,
    pub capabilities_control: u32,
    pub header_log: [u32; 4],
    /// Names of the set uncorrectable status bits (lspci's `UESta` `+` flags).
    pub uncorrectable_errors: Vec<&'static str>,
    /// Names of the set correctable status bits (lspci's `CESta` `+` flags).
    pub correctable_errors: Vec<&'static str>,
}

pub fn names(value: u32, bits: &[(u32, &'static str)]) -> Vec<&'static str> {
    bits.iter().filter(|(bit, _)| value >> bit & 1 == 1).map(|(_, name)| *name).collect()
}

/// Decode the capability at `offset`: `None` if its 44 bytes were not all read.
pub fn decode(config: &ConfigSpace, offset: usize) -> Option<Aer> {
    let reg = |at: usize| config.u32_at(offset + at);
    if !config.has(offset, PCI_ERR_LENGTH) {
        return None;
    }
    let uncorrectable_status = reg(PCI_ERR_UNCOR_STATUS)?;
    let correctable_status = reg(PCI_ERR_COR_STATUS)?;
    let log = |dword: usize| reg(PCI_ERR_HEADER_LOG + 4 * dword);
    Some(Aer {
        offset,
        uncorrectable_status,
        uncorrectable_mask: reg(PCI_ERR_UNCOR_MASK)?,
        uncorrectable_severity: reg(PCI_ERR_UNCOR_SEVER)?,
        correctable_status,
        correctable_mask: reg(PCI_ERR_COR_MASK)?,
        capabilities_control: reg(PCI_ERR_CAP)?,
        header_log: [log(0)?, log(1)?, log(2)?, log(3)?],
        uncorrectable_errors: names(uncorrectable_status, &UNCORRECTABLE_BITS),
        correctable_errors: names(correctable_status, &CORRECTABLE_BITS),
    })
}

fn flags(value: u32, bits: &[(u32, &str)]) -> String {
    bits.iter().map(|(bit, name)| format!("{name}{}", super::flag(value >> bit & 1 == 1))).collect::<Vec<_>>().join(" ")
}

impl Aer {
    pub fn describe(&self) -> Vec<String> {
        vec![
            "Advanced Error Reporting".to_string(),
            format!("UESta: {}", flags(self.uncorrectable_status, &UNCORRECTABLE_BITS)),
            format!("UEMsk: {}", flags(self.uncorrectable_mask, &UNCORRECTABLE_BITS)),
            format!("UESvrt: {}", flags(self.uncorrectable_severity, &UNCORRECTABLE_BITS)),
            format!("CESta: {}", flags(self.correctable_status, &CORRECTABLE_BITS)),
            format!("CEMsk: {}", flags(self.correctable_mask, &CORRECTABLE_BITS)),
        ]
    }

    pub fn raw(&self) -> Vec<String> {
        vec![format!(
            "UESta {:08x} UEMsk {:08x} UESvrt {:08x} CESta {:08x} CEMsk {:08x} AERCap {:08x} HeaderLog {:08x} {:08x} {:08x} {:08x}",
            self.uncorrectable_status,
            self.uncorrectable_mask,
            self.uncorrectable_severity,
            self.correctable_status,
            self.correctable_mask,
            self.capabilities_control,
            self.header_log[0],
            self.header_log[1],
            self.header_log[2],
            self.header_log[3]
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_set_bits() {
        let mut bytes = vec![0u8; 0x200];
        bytes[0x104..0x108].copy_from_slice(&(1u32 << 14 | 1 << 20).to_le_bytes());
        bytes[0x110..0x114].copy_from_slice(&(1u32 | 1 << 12).to_le_bytes());
        let aer = decode(&ConfigSpace::new(bytes), 0x100).unwrap();
        assert_eq!(aer.uncorrectable_errors, vec!["CmpltTO", "UnsupReq"]);
        assert_eq!(aer.correctable_errors, vec!["RxErr", "Timeout"]);
        assert!(decode(&ConfigSpace::new(vec![0; 0x120]), 0x100).is_none());
    }
}
