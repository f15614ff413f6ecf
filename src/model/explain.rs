//! The waterfall: from the raw signalling rate to what the application gets, one overhead at a
//! time, for one transfer in its data direction.

use serde::{Deserialize, Serialize};

use super::load::bytes_ns;
use super::{read, write, Encoding, Flow, Load, LinkParams, Span};

/// Overhead above the link: a framework's per-message bytes (document 003) and a fixed
/// software cost per transfer (document 002's m).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Software {
    /// Message payload size; 0 means no message framing.
    pub message_bytes: u64,
    /// Header and trailer bytes per message.
    pub message_overhead_bytes: u64,
    /// Fixed time per transfer (interrupt, doorbell, driver), µs.
    pub per_transfer_us: f64,
}

impl Software {
    fn message_efficiency(&self) -> f64 {
        if self.message_bytes == 0 {
            1.0
        } else {
            self.message_bytes as f64 / (self.message_bytes + self.message_overhead_bytes) as f64
        }
    }
}

/// One step of the waterfall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub name: String,
    /// Bytes left for the layers above, within the transfer's time on the link.
    pub bytes: f64,
    /// Rate left, MB/s (10^6 B/s).
    #[serde(rename = "MBps")]
    pub mbps: f64,
    /// Rate left as a percentage of the raw signalling rate.
    pub percent_of_raw: f64,
}

/// The waterfall of one transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waterfall {
    /// "write" (posted writes) or "read" (completions of non-posted reads).
    pub kind: String,
    pub size_bytes: u64,
    pub duration_ns: f64,
    pub steps: Vec<Step>,
    /// What the transfer puts on the opposite direction (DLLPs; read requests).
    pub opposite: Load,
    /// Those bytes per time, MB/s (10^6 B/s).
    #[serde(rename = "opposite_MBps")]
    pub opposite_mbps: f64,
}

/// Waterfall of a write of `size_bytes`.
pub fn write_waterfall(params: &LinkParams, size_bytes: u64, software: Software) -> Waterfall {
    waterfall(params, "write", &write::write_flow(params, size_bytes, Span::Steady), software)
}

/// Waterfall of a read of `size_bytes` (the completion direction).
pub fn read_waterfall(params: &LinkParams, size_bytes: u64, software: Software) -> Waterfall {
    waterfall(params, "read", &read::read_flow(params, size_bytes, Span::Steady), software)
}

fn waterfall(params: &LinkParams, kind: &str, flow: &Flow, software: Software) -> Waterfall {
    let link = params.link;
    let window_ns = flow.duration_ns;
    let raw_bytes = link.raw_gbps() * window_ns / 8.0;
    let raw_mbps = crate::units::mbps(raw_bytes, window_ns);
    let load = &flow.data;
    let encoded = window_ns / bytes_ns(link, 1.0);
    let idle = (encoded - load.total_bytes()).max(0.0);
    let encoding = link.generation.encoding();
    let encoding_name = match encoding {
        Encoding::Flit1b1b => "after 1b/1b encoding and flit DLP/CRC/FEC bytes".to_string(),
        _ => format!("after {} encoding", encoding.name()),
    };
    let mut steps: Vec<(String, f64)> = vec![
        (format!("raw signalling ({} GT/s x{})", link.generation.gts(), link.width), raw_bytes),
        (encoding_name, encoded - load.flit_bytes),
    ];
    let mut left = encoded - load.flit_bytes;
    let mut take = |name: &str, bytes: f64, steps: &mut Vec<(String, f64)>| {
        left -= bytes;
        steps.push((name.to_string(), left));
    };
    take("after SKP ordered sets", load.skp_bytes, &mut steps);
    take("after DLLPs (ACK, UpdateFC)", load.dllp_bytes, &mut steps);
    if idle > 0.5 {
        let why = if kind == "read" { "after idle time (completion latency, requests)" } else { "after idle time (opposite direction)" };
        take(why, idle, &mut steps);
    }
    take("after TLP framing and headers", load.framing_bytes + load.header_bytes, &mut steps);
    take("after data alignment (whole DWs, 4 KiB boundaries)", load.alignment_bytes, &mut steps);
    let mut steps: Vec<Step> = steps
        .into_iter()
        .map(|(name, bytes)| {
            let mbps = crate::units::mbps(bytes, window_ns);
            Step { name, bytes, mbps, percent_of_raw: 100.0 * mbps / raw_mbps }
        })
        .collect();
    let app_bytes = load.payload_bytes * software.message_efficiency();
    let software_ns = software.per_transfer_us * 1e3;
    let app_mbps = crate::units::mbps(app_bytes, window_ns + software_ns);
    // Every step above shares the link's time; a software cost lengthens it, so say so.
    let name = if software_ns > 0.0 {
        format!("after software/message overhead (over {window_ns:.1} ns on the link + {software_ns:.1} ns of software per transfer)")
    } else {
        "after software/message overhead".to_string()
    };
    steps.push(Step {
        name,
        bytes: app_bytes,
        mbps: app_mbps,
        percent_of_raw: 100.0 * app_mbps / raw_mbps,
    });
    Waterfall {
        kind: kind.to_string(),
        size_bytes: flow.size_bytes,
        duration_ns: window_ns,
        steps,
        opposite: flow.opposite,
        opposite_mbps: crate::units::mbps(flow.opposite.total_bytes(), window_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_software_step_states_its_longer_time_base() {
        let params = LinkParams::typical("gen3x8".parse().unwrap());
        let plain = write_waterfall(&params, 65536, Software::default());
        assert_eq!(plain.steps.last().unwrap().name, "after software/message overhead");
        let software = Software { per_transfer_us: 2.0, ..Software::default() };
        let w = write_waterfall(&params, 65536, software);
        let last = w.steps.last().unwrap();
        let expected = format!("after software/message overhead (over {:.1} ns on the link + 2000.0 ns of software per transfer)", w.duration_ns);
        assert_eq!(last.name, expected);
        assert!(last.mbps < w.steps[w.steps.len() - 2].mbps);
    }
}
