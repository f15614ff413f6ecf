//! Register offsets and field masks of the capabilities pcieperf decodes, named as pciutils'
//! `lib/header.h` names them (the PCI Express Base Specification's registers, lspci's
//! abbreviations), so a decoder line reads against the specification and against lspci's source.
//! A field is read with [`field`] (shifted down by its mask) or [`is_set`] (one bit).

/// The field `mask` selects in `value`, shifted down to bit 0.
pub fn field(value: impl Into<u32>, mask: impl Into<u32>) -> u32 {
    let mask = mask.into();
    (value.into() & mask) >> mask.trailing_zeros()
}

/// Whether any bit of `mask` is set in `value` (masks of one bit: that flag).
pub fn is_set(value: impl Into<u32>, mask: impl Into<u32>) -> bool {
    value.into() & mask.into() != 0
}

// Capability IDs (PCI Code and ID Assignment Specification §2, §3).
pub const PCI_CAP_ID_PM: u16 = 0x01;
pub const PCI_CAP_ID_MSI: u16 = 0x05;
pub const PCI_CAP_ID_PCIX: u16 = 0x07;
pub const PCI_CAP_ID_VNDR: u16 = 0x09;
pub const PCI_CAP_ID_SSVID: u16 = 0x0d;
pub const PCI_CAP_ID_EXP: u16 = 0x10;
pub const PCI_CAP_ID_MSIX: u16 = 0x11;
pub const PCI_EXT_CAP_ID_AER: u16 = 0x01;
pub const PCI_EXT_CAP_ID_DSN: u16 = 0x03;
pub const PCI_EXT_CAP_ID_ARI: u16 = 0x0e;
pub const PCI_EXT_CAP_ID_LTR: u16 = 0x18;
pub const PCI_EXT_CAP_ID_VNDR: u16 = 0x0b;

// Power Management (PCI Bus Power Management Interface Specification 1.2 §3.2).
pub const PCI_PM_PMC: usize = 2;
pub const PCI_PM_CAP_VER_MASK: u16 = 0x0007;
pub const PCI_PM_CAP_PME_CLOCK: u16 = 0x0008;
pub const PCI_PM_CAP_DSI: u16 = 0x0020;
pub const PCI_PM_CAP_AUX_C_MASK: u16 = 0x01c0;
pub const PCI_PM_CAP_D1: u16 = 0x0200;
pub const PCI_PM_CAP_D2: u16 = 0x0400;
/// PME_Support: one bit per state, D0 (bit 11) to D3cold (bit 15).
pub const PCI_PM_CAP_PME_MASK: u16 = 0xf800;
pub const PCI_PM_CAP_PME_D0: u16 = 0x0800;
pub const PCI_PM_CAP_PME_D1: u16 = 0x1000;
pub const PCI_PM_CAP_PME_D2: u16 = 0x2000;
pub const PCI_PM_CAP_PME_D3_HOT: u16 = 0x4000;
pub const PCI_PM_CAP_PME_D3_COLD: u16 = 0x8000;
pub const PCI_PM_CTRL: usize = 4;
pub const PCI_PM_CTRL_STATE_MASK: u16 = 0x0003;
pub const PCI_PM_CTRL_NO_SOFT_RST: u16 = 0x0008;
pub const PCI_PM_CTRL_PME_ENABLE: u16 = 0x0100;
pub const PCI_PM_CTRL_DATA_SEL_MASK: u16 = 0x1e00;
pub const PCI_PM_CTRL_DATA_SCALE_MASK: u16 = 0x6000;
pub const PCI_PM_CTRL_PME_STATUS: u16 = 0x8000;
pub const PCI_PM_PPB_EXTENSIONS: usize = 6;
pub const PCI_PM_PPB_B2_B3: u8 = 0x40;
pub const PCI_PM_BPCC_ENABLE: u8 = 0x80;

// MSI (PCI Local Bus Specification 3.0 §6.8.1).
pub const PCI_MSI_FLAGS: usize = 2;
pub const PCI_MSI_FLAGS_ENABLE: u16 = 0x0001;
pub const PCI_MSI_FLAGS_QMASK: u16 = 0x000e;
pub const PCI_MSI_FLAGS_QSIZE: u16 = 0x0070;
pub const PCI_MSI_FLAGS_64BIT: u16 = 0x0080;
pub const PCI_MSI_FLAGS_MASK_BIT: u16 = 0x0100;
pub const PCI_MSI_ADDRESS_LO: usize = 4;
pub const PCI_MSI_ADDRESS_HI: usize = 8;
pub const PCI_MSI_DATA_32: usize = 8;
pub const PCI_MSI_DATA_64: usize = 12;

