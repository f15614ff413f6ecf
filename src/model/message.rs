//! Framework message overhead (document 003 §3.3): a data-movement framework wraps every message
//! of `message_bytes` payload in `overhead_bytes` of header and trailer (OpenCPI: 4 DW metadata +
//! 2 DW flag = 24 bytes). Messages stream back to back, so the overhead is a byte ratio on top of
//! the link's steady write rate: rate = link × message / (message + overhead).

use serde::{Deserialize, Serialize};

use super::{steady_write_mbps, LinkParams};

/// Throughput after framework message overhead.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MessageOverhead {
    pub message_bytes: u64,
    pub overhead_bytes: u64,
    /// Steady write rate of the link, before message overhead, MB/s.
    #[serde(rename = "link_MBps")]
    pub link_mbps: f64,
    /// message / (message + overhead).
    pub message_efficiency: f64,
    /// Payload rate after message overhead, MB/s (10^6 B/s).
    #[serde(rename = "MBps")]
    pub mbps: f64,
}

impl MessageOverhead {
    /// The same rate in Gb/s (10^9 bits/s), as document 003 prints it.
    pub fn gbps(&self) -> f64 {
        self.mbps * 8.0 / 1e3
    }
}

/// Payload rate of messages of `message_bytes` with `overhead_bytes` each, streamed as posted
/// writes.
pub fn message_throughput(params: &LinkParams, message_bytes: u64, overhead_bytes: u64) -> MessageOverhead {
    let link_mbps = steady_write_mbps(params);
    // In f64: the sum of two user numbers must not wrap (u64::MAX overhead is an efficiency of ~0).
    let message_efficiency = message_bytes as f64 / (message_bytes as f64 + overhead_bytes as f64);
    MessageOverhead { message_bytes, overhead_bytes, link_mbps, message_efficiency, mbps: link_mbps * message_efficiency }
}
