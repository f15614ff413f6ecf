//! Differential test against lspci (pciutils 3.9): random configuration spaces are written as an
//! `lspci -xxxx` dump, lspci decodes them with `-F DUMP -vv`, and every field lspci prints that
//! pcieperf also decodes must agree. lspci is the oracle; CI installs it (`.ci/run`).

#[path = "support/lspci.rs"]
mod lspci;

use std::collections::HashMap;
use std::process::Command;

use lspci::{our_flags, ours, parse_lspci};
use pcieperf::pci::{dump, Bdf, Device};

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

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