// MSI-X (PCI Local Bus Specification 3.0 §6.8.2).
pub const PCI_MSIX_CTRL: usize = 2;
pub const PCI_MSIX_ENABLE: u16 = 0x8000;
pub const PCI_MSIX_MASK: u16 = 0x4000;
pub const PCI_MSIX_TABSIZE: u16 = 0x07ff;
pub const PCI_MSIX_TABLE: usize = 4;
pub const PCI_MSIX_PBA: usize = 8;
pub const PCI_MSIX_BIR: u32 = 0x7;

// PCI Express Capability (PCI Express Base Specification §7.5.3).
pub const PCI_EXP_FLAGS: usize = 0x02;
pub const PCI_EXP_FLAGS_VERS: u16 = 0x000f;
pub const PCI_EXP_FLAGS_TYPE: u16 = 0x00f0;
pub const PCI_EXP_FLAGS_SLOT: u16 = 0x0100;
pub const PCI_EXP_FLAGS_IRQ: u16 = 0x3e00;
pub const PCI_EXP_DEVCAP: usize = 0x04;
pub const PCI_EXP_DEVCAP_PAYLOAD: u32 = 0x0000_0007;
pub const PCI_EXP_DEVCAP_EXT_TAG: u32 = 0x0000_0020;
pub const PCI_EXP_DEVCAP_L0S: u32 = 0x0000_01c0;
pub const PCI_EXP_DEVCAP_L1: u32 = 0x0000_0e00;
pub const PCI_EXP_DEVCAP_FLRESET: u32 = 0x1000_0000;
pub const PCI_EXP_DEVCTL: usize = 0x08;
pub const PCI_EXP_DEVCTL_CERE: u16 = 0x0001;
pub const PCI_EXP_DEVCTL_NFERE: u16 = 0x0002;
pub const PCI_EXP_DEVCTL_FERE: u16 = 0x0004;
pub const PCI_EXP_DEVCTL_URRE: u16 = 0x0008;
pub const PCI_EXP_DEVCTL_RELAXED: u16 = 0x0010;
pub const PCI_EXP_DEVCTL_PAYLOAD: u16 = 0x00e0;
pub const PCI_EXP_DEVCTL_EXT_TAG: u16 = 0x0100;
pub const PCI_EXP_DEVCTL_NOSNOOP: u16 = 0x0800;
pub const PCI_EXP_DEVCTL_READRQ: u16 = 0x7000;
pub const PCI_EXP_DEVSTA: usize = 0x0a;
pub const PCI_EXP_DEVSTA_CED: u16 = 0x0001;
pub const PCI_EXP_DEVSTA_NFED: u16 = 0x0002;
pub const PCI_EXP_DEVSTA_FED: u16 = 0x0004;
pub const PCI_EXP_DEVSTA_URD: u16 = 0x0008;
pub const PCI_EXP_DEVSTA_TRPND: u16 = 0x0020;
pub const PCI_EXP_LNKCAP: usize = 0x0c;
pub const PCI_EXP_LNKCAP_SPEED: u32 = 0x0000_000f;
pub const PCI_EXP_LNKCAP_WIDTH: u32 = 0x0000_03f0;
pub const PCI_EXP_LNKCAP_ASPM: u32 = 0x0000_0c00;
pub const PCI_EXP_LNKCAP_L0S: u32 = 0x0000_7000;
pub const PCI_EXP_LNKCAP_L1: u32 = 0x0003_8000;
pub const PCI_EXP_LNKCAP_DLLA: u32 = 0x0010_0000;
pub const PCI_EXP_LNKCAP_PORT: u32 = 0xff00_0000;
pub const PCI_EXP_LNKCTL: usize = 0x10;
pub const PCI_EXP_LNKCTL_ASPM: u16 = 0x0003;
pub const PCI_EXP_LNKCTL_ASPM_L0S: u16 = 0x0001;
pub const PCI_EXP_LNKCTL_ASPM_L1: u16 = 0x0002;
pub const PCI_EXP_LNKCTL_RCB: u16 = 0x0008;
pub const PCI_EXP_LNKCTL_DISABLE: u16 = 0x0010;
pub const PCI_EXP_LNKCTL_CLOCK: u16 = 0x0040;
pub const PCI_EXP_LNKSTA: usize = 0x12;
pub const PCI_EXP_LNKSTA_SPEED: u16 = 0x000f;
pub const PCI_EXP_LNKSTA_WIDTH: u16 = 0x03f0;
pub const PCI_EXP_LNKSTA_TRAIN: u16 = 0x0800;
pub const PCI_EXP_LNKSTA_DL_ACT: u16 = 0x2000;
pub const PCI_EXP_DEVCAP2: usize = 0x24;
pub const PCI_EXP_DEVCAP2_TIMEOUT_RANGE: u32 = 0x0000_000f;
pub const PCI_EXP_DEVCAP2_TIMEOUT_DIS: u32 = 0x0000_0010;
pub const PCI_EXP_DEVCAP2_10BIT_TAG_COMP: u32 = 0x0001_0000;
pub const PCI_EXP_DEVCAP2_10BIT_TAG_REQ: u32 = 0x0002_0000;
pub const PCI_EXP_DEVCTL2: usize = 0x28;
pub const PCI_EXP_DEVCTL2_TIMEOUT_VALUE: u16 = 0x000f;
pub const PCI_EXP_DEVCTL2_TIMEOUT_DIS: u16 = 0x0010;
pub const PCI_EXP_DEVCTL2_10BIT_TAG_REQ: u16 = 0x1000;
pub const PCI_EXP_LNKCAP2: usize = 0x2c;
/// Supported Link Speeds Vector: bit 1 is 2.5 GT/s, bit 7 is reserved (pciutils'
/// `PCI_EXP_LNKCAP2_SPEED(x)`).
pub const PCI_EXP_LNKCAP2_SPEED: u32 = 0x0000_00fe;
pub const PCI_EXP_LNKCTL2: usize = 0x30;
pub const PCI_EXP_LNKCTL2_SPEED: u16 = 0x000f;
pub const PCI_EXP_LNKSTA2: usize = 0x32;
pub const PCI_EXP_LINKSTA2_EQU_COMP: u16 = 0x0002;

