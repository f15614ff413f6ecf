//! CPU-initiated single accesses to a device's memory BAR (document 000 §3.5, §4).
//!
//! A CPU write of 1, 2, 4 or 8 bytes is one posted TLP; a CPU read is one request and one
//! completion, and the CPU waits for each read before the next (one outstanding read).

use serde::{Deserialize, Serialize};

use super::tlp::{self, Piece};
use super::{read, write, Load, LinkParams, Span, Throughput};

/// Access sizes a CPU issues as single TLPs (document 000 Tests 1–15).
pub const ACCESS_SIZES: [u64; 4] = [1, 2, 4, 8];

/// Rates of back-to-back single accesses of one size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SingleAccess {
    pub access_bytes: u64,
    /// Back-to-back posted writes.
    pub write: Throughput,
    /// Reads, one outstanding at a time (the CPU stalls on each).
    pub read: Throughput,
}

/// Rates of single accesses of `access_bytes`.
pub fn single_access(params: &LinkParams, access_bytes: u64) -> SingleAccess {
    let one_tag = LinkParams { tags: 1, ..params.clone() };
    SingleAccess {
        access_bytes,
        write: write::write_throughput(params, access_bytes),
        read: read::read_flow(&one_tag, access_bytes, Span::Steady).throughput,
    }
}

/// A record of `count` single writes as a trace shows it (document 000 §3.5 Example 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WriteRecord {
    pub access_bytes: u64,
    pub count: u64,
    pub duration_ns: f64,
    /// Payload rate, MB/s (10^6 B/s).
    #[serde(rename = "payload_MBps")]
    pub payload_mbps: f64,
    /// All bytes the writes put on their direction (TLPs and SKPs) per time, MB/s.
    #[serde(rename = "data_direction_allocated_MBps")]
    pub data_allocated_mbps: f64,
    pub data_allocated_fraction: f64,
    /// DLLP bytes the writes cause in the opposite direction per time, MB/s.
    #[serde(rename = "opposite_direction_allocated_MBps")]
    pub opposite_allocated_mbps: f64,
    pub opposite_allocated_fraction: f64,
    pub data: Load,
    pub opposite: Load,
}

/// `count` single writes of `access_bytes` each, back to back, counted as one record (whole
/// SKPs and DLLPs).
pub fn write_record(params: &LinkParams, access_bytes: u64, count: u64) -> WriteRecord {
    let start = params.start_addr % tlp::ADDRESS_BOUNDARY_BYTES;
    let pieces = [Piece { start, len: access_bytes, count }];
    let flow = write::write_pieces(params, &pieces, access_bytes.saturating_mul(count), Span::Record);
    let encoded = params.link.encoded_mbps();
    let rate = |bytes: f64| crate::units::mbps(bytes, flow.duration_ns);
    WriteRecord {
        access_bytes,
        count,
        duration_ns: flow.duration_ns,
        payload_mbps: flow.throughput.mbps,
        data_allocated_mbps: rate(flow.data.total_bytes()),
        data_allocated_fraction: rate(flow.data.total_bytes()) / encoded,
        opposite_allocated_mbps: rate(flow.opposite.dllp_bytes),
        opposite_allocated_fraction: rate(flow.opposite.dllp_bytes) / encoded,
        data: flow.data,
        opposite: flow.opposite,
    }
}

/// A record of `count` single reads, one at a time (document 000 §3.5 Example 2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReadRecord {
    pub access_bytes: u64,
    pub count: u64,
    /// Request + latency + completion (+ the ACK for the completion when it is sent at once).
    pub per_read_ns: f64,
    pub duration_ns: f64,
    /// Payload rate, MB/s (10^6 B/s).
    #[serde(rename = "payload_MBps")]
    pub payload_mbps: f64,
}

/// `count` single reads of `access_bytes`, each issued when the previous one completed. With
/// one ACK per TLP (`dllp_every_tlps = Some(1)`) the requester's ACK for each completion goes out
/// before the next request (ACKs outrank TLPs in the transmit priority), as document 000 counts;
/// coalesced ACKs stay off that path.
pub fn read_record(params: &LinkParams, access_bytes: u64, count: u64) -> ReadRecord {
    let one_tag = LinkParams { tags: 1, ..params.clone() };
    let one = read::read_flow(&one_tag, access_bytes, Span::Record);
    let serial_ack = params.include_dllp && params.dllp_every_tlps == Some(1);
    let ack_ns = if serial_ack { super::load::bytes_ns(params.link, super::dllp::bytes(params.link, 1.0)) } else { 0.0 };
    let per_read_ns = one.duration_ns + ack_ns;
    let duration_ns = per_read_ns * count as f64;
    ReadRecord {
        access_bytes,
        count,
        per_read_ns,
        duration_ns,
        payload_mbps: crate::units::mbps(access_bytes as f64 * count as f64, duration_ns),
    }
}
