//! What `pcieperf run` knows about the machine before it measures: the inspection layer's view of
//! the target's PCI device (its link, the kernel's bandwidth line, warnings, the model ceiling)
//! and the targets detection found. Stored in the results document so a run carries the
//! conditions it was measured under.

use serde::{Deserialize, Serialize};

use crate::engine::{Candidate, EngineInfo};
use crate::pci::{self, Bdf, DeviceReport, InspectOptions};

/// The machine as inspected at the start of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineContext {
    pub pci_devices: usize,
    pub pcie_devices: usize,
    pub devices_with_warnings: usize,
    /// Why inspection could not run (no sysfs, e.g. in a container), when it could not.
    pub inspection_error: Option<String>,
    /// The PCI device behind the target, when the engine names one.
    pub target_device: Option<TargetDevice>,
    /// Targets detection found on this machine, usable or not, with the reason.
    pub candidates: Vec<Candidate>,
}

/// The inspection layer's view of the target's device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetDevice {
    pub bdf: String,
    pub name: String,
    /// Trained link as `S GT/s xW`, when known.
    pub link_status: Option<String>,
    pub link_capable: Option<String>,
    /// The Linux kernel's "available PCIe bandwidth" line for this device, word for word.
    pub bandwidth: Option<String>,
    /// Model ceiling at large transfers on the trained path, MB/s (10^6 B/s).
    #[serde(rename = "ceiling_write_MBps")]
    pub ceiling_write_mbps: Option<f64>,
    #[serde(rename = "ceiling_read_MBps")]
    pub ceiling_read_mbps: Option<f64>,
    pub warnings: Vec<String>,
}

/// Inspect the machine for a run on the engine described by `info`.
pub fn inspect_for(info: &EngineInfo, options: &InspectOptions, candidates: Vec<Candidate>) -> MachineContext {
    let mut context = MachineContext { candidates, ..MachineContext::default() };
    match pci::inspect(options) {
        Ok(inspection) => {
            context.pci_devices = inspection.devices.len();
            context.pcie_devices = inspection.devices.iter().filter(|d| d.pcie.is_some()).count();
            context.devices_with_warnings = inspection.devices.iter().filter(|d| !d.warnings.is_empty()).count();
            let wanted: Option<Bdf> = info.pci_address.as_deref().and_then(|a| a.parse().ok());
            context.target_device = wanted
                .and_then(|bdf| inspection.devices.iter().find(|d| d.bdf == bdf))
                .map(target_device);
        }
        Err(error) => context.inspection_error = Some(format!("{error:#}")),
    }
    context
}

fn target_device(report: &DeviceReport) -> TargetDevice {
    let link = |state: &pci::LinkState| match (state.speed_gts, state.width) {
        (Some(speed), Some(width)) => Some(format!("{speed} GT/s x{width}")),
        _ => None,
    };
    let trained = report.ceiling.as_ref().and_then(|c| c.trained.as_ref());
    TargetDevice {
        bdf: report.bdf.to_string(),
        name: report.name.clone(),
        link_status: link(&report.link_status),
        link_capable: link(&report.link_capable),
        bandwidth: report.bandwidth.as_ref().map(|b| b.message.clone()),
        ceiling_write_mbps: trained.map(|t| t.write_mbps),
        ceiling_read_mbps: trained.map(|t| t.read_mbps),
        warnings: report.warnings.iter().map(|w| w.message.clone()).collect(),
    }
}

impl MachineContext {
    /// Lines for the terminal, before the summary.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.inspection_error {
            Some(error) => lines.push(format!("machine: not inspected ({error})")),
            None => lines.push(format!(
                "machine: {} PCI devices, {} PCI Express, {} with warnings (pcieperf inspect for details)",
                self.pci_devices, self.pcie_devices, self.devices_with_warnings
            )),
        }
        for candidate in &self.candidates {
            let usable = if candidate.usable { "usable" } else { "not used" };
            lines.push(format!("found {} ({usable}): {}", candidate.target, candidate.reason));
        }
        if let Some(device) = &self.target_device {
            let link = device.link_status.as_deref().unwrap_or("link unknown");
            let capable = device.link_capable.as_deref().map_or(String::new(), |c| format!(", capable {c}"));
            lines.push(format!("target device {} {}: {link}{capable}", device.bdf, device.name));
            lines.extend(device.bandwidth.iter().map(|b| format!("kernel: {b}")));
            lines.extend(device.warnings.iter().map(|w| format!("warning: {w}")));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_sysfs_is_a_note_not_an_error() {
        let info = crate::engine::EngineInfo {
            kind: "test".into(),
            target: "test".into(),
            simulated: true,
            co_simulated: false,
            description: String::new(),
            in_flight: 1,
            copies_per_transfer: 1,
            pci_address: Some("0000:01:00.0".into()),
            device_clock_hz: None,
            directions: vec![],
            concurrent: false,
            alignment_bytes: 1,
            max_transfer_bytes: 1,
            capacity_bytes: None,
            data_model: crate::engine::DataModel::Generator,
        };
        let options = InspectOptions { source: pci::Source::Sysfs("/nonexistent-sysfs".into()), ..InspectOptions::default() };
        let context = inspect_for(&info, &options, vec![]);
        assert!(context.inspection_error.is_some());
        assert!(context.target_device.is_none());
        assert!(context.lines()[0].starts_with("machine: not inspected"));
    }
}
