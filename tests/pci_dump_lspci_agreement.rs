//! pcieperf reads every dump `lspci -F` reads, as lspci reads it: damaged dumps (rows missing or
//! out of order, a device line wrapped by a mail client, blank lines inside a device, CRLF,
//! trailing spaces, verbose text, lengths other than 64/256/4096) are generated at random, and
//! `pcieperf inspect -F DUMP -n -x/-xxx/-xxxx` must print byte for byte what lspci prints for
//! the same file; `-vv`'s lspci lines (device line, Subsystem, Control, Status, bridge bus and
//! windows, VirtIO capability names) must agree too. lspci (pciutils 3.9) is the oracle; CI
//! installs it (`.ci/run`).

use std::process::Command;

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// A plausible function: random IDs, class, header type 0 or 1 (bridges with random windows),
/// a capability list with PM, MSI, PCI Express, vendor-specific and Subsystem ID entries.
fn random_config(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut b: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    let bridge = rng.chance(3);
    b[0x0e] = u8::from(bridge) | if rng.chance(4) { 0x80 } else { 0 };
    if rng.chance(2) {
        b[0x08] = 0; // revision 0: no "(rev 00)"
    }
    if rng.chance(4) {
        b[0..4].copy_from_slice(&[0xf4, 0x1a, 0x41, 0x10]); // a virtio device
    }
    b[0x06] |= 0x10;
    b[0x34] = 0x40;
    let chain = [(0x40usize, 0x01u8), (0x50, 0x05), (0x70, 0x10), (0xb0, 0x09), (0xc8, 0x0d)];
    for (i, (at, id)) in chain.iter().enumerate() {
        if at + 20 <= 4096 {
            b[*at] = *id;
            b[at + 1] = chain.get(i + 1).map_or(0, |c| c.0 as u8);
        }
    }
    if true {
        b[0xb2] = 16 + 4 * (rng.below(2) as u8);
        b[0xb3] = 1 + rng.below(5) as u8;
    }
    if true {
        b[0x72] = 0x02; // PCI Express v2, endpoint
    }
    if bridge && rng.chance(2) {
        // Windows of valid types, sometimes disabled (base above limit).
        b[0x1c] = b[0x1c] & 0xf0 | 1;
        b[0x1d] = b[0x1d] & 0xf0 | 1;
        b[0x20] &= 0xf0;
        b[0x22] &= 0xf0;
        b[0x24] = b[0x24] & 0xf0 | 1;
        b[0x26] = b[0x26] & 0xf0 | 1;
    }
    // No extended capabilities: their walk is compared in pci_lspci_differential.
    b[0x100..0x104].fill(0);
    b.truncate(len);
    b
}

