//! The path from a device to its root port, and the available bandwidth along it computed as the
//! Linux kernel does (`pcie_bandwidth_available()`, `pcie_bandwidth_capable()` and
//! `__pcie_print_link_status()` in drivers/pci/pci.c) so the line pcieperf prints matches the
//! kernel message users paste into bug reports.

use serde::Serialize;

use super::address::Bdf;
use crate::model::Generation;

/// One device on the way up, with the link its LnkSta reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hop {
    pub bdf: Bdf,
    pub port_type: Option<&'static str>,
    pub speed_gts: Option<f64>,
    pub width: Option<u8>,
}

/// The kernel's per-lane rate after encoding in Mb/s, integer arithmetic as in
/// `PCIE_SPEED2MBS_ENC`: 2.5 → 2000, 5 → 4000, 8 → 7876, 16 → 15753, 32 → 31507, 64 → 64000.
pub fn kernel_lane_mbits(speed_gts: Option<f64>) -> u32 {
    match speed_gts.and_then(Generation::from_gts) {
        Some(Generation::Gen1) => 2500 * 8 / 10,
        Some(Generation::Gen2) => 5000 * 8 / 10,
        Some(Generation::Gen3) => 8000 * 128 / 130,
        Some(Generation::Gen4) => 16000 * 128 / 130,
        Some(Generation::Gen5) => 32000 * 128 / 130,
        Some(Generation::Gen6) => 64000,
        None => 0,
    }
}

/// The kernel's `pci_speed_string()`: "8.0 GT/s PCIe".
pub fn kernel_speed_string(speed_gts: Option<f64>) -> String {
    match speed_gts {
        Some(s) if kernel_lane_mbits(Some(s)) > 0 => format!("{s:.1} GT/s PCIe"),
        _ => "Unknown".to_string(),
    }
}

/// Available and capable bandwidth, and the hop that limits it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bandwidth {
    /// Mb/s after encoding, the kernel's integer figure.
    pub available_mbits: u32,
    pub limiting_bdf: Option<Bdf>,
    pub limiting_speed_gts: Option<f64>,
    pub limiting_width: Option<u8>,
    pub capable_mbits: u32,
    pub capable_speed_gts: Option<f64>,
    pub capable_width: Option<u8>,
    /// The kernel's message, word for word, except where LnkCap reads 0: the kernel then
    /// prints "0.000 Gb/s available PCIe bandwidth (Unknown x0 link)", which is not true.
    pub message: String,
}

/// The kernel's rate of one hop in Mb/s: 0 when its link is unknown, as the kernel reads zeros
/// from a missing register.
pub fn hop_mbits(hop: &Hop) -> u32 {
    u32::from(hop.width.unwrap_or(0)) * kernel_lane_mbits(hop.speed_gts)
}

/// The hop that limits `hops` (the device first, then each upstream bridge) and its rate, as
/// the kernel's loop finds it: a hop replaces the one so far when its rate is lower or equal
/// (ties go upstream) or when the one so far reads 0 Mb/s.
pub fn narrowest(hops: &[Hop]) -> Option<(u32, &Hop)> {
    hops.iter().fold(None, |so_far, hop| match so_far {
        Some((available, _)) if available != 0 && hop_mbits(hop) > available => so_far,
        _ => Some((hop_mbits(hop), hop)),
    })
}

/// `hops[0]` is the device, then each upstream bridge; ties go to the upstream hop, because the
/// kernel compares with `<=`.
pub fn bandwidth(hops: &[Hop], capable_speed_gts: Option<f64>, capable_width: Option<u8>) -> Bandwidth {
    limited_by(narrowest(hops), capable_speed_gts, capable_width)
}

/// The bandwidth of a path whose narrowest hop (with its rate) is `narrowest`.
pub fn limited_by(narrowest: Option<(u32, &Hop)>, capable_speed_gts: Option<f64>, capable_width: Option<u8>) -> Bandwidth {
    let (available, limiting) = narrowest.map_or((0, None), |(mbits, hop)| (mbits, Some(hop)));
    let capable = if capable_width.is_some() && kernel_lane_mbits(capable_speed_gts) > 0 {
        u32::from(capable_width.unwrap_or(0)) * kernel_lane_mbits(capable_speed_gts)
    } else {
        0
    };
    let mbits = |v: u32| format!("{}.{:03}", v / 1000, v % 1000);
    let cap_link = format!("{} x{}", kernel_speed_string(capable_speed_gts), capable_width.unwrap_or(0));
    let message = match limiting {
        Some(hop) if available < capable => format!(
            "{} Gb/s available PCIe bandwidth, limited by {} x{} link at {} (capable of {} Gb/s with {cap_link} link)",
            mbits(available),
            kernel_speed_string(hop.speed_gts),
            hop.width.unwrap_or(0),
            hop.bdf,
            mbits(capable)
        ),
        // The kernel would print "0.000 Gb/s available (Unknown x0 link)": say what is true.
        _ if capable == 0 => "link capability not reported (LnkCap = 0): available bandwidth unknown".to_string(),
        _ => format!("{} Gb/s available PCIe bandwidth ({cap_link} link)", mbits(capable)),
    };
    Bandwidth {
        available_mbits: available,
        limiting_bdf: limiting.map(|h| h.bdf),
        limiting_speed_gts: limiting.and_then(|h| h.speed_gts),
        limiting_width: limiting.and_then(|h| h.width),
        capable_mbits: capable,
        capable_speed_gts,
        capable_width,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(bdf: &str, speed: f64, width: u8) -> Hop {
        Hop { bdf: bdf.parse().unwrap(), port_type: None, speed_gts: Some(speed), width: Some(width) }
    }

    #[test]
    fn matches_the_kernel_message() {
        let hops = [hop("0000:01:00.0", 8.0, 4), hop("0000:00:01.0", 8.0, 4)];
        let bw = bandwidth(&hops, Some(8.0), Some(8));
        assert_eq!(
            bw.message,
            "31.504 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at 0000:00:01.0 (capable of 63.008 Gb/s with 8.0 GT/s PCIe x8 link)"
        );
        let full = bandwidth(&[hop("0000:01:00.0", 16.0, 16)], Some(16.0), Some(16));
        assert_eq!(full.message, "252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)");
        let gen1 = bandwidth(&[hop("0000:02:00.0", 2.5, 1)], Some(5.0), Some(1));
        assert!(gen1.message.starts_with("2.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x1 link at 0000:02:00.0 (capable of 4.000 Gb/s with 5.0 GT/s PCIe x1"));
    }

    #[test]
    fn a_port_whose_lnkcap_reads_zero_is_not_said_to_have_zero_bandwidth() {
        let bw = bandwidth(&[hop("0000:00:1c.0", 2.5, 1)], None, Some(0));
        assert_eq!(bw.message, "link capability not reported (LnkCap = 0): available bandwidth unknown");
        assert!(!bw.message.contains("0.000 Gb/s") && !bw.message.contains("x0"), "{}", bw.message);
    }
}
