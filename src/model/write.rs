//! Posted writes (memory write TLPs): device→host DMA writes, or CPU writes to a device.
//!
//! The data direction carries the write TLPs and SKPs; the receiver answers with one ACK and one
//! UpdateFC-P DLLP per coalescing interval in the opposite direction (document 000 §3.5).

use super::load::{bytes_ns, bytes_symbols, Load};
use super::tlp::{self, TlpTotals};
use super::{dllp, flit, skp, Flow, Limit, LinkParams, Span, Throughput};

/// Posted writes of `size_bytes` (device→host DMA writes, or CPU writes to a device), as one
/// transfer out of a long run of equal transfers.
pub fn write_throughput(params: &LinkParams, size_bytes: u64) -> Throughput {
    write_flow(params, size_bytes, Span::Steady).throughput
}

/// One write transfer with nothing before or after it on the link, in ns: as [`write_flow`],
/// except that in flit mode the flit holding its last TLP byte is sent whole and its TLPs are
/// usable only at that flit's end (back-to-back transfers share flits instead, as
/// [`write_flow`] charges).
pub fn isolated_write_ns(params: &LinkParams, size_bytes: u64) -> f64 {
    let flow = write_flow(params, size_bytes, Span::Steady);
    let tlp_bytes = flow.data.tlp_bytes();
    let idle_bytes = if params.link.generation == super::Generation::Gen6 { flit::whole_flit_bytes(tlp_bytes) - tlp_bytes } else { 0.0 };
    flow.duration_ns + bytes_ns(params.link, idle_bytes)
}

/// Everything about one write transfer of `size_bytes`.
pub fn write_flow(params: &LinkParams, size_bytes: u64, span: Span) -> Flow {
    let pieces = tlp::cut_aligned(params.start_addr % tlp::ADDRESS_BOUNDARY_BYTES, size_bytes, params.mps_bytes, params.accounting);
    write_pieces(params, &pieces, size_bytes, span)
}

/// A write made of the given TLP payloads (also used for MMIO and write combining).
pub fn write_pieces(params: &LinkParams, pieces: &[tlp::Piece], size_bytes: u64, span: Span) -> Flow {
    let link = params.link;
    let tlps = TlpTotals::of(params, pieces, params.header.bytes());
    let mut data = Load::default();
    data.add_tlps(link, &tlps);
    data.add_skps(params, span);
    let mut opposite = Load::default();
    if params.include_dllp {
        let intervals = dllp::count(params, tlps.tlps, bytes_symbols(link, data.tlp_bytes()), span);
        // One ACK and one UpdateFC-P per interval.
        opposite.add_dllps(link, 2.0 * intervals);
    }
    let data_ns = data.busy_ns(link);
    let opposite_ns = opposite_busy_ns(params, &opposite);
    let (duration_ns, limit) =
        if opposite_ns > data_ns { (opposite_ns, Limit::OppositeDirection) } else { (data_ns, Limit::Link) };
    Flow {
        size_bytes,
        data,
        opposite,
        duration_ns,
        throughput: Throughput::new(link, size_bytes as f64, duration_ns, limit),
    }
}

/// Busy time of a direction that carries only `load`, with SKPs charged as the time fraction
/// they take (they are sent whether or not this stream needs the direction).
pub(crate) fn opposite_busy_ns(params: &LinkParams, load: &Load) -> f64 {
    let skp_share = if params.include_skp { skp::fraction(params.link.generation) } else { 0.0 };
    bytes_ns(params.link, load.total_bytes()) / (1.0 - skp_share)
}
