//! Differential test against lspci (pciutils 3.9): random configuration spaces are written as an
//! `lspci -xxxx` dump, lspci decodes them with `-F DUMP -vv`, and every field lspci prints that
//! pcieperf also decodes must agree. lspci is the oracle; CI installs it (`.ci/run`).

use std::collections::{BTreeMap, HashMap};
use std::process::Command;

use pcieperf::pci::caps::pcie::{speed_label, supported_speeds_label, target_speed_label};
use pcieperf::pci::{dump, Bdf, Device};

/// splitmix64: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn u32(&mut self) -> u32 {
        self.next() as u32
    }
    fn u16(&mut self) -> u16 {
        self.next() as u16
    }
}

fn put(bytes: &mut [u8], at: usize, data: &[u8]) {
    bytes[at..at + data.len()].copy_from_slice(data);
}

/// A random PCIe function: endpoint, legacy endpoint, root port, switch upstream or downstream
/// port, with random device, link, link-2 and AER registers (reserved encodings included).
fn random_config(rng: &mut Rng) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    put(&mut b, 0, &(0x1000 + rng.below(0xe000) as u16).to_le_bytes());
    put(&mut b, 2, &rng.u16().to_le_bytes());
    put(&mut b, 6, &0x0010u16.to_le_bytes());
    let port_code: u16 = [0, 0, 1, 4, 5, 6][rng.below(6) as usize];
    let bridge = port_code >= 4;
    b[0x0e] = u8::from(bridge);
    put(&mut b, 0x09, if bridge { &[0x00, 0x04, 0x06] } else { &[0x00, 0x00, 0x02] });
    // Capabilities in a random order among PM, PCI Express, MSI.
    let mut slots = [(0x40usize, 0x01u8), (0x60, 0x10), (0xa0, 0x05), (0xc0, 0x11)];
    for i in (1..slots.len()).rev() {
        slots.swap(i, rng.below(i as u64 + 1) as usize);
    }
    b[0x34] = slots[0].0 as u8;
    for (i, (at, id)) in slots.iter().enumerate() {
        b[*at] = *id;
        b[at + 1] = slots.get(i + 1).map_or(0, |s| s.0 as u8);
    }
    put(&mut b, 0x42, &(rng.u16() & 0xfe07 | 3).to_le_bytes());
    put(&mut b, 0x44, &(rng.u16() & 0x810b).to_le_bytes());
    put(&mut b, 0xc2, &(rng.u16() & 0xc7ff).to_le_bytes());
    put(&mut b, 0xc4, &rng.u32().to_le_bytes());
    put(&mut b, 0xc8, &rng.u32().to_le_bytes());
    put(&mut b, 0xa2, &(rng.u16() & 0x01ff).to_le_bytes());
    let version: u16 = if rng.below(8) == 0 { 1 } else { 2 };
    let slot = u16::from(rng.below(2) == 1 && matches!(port_code, 4 | 6)) << 8;
    put(&mut b, 0x62, &(version | port_code << 4 | slot).to_le_bytes());
    for at in [0x64, 0x6c, 0x74, 0x78, 0x7c, 0x84, 0x8c] {
        put(&mut b, at, &rng.u32().to_le_bytes());
    }
    put(&mut b, 0x68, &rng.u16().to_le_bytes());
    put(&mut b, 0x6a, &rng.u16().to_le_bytes());
    put(&mut b, 0x70, &rng.u16().to_le_bytes());
    // LnkSta: mostly valid speeds and widths, sometimes anything.
    let lnksta = if rng.below(4) == 0 { rng.u16() } else { (1 + rng.below(6)) as u16 | ([1u16, 2, 4, 8, 16][rng.below(5) as usize] << 4) | (rng.u16() & 0xfc00) };
    put(&mut b, 0x72, &lnksta.to_le_bytes());
    let lnkcap2 = if rng.below(5) == 0 { 0 } else { rng.u32() & 0x8000_01fe };
    put(&mut b, 0x8c, &lnkcap2.to_le_bytes());
    put(&mut b, 0x88, &rng.u16().to_le_bytes());
    put(&mut b, 0x90, &rng.u16().to_le_bytes());
    put(&mut b, 0x92, &rng.u16().to_le_bytes());
    // AER at 0x100, the only extended capability.
    put(&mut b, 0x100, &(0x0001u32 | 2 << 16).to_le_bytes());
    for at in (0x104..0x12c).step_by(4) {
        put(&mut b, at, &rng.u32().to_le_bytes());
    }
    b
}

