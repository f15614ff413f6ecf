//! Power Management capability (PCI Bus Power Management Interface Spec 1.2 §3.2).

use serde::Serialize;

use super::flag;
use crate::pci::config::ConfigSpace;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PowerManagement {
    pub offset: usize,
    pub version: u8,
    pub d1_supported: bool,
    pub d2_supported: bool,
    /// PME_Support bits for D0, D1, D2, D3hot, D3cold.
    pub pme_support: u8,
    /// Current power state 0–3 (D0–D3hot).
    pub power_state: Option<u8>,
    pub no_soft_reset: Option<bool>,
    /// Power Management Capabilities register (PMC), as read.
    pub capabilities: u16,
    /// Power Management Control/Status register (PMCSR), when the capability's second dword
    /// was read.
    pub control_status: Option<u16>,
    /// PMCSR PCI-to-PCI Bridge Support Extensions (PMCSR_BSE).
    pub bridge_extensions: Option<u8>,
}

/// pciutils' AuxCurrent column: the PMC Aux_Current field in mA.
const AUX_CURRENT_MA: [u32; 8] = [0, 55, 100, 160, 220, 270, 320, 375];

pub fn decode(config: &ConfigSpace, offset: usize) -> Option<PowerManagement> {
    let pmc = config.u16_at(offset + 2)?;
    // lspci reads PMCSR only with its whole dword.
    let pmcsr = config.has(offset + 4, 4).then(|| config.u16_at(offset + 4)).flatten();
    Some(PowerManagement {
        offset,
        version: (pmc & 7) as u8,
        d1_supported: pmc & 0x200 != 0,
        d2_supported: pmc & 0x400 != 0,
        pme_support: (pmc >> 11) as u8,
        power_state: pmcsr.map(|s| (s & 3) as u8),
        no_soft_reset: pmcsr.map(|s| s & 8 != 0),
        capabilities: pmc,
        control_status: pmcsr,
        bridge_extensions: pmcsr.and_then(|_| config.u8_at(offset + 6)),
    })
}

impl PowerManagement {
    /// lspci's heading and its `Flags:`, `Status:` and `Bridge:` lines.
    pub fn describe(&self) -> Vec<String> {
        let pmc = |bit: u32| flag(self.capabilities >> bit & 1 == 1);
        let aux_ma = AUX_CURRENT_MA[usize::from(self.capabilities >> 6 & 7)];
        let mut lines = vec![
            format!("Power Management version {}", self.version),
            format!("Flags: PMEClk{} DSI{} D1{} D2{} AuxCurrent={aux_ma}mA PME(D0{},D1{},D2{},D3hot{},D3cold{})", pmc(3), pmc(5), pmc(9), pmc(10), pmc(11), pmc(12), pmc(13), pmc(14), pmc(15)),
        ];
        if let Some(pmcsr) = self.control_status {
            let csr = |bit: u32| flag(pmcsr >> bit & 1 == 1);
            lines.push(format!("Status: D{} NoSoftRst{} PME-Enable{} DSel={} DScale={} PME{}", pmcsr & 3, csr(3), csr(8), pmcsr >> 9 & 0xf, pmcsr >> 13 & 3, csr(15)));
        }
        if let Some(bse) = self.bridge_extensions.filter(|b| *b != 0) {
            lines.push(format!("Bridge: PM{} B3{}", flag(bse & 0x80 != 0), flag(bse & 0x40 == 0)));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_state() {
        let mut bytes = vec![0u8; 256];
        bytes[0x42..0x44].copy_from_slice(&0x0603u16.to_le_bytes());
        bytes[0x44..0x46].copy_from_slice(&0x0008u16.to_le_bytes());
        let pm = super::decode(&super::ConfigSpace::new(bytes), 0x40).unwrap();
        assert_eq!((pm.version, pm.d1_supported, pm.d2_supported, pm.power_state, pm.no_soft_reset), (3, true, true, Some(0), Some(true)));
    }
}
