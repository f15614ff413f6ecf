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
}

pub fn decode(config: &ConfigSpace, offset: usize) -> Option<PowerManagement> {
    let pmc = config.u16_at(offset + 2)?;
    let pmcsr = config.u16_at(offset + 4);
    Some(PowerManagement {
        offset,
        version: (pmc & 7) as u8,
        d1_supported: pmc & 0x200 != 0,
        d2_supported: pmc & 0x400 != 0,
        pme_support: (pmc >> 11) as u8,
        power_state: pmcsr.map(|s| (s & 3) as u8),
        no_soft_reset: pmcsr.map(|s| s & 8 != 0),
    })
}

impl PowerManagement {
    pub fn describe(&self) -> Vec<String> {
        let mut line = format!("Power Management version {}: D1{} D2{}", self.version, flag(self.d1_supported), flag(self.d2_supported));
        if let (Some(state), Some(no_soft_reset)) = (self.power_state, self.no_soft_reset) {
            line += &format!(", Status: D{state} NoSoftRst{}", flag(no_soft_reset));
        }
        vec![line]
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
