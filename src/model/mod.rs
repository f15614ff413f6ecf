//! Throughput theory: pure functions, no I/O, instant.
//!
//! Everything here answers "what should this link deliver?" for a set of [`LinkParams`]. The
//! measurement layers reuse it for the simulator's timing and for the ceiling printed beside
//! every measured figure. `docs/theory.md` gives the formulas and the source of every constant.

pub mod link;
pub mod transfer;

pub use link::{Encoding, Generation, Link};

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;

/// TLP header size: 3 DW (32-bit addresses, completions) or 4 DW (64-bit addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum HeaderFormat {
    #[value(name = "3dw")]
    Dw3,
    #[value(name = "4dw")]
    Dw4,
}

impl HeaderFormat {
    pub fn bytes(self) -> u64 {
        match self {
            HeaderFormat::Dw3 => 12,
            HeaderFormat::Dw4 => 16,
        }
    }
}

/// How payload bytes are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Accounting {
    /// Whole DWs on the wire, TLPs split at 4 KiB address boundaries (the default).
    WireAccurate,
    /// Only the bytes asked for, as the documents' tables count them.
    ByteExact,
}

/// Allowed MaxPayload / MaxReadRequest sizes (PCIe Base Spec, Device Control register).
pub const PAYLOAD_SIZES: [u64; 6] = [128, 256, 512, 1024, 2048, 4096];

/// Everything the model needs to know about the conditions of a transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkParams {
    pub link: Link,
    /// MaxPayload size in bytes (128–4096).
    pub mps_bytes: u64,
    /// MaxReadRequest size in bytes (128–4096).
    pub mrrs_bytes: u64,
    /// Read completion boundary in bytes (64 or 128).
    pub rcb_bytes: u64,
    pub header: HeaderFormat,
    pub ecrc: bool,
    pub accounting: Accounting,
    /// Time from the end of a read request to the start of its completion, in ns.
    pub read_latency_ns: f64,
    /// Read requests that may be outstanding at once (tags).
    pub tags: u32,
    /// Charge SKP ordered sets.
    pub include_skp: bool,
    /// Charge ACK and UpdateFC DLLPs.
    pub include_dllp: bool,
    /// Start address of the transfer (only its offset within a 4 KiB page matters).
    pub start_addr: u64,
}

impl LinkParams {
    /// Typical conditions for a link: MPS 256, MRRS 512, RCB 64, 3DW headers, 32 tags,
    /// 500 ns completion latency, all link-level overhead charged.
    pub fn typical(link: Link) -> Self {
        LinkParams {
            link,
            mps_bytes: 256,
            mrrs_bytes: 512,
            rcb_bytes: 64,
            header: HeaderFormat::Dw3,
            ecrc: false,
            accounting: Accounting::WireAccurate,
            read_latency_ns: 500.0,
            tags: 32,
            include_skp: true,
            include_dllp: true,
            start_addr: 0,
        }
    }

    /// Refuse values the specification does not allow, naming the allowed ones.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        link::check_width(self.link.width)?;
        check_payload_size("MaxPayload (--mps)", self.mps_bytes)?;
        check_payload_size("MaxReadRequest (--mrrs)", self.mrrs_bytes)?;
        if ![64, 128].contains(&self.rcb_bytes) {
            return Err(InvalidInput::new(format!("invalid read completion boundary {}: allowed 64, 128", self.rcb_bytes)));
        }
        if !(self.read_latency_ns >= 0.0 && self.read_latency_ns.is_finite()) {
            return Err(InvalidInput::new(format!("invalid read latency {} ns: must be 0 or more", self.read_latency_ns)));
        }
        if !(1..=1024).contains(&self.tags) {
            return Err(InvalidInput::new(format!("invalid tag count {}: allowed 1 to 1024", self.tags)));
        }
        Ok(())
    }

    /// Framing bytes around every TLP on the wire (start/sequence/LCRC/end or STP token/LCRC),
    /// plus ECRC when enabled. Gen1–2: STP 1 + sequence 2 + LCRC 4 + END 1; Gen3–5: STP token 4
    /// (holds the sequence number) + LCRC 4.
    pub fn framing_bytes(&self) -> u64 {
        let ecrc = if self.ecrc { 4 } else { 0 };
        8 + ecrc
    }
}