/// Fields lspci printed for one device.
#[derive(Debug, Default, Clone, PartialEq)]
struct Seen {
    port_type: Option<String>,
    devcap_mps: Option<u32>,
    devctl_mps: Option<u32>,
    mrrs: Option<u32>,
    lnkcap: Option<(String, u32, String, u32)>,
    lnkctl_aspm: Option<String>,
    lnksta: Option<(String, u32)>,
    lnkcap2: Option<String>,
    target: Option<String>,
    uesta: Option<Vec<String>>,
    cesta: Option<Vec<String>>,
    /// `Register.Flag` → set, for the flags of the PCI Express capability lspci printed.
    flags: BTreeMap<String, bool>,
    rcb: Option<u32>,
    msi: Option<String>,
    msix: Option<String>,
    /// Power Management version and D-state.
    pm: (Option<u8>, Option<u8>),
    completion_timeout_ranges: Option<String>,
    completion_timeout: Option<String>,
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

fn parse_lspci(output: &str) -> HashMap<Bdf, Seen> {
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
fn our_flags(device: &Device) -> BTreeMap<String, bool> {
    let pcie = device.pcie.as_ref().unwrap();
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

fn ours(device: &Device) -> Seen {
    let pcie = device.pcie.as_ref().expect("generated devices have a PCIe capability");
    let d = pcie.device.as_ref().unwrap();
    let link = pcie.link.as_ref();
    let link2 = pcie.link2.as_ref();
    Seen {
        flags: BTreeMap::new(),
        rcb: link.and_then(|l| l.rcb_bytes),
        msi: device.msi.as_ref().map(|m| m.describe()[0].clone()),
        msix: device.msix.as_ref().map(|m| m.describe()[0].clone()),
        pm: (device.pm.as_ref().map(|p| p.version), device.pm.as_ref().and_then(|p| p.power_state)),
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
    }
}

fn lspci_decode(dump_text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("random.dump");
    std::fs::write(&path, dump_text).unwrap();
    let output = Command::new("lspci").arg("-D").arg("-F").arg(&path).arg("-vv").output().unwrap_or_else(|e| {
        panic!("lspci is required for this test (Debian package pciutils, installed by .ci/run) but could not be run: {e}")
    });
    assert!(output.status.success(), "lspci failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn decoding_agrees_with_lspci_on_random_config_spaces() {
    let mut rng = Rng(0x5eed_0003);
    let mut compared = 0;
    let mut flags_compared = 0;
    let mut coverage: HashMap<String, u32> = HashMap::new();
    for batch in 0..4 {
        let mut devices: Vec<(Bdf, Vec<u8>)> = Vec::new();
        for i in 0..100u32 {
            // Some endpoints sit at non-zero device or function numbers: lspci hides their
            // LnkCap2/LnkCtl2, and so must we.
            let (device, function) = if rng.below(2) == 0 { (0, 0) } else { (rng.below(32) as u8, rng.below(8) as u8) };
            let bdf = Bdf::new(batch, i as u8 + 1, device, function).unwrap();
            devices.push((bdf, random_config(&mut rng)));
        }
        let refs: Vec<(Bdf, &[u8])> = devices.iter().map(|(b, c)| (*b, c.as_slice())).collect();
        let text = dump::write(&refs);
        let theirs = parse_lspci(&lspci_decode(&text));
        let parsed = dump::parse(&text).unwrap().devices;
        assert_eq!(parsed.len(), devices.len());
        for d in parsed {
            let device = Device::decode(d.bdf, d.config, None, None, Vec::new());
            let expected = theirs.get(&d.bdf).unwrap_or_else(|| panic!("lspci did not list {}", d.bdf));
            assert!(expected.devcap_mps.is_some() && expected.uesta.is_some(), "lspci output for {} was not parsed: {expected:?}", d.bdf);
            // Flags: every one we decode that lspci printed for this port type must agree.
            let mut mine = ours(&device);
            for (key, value) in our_flags(&device) {
                if let Some(&theirs_value) = expected.flags.get(&key) {
                    assert_eq!(value, theirs_value, "device {}: {key} differs from lspci", d.bdf);
                    flags_compared += 1;
                }
            }
            mine.flags = expected.flags.clone();
            assert_eq!(&mine, expected, "device {} differs from lspci", d.bdf);
            compared += 1;
            *coverage.entry(expected.port_type.clone().unwrap()).or_insert(0) += 1;
            if expected.lnkctl_aspm.is_some() && expected.target.is_none() {
                *coverage.entry("link2 hidden".into()).or_insert(0) += 1;
            }
            if expected.target.as_deref() == Some("2.5GT/s") {
                *coverage.entry("target 2.5".into()).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(compared, 400);
    assert!(flags_compared > 400 * 15, "only {flags_compared} flags compared");
    for case in ["Endpoint", "Legacy Endpoint", "Root Port", "Upstream Port", "Downstream Port", "link2 hidden", "target 2.5"] {
        assert!(coverage.get(case).copied().unwrap_or(0) > 5, "too few random cases of {case}: {coverage:?}");
    }
}
