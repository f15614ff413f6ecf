//! Messages through a ring of host buffers (document 003, OpenCPI's push mode): what bounds the
//! stream, from the link's TLPs and the ring's turnaround.
//!
//! Per message the producer sends its data as MWr TLPs (at most MPS, never across 4 KiB), one
//! metadata MWr and one flag MWr, with the SKP ordered sets and the receiver's DLLPs they bring
//! ([`super::write::write_pieces`]), plus the Ack and UpdateFC that the host's doorbell write
//! makes the device return on the same lanes, then pauses for its dwell. Three bounds:
//!
//! - the producer's: message ÷ (its time on the link + dwell);
//! - the ring's: host buffers × message ÷ one buffer's turnaround (filled, seen by the host,
//!   used, released by a doorbell that crosses the link);
//! - the host's: message ÷ its busy time per message (it takes buffers one at a time).
//!
//! The smallest is the limit. Document 003's own figure (6.727 Gb/s) counts the message overhead
//! as bytes on top of the TLP efficiency ([`super::message`]); [`doc003_convention`] keeps it
//! printable beside the TLP-accurate one.

use serde::{Deserialize, Serialize};

use super::load::bytes_ns;
use super::message::{message_throughput, MessageOverhead};
use super::tlp::{self, Piece};
use super::write::write_pieces;
use super::{LinkParams, Span};

/// The ring's shape and the host's figures the bounds need.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RingShape {
    pub message_bytes: u64,
    pub host_buffers: u64,
    pub metadata_bytes: u64,
    pub flag_bytes: u64,
    pub doorbell_bytes: u64,
    /// The producer's pause after each message.
    pub dwell_ns: f64,
    /// From the flag landing to the host seeing it.
    pub host_reaction_ns: f64,
    /// From the host seeing a buffer to its release (its use of the data).
    pub host_hold_ns: f64,
}

/// One bound of the stream, MB/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// `producer`, `ring` or `host`.
    pub name: String,
    #[serde(rename = "MBps")]
    pub mbps: f64,
    pub why: String,
}

/// The model of one message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamModel {
    /// The producer's time per message on the link: data, metadata and flag TLPs with their
    /// framing, SKPs and DLLPs, ns (without the dwell).
    pub link_ns_per_message: f64,
    pub data_tlps: u64,
    /// Upstream link bytes per message (TLPs and SKPs; DLLPs in `dllp_bytes`).
    pub tlp_bytes: f64,
    pub skp_bytes: f64,
    pub dllp_bytes: f64,
    /// One buffer from fill to reuse, ns.
    pub turnaround_ns: f64,
    pub bounds: Vec<Bound>,
    /// The smallest bound's name.
    pub limit: String,
    #[serde(rename = "MBps")]
    pub mbps: f64,
}

/// The bounds of a ring of `shape` on the link of `params`.
pub fn stream_model(params: &LinkParams, shape: &RingShape) -> StreamModel {
    let link = params.link;
    let mut pieces = tlp::cut_aligned(0, shape.message_bytes, params.mps_bytes, params.accounting);
    let data_tlps = tlp::count(&pieces);
    pieces.push(Piece { start: 0, len: shape.metadata_bytes, count: 1 });
    pieces.push(Piece { start: 0, len: shape.flag_bytes, count: 1 });
    let total = shape.message_bytes + shape.metadata_bytes + shape.flag_bytes;
    let message = write_pieces(params, &pieces, total, Span::Steady);
    // The doorbell's data link layer answer (Ack, UpdateFC-P) travels on the message's lanes.
    let doorbell = write_pieces(params, &[Piece { start: 0, len: shape.doorbell_bytes, count: 1 }], shape.doorbell_bytes, Span::Steady);
    let dllp_bytes = doorbell.opposite.total_bytes();
    let link_ns = message.data.busy_ns(link) + bytes_ns(link, dllp_bytes);
    let link_ns = link_ns.max(message.duration_ns);
    let doorbell_ns = doorbell.data.busy_ns(link);
    let turnaround_ns = link_ns + shape.host_reaction_ns + shape.host_hold_ns + doorbell_ns;
    let bytes = shape.message_bytes as f64;
    let mbps = |ns: f64| if ns > 0.0 { bytes / ns * 1e3 } else { f64::INFINITY };
    let bounds = vec![
        Bound {
            name: "producer".into(),
            mbps: mbps(link_ns + shape.dwell_ns),
            why: format!("one message is {data_tlps} data TLPs + metadata + flag on the link ({link_ns:.0} ns) and a {:.0} ns dwell", shape.dwell_ns),
        },
        Bound {
            name: "ring".into(),
            mbps: mbps(turnaround_ns) * shape.host_buffers as f64,
            why: format!("{} host buffers, each back after {turnaround_ns:.0} ns (fill, host reaction, use, doorbell)", shape.host_buffers),
        },
        Bound { name: "host".into(), mbps: mbps(shape.host_hold_ns), why: format!("the host holds each buffer {:.0} ns, one at a time", shape.host_hold_ns) },
    ];
    let smallest = bounds.iter().min_by(|a, b| a.mbps.total_cmp(&b.mbps)).expect("three bounds");
    StreamModel {
        link_ns_per_message: link_ns,
        data_tlps,
        tlp_bytes: message.data.tlp_bytes(),
        skp_bytes: message.data.total_bytes() - message.data.tlp_bytes(),
        dllp_bytes,
        turnaround_ns,
        limit: smallest.name.clone(),
        mbps: smallest.mbps,
        bounds,
    }
}

/// Document 003's convention: the link's steady write rate in full-MPS TLPs, byte-exact, no
/// SKPs or DLLPs, times message ÷ (message + metadata and flag bytes, 24 in the document).
pub fn doc003_convention(params: &LinkParams, message_bytes: u64, overhead_bytes: u64) -> MessageOverhead {
    message_throughput(&params.clone().documents_convention(), message_bytes, overhead_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HeaderFormat;

    fn doc003() -> LinkParams {
        let mut params = LinkParams::typical("gen1x4".parse().unwrap());
        params.mps_bytes = 128;
        params.header = HeaderFormat::Dw4;
        params
    }

    #[test]
    fn document_003_figure_in_its_convention() {
        let figure = doc003_convention(&doc003(), 16352, 24);
        assert!((figure.gbps() - 6.727).abs() < 0.0005, "{}", figure.gbps());
    }

    #[test]
    fn tlp_accurate_figure_is_below_the_documents_and_names_the_producer() {
        let shape = RingShape { message_bytes: 16352, host_buffers: 200, metadata_bytes: 16, flag_bytes: 4, doorbell_bytes: 4, dwell_ns: 0.0, host_reaction_ns: 200.0, host_hold_ns: 100.0 };
        let model = stream_model(&doc003(), &shape);
        assert_eq!(model.data_tlps, 128);
        assert_eq!(model.limit, "producer");
        // Below the document's 840.87 MB/s (it leaves out SKPs, DLLPs and the flag TLP's own
        // header) but within 1 %.
        assert!(model.mbps < 840.87 && model.mbps > 830.0, "{}", model.mbps);
        let slow = stream_model(&doc003(), &RingShape { host_hold_ns: 40_000.0, ..shape });
        assert_eq!(slow.limit, "host");
    }
}
