//! lspci's `-vv` text parsed into the fields pcieperf also decodes, and pcieperf's decoding of
//! the same device in the same form: the two sides of every comparison with lspci (the random
//! differential test and the live QEMU testbed). Included with `#[path]`.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

use pcieperf::pci::caps::pcie::{speed_label, supported_speeds_label, target_speed_label};
use pcieperf::pci::{Bdf, Device};

/// Fields lspci printed for one device.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Seen {
    pub port_type: Option<String>,
    pub devcap_mps: Option<u32>,
    pub devctl_mps: Option<u32>,
    pub mrrs: Option<u32>,
    pub lnkcap: Option<(String, u32, String, u32)>,
    pub lnkctl_aspm: Option<String>,
    pub lnksta: Option<(String, u32)>,
    lnkcap2: Option<String>,
    pub target: Option<String>,
    pub uesta: Option<Vec<String>>,
    pub cesta: Option<Vec<String>>,
    /// `Register.Flag` → set, for the flags of the PCI Express capability lspci printed.
    pub flags: BTreeMap<String, bool>,
    pub rcb: Option<u32>,
    pub msi: Option<String>,
    pub msix: Option<String>,
    /// Power Management version and D-state.
    pub pm: (Option<u8>, Option<u8>),
    pub completion_timeout_ranges: Option<String>,
    pub completion_timeout: Option<String>,
}

const FLAG_REGISTERS: [&str; 8] = ["DevCap", "DevCtl", "DevSta", "LnkCap", "LnkCtl", "LnkSta", "DevCap2", "DevCtl2"];

fn record_flags(section: &str, text: &str, flags: &mut BTreeMap<String, bool>) {
    for token in text.split([' ', ',', '\t']) {
        let (name, set) = match (token.strip_suffix('+'), token.strip_suffix('-')) {
            (Some(name), _) => (name, true),
            (_, Some(name)) => (name, false),
            _ => continue,
        };
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()) {
            flags.insert(format!("{section}.{name}"), set);
        }
    }
}

fn number_before(text: &str, suffix: &str) -> Option<u32> {
    let end = text.find(suffix)?;
    text[..end].rsplit(' ').next()?.parse().ok()
}

fn set_flags(text: &str) -> Vec<String> {
    text.split_whitespace().filter_map(|f| f.strip_suffix('+')).map(str::to_string).collect()
}

