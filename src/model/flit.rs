//! Gen6 flit mode: 256-byte flits of 236 TLP bytes, 6 DLLP (DLP) bytes, 8 CRC and 6 FEC bytes.
//!
//! TLPs are packed back to back into the 236-byte TLP area (no STP, sequence number or LCRC per
//! TLP); DLLPs ride in the DLP bytes of every flit, so they cost nothing extra. pcie-bench's model
//! assumes 242/256 for Gen6; the specification's flit layout gives 236/256 for TLP bytes.

/// Bytes of one flit.
pub const FLIT_BYTES: u64 = 256;
/// Bytes of a flit that carry TLPs.
pub const FLIT_TLP_BYTES: u64 = 236;
/// Bytes of a flit that carry DLLP payloads.
pub const FLIT_DLP_BYTES: u64 = 6;
/// Flit CRC bytes.
pub const FLIT_CRC_BYTES: u64 = 8;
/// Flit FEC bytes.
pub const FLIT_FEC_BYTES: u64 = 6;

/// Flit overhead (DLP + CRC + FEC) carried alongside `tlp_bytes` of TLPs, in a steady stream
/// where flits are full.
pub fn overhead_bytes(tlp_bytes: f64) -> f64 {
    tlp_bytes * (FLIT_BYTES - FLIT_TLP_BYTES) as f64 / FLIT_TLP_BYTES as f64
}

/// `bytes` of flits (TLP bytes with their flit overhead) rounded up to whole flits.
pub fn whole_flit_bytes(bytes: f64) -> f64 {
    // A phase that is a whole number of flits up to rounding stays that number.
    (bytes / FLIT_BYTES as f64 - 1e-9).ceil().max(0.0) * FLIT_BYTES as f64
}

/// A phase of an exchange in flit mode ends on a flit boundary: a lone request arrives with the
/// end of its flit, a completion waits for the completer's next flit and arrives with the end of
/// the flit holding its last byte. `ns` rounded up to whole flits on `link` (unchanged below Gen6,
/// where packets end where their last symbol does).
pub fn whole_flits_ns(link: super::Link, ns: f64) -> f64 {
    if link.generation != super::Generation::Gen6 || ns <= 0.0 {
        return ns;
    }
    let ns_per_byte = super::load::bytes_ns(link, 1.0);
    whole_flit_bytes(ns / ns_per_byte) * ns_per_byte
}

/// Time one flit takes on `link`, in ns.
pub fn flit_ns(link: super::Link) -> f64 {
    super::load::bytes_ns(link, FLIT_BYTES as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flit_layout_adds_up() {
        assert_eq!(FLIT_TLP_BYTES + FLIT_DLP_BYTES + FLIT_CRC_BYTES + FLIT_FEC_BYTES, FLIT_BYTES);
        assert_eq!(overhead_bytes(236.0), 20.0);
    }
}
