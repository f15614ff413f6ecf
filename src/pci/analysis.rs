//! Warnings about a device, each with its cause named: what limits the link, the payload sizes,
//! power management on a throughput path, and errors the device has logged.

use serde::Serialize;

use super::caps::pcie::{speed_label, PortType};
use super::device::Device;

/// A finding, with a stable code for scripts and a sentence for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub code: &'static str,
    pub message: String,
}

/// Every kind of warning, so the findings audit (src/bench/diagnose_audit.rs) can list each one
/// with a scenario where it fires and one where it stays silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    LinkDown,
    LinkSpeedBelowCapability,
    LinkWidthBelowCapability,
    MaxPayloadReserved,
    MaxPayloadBelowSupported,
    MaxReadRequestSmall,
    RelaxedOrderingDisabled,
    AspmEnabled,
    AerCorrectableErrors,
    AerUncorrectableErrors,
    EmulatedDevice,
    CapabilityListCorrupt,
}

impl WarningKind {
    pub const ALL: [WarningKind; 12] = [
        WarningKind::LinkDown,
        WarningKind::LinkSpeedBelowCapability,
        WarningKind::LinkWidthBelowCapability,
        WarningKind::MaxPayloadReserved,
        WarningKind::MaxPayloadBelowSupported,
        WarningKind::MaxReadRequestSmall,
        WarningKind::RelaxedOrderingDisabled,
        WarningKind::AspmEnabled,
        WarningKind::AerCorrectableErrors,
        WarningKind::AerUncorrectableErrors,
        WarningKind::EmulatedDevice,
        WarningKind::CapabilityListCorrupt,
    ];

    /// The stable code scripts read (`Warning::code`).
    pub fn code(self) -> &'static str {
        match self {
            WarningKind::LinkDown => "link_down",
            WarningKind::LinkSpeedBelowCapability => "link_speed_below_capability",
            WarningKind::LinkWidthBelowCapability => "link_width_below_capability",
            WarningKind::MaxPayloadReserved => "max_payload_reserved",
            WarningKind::MaxPayloadBelowSupported => "max_payload_below_supported",
            WarningKind::MaxReadRequestSmall => "max_read_request_small",
            WarningKind::RelaxedOrderingDisabled => "relaxed_ordering_disabled",
            WarningKind::AspmEnabled => "aspm_enabled",
            WarningKind::AerCorrectableErrors => "aer_correctable_errors",
            WarningKind::AerUncorrectableErrors => "aer_uncorrectable_errors",
            WarningKind::EmulatedDevice => "emulated_device",
            WarningKind::CapabilityListCorrupt => "capability_list_corrupt",
        }
    }
}

fn warn(kind: WarningKind, message: String) -> Warning {
    Warning { code: kind.code(), message }
}

/// Everything the checks need besides the device itself.
pub struct Context<'a> {
    /// The device at the other end of this device's upstream link (its parent port), if known.
    pub link_partner: Option<&'a Device>,
    /// The smallest MaxPayload supported by the device and every port on its path to the root.
    pub path_max_payload_supported_bytes: Option<u32>,
}

fn max_speed(device: &Device) -> Option<f64> {
    device.link_capable().0
}

fn target_speed(device: &Device) -> Option<f64> {
    device.pcie.as_ref()?.link2.as_ref()?.target_speed_gts
}

/// Run every check.
pub fn analyse(device: &Device, context: &Context) -> Vec<Warning> {
    let mut warnings = Vec::new();
    link_checks(device, context, &mut warnings);
    payload_checks(device, context, &mut warnings);
    aspm_check(device, &mut warnings);
    aer_checks(device, &mut warnings);
    if let Some(emulator) = super::emulated::emulator(device).filter(|_| device.has_link()) {
        warnings.push(warn(WarningKind::EmulatedDevice, super::emulated::nominal_link_sentence(&emulator)));
    }
    if let Some(problem) = device.caps.problem.as_ref().filter(|p| !matches!(p, super::walk::WalkProblem::Unavailable { .. })) {
        warnings.push(warn(WarningKind::CapabilityListCorrupt, format!("{problem}: later capabilities are not decoded")));
    }
    if let Some(problem) = device.ext_caps.problem.as_ref().filter(|p| !matches!(p, super::walk::WalkProblem::Unavailable { .. })) {
        warnings.push(warn(WarningKind::CapabilityListCorrupt, format!("extended {problem}: later capabilities are not decoded")));
    }
    warnings
}