fn rows(bytes: &[u8]) -> Vec<String> {
    bytes.chunks(16).enumerate().map(|(i, c)| format!("{:02x}: {}", i * 16, c.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "))).collect()
}

/// A dump of a few devices, damaged the ways pasted dumps are.
fn damaged_dump(rng: &mut Rng) -> String {
    let mut lines: Vec<String> = Vec::new();
    let domain = if rng.chance(5) { format!("{:04x}:", rng.below(3)) } else { String::new() };
    let mut used = std::collections::BTreeSet::new();
    for _ in 0..1 + rng.below(4) {
        let address = (rng.below(4) as u8, rng.below(32) as u8, rng.below(8) as u8);
        if !used.insert(address) {
            continue; // lspci lists a duplicated address twice; pcieperf keeps one (warned)
        }
        let len = [64, 64, 256, 256, 4096, 48, 100, 200][rng.below(8) as usize];
        let config = random_config(rng, len);
        let address = format!("{domain}{:02x}:{:02x}.{}", address.0, address.1, address.2);
        if rng.chance(4) {
            lines.push(format!("{address} Ethernet controller: Intel Corporation Ethernet Controller (rev"));
            lines.push("01)".into()); // the mail client's wrap
        } else {
            lines.push(format!("{address} Ethernet controller: Some Vendor Device"));
        }
        if rng.chance(3) {
            lines.push("\tSubsystem: Some Vendor Device".into());
            lines.push("\tControl: I/O- Mem+ BusMaster+".into());
        }
        let mut device_rows = rows(&config);
        if rng.chance(3) && device_rows.len() > 4 {
            let gone = 4 + rng.below(device_rows.len() as u64 - 4) as usize;
            device_rows.remove(gone);
        }
        if rng.chance(4) {
            let at = rng.below(device_rows.len() as u64) as usize;
            let row = device_rows.remove(at);
            device_rows.push(row); // out of order
        }
        if rng.chance(6) && device_rows.len() > 5 {
            device_rows.insert(5, String::new()); // a blank line inside: the rest is ignored
        }
        if rng.chance(5) {
            device_rows.iter_mut().for_each(|r| r.push(' '));
        }
        lines.extend(device_rows);
        lines.push(String::new());
    }
    let ending = if rng.chance(4) { "\r\n" } else { "\n" };
    lines.iter().map(|l| format!("{l}{ending}")).collect()
}

fn output(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program} could not be run (lspci: Debian package pciutils, installed by .ci/run): {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    // lspci prints some registers' bytes raw (an Interrupt pin letter): not always UTF-8.
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines both tools print in lspci's words, per device, with capability headings reduced
/// to lspci's VirtIO names.
fn lspci_lines(text: &str) -> Vec<String> {
    const SHARED: [&str; 8] = ["Subsystem:", "Control:", "Status:", "Bus:", "I/O behind", "Memory behind", "Prefetchable memory behind", "!!! Unknown"];
    text.lines()
        .filter_map(|l| {
            if !l.starts_with('\t') && !l.is_empty() {
                return Some(l.to_string());
            }
            let t = l.trim_start_matches('\t');
            if l.starts_with("\t\t") {
                return None;
            }
            // Capability headings are compared on whole dumps in pci_lspci_differential; on
            // truncated ones lspci lists a capability whose body is cut off, pcieperf does not.
            if t.contains("VirtIO") {
                return Some(t.split(" Vendor").nth(1).unwrap_or("").to_string());
            }
            SHARED.iter().any(|p| t.starts_with(p)).then(|| t.to_string())
        })
        .collect()
}

#[test]
fn damaged_dumps_read_as_lspci_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let pcieperf = env!("CARGO_BIN_EXE_pcieperf");
    let mut rng = Rng(0xd0_5eed);
    for case in 0..60 {
        let text = damaged_dump(&mut rng);
        let path = dir.path().join(format!("case{case}.dump"));
        std::fs::write(&path, &text).unwrap();
        let file = path.to_str().unwrap();
        for hex in ["-x", "-xxx", "-xxxx"] {
            let theirs = output("lspci", &["-F", file, "-n", hex]);
            let ours = output(pcieperf, &["inspect", "-F", file, "-n", hex]);
            assert_eq!(ours, theirs, "case {case} {hex}: pcieperf differs from lspci on this dump:\n{text}");
        }
        let theirs = lspci_lines(&output("lspci", &["-F", file, "-n", "-vv"]));
        let ours = lspci_lines(&output(pcieperf, &["inspect", "-F", file, "-n", "-vv"]));
        assert_eq!(ours, theirs, "case {case} -vv: lspci's lines differ on this dump:\n{text}");
    }
}

#[test]
fn standard_input_is_a_dump_too() {
    let text = "01:00.0 Ethernet controller: X\n".to_string() + &rows(&[0x11; 64]).join("\n") + "\n";
    let out = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["inspect", "--dump", "-", "-n", "-x"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("01:00.0 1111: 1111:1111 (rev 11)\n{}\n", rows(&[0x11; 64]).join("\n") + "\n"));
}
