//! SKP ordered sets: clock compensation sent on every lane at once, between packets.
//!
//! Gen1–2 (8b/10b): COM + 3 SKP = 4 symbols, scheduled every 1180–1538 symbol times (PCIe Base
//! Specification §4.2.7; document 000 §3.4 says "every 1180th to 1538th byte" for x1).
//! Gen3–5 (128b/130b): one 16-symbol SKP OS block every 370–375 data blocks of 16 symbols
//! (§4.2.7.3). Gen6 flit mode keeps the 128b/130b-style schedule between flits; pcieperf charges it
//! the same way (an assumption, < 0.3 % either way). pcieperf uses the shortest interval: the most
//! SKPs a compliant transmitter may send.

use super::{Generation, Link, Span};

/// (SKP length, scheduling interval), both in symbol times per lane.
pub fn schedule_symbols(generation: Generation) -> (u64, u64) {
    match generation {
        Generation::Gen1 | Generation::Gen2 => (4, 1180),
        _ => (16, 370 * 16),
    }
}

/// SKP ordered sets sent while a direction is busy for `busy_symbols` symbol times.
pub fn count(generation: Generation, busy_symbols: f64, span: Span) -> f64 {
    let (_, interval) = schedule_symbols(generation);
    span.round(busy_symbols / interval as f64)
}

/// Link bytes (summed over lanes) that `count` SKP ordered sets take.
pub fn bytes(link: Link, count: f64) -> f64 {
    count * (schedule_symbols(link.generation).0 * link.width as u64) as f64
}

/// Fraction of a direction's time taken by SKP ordered sets in steady state.
pub fn fraction(generation: Generation) -> f64 {
    let (len, interval) = schedule_symbols(generation);
    len as f64 / (interval + len) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_000_example_counts_three_skps_in_2400_bytes() {
        assert_eq!(count(Generation::Gen1, 2400.0, Span::Record), 3.0);
        assert!((count(Generation::Gen1, 2400.0, Span::Steady) - 2.034).abs() < 1e-3);
        assert_eq!(bytes("gen1x4".parse().unwrap(), 1.0), 16.0);
    }
}
