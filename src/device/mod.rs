//! The pcieperf device as the host sees it: the register map of the performance-demo endpoint
//! (document 001 §4) with pcieperf's measurement-core registers, and the rules every
//! implementation of it shares. Below the engines: the simulator engine, the co-simulation
//! engine and the procedures (`bench::demo`) all read the map from here.
//!
//! [`regmap`] is generated from `hdl/regs/pcieperf.rdl` (SystemRDL) by `hdl/regs/generate.py`,
//! together with the RTL's Verilog header, the cocotb testbench's Python module and
//! `docs/regmap.md`: the map is written once (docs/hdl.md, "The register map").

pub mod regmap;

use crate::error::InvalidInput;
use crate::model::LinkParams;

/// Unit of the stall and threshold registers, in ns (document 001: 16 ns).
pub const STALL_UNIT_NS: f64 = regmap::MAX_STALL_UNIT_NS as f64;
// The threshold is compared with stalls: both registers must count in the same unit.
const _: () = assert!(regmap::MAX_STALL_UNIT_NS == regmap::THRESHOLD_UNIT_NS);

/// Whether a 32-bit register or RAM access fits the device's BARs: an existing BAR, an aligned
/// offset, inside the BAR's size.
pub fn check_access(bar: u8, offset: u64, device: &str) -> Result<(), InvalidInput> {
    let last = regmap::BAR_BYTES.len() - 1;
    let size = *regmap::BAR_BYTES
        .get(bar as usize)
        .ok_or_else(|| InvalidInput::new(format!("BAR{bar} does not exist on {device} (BAR0–BAR{last})")))?;
    if !offset.is_multiple_of(4) || offset + 4 > size {
        return Err(InvalidInput::new(format!("BAR{bar}+{offset:#x}: offsets must be 32-bit aligned and below {size:#x}")));
    }
    Ok(())
}

/// PCI-status word (`regmap::PCI_STATUS`, document 001 §3 layout) of a link, MSI enabled.
/// `extra_bits` are bits the map does not name, or'ed in as given.
pub fn status_word(params: &LinkParams, extended_tag: bool, extra_bits: u32) -> u32 {
    use regmap::*;
    let size_code = |bytes: u64| (bytes / 128).trailing_zeros();
    let field = |value: u32, shift: u32, mask: u32| (value & mask) << shift;
    field(size_code(params.mps_bytes), PCI_STATUS_MPS_SHIFT, PCI_STATUS_MPS_MASK)
        | field(extended_tag as u32, PCI_STATUS_EXTENDED_TAG_SHIFT, PCI_STATUS_EXTENDED_TAG_MASK)
        | field(size_code(params.mrrs_bytes), PCI_STATUS_MRRS_SHIFT, PCI_STATUS_MRRS_MASK)
        | field(params.link.generation.number(), PCI_STATUS_GENERATION_SHIFT, PCI_STATUS_GENERATION_MASK)
        | field(params.link.width, PCI_STATUS_WIDTH_SHIFT, PCI_STATUS_WIDTH_MASK)
        | field(1, PCI_STATUS_MSI_SHIFT, PCI_STATUS_MSI_MASK)
        | extra_bits
}

#[cfg(test)]
mod tests {
    use super::regmap::{Register, BAR_BYTES, RAM_BAR, RAM_BYTES, REGISTERS};
    use super::*;

    #[test]
    fn every_register_word_is_an_access_the_device_takes() {
        for reg in REGISTERS {
            for word in (0..reg.bytes).step_by(4) {
                assert!(check_access(reg.bar, reg.offset + word, "the device").is_ok(), "{reg:?}");
            }
        }
    }

    #[test]
    fn accesses_outside_the_bars_are_refused() {
        for (bar, &size) in BAR_BYTES.iter().enumerate() {
            assert!(check_access(bar as u8, size - 4, "d").is_ok());
            assert!(check_access(bar as u8, size, "d").is_err(), "BAR{bar} ends at {size:#x}");
            assert!(check_access(bar as u8, 2, "d").is_err(), "unaligned");
        }
        assert!(check_access(BAR_BYTES.len() as u8, 0, "d").is_err());
        assert_eq!(BAR_BYTES[RAM_BAR as usize], RAM_BYTES);
    }

    #[test]
    fn registers_do_not_overlap_and_avoid_the_ram() {
        let overlap = |a: &Register, b: &Register| a.bar == b.bar && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
        for (i, a) in REGISTERS.iter().enumerate() {
            assert_ne!(a.bar, RAM_BAR, "{} sits in the RAM BAR", a.name);
            for b in &REGISTERS[i + 1..] {
                assert!(!overlap(a, b), "{} and {} overlap", a.name, b.name);
                assert_ne!(a.name, b.name);
            }
        }
    }

    #[test]
    fn status_word_fields_fit_their_masks() {
        let params = LinkParams { mps_bytes: 4096, mrrs_bytes: 4096, ..LinkParams::typical("gen5x16".parse().unwrap()) };
        let word = status_word(&params, true, 0);
        assert_eq!(word >> regmap::PCI_STATUS_MPS_SHIFT & regmap::PCI_STATUS_MPS_MASK, 5);
        assert_eq!(word >> regmap::PCI_STATUS_MRRS_SHIFT & regmap::PCI_STATUS_MRRS_MASK, 5);
        assert_eq!(word >> regmap::PCI_STATUS_GENERATION_SHIFT & regmap::PCI_STATUS_GENERATION_MASK, 5);
        assert_eq!(word >> regmap::PCI_STATUS_WIDTH_SHIFT & regmap::PCI_STATUS_WIDTH_MASK, 16);
    }
}
