//! Device Serial Number extended capability (PCIe Base Spec §7.9.3): the 64-bit serial as
//! lspci prints it, most significant byte first (`ls-ecaps.c`: `cap_dsn`).

use crate::pci::config::ConfigSpace;

const PCI_DSN_LOWER: usize = 4;
const PCI_DSN_UPPER: usize = 8;

/// `Device Serial Number 00-11-22-33-44-55-66-77`; `None` when the 8 bytes were not read.
pub fn lines(config: &ConfigSpace, offset: usize) -> Option<Vec<String>> {
    config.has(offset + PCI_DSN_LOWER, 8).then_some(())?;
    let serial = u64::from(config.u32_at(offset + PCI_DSN_UPPER)?) << 32 | u64::from(config.u32_at(offset + PCI_DSN_LOWER)?);
    let bytes: Vec<String> = serial.to_be_bytes().iter().map(|b| format!("{b:02x}")).collect();
    Some(vec![format!("Device Serial Number {}", bytes.join("-"))])
}

#[cfg(test)]
mod tests {
    #[test]
    fn most_significant_byte_first() {
        let mut bytes = vec![0u8; 0x110];
        bytes[0x104..0x10c].copy_from_slice(&[0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00]);
        let lines = super::lines(&super::ConfigSpace::new(bytes), 0x100).unwrap();
        assert_eq!(lines, ["Device Serial Number 00-11-22-33-44-55-66-77"]);
    }
}