pub fn parse_lspci(output: &str) -> HashMap<Bdf, Seen> {
    let mut all = HashMap::new();
    let mut current: Option<(Bdf, Seen)> = None;
    let mut in_devctl = false;
    let mut section = String::new();
    for line in output.lines() {
        if !line.starts_with('\t') && !line.is_empty() {
            if let Some((bdf, seen)) = current.take() {
                all.insert(bdf, seen);
            }
            let bdf: Bdf = line.split(' ').next().unwrap().parse().expect("lspci device line");
            current = Some((bdf, Seen::default()));
            continue;
        }
        let Some((_, seen)) = current.as_mut() else { continue };
        let text = line.trim_start_matches('\t');
        if line.starts_with("\t\t") && !line.starts_with("\t\t\t") {
            section = text.split(':').next().unwrap().to_string();
        } else if !line.starts_with("\t\t") {
            section.clear();
        }
        if FLAG_REGISTERS.contains(&section.as_str()) {
            let body = if line.starts_with("\t\t\t") { text } else { text.split_once(':').unwrap().1 };
            record_flags(&section, body, &mut seen.flags);
        }
        if let Some((_, rest)) = text.strip_prefix("Capabilities: ").and_then(|r| r.split_once("] MSI: ")) {
            seen.msi = Some(format!("MSI: {rest}"));
        }
        if let Some((_, rest)) = text.strip_prefix("Capabilities: ").and_then(|r| r.split_once("] MSI-X: ")) {
            seen.msix = Some(format!("MSI-X: {rest}"));
        }
        if let Some((_, rest)) = text.strip_prefix("Capabilities: ").and_then(|r| r.split_once("] Power Management version ")) {
            seen.pm.0 = rest.parse().ok();
        }
        if let Some(rest) = text.strip_prefix("Status: D") {
            seen.pm.1 = rest.split(' ').next().unwrap().parse().ok();
        }
        if let Some(rest) = text.strip_prefix("DevCap2: Completion Timeout: ") {
            seen.completion_timeout_ranges = Some(rest.split(',').next().unwrap().to_string());
        }
        if let Some(rest) = text.strip_prefix("DevCtl2: Completion Timeout: ") {
            seen.completion_timeout = Some(rest.split(',').next().unwrap().to_string());
        }
        if let Some(rcb) = text.split_once("RCB ") {
            seen.rcb = number_before(rcb.1, " bytes").or_else(|| rcb.1.split(' ').next()?.parse().ok());
        }
        if let Some(rest) = text.strip_prefix("Capabilities: ").and_then(|r| r.split_once("] Express (v").map(|x| x.1)) {
            let after = rest.split_once(") ").unwrap().1;
            seen.port_type = Some(after.rsplit_once(", MSI").unwrap().0.split(" (Slot").next().unwrap().to_string());
        } else if let Some(rest) = text.strip_prefix("DevCap:\t") {
            seen.devcap_mps = number_before(rest, " bytes");
        } else if text.starts_with("DevCtl:\t") {
            in_devctl = true;
            continue;
        } else if text.starts_with("DevSta:") {
            in_devctl = false;
        } else if in_devctl && text.starts_with("MaxPayload ") {
            seen.devctl_mps = number_before(text, " bytes,");
            seen.mrrs = number_before(text.split_once(", ").unwrap().1, " bytes");
        } else if let Some(rest) = text.strip_prefix("LnkCap:\t") {
            let parts: Vec<&str> = rest.split(", ").collect();
            let port = parts[0].trim_start_matches("Port #").parse().unwrap();
            let speed = parts[1].trim_start_matches("Speed ").to_string();
            let width = parts[2].trim_start_matches("Width x").parse().unwrap();
            let aspm = parts[3].trim_start_matches("ASPM ").to_string();
            seen.lnkcap = Some((speed, width, aspm, port));
        } else if let Some(rest) = text.strip_prefix("LnkCtl:\tASPM ") {
            seen.lnkctl_aspm = Some(rest.split(';').next().unwrap().to_string());
        } else if let Some(rest) = text.strip_prefix("LnkSta:\tSpeed ") {
            let (speed, width) = rest.split_once(", Width x").unwrap();
            let speed = speed.split(' ').next().unwrap().to_string();
            let width = width.split(' ').next().unwrap().parse().unwrap();
            seen.lnksta = Some((speed, width));
        } else if let Some(rest) = text.strip_prefix("LnkCap2: Supported Link Speeds: ") {
            seen.lnkcap2 = Some(rest.split(',').next().unwrap().to_string());
        } else if let Some(rest) = text.strip_prefix("LnkCtl2: Target Link Speed: ") {
            seen.target = Some(rest.split(',').next().unwrap().to_string());
        } else if let Some(rest) = text.strip_prefix("UESta:\t") {
            seen.uesta = Some(set_flags(rest));
        } else if let Some(rest) = text.strip_prefix("CESta:\t") {
            seen.cesta = Some(set_flags(rest));
        }
    }
    if let Some((bdf, seen)) = current {
        all.insert(bdf, seen);
    }
    all
}

