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

/// The ring's shape and the measured figures the bounds need. Named after d2h push; for the
/// other models ([`h2d_push_model`], [`pull_model`]) `host_buffers` is the ring the producer
/// fills (the device's buffers), `dwell_ns` the producer's pause (h2d: the host's preparation),
/// `host_reaction_ns` the consumer's reaction, `host_hold_ns` its hold per buffer (h2d: the
/// device's consume time; pull: the host's use after reading).
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
    let mbps = rate(shape.message_bytes);
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
    model(link_ns, data_tlps, message.data.tlp_bytes(), message.data.total_bytes() - message.data.tlp_bytes(), dllp_bytes, turnaround_ns, bounds)
}

/// Host to device push (XDMA H2C, the sim's h2d ring): per message the host writes the data as
/// MWr TLPs (at most MPS, never across 4 KiB) and a doorbell MWr downstream, with the SKPs and
/// the Ack and UpdateFC the device's "done" write makes the host return on the same lanes, then
/// prepares the next for `dwell_ns`. The device consumes each buffer for `host_hold_ns`, one at
/// a time, and gives it back with a "done" MWr upstream. Bounds: `producer` (the host's writes
/// and its preparation), `ring` (`host_buffers` device buffers, each back after fill, consume
/// and the done write), `device` (its consume time, one buffer at a time).
pub fn h2d_push_model(params: &LinkParams, shape: &RingShape) -> StreamModel {
    let link = params.link;
    let mut pieces = tlp::cut_aligned(0, shape.message_bytes, params.mps_bytes, params.accounting);
    let data_tlps = tlp::count(&pieces);
    pieces.push(Piece { start: 0, len: shape.doorbell_bytes, count: 1 });
    let message = write_pieces(params, &pieces, shape.message_bytes + shape.doorbell_bytes, Span::Steady);
    let done = write_pieces(params, &[Piece { start: 0, len: shape.flag_bytes, count: 1 }], shape.flag_bytes, Span::Steady);
    let dllp_bytes = done.opposite.total_bytes();
    let link_ns = (message.data.busy_ns(link) + bytes_ns(link, dllp_bytes)).max(message.duration_ns);
    let turnaround_ns = link_ns + shape.host_hold_ns + done.data.busy_ns(link);
    let mbps = rate(shape.message_bytes);
    let bounds = vec![
        Bound {
            name: "producer".into(),
            mbps: mbps(link_ns + shape.dwell_ns),
            why: format!("the host writes {data_tlps} data TLPs + doorbell ({link_ns:.0} ns on the link) and prepares the next for {:.0} ns", shape.dwell_ns),
        },
        Bound {
            name: "ring".into(),
            mbps: mbps(turnaround_ns) * shape.host_buffers as f64,
            why: format!("{} device buffers, each back after {turnaround_ns:.0} ns (fill, consume, done write)", shape.host_buffers),
        },
        Bound { name: "device".into(), mbps: mbps(shape.host_hold_ns), why: format!("the device consumes each buffer {:.0} ns, one at a time", shape.host_hold_ns) },
    ];
    model(link_ns, data_tlps, message.data.tlp_bytes(), message.data.total_bytes() - message.data.tlp_bytes(), dllp_bytes, turnaround_ns, bounds)
}

/// Pull (document 003: "Pull mode keeps one read in flight"): the host reads each message out
/// of a device buffer with MRd requests of at most MRRS (never across 4 KiB), the next leaving
/// when every completion of the one before (after the completer's latency, cut at RCB and MPS)
/// has arrived: one round trip per request ([`super::read::read_flow`], one request alone).
/// Then a doorbell MWr frees the device buffer and the host uses its copy for `host_hold_ns`.
/// Bounds: `reads` (the round trips alone: the link with one read in flight), `ring`
/// (`host_buffers` device buffers, each back after the flag write, the host's reaction, the
/// reads and the doorbell), `host` (reads and use, one message at a time).
pub fn pull_model(params: &LinkParams, shape: &RingShape) -> StreamModel {
    let link = params.link;
    let reads = one_in_flight(params, shape.message_bytes);
    let flag = write_pieces(params, &[Piece { start: 0, len: shape.flag_bytes, count: 1 }], shape.flag_bytes, Span::Steady);
    let doorbell = write_pieces(params, &[Piece { start: 0, len: shape.doorbell_bytes, count: 1 }], shape.doorbell_bytes, Span::Steady);
    let reads_ns = reads.ns;
    let turnaround_ns = flag.data.busy_ns(link) + shape.host_reaction_ns + reads_ns + doorbell.data.busy_ns(link);
    let mbps = rate(shape.message_bytes);
    let bounds = vec![
        Bound {
            name: "reads".into(),
            mbps: mbps(reads_ns),
            why: format!("{} reads of at most {} bytes, one in flight, each a round trip ({reads_ns:.0} ns in all)", reads.requests, params.mrrs_bytes),
        },
        Bound {
            name: "ring".into(),
            mbps: mbps(turnaround_ns) * shape.host_buffers as f64,
            why: format!("{} device buffers, each back after {turnaround_ns:.0} ns (flag, host reaction, reads, doorbell)", shape.host_buffers),
        },
        Bound {
            name: "host".into(),
            mbps: mbps(reads_ns + shape.host_hold_ns),
            why: format!("the host reads one message at a time and uses it {:.0} ns", shape.host_hold_ns),
        },
    ];
    model(reads_ns, reads.completions, reads.tlp_bytes, reads.total_bytes - reads.tlp_bytes, reads.dllp_bytes, turnaround_ns, bounds)
}

