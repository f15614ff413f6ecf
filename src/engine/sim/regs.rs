//! The register file of the performance-demo endpoint (document 001 §4), as the simulator
//! implements it.
//!
//! Offsets and meanings are the document's table (steps 0–11). Two registers the GUI shows but
//! the table does not locate — "Num Deadlock" (stalls above the threshold) and the PCI-status
//! word of §3 — sit at BAR2+0x30 and BAR2+0x34 here; on a real board, check its register map.
//! BAR3 is a plain 32 KiB RAM, like the AHB RAM that document 000 §4 accesses from the CPU.

/// Register offsets, shared by the simulated device and the driver procedure
/// (`crate::bench::demo`).
pub mod map {
    /// BAR0+0x0: version DD_MM_YY_00 (step 0, endianness check).
    pub const VERSION: (u8, u64) = (0, 0x0);
    /// BAR0+0x10: start: 1 read (h2d), 2 write (d2h), 3 both (step 6).
    pub const START: (u8, u64) = (0, 0x10);
    /// BAR0+0x3C / +0x40: bit errors during the test, RX (h2d) and TX (d2h) (steps 10, 11).
    pub const RX_BIT_ERRORS: (u8, u64) = (0, 0x3C);
    pub const TX_BIT_ERRORS: (u8, u64) = (0, 0x40);
    /// BAR1+0x4 / +0x8: physical addresses of the two 8 KiB host buffers, below 4 GiB (steps 1, 2).
    pub const BUFFER1: (u8, u64) = (1, 0x4);
    pub const BUFFER2: (u8, u64) = (1, 0x8);
    /// BAR1+0xC: fixed parameter 0x2000 (step 3).
    pub const FIXED: (u8, u64) = (1, 0xC);
    /// BAR2+0x18 / +0x1C: transfer time in 0.1 s units, 0 while running (step 8).
    pub const TX_RESULT: (u8, u64) = (2, 0x18);
    pub const RX_RESULT: (u8, u64) = (2, 0x1C);
    /// BAR2+0x20: block amount = 0xA343C × link multiplier (step 4).
    pub const BLOCK_AMOUNT: (u8, u64) = (2, 0x20);
    /// BAR2+0x28: longest stall in 16 ns units (step 9).
    pub const MAX_STALL: (u8, u64) = (2, 0x28);
    /// BAR2+0x2C: stall threshold in 16 ns units, 0x0C35 (step 5).
    pub const THRESHOLD: (u8, u64) = (2, 0x2C);
    /// BAR2+0x30: stalls above the threshold ("Num Deadlock"); not located by 001 §4.
    pub const STALL_COUNT: (u8, u64) = (2, 0x30);
    /// BAR2+0x34: PCI-status word with the 001 §3 bit layout; not located by 001 §4.
    pub const PCI_STATUS: (u8, u64) = (2, 0x34);
    /// BAR2+0x38 / +0x3C / +0x40: device clock cycles of the last write, read and read/write
    /// run (high words 0xC above): the pcieperf core's extension (hdl/), not in 001 §4, for
    /// runs too short for the result registers' 0.1 s unit. Read 0 where not implemented.
    pub const WRITE_CYCLES: (u8, u64) = (2, 0x38);
    pub const READ_CYCLES: (u8, u64) = (2, 0x3C);
    pub const READ_WRITE_CYCLES: (u8, u64) = (2, 0x40);
    pub const CYCLES_HIGH_OFFSET: u64 = 0xC;
    /// BAR3: 32 KiB RAM for CPU-initiated access tests (document 000 §4).
    pub const RAM_BAR: u8 = 3;
    pub const RAM_BYTES: u64 = 32 * 1024;

    /// Value of the version register: 08.02.2016, revision 00.
    pub const VERSION_VALUE: u32 = 0x0802_1600;
    /// Value of the fixed parameter register.
    pub const FIXED_VALUE: u32 = 0x2000;
    /// Block amount for a link multiplier of 1.
    pub const BLOCK_AMOUNT_PER_MULTIPLIER: u32 = 0xA343C;
    /// Default threshold: 0x0C35 × 16 ns = 50 µs.
    pub const THRESHOLD_VALUE: u32 = 0x0C35;
    /// Unit of the stall and threshold registers.
    pub const STALL_UNIT_NS: f64 = 16.0;
}