/// Only the upstream end of a link (endpoint, upstream port, PCIe-to-PCI bridge) judges it, so
/// one bad link gives one warning; root and downstream ports with nothing below are empty slots.
fn judges_its_link(device: &Device) -> bool {
    match device.pcie.as_ref().map(|p| p.port_type) {
        Some(t) => !t.is_downstream_port() && t.has_link(),
        None => device.has_link(),
    }
}

fn link_checks(device: &Device, context: &Context, warnings: &mut Vec<Warning>) {
    if !judges_its_link(device) {
        return;
    }
    let (speed, width, _) = device.link_status();
    let (cap_speed, cap_width, _) = device.link_capable();
    if width == Some(0) || (width.is_some() && speed.is_none()) {
        warnings.push(warn(WarningKind::LinkDown, "link is down (LnkSta reports no negotiated width or speed): the device cannot move data".into()));
        return;
    }
    let partner = context.link_partner;
    let partner_name = partner.map(|p| p.bdf.to_string()).unwrap_or_else(|| "the other end".into());
    if let (Some(now), Some(cap)) = (speed, cap_speed) {
        if now < cap {
            let cause = match partner.and_then(max_speed) {
                Some(other) if other <= now => format!("the other end ({partner_name}) is capable of only {}", speed_label(Some(other))),
                Some(other) => {
                    let targets: Vec<String> = [Some(device), partner]
                        .into_iter()
                        .flatten()
                        .filter_map(|d| target_speed(d).filter(|t| *t <= now).map(|t| format!("{} has LnkCtl2 Target Link Speed {}", d.bdf, speed_label(Some(t)))))
                        .collect();
                    if targets.is_empty() {
                        format!(
                            "both ends support {}: the link trained down (slot, riser, cable or signal integrity; check the BIOS link speed setting)",
                            speed_label(Some(cap.min(other)))
                        )
                    } else {
                        format!("limited by configuration: {}", targets.join(", "))
                    }
                }
                None if target_speed(device).is_some_and(|t| t <= now) => "LnkCtl2 Target Link Speed limits it".to_string(),
                None => "the other end's capability is unknown".to_string(),
            };
            warnings.push(warn(
                WarningKind::LinkSpeedBelowCapability,
                format!("link trained at {} but the device is capable of {}: {cause}", speed_label(Some(now)), speed_label(Some(cap))),
            ));
        }
    }
    if let (Some(now), Some(cap)) = (width, cap_width) {
        if now < cap {
            let cause = match partner.and_then(|p| p.link_capable().1) {
                Some(other) if other <= now => format!("the other end ({partner_name}) has only x{other}"),
                Some(_) => "both ends have more lanes: the slot is narrower, or lanes failed to train (seating, riser, bifurcation setting)".to_string(),
                None => "the other end's width is unknown".to_string(),
            };
            warnings.push(warn(WarningKind::LinkWidthBelowCapability, format!("link trained at x{now} but the device is capable of x{cap}: {cause}")));
        }
    }
}

