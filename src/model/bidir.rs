//! Writes and reads at the same time (document 001 "Read/Write", `dma --both`).
//!
//! Device→host carries the write TLPs, the read requests and the ACKs for completions;
//! host→device carries the completions and the ACK/UpdateFC DLLPs for writes and requests.
//! Each stream costs each direction a fixed number of link bytes per payload byte (from its
//! one-way [`Flow`]); SKPs reduce both directions' capacity. Both streams run as fast as they can:
//! the rates are where both directions are full, clamped to each stream's one-way rate (a read
//! stream that is latency bound stays latency bound and leaves room for the writes).

use serde::{Deserialize, Serialize};

use super::load::bytes_ns;
use super::{read, skp, write, Flow, Limit, LinkParams, Span, Throughput};

/// Write and read throughput when both run at once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bidirectional {
    pub write: Throughput,
    pub read: Throughput,
}

impl Bidirectional {
    /// Payload in both directions together, MB/s.
    pub fn total_mbps(&self) -> f64 {
        self.write.mbps + self.read.mbps
    }
}

/// Writes and reads of `size_bytes` each, at the same time: (write, read).
pub fn bidirectional_throughput(params: &LinkParams, size_bytes: u64) -> (Throughput, Throughput) {
    let both = bidirectional(params, size_bytes);
    (both.write, both.read)
}

/// Writes and reads of `size_bytes` each, at the same time.
pub fn bidirectional(params: &LinkParams, size_bytes: u64) -> Bidirectional {
    let link = params.link;
    let writes = write::write_flow(params, size_bytes, Span::Steady);
    let reads = read::read_flow(params, size_bytes, Span::Steady);
    let size = size_bytes as f64;
    // Link bytes per payload byte, SKPs left out (they are capacity, below).
    let per_byte = |flow: &Flow, data_side: bool| {
        let load = if data_side { flow.data } else { flow.opposite };
        (load.total_bytes() - load.skp_bytes) / size
    };
    let (a, b) = (per_byte(&writes, true), per_byte(&reads, false)); // device→host
    let (c, d) = (per_byte(&writes, false), per_byte(&reads, true)); // host→device
    let skp_share = if params.include_skp { skp::fraction(link.generation) } else { 0.0 };
    // Link bytes per ns of one direction.
    let capacity = 1.0 / bytes_ns(link, 1.0) * (1.0 - skp_share);
    let w_max = size / writes.duration_ns;
    let r_max = size / reads.duration_ns;
    let slack = |used: f64, cost: f64| if cost > 0.0 { ((capacity - used) / cost).max(0.0) } else { f64::INFINITY };

    // Both directions full: a·w + b·r = C and c·w + d·r = C. Clamp the read rate to its one-way
    // rate, give the writes what fits, then give the reads what the writes left.
    let det = a * d - b * c;
    let r_full = if det.abs() > 1e-12 { capacity * (a - c) / det } else { r_max };
    let r = r_full.clamp(0.0, r_max);
    let w = w_max.min(slack(b * r, a)).min(slack(d * r, c));
    let r = r_max.min(slack(a * w, b)).min(slack(c * w, d));
    let limit = |rate: f64, max: f64, one_way: Limit| if rate >= max * (1.0 - 1e-9) { one_way } else { Limit::Link };
    let throughput = |rate_bytes_per_ns: f64, limit: Limit| {
        Throughput::new(link, size, if rate_bytes_per_ns > 0.0 { size / rate_bytes_per_ns } else { f64::INFINITY }, limit)
    };
    Bidirectional {
        write: throughput(w, limit(w, w_max, writes.throughput.limit)),
        read: throughput(r, limit(r, r_max, reads.throughput.limit)),
    }
}