fn check_payload_size(what: &str, bytes: u64) -> Result<(), InvalidInput> {
    if PAYLOAD_SIZES.contains(&bytes) {
        Ok(())
    } else {
        Err(InvalidInput::new(format!("invalid {what} {bytes}: allowed 128, 256, 512, 1024, 2048, 4096")))
    }
}

/// What bounds a throughput figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The link's bytes, after all overhead, are the bottleneck.
    Link,
    /// Read completion latency × outstanding requests bounds the rate.
    Latency,
}

/// A predicted throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Payload rate in MB/s (10^6 B/s).
    #[serde(rename = "MBps")]
    pub mbps: f64,
    /// Payload rate divided by the link's rate after encoding.
    pub efficiency: f64,
    pub limit: Limit,
}

fn data_bytes_on_wire(params: &LinkParams, payload: u64) -> u64 {
    match params.accounting {
        Accounting::ByteExact => payload,
        Accounting::WireAccurate => payload.div_ceil(4) * 4,
    }
}

/// Bytes on the wire to carry `size_bytes` of payload in TLPs of at most `max_payload` bytes
/// with a header of `header_bytes`.
fn tlp_stream_bytes(params: &LinkParams, size_bytes: u64, max_payload: u64, header_bytes: u64) -> u64 {
    let full = size_bytes / max_payload;
    let rest = size_bytes % max_payload;
    let per_tlp = header_bytes + params.framing_bytes();
    let mut bytes = full * (data_bytes_on_wire(params, max_payload) + per_tlp);
    if rest > 0 {
        bytes += data_bytes_on_wire(params, rest) + per_tlp;
    }
    bytes
}

fn throughput(params: &LinkParams, size_bytes: u64, time_ns: f64, limit: Limit) -> Throughput {
    let mbps = crate::units::mbps(size_bytes as f64, time_ns);
    Throughput { mbps, efficiency: mbps / params.link.encoded_mbps(), limit }
}

/// Posted writes of `size_bytes` (device→host DMA writes, or CPU writes to a device).
pub fn write_throughput(params: &LinkParams, size_bytes: u64) -> Throughput {
    let wire = tlp_stream_bytes(params, size_bytes, params.mps_bytes, params.header.bytes());
    let time_ns = wire as f64 * params.link.byte_time_ns() / params.link.width as f64;
    throughput(params, size_bytes, time_ns, Limit::Link)
}

/// Non-posted reads of `size_bytes`: requests of at most MRRS, completions of at most MPS,
/// `read_latency_ns` between a request and its completion, at most `tags` outstanding.
pub fn read_throughput(params: &LinkParams, size_bytes: u64) -> Throughput {
    let lane_ns = params.link.byte_time_ns() / params.link.width as f64;
    let request_ns = (params.header.bytes() + params.framing_bytes()) as f64 * lane_ns;
    let requests = size_bytes.div_ceil(params.mrrs_bytes);
    let completion_ns = |bytes: u64| tlp_stream_bytes(params, bytes, params.mps_bytes, 12) as f64 * lane_ns;
    let link_bound_ns = request_ns + params.read_latency_ns + completion_ns(size_bytes);
    let per_round_ns = request_ns + params.read_latency_ns + completion_ns(params.mrrs_bytes.min(size_bytes));
    let latency_bound_ns = requests.div_ceil(params.tags as u64) as f64 * per_round_ns;
    if latency_bound_ns > link_bound_ns {
        throughput(params, size_bytes, latency_bound_ns, Limit::Latency)
    } else {
        throughput(params, size_bytes, link_bound_ns, Limit::Link)
    }
}