// Advanced Error Reporting (PCI Express Base Specification §7.8.4).
pub const PCI_ERR_UNCOR_STATUS: usize = 0x04;
pub const PCI_ERR_UNCOR_MASK: usize = 0x08;
pub const PCI_ERR_UNCOR_SEVER: usize = 0x0c;
pub const PCI_ERR_COR_STATUS: usize = 0x10;
pub const PCI_ERR_COR_MASK: usize = 0x14;
pub const PCI_ERR_CAP: usize = 0x18;
pub const PCI_ERR_HEADER_LOG: usize = 0x1c;
/// The capability's whole length: through the four header log dwords.
pub const PCI_ERR_LENGTH: usize = 0x2c;
pub const PCI_ERR_ROOT_COMMAND: usize = 0x2c;
pub const PCI_ERR_ROOT_STATUS: usize = 0x30;
pub const PCI_ERR_ROOT_COR_SRC: usize = 0x34;
pub const PCI_ERR_ROOT_SRC: usize = 0x36;

// Slot Identification (PCI-to-PCI Bridge Architecture Spec §13.1): the Expansion Slot register and
// the Chassis Number, read together as the capability's upper word.
pub const PCI_SID_ESR_NSLOTS: u16 = 0x001f;
pub const PCI_SID_ESR_FIC: u16 = 0x0020;
pub const PCI_SID_CHASSIS_NR: u16 = 0xff00;

// Debug Port (EHCI Specification Appendix C): BAR number and offset, the capability's upper word.
pub const PCI_DBG_PORT_BAR: u16 = 0xe000;
pub const PCI_DBG_PORT_OFFSET: u16 = 0x1fff;

// Subsystem ID and Subsystem Vendor ID capability (PCI-to-PCI Bridge Architecture Spec §3.2.5.13).
pub const PCI_SSVID_VENDOR: usize = 4;
pub const PCI_SSVID_DEVICE: usize = 6;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_shift_down_by_their_mask() {
        assert_eq!(field(0x5020u16, PCI_EXP_DEVCTL_PAYLOAD), 1);
        assert_eq!(field(0x5020u16, PCI_EXP_DEVCTL_READRQ), 5);
        assert_eq!(field(0xab00_0483u32, PCI_EXP_LNKCAP_PORT), 0xab);
        assert_eq!(field(0xab00_0483u32, PCI_EXP_LNKCAP_WIDTH), 8);
        assert!(is_set(0x2000u16, PCI_EXP_LNKSTA_DL_ACT));
        assert!(!is_set(0x0800u16, PCI_EXP_LNKSTA_DL_ACT));
    }
}
