//! Power Management capability (PCI Bus Power Management Interface Spec 1.2 §3.2).

use serde::Serialize;

use super::flag;
use super::regs::*;
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
    let pmc = config.u16_at(offset + PCI_PM_PMC)?;
    // lspci reads PMCSR only with its whole dword.
    let pmcsr = config.has(offset + PCI_PM_CTRL, 4).then(|| config.u16_at(offset + PCI_PM_CTRL)).flatten();
    Some(PowerManagement {
        offset,
        version: field(pmc, PCI_PM_CAP_VER_MASK) as u8,
        d1_supported: is_set(pmc, PCI_PM_CAP_D1),
        d2_supported: is_set(pmc, PCI_PM_CAP_D2),
        pme_support: field(pmc, PCI_PM_CAP_PME_MASK) as u8,
        power_state: pmcsr.map(|s| field(s, PCI_PM_CTRL_STATE_MASK) as u8),
        no_soft_reset: pmcsr.map(|s| is_set(s, PCI_PM_CTRL_NO_SOFT_RST)),
        capabilities: pmc,
        control_status: pmcsr,
        bridge_extensions: pmcsr.and_then(|_| config.u8_at(offset + PCI_PM_PPB_EXTENSIONS)),
    })
}

impl PowerManagement {
    /// lspci's heading and its `Flags:`, `Status:` and `Bridge:` lines.
    pub fn describe(&self) -> Vec<String> {
        let pmc = |mask: u16| flag(is_set(self.capabilities, mask));
        let aux_ma = AUX_CURRENT_MA[field(self.capabilities, PCI_PM_CAP_AUX_C_MASK) as usize];
        let pme = [PCI_PM_CAP_PME_D0, PCI_PM_CAP_PME_D1, PCI_PM_CAP_PME_D2, PCI_PM_CAP_PME_D3_HOT, PCI_PM_CAP_PME_D3_COLD].map(pmc);
        let mut lines = vec![
            format!("Power Management version {}", self.version),
            format!(
                "Flags: PMEClk{} DSI{} D1{} D2{} AuxCurrent={aux_ma}mA PME(D0{},D1{},D2{},D3hot{},D3cold{})",
                pmc(PCI_PM_CAP_PME_CLOCK), pmc(PCI_PM_CAP_DSI), pmc(PCI_PM_CAP_D1), pmc(PCI_PM_CAP_D2), pme[0], pme[1], pme[2], pme[3], pme[4]
            ),
        ];
        if let Some(pmcsr) = self.control_status {
            let csr = |mask: u16| flag(is_set(pmcsr, mask));
            lines.push(format!(
                "Status: D{} NoSoftRst{} PME-Enable{} DSel={} DScale={} PME{}",
                field(pmcsr, PCI_PM_CTRL_STATE_MASK),
                csr(PCI_PM_CTRL_NO_SOFT_RST),
                csr(PCI_PM_CTRL_PME_ENABLE),
                field(pmcsr, PCI_PM_CTRL_DATA_SEL_MASK),
                field(pmcsr, PCI_PM_CTRL_DATA_SCALE_MASK),
                csr(PCI_PM_CTRL_PME_STATUS)
            ));
        }
        if let Some(bse) = self.bridge_extensions.filter(|b| *b != 0) {
            lines.push(format!("Bridge: PM{} B3{}", flag(is_set(bse, PCI_PM_BPCC_ENABLE)), flag(!is_set(bse, PCI_PM_PPB_B2_B3))));
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
