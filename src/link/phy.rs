//! Physical layer: how many lane slots a packet takes, where ordered sets may start, and what a
//! slot lasts.
//!
//! Time is counted in *ticks*: one tick is one byte on one lane, so a symbol time is `width`
//! ticks and a packet of B bytes striped over the lanes takes B ticks. Every TLP and DLLP is a
//! whole number of DWs, so packets start on lane 0 or a lane 4k, as the specification requires
//! of links wider than x4. Ordered sets (SKP) go out on all lanes at once: they start on a
//! symbol boundary (8b/10b) or a block boundary (128b/130b) and the lanes before it carry PAD.
//!
//! 8b/10b (Gen1–2): a symbol is 10 bits, 4 ns at 2.5 GT/s. Framing: STP 1, sequence 2, LCRC 4,
//! END 1 around a TLP; SDP 1, 6, END 1 for a DLLP; SKP ordered set = COM and 3 SKP symbols.
//!
//! 128b/130b (Gen3–5): a symbol is 8 bits, and every 16 symbols per lane a 2-bit sync header
//! makes a 130-bit block; the sync headers are charged evenly (130/128 of a symbol per symbol).
//! Framing: STP token 4 (length, sequence number) and LCRC 4; SDP token 2 and 6. A SKP ordered set
//! is one 16-symbol block, announced by a 4-byte EDS token at the end of the data stream.

use crate::model::{Encoding, Link};

/// 8b/10b TLP framing: STP, sequence number, LCRC, END.
pub const FRAMING_8B10B_BYTES: u64 = 1 + 2 + 4 + 1;
/// 128b/130b TLP framing: STP token (which carries the sequence number), LCRC.
pub const FRAMING_128B130B_BYTES: u64 = 4 + 4;
/// A DLLP's body: type, 3 bytes of content, 16-bit CRC.
pub const DLLP_BODY_BYTES: u64 = 6;
/// 8b/10b DLLP framing: SDP and END.
pub const DLLP_FRAMING_8B10B_BYTES: u64 = 2;
/// 128b/130b DLLP framing: the 2-byte SDP token.
pub const DLLP_FRAMING_128B130B_BYTES: u64 = 2;
/// SKP ordered set at 8b/10b: COM and three SKP symbols, per lane.
pub const SKP_8B10B_SYMBOLS: u64 = 4;
/// Symbols per lane in a 128b/130b block (a SKP ordered set is one block).
pub const BLOCK_SYMBOLS: u64 = 16;
/// EDS token that ends a data stream before an ordered-set block.
pub const EDS_BYTES: u64 = 4;
/// Optional end-to-end CRC.
pub const ECRC_BYTES: u64 = 4;

/// The physical layer of one link, in ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phy {
    pub width: u64,
    pub encoding: Encoding,
    /// Duration of one tick (a lane byte) in ns.
    pub tick_ns: f64,
}

impl Phy {
    pub fn new(link: Link) -> Self {
        let encoding = link.generation.encoding();
        let bits_per_symbol = match encoding {
            Encoding::B8b10b => 10.0,
            // Flit mode: 1b/1b, the flit carries its own CRC and FEC.
            Encoding::Flit1b1b => 8.0,
            // Sync headers: 2 bits per 16 symbols of 8 bits.
            _ => 8.0 * 130.0 / 128.0,
        };
        let symbol_ns = bits_per_symbol / link.generation.gts();
        Phy { width: link.width as u64, encoding, tick_ns: symbol_ns / link.width as f64 }
    }

    /// Link bytes of a TLP's framing.
    pub fn tlp_framing_bytes(&self) -> u64 {
        match self.encoding {
            Encoding::B8b10b => FRAMING_8B10B_BYTES,
            Encoding::Flit1b1b => 0,
            _ => FRAMING_128B130B_BYTES,
        }
    }

    /// Link bytes of a DLLP, framing included (8 in both encodings).
    pub fn dllp_bytes(&self) -> u64 {
        DLLP_BODY_BYTES
            + match self.encoding {
                Encoding::B8b10b => DLLP_FRAMING_8B10B_BYTES,
                _ => DLLP_FRAMING_128B130B_BYTES,
            }
    }

    /// Ticks of one symbol time (all lanes).
    pub fn symbol_ticks(&self) -> u64 {
        self.width
    }

    /// Ticks between SKP ordered sets for an interval in symbol times (8b/10b) or blocks.
    pub fn skp_interval_ticks(&self, interval: u64) -> u64 {
        match self.encoding {
            Encoding::B8b10b => interval * self.width,
            _ => interval * BLOCK_SYMBOLS * self.width,
        }
    }

    /// Where a SKP ordered set that may start at `at` occupies the lanes: (start, end) in
    /// ticks, the EDS token of 128b/130b included.
    pub fn skp_span(&self, at: u64) -> (u64, u64) {
        match self.encoding {
            Encoding::B8b10b => {
                let start = at.next_multiple_of(self.width);
                (start, start + SKP_8B10B_SYMBOLS * self.width)
            }
            // Flit mode: between flits, one 16-symbol ordered set, no EDS (the model's
            // assumption too: the 128b/130b-style schedule and length).
            Encoding::Flit1b1b => {
                let start = at.next_multiple_of(self.width);
                (start, start + BLOCK_SYMBOLS * self.width)
            }
            _ => {
                let block = BLOCK_SYMBOLS * self.width;
                let ordered_set = (at + EDS_BYTES).next_multiple_of(block);
                (at, ordered_set + block)
            }
        }
    }

    /// Nearest whole tick to `ns` (latencies and timers are given in ns).
    pub fn ticks(&self, ns: f64) -> u64 {
        (ns / self.tick_ns).round() as u64
    }

    pub fn ns(&self, ticks: u64) -> f64 {
        ticks as f64 * self.tick_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen1_symbol_is_4_ns_and_framing_is_8_bytes() {
        let phy = Phy::new("gen1x1".parse().unwrap());
        assert_eq!(phy.ns(1), 4.0);
        assert_eq!(phy.tlp_framing_bytes(), 8);
        assert_eq!(phy.dllp_bytes(), 8);
        assert_eq!(phy.skp_span(5), (5, 9));
        let x4 = Phy::new("gen1x4".parse().unwrap());
        assert_eq!(x4.ns(4), 4.0);
        assert_eq!(x4.skp_span(5), (8, 24));
    }

    #[test]
    fn gen3_skp_is_an_eds_then_a_whole_block() {
        let phy = Phy::new("gen3x2".parse().unwrap());
        // EDS at 30..34, pad to the block boundary at 64, SKP block 64..96.
        assert_eq!(phy.skp_span(30), (30, 96));
        assert!((phy.ns(128) - 64.0 * 130.0 / 128.0 / 8.0 * 8.0).abs() < 1e-9);
    }
}