/// Host to device pull (OCDP's pull mode "to device", the sim's h2d pull ring): the host fills
/// one of `host_buffers` host buffers and rings a doorbell MWr downstream; the device, its pause
/// `dwell_ns` after (its reaction), reads the message with MRd requests of at most MRRS, one in
/// flight (the host's memory answers after its latency, completions cut at RCB and MPS), then
/// frees the host buffer with a 1-DW MWr upstream and hands its copy to its consumer, which
/// takes `host_hold_ns` per message. Bounds: `reads` (the device's pause and round trips, one
/// message at a time), `ring` (host buffers, each back after the doorbell, the pause, the reads
/// and the free write), `device` (its consume time, one buffer at a time). The host's own
/// preparation is not measured from the device's side and bounds nothing here.
pub fn h2d_pull_model(params: &LinkParams, shape: &RingShape) -> StreamModel {
    let link = params.link;
    let reads = one_in_flight(params, shape.message_bytes);
    let doorbell = write_pieces(params, &[Piece { start: 0, len: shape.doorbell_bytes, count: 1 }], shape.doorbell_bytes, Span::Steady);
    let free = write_pieces(params, &[Piece { start: 0, len: shape.flag_bytes, count: 1 }], shape.flag_bytes, Span::Steady);
    let engine_ns = shape.dwell_ns + reads.ns;
    let turnaround_ns = doorbell.data.busy_ns(link) + engine_ns + free.data.busy_ns(link);
    let mbps = rate(shape.message_bytes);
    let bounds = vec![
        Bound {
            name: "reads".into(),
            mbps: mbps(engine_ns),
            why: format!(
                "the device pauses {:.0} ns, then makes {} reads of at most {} bytes, one in flight, each a round trip ({:.0} ns in all)",
                shape.dwell_ns, reads.requests, params.mrrs_bytes, reads.ns
            ),
        },
        Bound {
            name: "ring".into(),
            mbps: mbps(turnaround_ns) * shape.host_buffers as f64,
            why: format!("{} host buffers, each back after {turnaround_ns:.0} ns (doorbell, device pause, reads, free write)", shape.host_buffers),
        },
        Bound { name: "device".into(), mbps: mbps(shape.host_hold_ns), why: format!("the device consumes each message {:.0} ns, one at a time", shape.host_hold_ns) },
    ];
    model(reads.ns, reads.completions, reads.tlp_bytes, reads.total_bytes - reads.tlp_bytes, reads.dllp_bytes, turnaround_ns, bounds)
}

/// One message read with requests of at most MRRS (4 KiB-aligned cuts), one in flight: each
/// request a round trip as [`super::read::read_flow`] times one alone. The link is symmetric,
/// so the same holds whichever side reads.
struct Reads {
    ns: f64,
    requests: u64,
    completions: u64,
    /// The completions' direction: TLP bytes, TLP and SKP bytes; the requests' lanes' DLLPs.
    tlp_bytes: f64,
    total_bytes: f64,
    dllp_bytes: f64,
}

fn one_in_flight(params: &LinkParams, message_bytes: u64) -> Reads {
    let requests = tlp::cut_aligned(0, message_bytes, params.mrrs_bytes, params.accounting);
    let one_at_a_time = LinkParams { in_flight: 1, ..params.clone() };
    let mut reads = Reads { ns: 0.0, requests: tlp::count(&requests), completions: 0, tlp_bytes: 0.0, total_bytes: 0.0, dllp_bytes: 0.0 };
    for request in &requests {
        let flow = super::read::read_flow(&LinkParams { start_addr: request.start, ..one_at_a_time.clone() }, request.len, Span::Steady);
        let n = request.count as f64;
        reads.ns += n * flow.duration_ns;
        reads.tlp_bytes += n * flow.data.tlp_bytes();
        reads.total_bytes += n * flow.data.total_bytes();
        reads.dllp_bytes += n * flow.opposite.total_bytes();
        reads.completions += request.count * tlp::count(&tlp::completions(params, Piece { count: 1, ..*request }));
    }
    reads
}

