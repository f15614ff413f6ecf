//! A device's transfer conditions, read from config space along its path to the root port: the
//! one place that turns a PCI address into a [`Conditions`] value. `inspect` quotes its ceiling
//! from it, and measurements of real devices (`dma`, `run`, `demo`) put it beside their figures.
//!
//! - Link: the narrowest hop of the path, as the kernel's `pcie_bandwidth_available()` finds it;
//!   capable: what the device and the path could do ([`topology::bandwidth`]).
//! - MaxPayload: the smallest configured along the path (a TLP crosses every hop).
//! - MaxReadReq: the device's own (it issues the reads).
//! - RCB: the root port's (completions for the device's reads come from the root complex).
//! - Tags: 32, 256 with Extended Tag, 768 with 10-bit tags enabled (PCIe Base Spec §2.2.6.2).
//! - Completion latency and header format cannot be read from config space: they are typical
//!   values, listed in [`Conditions::assumed`].

use std::path::Path;

use crate::model::{Conditions, Generation, Link, LinkParams};

use super::address::Bdf;
use super::device::Device;
use super::path_summary::PathSummary;
use super::topology::{self, Bandwidth, Hop};
use super::{Machine, Source};

/// One device on the way up, with the link its LnkSta reports.
pub fn hop(device: &Device) -> Hop {
    let (speed_gts, width, _) = device.link_status();
    Hop { bdf: device.bdf, port_type: device.pcie.as_ref().map(|p| p.port_type.name()), speed_gts, width }
}

/// The path's bandwidth as the kernel computes it; `None` for a device without a link.
pub fn bandwidth(device: &Device, path: &PathSummary) -> Option<Bandwidth> {
    if !device.has_link() {
        return None;
    }
    let (speed, width, _) = device.link_capable();
    let (mbits, limiting) = path.narrowest_from(hop(device));
    Some(topology::limited_by(Some((mbits, &limiting)), speed, width))
}

fn link(speed_gts: Option<f64>, width: Option<u8>) -> Option<Link> {
    Link::new(Generation::from_gts(speed_gts?)?, u32::from(width?)).ok()
}

/// The conditions of `device` given its upstream path and the path's bandwidth; `None` when no
/// link is known. `origin` says where the bytes came from ("sysfs", "lspci dump").
pub fn from_path(device: &Device, path: &PathSummary, bandwidth: &Bandwidth, origin: &str) -> Option<Conditions> {
    let capable = link(bandwidth.capable_speed_gts, bandwidth.capable_width);
    let trained = link(bandwidth.limiting_speed_gts, bandwidth.limiting_width).or(capable)?;
    let mut assumed = vec![
        "completion latency 500 ns (typical; config space cannot tell)".to_string(),
        "3DW request headers (host buffers below 4 GiB; 4DW above)".to_string(),
    ];
    let mut params = LinkParams::typical(trained);
    match device.pcie.as_ref().and_then(|p| p.device.as_ref()) {
        Some(regs) => {
            params.mps_bytes = u64::from(path.max_payload_bytes(regs.max_payload_bytes));
            params.mrrs_bytes = u64::from(regs.max_read_request_bytes);
            let ten_bit = device.pcie.as_ref().and_then(|p| p.device2.as_ref()).is_some_and(|d| d.ten_bit_tag_requester_enabled);
            params.tags = if ten_bit { 768 } else if regs.extended_tag_enabled { 256 } else { 32 };
        }
        None => assumed.push(format!(
            "MaxPayload {} bytes, MaxReadReq {} bytes, {} tags (typical; the device's PCI Express capability was not readable)",
            params.mps_bytes, params.mrrs_bytes, params.tags
        )),
    }
    match path.root.and_then(|d| d.pcie.as_ref()?.link.as_ref()?.rcb_bytes) {
        Some(rcb) => params.rcb_bytes = u64::from(rcb),
        None => assumed.push(format!("read completion boundary {} bytes (the root port's was not readable)", params.rcb_bytes)),
    }
    // A reserved DevCtl code decodes above 4096: no model for it.
    params.validate().ok()?;
    Some(Conditions {
        params,
        capable,
        source: format!("PCI {} and its path to the root port ({origin})", device.bdf),
        assumed,
        credits: None,
    })
}

/// The conditions of `bdf` in a loaded machine or dump.
pub fn of(machine: &Machine, bdf: &Bdf) -> Option<Conditions> {
    let device = machine.devices.get(bdf)?;
    let upstream = machine.upstream(bdf);
    let path = PathSummary::of(&upstream);
    let origin = if machine.live { "sysfs" } else { "lspci dump" };
    from_path(device, &path, &bandwidth(device, &path)?, origin)
}

/// The conditions of `bdf` on the live machine (or a sysfs tree): why not, when they cannot be
/// read (no such device, conventional PCI without a link, no sysfs).
pub fn live(sysfs_root: &Path, bdf: &str) -> Result<Conditions, String> {
    let address: Bdf = bdf.parse().map_err(|_| format!("'{bdf}' is not a PCI address"))?;
    let machine = Machine::load(&Source::Sysfs(sysfs_root.to_path_buf())).map_err(|e| format!("{e:#}"))?;
    if !machine.devices.contains_key(&address) {
        return Err(format!("no PCI device {address} under {}", sysfs_root.display()));
    }
    of(&machine, &address).ok_or_else(|| format!("PCI {address} reports no PCI Express link (conventional PCI or an emulated device)"))
}