/// Our decoding of the flags compared, keyed as lspci prints them.
pub fn our_flags(device: &Device) -> BTreeMap<String, bool> {
    let Some(pcie) = device.pcie.as_ref() else { return BTreeMap::new() };
    let d = pcie.device.as_ref().unwrap();
    let mut flags: Vec<(&str, bool)> = vec![
        ("DevCap.ExtTag", d.extended_tag_supported),
        ("DevCap.FLReset", d.function_level_reset),
        ("DevCtl.CorrErr", d.correctable_error_reporting),
        ("DevCtl.NonFatalErr", d.non_fatal_error_reporting),
        ("DevCtl.FatalErr", d.fatal_error_reporting),
        ("DevCtl.UnsupReq", d.unsupported_request_reporting),
        ("DevCtl.RlxdOrd", d.relaxed_ordering),
        ("DevCtl.ExtTag", d.extended_tag_enabled),
        ("DevCtl.NoSnoop", d.no_snoop),
        ("DevSta.CorrErr", d.correctable_error_detected),
        ("DevSta.NonFatalErr", d.non_fatal_error_detected),
        ("DevSta.FatalErr", d.fatal_error_detected),
        ("DevSta.UnsupReq", d.unsupported_request_detected),
        ("DevSta.TransPend", d.transactions_pending),
    ];
    if let Some(l) = &pcie.link {
        flags.extend([
            ("LnkCap.LLActRep", l.dll_active_reporting),
            ("LnkCtl.Disabled", l.link_disabled),
            ("LnkCtl.CommClk", l.common_clock),
            ("LnkSta.Train", l.training),
            ("LnkSta.DLActive", l.dl_active),
        ]);
    }
    if let Some(d2) = &pcie.device2 {
        flags.extend([
            ("DevCap2.TimeoutDis", d2.completion_timeout_disable_supported),
            ("DevCap2.10BitTagComp", d2.ten_bit_tag_completer),
            ("DevCap2.10BitTagReq", d2.ten_bit_tag_requester),
            ("DevCtl2.TimeoutDis", d2.completion_timeout_disabled),
            ("DevCtl2.10BitTagReq", d2.ten_bit_tag_requester_enabled),
        ]);
    }
    flags.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

pub fn ours(device: &Device) -> Seen {
    let general = Seen {
        msi: device.msi.as_ref().map(|m| m.describe()[0].clone()),
        msix: device.msix.as_ref().map(|m| m.describe()[0].clone()),
        pm: (device.pm.as_ref().map(|p| p.version), device.pm.as_ref().and_then(|p| p.power_state)),
        ..Seen::default()
    };
    // Conventional PCI functions (host bridges, virtio on the root bus) have only these.
    let Some(pcie) = device.pcie.as_ref() else { return general };
    let d = pcie.device.as_ref().unwrap();
    let link = pcie.link.as_ref();
    let link2 = pcie.link2.as_ref();
    Seen {
        flags: BTreeMap::new(),
        rcb: link.and_then(|l| l.rcb_bytes),
        completion_timeout_ranges: pcie.device2.as_ref().map(|d| d.completion_timeout_ranges.to_string()),
        completion_timeout: pcie.device2.as_ref().map(|d| d.completion_timeout.to_string()),
        port_type: Some(pcie.port_type.name().to_string()),
        devcap_mps: Some(d.max_payload_supported_bytes),
        devctl_mps: Some(d.max_payload_bytes),
        mrrs: Some(d.max_read_request_bytes),
        lnkcap: link.map(|l| (speed_label(l.max_speed_gts), u32::from(l.max_width), l.aspm_support.to_string(), u32::from(l.port_number))),
        lnkctl_aspm: link.map(|l| l.aspm_control.to_string()),
        lnksta: link.map(|l| (speed_label(l.speed_gts), u32::from(l.width))),
        lnkcap2: link2.and_then(|l| l.lnkcap2).filter(|&c| c != 0).map(|c| supported_speeds_label(c).to_string()),
        target: link2.and_then(|l| l.lnkctl2.map(|_| target_speed_label(l.target_speed_gts))),
        uesta: device.aer.as_ref().map(|a| a.uncorrectable_errors.iter().map(|s| s.to_string()).collect()),
        cesta: device.aer.as_ref().map(|a| a.correctable_errors.iter().map(|s| s.to_string()).collect()),
        ..general
    }
}

