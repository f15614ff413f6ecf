//! Data Link Layer Packets that share the link with TLPs: ACK and UpdateFC.
//!
//! A DLLP is 8 bytes on the wire (Gen1–2: SDP 1 + 6 + END 1; Gen3–5: SDP token 2 + 6), striped
//! over the lanes like any packet, so it costs `8 / width` symbol times. (pcie-bench's public
//! model charges `8 / limit` of the link, i.e. bytes divided by symbol times, which overcharges
//! an xN link N times.) DLLPs travel opposite to the TLPs they acknowledge or credit.
//!
//! How often: the receiver must send an ACK within the AckNak latency limit of the PCIe Base
//! Specification (rev 5.0 Tables 3-7 to 3-9) and should send UpdateFC within the UpdateFC
//! latency guideline (Tables 2-46 to 2-48). Both tables follow one formula,
//! `(MaxPayload + 28) × AckFactor / width + InternalDelay` symbol times, and by default pcieperf
//! assumes one ACK and one UpdateFC per limit, i.e. the most coalescing a compliant receiver may
//! do. `LinkParams::dllp_every_tlps` replaces that by "one of each per N TLPs" (document 000 §3.5
//! assumes N = 1). Gen6 flit mode carries DLLPs in each flit's 6 DLP bytes: no extra bytes.

use super::{Generation, Link, LinkParams, Span};

/// Bytes of one DLLP on the wire, framing included.
pub const DLLP_BYTES: u64 = 8;

/// TLP overhead the spec's latency formula assumes, in symbols (header, framing, ECRC).
const TLP_OVERHEAD_SYMBOLS: f64 = 28.0;

/// AckFactor (equal to the UpdateFC "UpdateFactor") by MaxPayload and width.
pub fn ack_factor(mps_bytes: u64, width: u32) -> f64 {
    match (mps_bytes <= 256, width) {
        (true, 1 | 2 | 4) => 1.4,
        (true, 8) => 2.5,
        (true, _) => 3.0,
        (false, 1 | 2 | 4 | 8) => 1.0,
        (false, _) => 2.0,
    }
}

/// Internal delay term of the formula, in symbol times: 19 at 2.5 GT/s, 70 at 5 GT/s, 115 at
/// 8 GT/s and above (the spec's tables minus the payload term).
pub fn internal_delay_symbols(generation: Generation) -> f64 {
    match generation {
        Generation::Gen1 => 19.0,
        Generation::Gen2 => 70.0,
        _ => 115.0,
    }
}

/// AckNak latency limit (and UpdateFC guideline) in symbol times, rounded down as the tables are.
/// Gen1 x1 MPS 128: 237; Gen1 x4 MPS 128: 73; Gen3 x8 MPS 256: 203.
pub fn ack_latency_limit_symbols(link: Link, mps_bytes: u64) -> u64 {
    let payload = (mps_bytes as f64 + TLP_OVERHEAD_SYMBOLS) * ack_factor(mps_bytes, link.width) / link.width as f64;
    (payload + internal_delay_symbols(link.generation)).floor() as u64
}

/// DLLPs of one kind a receiver sends while `tlps` TLPs arrive over `busy_symbols` symbol times.
pub fn count(params: &LinkParams, tlps: f64, busy_symbols: f64, span: Span) -> f64 {
    if tlps <= 0.0 {
        return 0.0;
    }
    let events = match params.dllp_every_tlps {
        Some(n) => tlps / n as f64,
        None => (busy_symbols / ack_latency_limit_symbols(params.link, params.mps_bytes) as f64).min(tlps),
    };
    span.round(events).max(if span == Span::Record { 1.0 } else { 0.0 })
}

/// Bytes `count` DLLPs occupy on the link: 8 each, none in flit mode.
pub fn bytes(link: Link, count: f64) -> f64 {
    match link.generation {
        Generation::Gen6 => 0.0,
        _ => count * DLLP_BYTES as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(link: &str, mps: u64) -> u64 {
        ack_latency_limit_symbols(link.parse().unwrap(), mps)
    }

    #[test]
    fn formula_reproduces_the_spec_tables() {
        // 2.5 GT/s table (rev 1.1 Table 3-7), every width at two payload sizes.
        let gen1_128 = [(1, 237), (2, 128), (4, 73), (8, 67), (12, 58), (16, 48), (32, 33)];
        for (w, v) in gen1_128 {
            assert_eq!(limit(&format!("gen1x{w}"), 128), v, "x{w}");
        }
        let gen1_4096 = [(1, 4143), (2, 2081), (4, 1050), (8, 534), (12, 706), (16, 534), (32, 276)];
        for (w, v) in gen1_4096 {
            assert_eq!(limit(&format!("gen1x{w}"), 4096), v, "x{w}");
        }
        assert_eq!(limit("gen2x1", 128), 288);
        assert_eq!(limit("gen2x8", 512), 137);
        assert_eq!(limit("gen3x8", 256), 203);
        assert_eq!(limit("gen3x16", 4096), 630);
    }
}