/// A 32-bit access the performance-demo BARs can take: BAR0–BAR2 of 4 KiB, BAR3 of 32 KiB,
/// aligned offsets (the simulated endpoint and the pcieperf core share the layout).
pub fn check_access(bar: u8, offset: u64, device: &str) -> Result<(), crate::engine::EngineError> {
    use crate::error::InvalidInput;
    let size = match bar {
        0..=2 => 4096,
        map::RAM_BAR => map::RAM_BYTES,
        _ => return Err(InvalidInput::new(format!("BAR{bar} does not exist on {device} (BAR0–BAR3)")).into()),
    };
    if offset % 4 != 0 || offset + 4 > size {
        return Err(InvalidInput::new(format!("BAR{bar}+{offset:#x}: offsets must be 32-bit aligned and below {size:#x}")).into());
    }
    Ok(())
}

/// One run the device has started: its results appear when the clock passes `done_at_ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PendingResult {
    pub done_at_ns: f64,
    /// Transfer time in 0.1 s units, as the device's counter measured it.
    pub tenths: u32,
}

/// The demo endpoint's state.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoRegisters {
    pub buffer1: u32,
    pub buffer2: u32,
    pub fixed: u32,
    pub block_amount: u32,
    pub threshold: u32,
    pub tx: Option<PendingResult>,
    pub rx: Option<PendingResult>,
    pub max_stall: u32,
    pub stall_count: u32,
    pub rx_bit_errors: u32,
    pub tx_bit_errors: u32,
    /// When the counters above become visible (end of the last running direction).
    pub counters_at_ns: f64,
    pub ram: Vec<u8>,
}

impl Default for DemoRegisters {
    fn default() -> Self {
        DemoRegisters {
            buffer1: 0,
            buffer2: 0,
            fixed: 0,
            block_amount: 0,
            threshold: map::THRESHOLD_VALUE,
            tx: None,
            rx: None,
            max_stall: 0,
            stall_count: 0,
            rx_bit_errors: 0,
            tx_bit_errors: 0,
            counters_at_ns: 0.0,
            ram: vec![0; map::RAM_BYTES as usize],
        }
    }
}

impl DemoRegisters {
    /// Whether the host has set up what the device needs before a start (steps 1–4).
    pub fn ready(&self) -> bool {
        self.buffer1 != 0 && self.buffer2 != 0 && self.fixed == map::FIXED_VALUE && self.block_amount != 0
    }

    /// Bytes one direction moves: 0x2000 × block amount.
    pub fn bytes(&self) -> u64 {
        self.fixed as u64 * self.block_amount as u64
    }

    pub fn threshold_ns(&self) -> f64 {
        self.threshold as f64 * map::STALL_UNIT_NS
    }

    /// Value a result register shows at `now_ns`.
    pub fn result(pending: Option<PendingResult>, now_ns: f64) -> u32 {
        match pending {
            Some(p) if now_ns >= p.done_at_ns => p.tenths,
            _ => 0,
        }
    }
}

/// PCI-status word with the bit layout of document 001 §3.
pub fn status_word(params: &crate::model::LinkParams, extended_tag: bool, extra_bits: u32) -> u32 {
    let size_code = |bytes: u64| (bytes / 128).trailing_zeros();
    (size_code(params.mps_bytes) & 0x7) << 5
        | (extended_tag as u32) << 8
        | (size_code(params.mrrs_bytes) & 0x7) << 12
        | (params.link.generation.number() & 0xF) << 16
        | (params.link.width & 0x3F) << 20
        | 1 << 31 // MSI enabled
        | extra_bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc001_status_word_is_the_documents() {
        let config = super::super::config::SimConfig::preset("doc001").unwrap();
        assert_eq!(status_word(&config.params, true, config.status_extra_bits), 0x9041_2100);
    }
}