/// Message bytes per ns as MB/s.
fn rate(message_bytes: u64) -> impl Fn(f64) -> f64 {
    move |ns: f64| if ns > 0.0 { message_bytes as f64 / ns * 1e3 } else { f64::INFINITY }
}

/// The model with its smallest bound named as the limit.
fn model(link_ns: f64, data_tlps: u64, tlp_bytes: f64, skp_bytes: f64, dllp_bytes: f64, turnaround_ns: f64, mut bounds: Vec<Bound>) -> StreamModel {
    // A stage that takes no time (a device that consumes instantly) bounds nothing: leave it
    // out rather than print "inf MB/s". The link's stage always takes time, so one remains.
    bounds.retain(|bound| bound.mbps.is_finite());
    let smallest = bounds.iter().min_by(|a, b| a.mbps.total_cmp(&b.mbps)).expect("the link stage bounds");
    StreamModel { link_ns_per_message: link_ns, data_tlps, tlp_bytes, skp_bytes, dllp_bytes, turnaround_ns, limit: smallest.name.clone(), mbps: smallest.mbps, bounds }
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

    fn shape(host_hold_ns: f64) -> RingShape {
        RingShape { message_bytes: 16352, host_buffers: 2, metadata_bytes: 16, flag_bytes: 4, doorbell_bytes: 4, dwell_ns: 0.0, host_reaction_ns: 200.0, host_hold_ns }
    }

    /// One read in flight: every request pays the completion latency once, so 1 µs more of it
    /// costs (requests) µs more per message; and the reads are the host's work.
    #[test]
    fn pull_pays_the_latency_once_per_request() {
        let mut params = doc003();
        params.mrrs_bytes = 512;
        params.read_latency_ns = 1_000.0;
        let base = pull_model(&params, &shape(100.0));
        params.read_latency_ns = 2_000.0;
        let slower = pull_model(&params, &shape(100.0));
        assert_eq!(base.limit, "host");
        let extra_ns = slower.link_ns_per_message - base.link_ns_per_message;
        assert!((extra_ns - 32_000.0).abs() < 320.0, "{extra_ns}");
        // 128 completions of 128 bytes (RCB 64 never cuts an aligned 512-byte read short).
        assert_eq!(base.data_tlps, 128);
        assert!(base.mbps < 0.4 * stream_model(&doc003(), &shape(100.0)).mbps, "{}", base.mbps);
    }

    /// h2d: the host's writes (data + doorbell) are the producer; a slow device consumer is the
    /// limit at exactly message ÷ its consume time.
    #[test]
    fn h2d_names_the_device_when_it_consumes_slowly() {
        let fast = h2d_push_model(&doc003(), &shape(0.0));
        assert_eq!(fast.limit, "producer");
        assert_eq!(fast.data_tlps, 128);
        // A device that consumes instantly bounds nothing: no infinite bound is listed.
        assert!(fast.bounds.iter().all(|b| b.name != "device" && b.mbps.is_finite()), "{:?}", fast.bounds);
        // The doorbell alone is less than the push's metadata + flag.
        assert!(fast.link_ns_per_message < stream_model(&doc003(), &shape(0.0)).link_ns_per_message);
        let slow = h2d_push_model(&doc003(), &shape(60_000.0));
        assert_eq!(slow.limit, "device");
        assert!((slow.mbps - 16352.0 / 60.0).abs() < 1e-9, "{}", slow.mbps);
    }

    /// h2d pull: the device's reads (one in flight) bound it as pull d2h's do; one host buffer
    /// adds the doorbell and the free write to every message (the ring); a slow consumer on the
    /// device is the limit at exactly message ÷ its consume time.
    #[test]
    fn h2d_pull_names_reads_ring_or_device() {
        let mut params = doc003();
        params.mrrs_bytes = 512;
        let many = RingShape { host_buffers: 200, ..shape(0.0) };
        let reads = h2d_pull_model(&params, &many);
        assert_eq!(reads.limit, "reads", "{:?}", reads.bounds);
        // The same round trips as the host's reads in d2h pull (the link is symmetric).
        assert_eq!(reads.link_ns_per_message, pull_model(&params, &many).link_ns_per_message);
        assert!(reads.bounds.iter().all(|b| b.name != "device"), "an instant consumer bounds nothing");
        let one = h2d_pull_model(&params, &RingShape { host_buffers: 1, ..many });
        assert_eq!(one.limit, "ring");
        assert!(one.mbps < reads.mbps);
        let slow = h2d_pull_model(&params, &RingShape { host_hold_ns: 100_000.0, ..many });
        assert_eq!(slow.limit, "device");
        assert!((slow.mbps - 163.52).abs() < 1e-9, "{}", slow.mbps);
    }
}
