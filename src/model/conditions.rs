//! The conditions of a measurement, stated once, and the one function that turns them into a
//! ceiling.
//!
//! Every command that puts a figure beside the model — `dma`, `run`, `demo`, `inspect`, `report`
//! and the findings — asks [`ceiling`] with a [`Conditions`] value. Where the value comes from is
//! decided elsewhere, once: a simulated engine states its configuration, and the pci layer reads
//! a real device's conditions along its path (`pci::conditions`).

use serde::{Deserialize, Serialize};

use super::{bidirectional_throughput, read_throughput, write_throughput, Limit, Link, LinkParams, Mode};

/// Everything a ceiling depends on, and where each figure came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    /// The link as trained (the narrowest hop of the path) and every other model input: MPS,
    /// MRRS, RCB, completion size, header format, tags, completion latency, transfers in flight.
    pub params: LinkParams,
    /// What the link could train to with both ends at their best, when known.
    pub capable: Option<Link>,
    /// Where the figures came from, for people: "simulated endpoint 'doc003'",
    /// "PCI 0000:01:00.0 and its path to the root port (sysfs)".
    pub source: String,
    /// Inputs that are assumptions, not readings (e.g. the completion latency, which config
    /// space cannot tell), each with its value.
    #[serde(default)]
    pub assumed: Vec<String>,
    /// Finite flow-control credits and the credit loop, when the engine knows them (a simulated
    /// link does; config space does not tell): the ceiling is then the smaller of the
    /// link-limited and the credit-limited rate ([`super::credit`]). `None`: credits never limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credits: Option<super::credit::CreditLoop>,
}

impl Conditions {
    /// The same conditions on the link the device is capable of, when that is known.
    pub fn on_capable_link(&self) -> Option<Conditions> {
        let capable = self.capable?;
        Some(Conditions { params: LinkParams { link: capable, ..self.params.clone() }, ..self.clone() })
    }

    /// True when the link trained below what both ends can do.
    pub fn below_capability(&self) -> bool {
        self.capable.is_some_and(|c| c.encoded_mbps() > self.params.link.encoded_mbps())
    }

    /// One line: link, payload sizes, headers, tags, latency, transfers in flight.
    pub fn summary(&self) -> String {
        let p = &self.params;
        let capable = match self.capable {
            Some(c) if c != p.link => format!(" (capable {c})"),
            _ => String::new(),
        };
        let in_flight = if p.in_flight > 1 { format!(", {} transfers in flight", p.in_flight) } else { String::new() };
        format!(
            "{}{capable}, MPS {}, MRRS {}, RCB {}, {} headers, {} tags, {} ns completion latency{in_flight}",
            p.link,
            p.mps_bytes,
            p.mrrs_bytes,
            p.rcb_bytes,
            if p.header.bytes() == 16 { "4DW" } else { "3DW" },
            p.tags,
            p.read_latency_ns
        )
    }
}

/// The model's ceiling for one mode at one transfer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// Payload rate in MB/s (10^6 B/s); for `both`, the two directions together.
    #[serde(rename = "MBps")]
    pub mbps: f64,
    /// What bounds it.
    pub limit: Limit,
    /// For `both`: the writes' and the reads' shares, MB/s.
    #[serde(default, rename = "write_MBps", skip_serializing_if = "Option::is_none")]
    pub write_mbps: Option<f64>,
    #[serde(default, rename = "read_MBps", skip_serializing_if = "Option::is_none")]
    pub read_mbps: Option<f64>,
}

/// The ceiling of `mode` at `size_bytes` per direction under `conditions`. On the link, d2h is
/// the device posting writes and h2d the device reading host memory.
pub fn ceiling(conditions: &Conditions, mode: Mode, size_bytes: u64) -> Ceiling {
    let params = &conditions.params;
    let one = |t: super::Throughput| Ceiling { mbps: t.mbps, limit: t.limit, write_mbps: None, read_mbps: None };
    match (mode, &conditions.credits) {
        (Mode::D2h, Some(credits)) => one(super::credit::write_throughput(params, credits, size_bytes)),
        (Mode::H2d, Some(credits)) => one(super::credit::read_throughput(params, credits, size_bytes)),
        (Mode::D2h, None) => one(write_throughput(params, size_bytes)),
        (Mode::H2d, None) => one(read_throughput(params, size_bytes)),
        (Mode::Both, _) => {
            // Each direction carries one stream's data and the other's requests and DLLPs.
            let (write, read) = bidirectional_throughput(params, size_bytes);
            let limit = if read.efficiency < write.efficiency { read.limit } else { write.limit };
            Ceiling { mbps: write.mbps + read.mbps, limit, write_mbps: Some(write.mbps), read_mbps: Some(read.mbps) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HeaderFormat;

    fn conditions(link: &str) -> Conditions {
        Conditions { params: LinkParams::typical(link.parse().unwrap()), capable: None, source: "test".into(), assumed: vec![], credits: None }
    }

    #[test]
    fn header_format_reaches_the_ceiling() {
        // Document 003's ML605: Gen1 x4, MPS 128, 4DW headers — lower than the 3DW figure.
        let mut c = conditions("gen1x4");
        c.params.mps_bytes = 128;
        let dw3 = ceiling(&c, Mode::D2h, 4 << 20).mbps;
        c.params.header = HeaderFormat::Dw4;
        let dw4 = ceiling(&c, Mode::D2h, 4 << 20).mbps;
        assert!(dw4 < dw3 - 15.0, "3DW {dw3} vs 4DW {dw4}");
    }

    #[test]
    fn both_is_the_sum_of_its_shares() {
        let c = conditions("gen3x8");
        let both = ceiling(&c, Mode::Both, 1 << 20);
        assert_eq!(both.mbps, both.write_mbps.unwrap() + both.read_mbps.unwrap());
        assert!(both.mbps > ceiling(&c, Mode::D2h, 1 << 20).mbps);
    }

    #[test]
    fn capable_link_and_summary() {
        let mut c = conditions("gen3x4");
        assert!(c.on_capable_link().is_none() && !c.below_capability());
        c.capable = Some("gen3x8".parse().unwrap());
        assert!(c.below_capability());
        assert_eq!(c.on_capable_link().unwrap().params.link.width, 8);
        assert!(c.summary().contains("(capable Gen3 x8)"), "{}", c.summary());
    }
}
