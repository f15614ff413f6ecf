//! Alternative Routing-ID Interpretation extended capability (PCIe Base Spec §7.8.7):
//! `ARICap`/`ARICtl` as lspci prints them (`ls-ecaps.c`: `cap_ari`).

use super::flag;
use super::regs::field;
use crate::pci::config::ConfigSpace;

const PCI_ARI_CAP: usize = 4;
const PCI_ARI_CTRL: usize = 6;
const PCI_ARI_MFVC: u16 = 0x0001;
const PCI_ARI_ACS: u16 = 0x0002;
const PCI_ARI_CAP_NFN: u16 = 0xff00;
const PCI_ARI_CTRL_FG: u16 = 0x0070;

/// The heading, and the two registers' lines when their 4 bytes were read.
pub fn lines(config: &ConfigSpace, offset: usize) -> Vec<String> {
    let mut lines = vec!["Alternative Routing-ID Interpretation (ARI)".to_string()];
    if let (true, Some(cap), Some(ctl)) = (config.has(offset + PCI_ARI_CAP, 4), config.u16_at(offset + PCI_ARI_CAP), config.u16_at(offset + PCI_ARI_CTRL)) {
        let bits = |w: u16| (flag(w & PCI_ARI_MFVC != 0), flag(w & PCI_ARI_ACS != 0));
        let ((mfvc, acs), (mfvc_en, acs_en)) = (bits(cap), bits(ctl));
        lines.push(format!("ARICap:\tMFVC{mfvc} ACS{acs}, Next Function: {}", field(cap, PCI_ARI_CAP_NFN)));
        lines.push(format!("ARICtl:\tMFVC{mfvc_en} ACS{acs_en}, Function Group: {}", field(ctl, PCI_ARI_CTRL_FG)));
    }
    lines
}
