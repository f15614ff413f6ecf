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
    /// Root Error Command, Root Error Status and the two Error Source IDs, shown for root ports
    /// and event collectors (the function's PCI Express type decides, as in lspci).
    #[serde(skip)]
    pub root: Option<(u32, u32, u16, u16)>,
}

pub fn names(value: u32, bits: &[(u32, &'static str)]) -> Vec<&'static str> {
    bits.iter().filter(|(bit, _)| value >> bit & 1 == 1).map(|(_, name)| *name).collect()
}

/// Decode the capability at `offset`: `None` if its 44 bytes were not all read. `root`: the
/// function is a root port or event collector (lspci then shows the root registers).
pub fn decode(config: &ConfigSpace, offset: usize, root: bool) -> Option<Aer> {
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
        root: if root && config.has(offset + PCI_ERR_ROOT_COMMAND, 12) {
            Some((reg(PCI_ERR_ROOT_COMMAND)?, reg(PCI_ERR_ROOT_STATUS)?, config.u16_at(offset + PCI_ERR_ROOT_COR_SRC)?, config.u16_at(offset + PCI_ERR_ROOT_SRC)?))
        } else {
            None
        },
    })
}

fn flags(value: u32, bits: &[(u32, &str)]) -> String {
    bits.iter().map(|(bit, name)| format!("{name}{}", super::flag(value >> bit & 1 == 1))).collect::<Vec<_>>().join(" ")
}

fn bit(value: u32, n: u32) -> char {
    super::flag(value >> n & 1 == 1)
}

impl Aer {
    /// The heading and lspci's `-vv` lines (`ls-ecaps.c`: `cap_aer`).
    pub fn describe(&self) -> Vec<String> {
        let cap = self.capabilities_control;
        let log = self.header_log;
        let mut lines = vec![
            "Advanced Error Reporting".to_string(),
            format!("UESta:\t{}", flags(self.uncorrectable_status, &UNCORRECTABLE_BITS)),
            format!("UEMsk:\t{}", flags(self.uncorrectable_mask, &UNCORRECTABLE_BITS)),
            format!("UESvrt:\t{}", flags(self.uncorrectable_severity, &UNCORRECTABLE_BITS)),
            format!("CESta:\t{}", flags(self.correctable_status, &CORRECTABLE_BITS)),
            format!("CEMsk:\t{}", flags(self.correctable_mask, &CORRECTABLE_BITS)),
            format!("AERCap:\tFirst Error Pointer: {:02x}, ECRCGenCap{} ECRCGenEn{} ECRCChkCap{} ECRCChkEn{}", cap & 31, bit(cap, 5), bit(cap, 6), bit(cap, 7), bit(cap, 8)),
            format!("\tMultHdrRecCap{} MultHdrRecEn{} TLPPfxPres{} HdrLogCap{}", bit(cap, 9), bit(cap, 10), bit(cap, 11), bit(cap, 12)),
            format!("HeaderLog: {:08x} {:08x} {:08x} {:08x}", log[0], log[1], log[2], log[3]),
        ];
        if let Some((command, status, correctable_source, source)) = self.root {
            lines.push(format!("RootCmd: CERptEn{} NFERptEn{} FERptEn{}", bit(command, 0), bit(command, 1), bit(command, 2)));
            lines.push(format!("RootSta: CERcvd{} MultCERcvd{} UERcvd{} MultUERcvd{}", bit(status, 0), bit(status, 1), bit(status, 2), bit(status, 3)));
            lines.push(format!("\t FirstFatal{} NonFatalMsg{} FatalMsg{} IntMsg {}", bit(status, 4), bit(status, 5), bit(status, 6), status >> 27 & 0x1f));
            lines.push(format!("ErrorSrc: ERR_COR: {correctable_source:04x} ERR_FATAL/NONFATAL: {source:04x}"));
        }
        lines
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
        let aer = decode(&ConfigSpace::new(bytes), 0x100, false).unwrap();
        assert_eq!(aer.uncorrectable_errors, vec!["CmpltTO", "UnsupReq"]);
        assert_eq!(aer.correctable_errors, vec!["RxErr", "Timeout"]);
        assert!(decode(&ConfigSpace::new(vec![0; 0x120]), 0x100, false).is_none());
    }
}
