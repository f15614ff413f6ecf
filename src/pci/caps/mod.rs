//! One decoder per capability, with the field names of the PCI Express Base Specification (and
//! lspci's abbreviations where users know them: DevCap, LnkSta, UESta …), their registers' masks
//! named as pciutils names them ([`regs`]), the table that maps a capability ID to its decoder
//! ([`table`]), plus the name of every standard and extended capability ID.

pub mod aer;
pub mod ari;
pub mod dsn;
pub mod ltr;
pub mod msi;
pub mod msix;
pub mod pcie;
pub mod pcie_text;
pub mod pm;
pub mod regs;
pub mod table;
pub mod vendor;

/// `+`/`-` as lspci prints a flag.
pub fn flag(set: bool) -> char {
    if set { '+' } else { '-' }
}

/// Capability IDs (PCI Code and ID Assignment Specification §2).
pub fn cap_name(id: u16) -> &'static str {
    match id {
        0x00 => "Null",
        0x01 => "Power Management",
        0x02 => "AGP",
        0x03 => "Vital Product Data",
        0x04 => "Slot Identification",
        0x05 => "MSI",
        0x06 => "CompactPCI Hot Swap",
        0x07 => "PCI-X",
        0x08 => "HyperTransport",
        0x09 => "Vendor Specific",
        0x0a => "Debug Port",
        0x0b => "CompactPCI Central Resource Control",
        0x0c => "PCI Hot-Plug",
        0x0d => "Bridge Subsystem Vendor ID",
        0x0e => "AGP 8x",
        0x0f => "Secure Device",
        0x10 => "PCI Express",
        0x11 => "MSI-X",
        0x12 => "Serial ATA Data/Index Configuration",
        0x13 => "Advanced Features",
        0x14 => "Enhanced Allocation",
        0x15 => "Flattening Portal Bridge",
        _ => "Unknown capability",
    }
}

/// Extended capability IDs (PCI Code and ID Assignment Specification §3).
pub fn ext_cap_name(id: u16) -> &'static str {
    match id {
        0x00 => "Null",
        0x01 => "Advanced Error Reporting",
        0x02 => "Virtual Channel",
        0x03 => "Device Serial Number",
        0x04 => "Power Budgeting",
        0x05 => "Root Complex Link Declaration",
        0x06 => "Root Complex Internal Link Control",
        0x07 => "Root Complex Event Collector Endpoint Association",
        0x08 => "Multi-Function Virtual Channel",
        0x09 => "Virtual Channel (MFVC present)",
        0x0a => "Root Complex Register Block",
        0x0b => "Vendor-Specific Extended",
        0x0c => "Configuration Access Correlation",
        0x0d => "Access Control Services",
        0x0e => "Alternative Routing-ID Interpretation",
        0x0f => "Address Translation Services",
        0x10 => "Single Root I/O Virtualization",
        0x11 => "Multi-Root I/O Virtualization",
        0x12 => "Multicast",
        0x13 => "Page Request Interface",
        0x14 => "AMD Reserved",
        0x15 => "Resizable BAR",
        0x16 => "Dynamic Power Allocation",
        0x17 => "TPH Requester",
        0x18 => "Latency Tolerance Reporting",
        0x19 => "Secondary PCI Express",
        0x1a => "Protocol Multiplexing",
        0x1b => "Process Address Space ID",
        0x1c => "LN Requester",
        0x1d => "Downstream Port Containment",
        0x1e => "L1 PM Substates",
        0x1f => "Precision Time Measurement",
        0x20 => "PCI Express over M-PHY",
        0x21 => "FRS Queueing",
        0x22 => "Readiness Time Reporting",
        0x23 => "Designated Vendor-Specific",
        0x24 => "VF Resizable BAR",
        0x25 => "Data Link Feature",
        0x26 => "Physical Layer 16.0 GT/s",
        0x27 => "Lane Margining at the Receiver",
        0x28 => "Hierarchy ID",
        0x29 => "Native PCIe Enclosure Management",
        0x2a => "Physical Layer 32.0 GT/s",
        0x2b => "Alternate Protocol",
        0x2c => "System Firmware Intermediary",
        0x2d => "Shadow Functions",
        0x2e => "Data Object Exchange",
        0x2f => "Device 3",
        0x30 => "Integrity and Data Encryption",
        0x31 => "Physical Layer 64.0 GT/s",
        0x32 => "Flit Logging",
        0x33 => "Flit Performance Measurement",
        0x34 => "Flit Error Injection",
        _ => "Unknown extended capability",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_standard_id_has_a_name() {
        for id in 0..=0x15 {
            assert_ne!(cap_name(id), "Unknown capability", "{id:#x}");
        }
        for id in 0..=0x34 {
            assert_ne!(ext_cap_name(id), "Unknown extended capability", "{id:#x}");
        }
        assert_eq!(cap_name(0x16), "Unknown capability");
    }
}
