//! One function fully decoded: header, both capability lists with every capability decoded once
//! at its offset (by the capability table, [`caps::table`]), and the sysfs attributes when live.
//! The input of analysis and reports.

use serde::Serialize;

use super::address::Bdf;
use super::caps::table::{self, Body, Decoded};
use super::caps::{self, aer::Aer, msi::Msi, msix::MsiX, pcie::PcieCap, pm::PowerManagement, regs::*};
use super::config::{Bar, ConfigSpace};
use super::sysfs::Attributes;
use super::walk::{self, Walk};

/// A device as decoded from its bytes (and sysfs, when live).
#[derive(Debug, Clone)]
pub struct Device {
    pub bdf: Bdf,
    pub config: ConfigSpace,
    /// Parent bridge from sysfs; `None` from a dump (then inferred from bus numbers).
    pub sysfs_parent: Option<Bdf>,
    pub attributes: Option<Attributes>,
    pub notes: Vec<String>,
    pub caps: Walk,
    pub ext_caps: Walk,
    /// Each capability of `caps` and then of `ext_caps`, in list order, decoded at its offset.
    pub decoded: Vec<Decoded>,
    /// The first capability of each kind, as lspci finds one (copies of entries of `decoded`).
    pub pcie: Option<PcieCap>,
    pub aer: Option<Aer>,
    pub msi: Option<Msi>,
    pub msix: Option<MsiX>,
    pub pm: Option<PowerManagement>,
}

/// A capability as listed in reports.
#[derive(Debug, Clone, Serialize)]
pub struct CapListing {
    pub offset: usize,
    pub id: u16,
    pub name: &'static str,
}

impl Device {
    pub fn decode(bdf: Bdf, config: ConfigSpace, sysfs_parent: Option<Bdf>, attributes: Option<Attributes>, notes: Vec<String>) -> Self {
        let caps = walk::standard(&config);
        let function_zero = bdf.device == 0 && bdf.function == 0;
        let mut decoded = table::decode_all(&config, &caps.caps, false, function_zero, None);
        let pcie: Option<PcieCap> = table::first_of(&decoded);
        // lspci's extended capabilities read the type of the last PCI Express capability listed.
        let express_type = decoded.iter().rev().find_map(|d| match &d.body {
            Some(table::Body::Pcie(p)) => Some(p.device_port_type),
            _ => None,
        });
        // lspci looks for extended capabilities only on PCI Express and PCI-X devices.
        let ext_caps = if pcie.is_some() || caps.find(PCI_CAP_ID_PCIX).is_some() { walk::extended(&config) } else { Walk::default() };
        decoded.extend(table::decode_all(&config, &ext_caps.caps, true, function_zero, express_type));
        let (standard, extended) = decoded.split_at(caps.caps.len());
        Device {
            aer: table::first_of(extended),
            msi: table::first_of(standard),
            msix: table::first_of(standard),
            pm: table::first_of(standard),
            bdf,
            config,
            sysfs_parent,
            attributes,
            notes,
            caps,
            ext_caps,
            decoded,
            pcie,
        }
    }

    /// The Subsystem ID capability's IDs (the first one's, as lspci reads it), when read whole.
    pub fn subsystem_capability(&self) -> Option<(u16, u16)> {
        match table::first(self.standard_decoded(), PCI_CAP_ID_SSVID) {
            Some(Body::Subsystem(ids)) => *ids,
            _ => None,
        }
    }

    /// The standard list's capabilities, decoded.
    pub fn standard_decoded(&self) -> &[Decoded] {
        &self.decoded[..self.caps.caps.len()]
    }

    pub fn capability_listing(&self) -> Vec<CapListing> {
        self.caps.caps.iter().map(|c| CapListing { offset: c.offset, id: c.id, name: caps::cap_name(c.id) }).collect()
    }

    pub fn extended_capability_listing(&self) -> Vec<CapListing> {
        self.ext_caps.caps.iter().map(|c| CapListing { offset: c.offset, id: c.id, name: caps::ext_cap_name(c.id) }).collect()
    }

    /// BARs with sizes from sysfs `resource` when known.
    pub fn bars(&self) -> Vec<Bar> {
        let resources = self.attributes.as_ref().map(|a| a.resources.as_slice()).unwrap_or_default();
        let mut bars = self.config.bars();
        for bar in &mut bars {
            bar.size_bytes = resources.get(bar.index).map(|r| r.size_bytes()).filter(|s| *s > 0);
        }
        bars
    }

    /// Current link (speed GT/s, width) from LnkSta, else from sysfs `current_link_*`.
    pub fn link_status(&self) -> (Option<f64>, Option<u8>, &'static str) {
        if let Some(link) = self.pcie.as_ref().and_then(|p| p.link.as_ref()) {
            return (link.speed_gts, Some(link.width), "config");
        }
        match &self.attributes {
            Some(a) if a.current_link_speed_gts.is_some() || a.current_link_width.is_some() => {
                (a.current_link_speed_gts, a.current_link_width, "sysfs")
            }
            _ => (None, None, "unavailable"),
        }
    }

    /// Capable link as the kernel computes it (`pcie_get_speed_cap()`: the highest speed in the
    /// LnkCap2 vector when non-zero, else LnkCap's Max Link Speed; width from LnkCap), else sysfs.
    pub fn link_capable(&self) -> (Option<f64>, Option<u8>, &'static str) {
        if let Some(pcie) = &self.pcie {
            if let Some(link) = &pcie.link {
                let lnkcap2 = if pcie.version >= 2 { pcie.lnkcap2.unwrap_or(0) } else { 0 };
                let speed = if lnkcap2 != 0 { caps::pcie::max_supported_speed(lnkcap2) } else { link.max_speed_gts };
                return (speed, Some(link.max_width), "config");
            }
        }
        match &self.attributes {
            Some(a) if a.max_link_speed_gts.is_some() || a.max_link_width.is_some() => (a.max_link_speed_gts, a.max_link_width, "sysfs"),
            _ => (None, None, "unavailable"),
        }
    }

    /// Whether this function has a PCIe link at all (as far as we can tell).
    pub fn has_link(&self) -> bool {
        match &self.pcie {
            Some(p) => p.port_type.has_link(),
            None => self.attributes.as_ref().is_some_and(|a| a.current_link_width.is_some() || a.current_link_speed_gts.is_some()),
        }
    }

    /// What could not be decoded because too few bytes were read, and what would fix it.
    pub fn unavailable(&self, live: bool) -> Vec<String> {
        let fix = if live { "needs root (unprivileged reads of sysfs config stop at 64 bytes)" } else { "needs a longer dump (lspci -xxx or -xxxx as root)" };
        let mut missing = Vec::new();
        if self.config.is_empty() {
            missing.push("config space: not readable".to_string());
            return missing;
        }
        if let Some(walk::WalkProblem::Unavailable { available, .. }) = &self.caps.problem {
            missing.push(format!(
                "capabilities (PCI Express DevCap/DevCtl MaxPayload, MaxReadReq, LnkCap/LnkCtl/LnkSta, ASPM; MSI, MSI-X, PM): only {available} bytes read, {fix}"
            ));
        }
        let may_have_ext = self.pcie.is_some() || self.caps.find(PCI_CAP_ID_PCIX).is_some();
        if may_have_ext && self.config.len() <= 0x100 {
            let fix = if live { fix } else { "needs a 4096-byte dump (lspci -xxxx as root)" };
            missing.push(format!("extended capabilities (AER status, masks, severity): only {} bytes read, {fix}", self.config.len()));
        }
        missing
    }
}