fn payload_checks(device: &Device, context: &Context, warnings: &mut Vec<Warning>) {
    let Some(regs) = device.pcie.as_ref().and_then(|p| p.device.as_ref()) else { return };
    let path_supported = context.path_max_payload_supported_bytes.unwrap_or(regs.max_payload_supported_bytes);
    if regs.max_payload_bytes > 4096 {
        warnings.push(warn(WarningKind::MaxPayloadReserved, format!("DevCtl MaxPayload field holds a reserved value ({} bytes)", regs.max_payload_bytes)));
    } else if regs.max_payload_bytes < path_supported.min(4096) {
        warnings.push(warn(
            WarningKind::MaxPayloadBelowSupported,
            format!(
                "MaxPayload configured {} bytes, but this device and every port on its path to the root support {} bytes: each write TLP carries less data than it could",
                regs.max_payload_bytes,
                path_supported.min(4096)
            ),
        ));
    }
    let endpoint = device.pcie.as_ref().is_some_and(|p| p.port_type.is_endpoint());
    if endpoint && regs.max_read_request_bytes < 512 {
        warnings.push(warn(
            WarningKind::MaxReadRequestSmall,
            format!("MaxReadReq {} bytes: DMA reads are split into many small requests, and read throughput depends on outstanding requests (512 or more is usual)", regs.max_read_request_bytes),
        ));
    }
    if endpoint && !regs.relaxed_ordering {
        warnings.push(warn(
            WarningKind::RelaxedOrderingDisabled,
            "relaxed ordering disabled (DevCtl RlxdOrd-): completions and writes cannot pass each other, which can lower DMA throughput".into(),
        ));
    }
}

fn aspm_check(device: &Device, warnings: &mut Vec<Warning>) {
    let Some(link) = device.pcie.as_ref().and_then(|p| p.link.as_ref()) else { return };
    if link.aspm_l0s_enabled || link.aspm_l1_enabled {
        warnings.push(warn(
            WarningKind::AspmEnabled,
            format!("ASPM {}: the link sleeps when idle and pays the exit latency on the next transfer, which costs latency and throughput on a busy path", link.aspm_control),
        ));
    }
}

use super::caps::aer::{names, CORRECTABLE_BITS, UNCORRECTABLE_BITS};

fn aer_checks(device: &Device, warnings: &mut Vec<Warning>) {
    let counters = device.attributes.as_ref().and_then(|a| a.aer.as_ref());
    let correctable = counters.map_or(0, |c| c.total_correctable());
    let uncorrectable = counters.map_or(0, |c| c.total_uncorrectable());
    if correctable > 0 {
        warnings.push(warn(WarningKind::AerCorrectableErrors, format!("{correctable} correctable errors counted (aer_dev_correctable): replays cost bandwidth; often signal integrity")));
    }
    if uncorrectable > 0 {
        warnings.push(warn(WarningKind::AerUncorrectableErrors, format!("{uncorrectable} uncorrectable errors counted (aer_dev_nonfatal, aer_dev_fatal)")));
    }
    if let Some(aer) = &device.aer {
        // A bit the device's mask register masks is not reported by the device (PCIe Base Spec
        // §7.8.4.3, §7.8.4.6): its status may be set, but no one is told; no warning either.
        let correctable_unmasked = names(aer.correctable_status & !aer.correctable_mask, &CORRECTABLE_BITS);
        let uncorrectable_unmasked = names(aer.uncorrectable_status & !aer.uncorrectable_mask, &UNCORRECTABLE_BITS);
        if !correctable_unmasked.is_empty() && correctable == 0 {
            warnings.push(warn(WarningKind::AerCorrectableErrors, format!("AER correctable error status set: {}", correctable_unmasked.join(" "))));
        }
        if !uncorrectable_unmasked.is_empty() && uncorrectable == 0 {
            warnings.push(warn(WarningKind::AerUncorrectableErrors, format!("AER uncorrectable error status set: {}", uncorrectable_unmasked.join(" "))));
        }
    }
}

/// The device at the other end of `device`'s upstream link: its parent when that is a port.
pub fn is_port(device: &Device) -> bool {
    device.pcie.as_ref().is_some_and(|p| matches!(p.port_type, PortType::RootPort | PortType::DownstreamPort | PortType::PciToPcieBridge))
}
