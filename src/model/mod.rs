//! Throughput theory: pure functions, no I/O, instant.
//!
//! Everything here answers "what should this link deliver?" for a set of [`LinkParams`]. The
//! measurement layers reuse it for the simulator's timing and for the ceiling printed beside
//! every measured figure. `docs/theory.md` gives the formulas and the source of every constant.

pub mod bidir;
pub mod conditions;
pub mod credit;
pub mod direction;
pub mod dllp;
pub mod document;
pub mod explain;
pub mod flit;
pub mod link;
pub mod load;
pub mod message;
pub mod mmio;
pub mod read;
pub mod skp;
pub mod status;
pub mod stream;
pub mod tlp;
pub mod transfer;
pub mod write;
pub mod write_combining;

pub use bidir::{bidirectional_throughput, Bidirectional};
pub use conditions::{ceiling, Ceiling, Conditions};
pub use direction::{Direction, Mode};
pub use link::{Encoding, Generation, Link};
pub use load::Load;
pub use read::read_throughput;
pub use write::write_throughput;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;

/// TLP header size: 3 DW (32-bit addresses, completions) or 4 DW (64-bit addresses). Written
/// as the command line spells it (`3dw`, `4dw`); older documents' `Dw3` is still read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HeaderFormat {
    #[serde(rename = "3dw", alias = "Dw3")]
    Dw3,
    #[serde(rename = "4dw", alias = "Dw4")]
    Dw4,
}

impl crate::named::Named for HeaderFormat {
    const ALL: &'static [Self] = &[HeaderFormat::Dw3, HeaderFormat::Dw4];
    fn name(self) -> &'static str {
        match self {
            HeaderFormat::Dw3 => "3dw",
            HeaderFormat::Dw4 => "4dw",
        }
    }
}

impl HeaderFormat {
    pub fn bytes(self) -> u64 {
        match self {
            HeaderFormat::Dw3 => 12,
            HeaderFormat::Dw4 => 16,
        }
    }
}

/// How payload bytes are counted (`wire_accurate`, `byte_exact` in documents; older documents'
/// `WireAccurate` is still read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accounting {
    /// Whole DWs on the wire, TLPs split at 4 KiB address boundaries (the default).
    #[serde(alias = "WireAccurate")]
    WireAccurate,
    /// Only the bytes asked for, as the documents' tables count them.
    #[serde(alias = "ByteExact")]
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
    /// One ACK and one UpdateFC DLLP per this many TLPs; `None` (the default) coalesces as much
    /// as the spec's AckNak latency / UpdateFC tables allow (see [`dllp`]).
    #[serde(default)]
    pub dllp_every_tlps: Option<u32>,
    /// Largest completion the completer sends; `None` (the default) means MaxPayload. Many root
    /// complexes answer in 64-byte completions whatever MaxPayload says.
    #[serde(default)]
    pub completion_bytes: Option<u64>,
    /// Transfers outstanding at once: 1 is one isolated transfer (a single DMA); more is the
    /// steady state of back-to-back DMAs, where reads share the tags and the completion latency
    /// overlaps other transfers' data ([`read`]).
    #[serde(default = "one")]
    pub in_flight: u32,
}

fn one() -> u32 {
    1
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
            dllp_every_tlps: None,
            completion_bytes: None,
            in_flight: 1,
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
        if let Some(bytes) = self.completion_bytes {
            if bytes == 0 || !bytes.is_multiple_of(self.rcb_bytes) || bytes > self.mps_bytes {
                return Err(InvalidInput::new(format!(
                    "invalid completion size {bytes}: allowed multiples of the RCB ({}) up to MaxPayload ({})",
                    self.rcb_bytes, self.mps_bytes
                )));
            }
        }
        if !(1..=65_536).contains(&self.in_flight) {
            return Err(InvalidInput::new(format!("invalid transfers in flight {}: allowed 1 to 65536", self.in_flight)));
        }
        if self.dllp_every_tlps == Some(0) {
            return Err(InvalidInput::new("invalid DLLP interval 0 TLPs: allowed 1 or more"));
        }
        Ok(())
    }

    /// Framing bytes around every TLP on the wire (start/sequence/LCRC/end or STP token/LCRC),
    /// plus ECRC when enabled. Gen1–2: STP 1 + sequence 2 + LCRC 4 + END 1; Gen3–5: STP token 4
    /// (holds the sequence number) + LCRC 4.
    /// Largest completion payload: `completion_bytes`, or MaxPayload.
    pub fn max_completion_bytes(&self) -> u64 {
        self.completion_bytes.unwrap_or(self.mps_bytes).min(self.mps_bytes)
    }

    /// Gen6 flit mode has no per-TLP framing (the flit carries CRC and FEC).
    pub fn framing_bytes(&self) -> u64 {
        let ecrc = if self.ecrc { 4 } else { 0 };
        tlp::framing_bytes(self.link.generation) + ecrc
    }

    /// The same conditions as the documents' tables count them: byte-exact payloads, no SKP
    /// ordered sets, no DLLPs (document 000 Table 1).
    pub fn documents_convention(mut self) -> Self {
        self.accounting = Accounting::ByteExact;
        self.include_skp = false;
        self.include_dllp = false;
        self
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
    /// The opposite direction (DLLPs, read requests, the other stream) is the bottleneck.
    OppositeDirection,
}

impl Limit {
    pub fn name(self) -> &'static str {
        match self {
            Limit::Link => "link",
            Limit::Latency => "latency",
            Limit::OppositeDirection => "opposite direction",
        }
    }
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

impl Throughput {
    /// `size_bytes` of payload moved in `time_ns` on `link`.
    pub fn new(link: Link, size_bytes: f64, time_ns: f64, limit: Limit) -> Self {
        let mbps = crate::units::mbps(size_bytes, time_ns);
        Throughput { mbps, efficiency: mbps / link.encoded_mbps(), limit }
    }
}

/// How a count of SKPs or DLLPs is rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Span {
    /// One transfer out of a long run of equal transfers: fractional SKPs and DLLPs per transfer,
    /// their long-run average (the default for rates).
    Steady,
    /// One isolated record, as a trace shows it: whole SKPs and DLLPs, rounded up
    /// (document 000 §3.5 counts 3 SKPs in 2400 bytes).
    Record,
}

impl Span {
    pub fn round(self, events: f64) -> f64 {
        match self {
            Span::Steady => events,
            Span::Record => events.ceil(),
        }
    }
}

/// One transfer on the link: what each direction carries, how long it takes, what bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    pub size_bytes: u64,
    /// The direction the data travels in (write TLPs, or read completions).
    pub data: Load,
    /// The other direction (DLLPs for the data, and read requests).
    pub opposite: Load,
    pub duration_ns: f64,
    pub throughput: Throughput,
}

impl Flow {
    /// Idle time of the data direction within the transfer, in ns (waiting for completions or
    /// for the opposite direction).
    pub fn data_idle_ns(&self, link: Link) -> f64 {
        (self.duration_ns - self.data.busy_ns(link)).max(0.0)
    }
}

/// The steady-state rate of posted writes in full MaxPayload TLPs, in MB/s: the link's ceiling
/// for streaming data (every other figure approaches it).
pub fn steady_write_mbps(params: &LinkParams) -> f64 {
    let aligned = LinkParams { start_addr: 0, ..params.clone() };
    write::write_flow(&aligned, params.mps_bytes, Span::Steady).throughput.mbps
}
