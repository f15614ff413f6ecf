//! The state of the performance-demo endpoint's register file (document 001 §4), as the
//! simulator implements it. The map itself — offsets, reset values, BAR sizes — is
//! `crate::device::regmap`, generated from hdl/regs/pcieperf.rdl like the RTL's.
//!
//! Two registers the GUI shows but the document's table does not locate — "Num Deadlock"
//! (stalls above the threshold) and the PCI-status word of §3 — sit where the map puts them
//! (BAR2+0x30, BAR2+0x34); on a real board, check its register map. BAR3 is a plain 32 KiB RAM,
//! like the AHB RAM that document 000 §4 accesses from the CPU.

use crate::device::regmap as map;

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
            threshold: map::THRESHOLD_RESET,
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
        self.threshold as f64 * crate::device::STALL_UNIT_NS
    }

    /// Value a result register shows at `now_ns`.
    pub fn result(pending: Option<PendingResult>, now_ns: f64) -> u32 {
        match pending {
            Some(p) if now_ns >= p.done_at_ns => p.tenths,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::device::status_word;

    #[test]
    fn doc001_status_word_is_the_documents() {
        let config = super::super::config::SimConfig::preset("doc001").unwrap();
        assert_eq!(status_word(&config.params, true, config.status_extra_bits), 0x9041_2100);
    }
}
