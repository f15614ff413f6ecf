//! Latency Tolerance Reporting extended capability (PCIe Base Spec §7.8.2): the maximum snoop
//! and no-snoop latencies as lspci prints them (`ls-ecaps.c`: `cap_ltr`).

use crate::pci::config::ConfigSpace;

const PCI_LTR_MAX_SNOOP: usize = 4;
const PCI_LTR_MAX_NOSNOOP: usize = 6;
const PCI_LTR_VALUE_MASK: u16 = 0x3ff;
const PCI_LTR_SCALE_SHIFT: u16 = 10;

/// A latency register in ns: value × 32^scale. Scales 6 and 7 are reserved; lspci computes
/// `1 << (scale * 5)` in a 32-bit int, which on x86 shifts by the count modulo 32.
fn latency_ns(register: u16) -> u64 {
    let scale = u32::from(register >> PCI_LTR_SCALE_SHIFT & 7);
    u64::from(register & PCI_LTR_VALUE_MASK) * u64::from(1u32 << (scale * 5 % 32))
}

/// The heading, and the two latencies when their 4 bytes were read.
pub fn lines(config: &ConfigSpace, offset: usize) -> Vec<String> {
    let mut lines = vec!["Latency Tolerance Reporting".to_string()];
    if let (true, Some(snoop), Some(no_snoop)) = (config.has(offset + PCI_LTR_MAX_SNOOP, 4), config.u16_at(offset + PCI_LTR_MAX_SNOOP), config.u16_at(offset + PCI_LTR_MAX_NOSNOOP)) {
        lines.push(format!("Max snoop latency: {}ns", latency_ns(snoop)));
        lines.push(format!("Max no snoop latency: {}ns", latency_ns(no_snoop)));
    }
    lines
}

#[cfg(test)]
mod tests {
    #[test]
    fn scales_by_powers_of_32() {
        assert_eq!(super::latency_ns(3 | 2 << 10), 3 * 1024);
        assert_eq!(super::latency_ns(1 | 7 << 10), 8, "reserved scale 7 as lspci computes it on x86");
    }
}
