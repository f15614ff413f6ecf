//! `pcieperf inspect -F DUMP -vv` (and `-vvv`) against `lspci -F DUMP -vv`, line for line.
//!
//! Random functions — endpoints, legacy and root-complex-integrated endpoints, event
//! collectors, root ports, switch ports, PCI Express bridges, plain PCI devices — with random
//! header and capability registers (reserved encodings included), capability chains in random
//! order among those pcieperf decodes and some it names only, in 256- and 4096-byte spaces, are
//! written as lspci dumps (a few hundred functions per file: one lspci and one pcieperf process
//! each); the example dump and this machine's `lspci -xxxx` join them. pcieperf's own lines
//! (`pcieperf:`) are dropped, each device block is aligned with lspci's by a longest common
//! subsequence, and the share of identical lines must be at least 99.5 %, every differing line
//! matching an entry of [`EXPLAINED`] (summarised in docs/inspect.md). lspci is the oracle; CI
//! installs it (`.ci/run`).

#[path = "support/rng.rs"]
mod rng;

use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use pcieperf::pci::{dump, Bdf};
use rng::Rng;

/// Differences that remain, each a substring of the differing line and why it differs.
const EXPLAINED: &[(&str, &str)] = &[];

fn put(bytes: &mut [u8], at: usize, data: &[u8]) {
    bytes[at..at + data.len()].copy_from_slice(data);
}

fn put16(bytes: &mut [u8], at: usize, value: u16) {
    put(bytes, at, &value.to_le_bytes());
}

fn put32(bytes: &mut [u8], at: usize, value: u32) {
    put(bytes, at, &value.to_le_bytes());
}

/// What a random function is: its PCI Express Device/Port Type (`None`: plain PCI) and header.
#[derive(Clone, Copy)]
struct Kind {
    express: Option<u8>,
    bridge: bool,
}

const KINDS: &[Kind] = &[
    Kind { express: Some(0), bridge: false },
    Kind { express: Some(0), bridge: false },
    Kind { express: Some(1), bridge: false },
    Kind { express: Some(9), bridge: false },
    Kind { express: Some(10), bridge: false },
    Kind { express: Some(4), bridge: true },
    Kind { express: Some(4), bridge: true },
    Kind { express: Some(5), bridge: true },
    Kind { express: Some(6), bridge: true },
    Kind { express: Some(7), bridge: true },
    Kind { express: Some(8), bridge: true },
    Kind { express: None, bridge: false },
];

/// A random BAR set for `count` registers: empty, I/O, 32-bit or 64-bit memory, or junk.
fn bars(rng: &mut Rng, b: &mut [u8], count: usize) {
    let mut i = 0;
    while i < count {
        let at = 0x10 + 4 * i;
        match rng.below(6) {
            0 => {}
            1 => put32(b, at, rng.u32() & 0xffff_fffc | 1),
            2 => put32(b, at, rng.u32() & 0xffff_fff0 | if rng.chance(2) { 8 } else { 0 }),
            3 if i + 1 < count => {
                put32(b, at, rng.u32() & 0xffff_fff0 | 4 | if rng.chance(2) { 8 } else { 0 });
                put32(b, at + 4, if rng.chance(2) { 0 } else { rng.u32() & 0xff });
                i += 1;
            }
            _ => put32(b, at, if rng.chance(8) { u32::MAX } else { rng.u32() }),
        }
        i += 1;
    }
}

/// The PCI Express capability's registers for `kind`, random otherwise.
fn express(rng: &mut Rng, b: &mut [u8], at: usize, kind: u8) -> usize {
    let version: u16 = if rng.chance(6) { 1 } else { 2 };
    let slot = u16::from(rng.chance(2)) << 8;
    put16(b, at + 2, version | u16::from(kind) << 4 | slot | (rng.u16() & 0x3e00));
    for offset in (4..0x3c).step_by(2) {
        put16(b, at + offset, rng.u16());
    }
    // LnkCap/LnkSta: mostly valid speeds and widths, sometimes anything.
    if !rng.chance(4) {
        let cap = (1 + rng.below(6) as u32) | ([1u32, 2, 4, 8, 16][rng.below(5) as usize] << 4);
        put32(b, at + 0xc, rng.u32() & !0x3ff | cap);
        let sta = (1 + rng.below(6) as u16) | ([1u16, 2, 4, 8, 16][rng.below(5) as usize] << 4);
        put16(b, at + 0x12, rng.u16() & 0xfc00 | sta);
    }
    if rng.chance(5) {
        put32(b, at + 0x2c, 0);
    } else if rng.chance(2) {
        put32(b, at + 0x2c, rng.u32() & 0x8180_01fe);
    }
    if version == 1 { 0x24 } else { 0x3c }
}

/// A random standard capability body at `at` (its ID and link already written); its length.
fn capability(rng: &mut Rng, b: &mut [u8], at: usize, id: u8, kind: Kind) -> usize {
    match id {
        0x01 => {
            put16(b, at + 2, rng.u16());
            put16(b, at + 4, rng.u16());
            b[at + 6] = if rng.chance(2) { 0 } else { rng.u16() as u8 };
            b[at + 7] = rng.u16() as u8;
            8
        }
        0x05 => {
            put16(b, at + 2, rng.u16() & 0x01ff);
            for offset in (4..24).step_by(4) {
                put32(b, at + offset, rng.u32());
            }
            24
        }
        0x11 => {
            put16(b, at + 2, rng.u16());
            put32(b, at + 4, rng.u32());
            put32(b, at + 8, rng.u32());
            12
        }
        0x10 => express(rng, b, at, kind.express.unwrap_or(0)),
        0x09 => {
            let len = 3 + rng.below(12) as u8;
            b[at + 2] = len;
            for offset in 3..usize::from(len) {
                b[at + offset] = rng.u16() as u8;
            }
            usize::from(len.max(4))
        }
        0x0d => {
            put16(b, at + 4, rng.u16());
            put16(b, at + 6, rng.u16());
            8
        }
        _ => {
            put16(b, at + 2, rng.u16());
            4
        }
    }
}

/// One random function's configuration space.
fn random_config(rng: &mut Rng) -> Vec<u8> {
    let kind = KINDS[rng.below(KINDS.len() as u64) as usize];
    let size = if kind.express.is_some() && !rng.chance(4) { 4096 } else { 256 };
    let mut b = vec![0u8; size];
    put16(&mut b, 0, 0x1000 + rng.below(0xe000) as u16);
    put16(&mut b, 2, rng.u16());
    put16(&mut b, 4, rng.u16() & 0x07ff);
    put16(&mut b, 6, rng.u16() & 0xffe8 | 0x10);
    b[0x08] = if rng.chance(3) { 0 } else { rng.u16() as u8 };
    let class: u32 = if kind.bridge {
        if rng.chance(10) { 0x060401 } else { 0x060400 }
    } else {
        [0x020000, 0x010802, 0x030000, 0x0c0330, 0x088000, 0x120000][rng.below(6) as usize]
    };
    put(&mut b, 0x09, &class.to_le_bytes()[..3]);
    b[0x0c] = if rng.chance(2) { 0 } else { rng.u16() as u8 };
    b[0x0d] = if rng.chance(2) { 0 } else { rng.u16() as u8 };
    b[0x0e] = u8::from(kind.bridge) | if rng.chance(4) { 0x80 } else { 0 };
    b[0x0f] = if rng.chance(10) { rng.u16() as u8 } else { 0 };
    b[0x3c] = if rng.chance(3) { 0 } else { rng.u16() as u8 };
    b[0x3d] = rng.below(5) as u8;
    if kind.bridge {
        bars(rng, &mut b, 2);
        for byte in &mut b[0x18..0x30] {
            *byte = rng.u16() as u8;
        }
        // Window types mostly valid (16/32-bit I/O, 32/64-bit prefetchable).
        if !rng.chance(8) {
            let io = rng.below(2) as u8;
            b[0x1c] = b[0x1c] & 0xf0 | io;
            b[0x1d] = b[0x1d] & 0xf0 | io;
            b[0x20] &= 0xf0;
            b[0x22] &= 0xf0;
            let pref = rng.below(2) as u8;
            b[0x24] = b[0x24] & 0xf0 | pref;
            b[0x26] = b[0x26] & 0xf0 | pref;
        }
        put32(&mut b, 0x30, rng.u32());
        put32(&mut b, 0x38, if rng.chance(3) { rng.u32() } else { 0 });
        put16(&mut b, 0x3e, rng.u16() & 0x0fff);
    } else {
        bars(rng, &mut b, 6);
        put32(&mut b, 0x2c, if rng.chance(5) { 0 } else { rng.u32() });
        put32(&mut b, 0x30, if rng.chance(3) { rng.u32() } else { 0 });
        b[0x3e] = rng.u16() as u8;
        b[0x3f] = rng.u16() as u8;
    }
    // Capabilities in a random order: the ones pcieperf decodes and a few it names only.
    let mut ids: Vec<u8> = vec![0x01, 0x05, 0x11, 0x09];
    if kind.express.is_some() {
        ids.push(0x10);
    }
    if kind.bridge {
        ids.push(0x0d);
    }
    ids.push([0x0c, 0x0a, 0x04, 0x0f, 0x06, 0x16, 0x20][rng.below(7) as usize]);
    ids.retain(|&id| id == 0x10 || !rng.chance(3));
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i as u64 + 1) as usize);
    }
    if ids.is_empty() || rng.chance(20) {
        b[6] &= !0x10;
        return b;
    }
    let mut at = 0x40 + 4 * rng.below(4) as usize;
    b[0x34] = at as u8;
    for (i, &id) in ids.iter().enumerate() {
        b[at] = id;
        let len = capability(rng, &mut b, at, id, kind);
        let next = (at + len).div_ceil(4) * 4 + 4 * rng.below(3) as usize;
        let last = i + 1 == ids.len() || next + 0x3c > 0x100;
        b[at + 1] = if last { 0 } else { next as u8 };
        if last {
            break;
        }
        at = next;
    }
    if size == 4096 {
        extended(rng, &mut b);
    }
    b
}

/// Extended capabilities from 0x100: AER, Device Serial Number, ARI, LTR, Vendor-Specific
/// (decoded), Power Budgeting (lspci names it only) and an ID lspci does not know, in random order.
fn extended(rng: &mut Rng, b: &mut [u8]) {
    let mut ids: Vec<u16> = vec![0x0001, 0x0003, 0x000e, 0x0018, 0x000b, 0x0004, 0x0035 + rng.below(8) as u16];
    ids.retain(|&id| id == 0x0001 || !rng.chance(2));
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut at = 0x100;
    for (i, &id) in ids.iter().enumerate() {
        let next = at + 0x40 + 4 * rng.below(8) as usize;
        let link = if i + 1 == ids.len() { 0 } else { next as u32 };
        put32(b, at, u32::from(id) | (1 + rng.below(2) as u32) << 16 | link << 20);
        for offset in (4..0x40).step_by(4) {
            put32(b, at + offset, rng.u32());
        }
        at = next;
    }
}

fn lspci(dump_path: &std::path::Path, verbose: &str) -> Option<String> {
    // Names from the pci.ids file both read: lspci would also ask udev's hwdb, newer here.
    let output = Command::new("lspci").args(["-O", "hwdb.disable=1", "-F"]).arg(dump_path).arg(verbose).output().ok()?;
    assert!(output.status.success(), "lspci failed: {}", String::from_utf8_lossy(&output.stderr));
    Some(String::from_utf8(output.stdout).unwrap())
}

fn pcieperf(dump_path: &std::path::Path, verbose: &str) -> String {
    let output = Command::cargo_bin("pcieperf").unwrap().args(["inspect", "-F"]).arg(dump_path).arg(verbose).output().unwrap();
    assert!(output.status.success(), "pcieperf failed: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines().filter(|l| !l.trim_start().starts_with("pcieperf:")).map(|l| format!("{l}\n")).collect()
}

/// Blocks of lines, one per device (lspci ends each with a blank line).
fn blocks(text: &str) -> Vec<Vec<&str>> {
    text.split("\n\n").filter(|b| !b.trim().is_empty()).map(|b| b.lines().collect()).collect()
}

/// The longest common subsequence of two line lists, as the unmatched lines of each side.
fn unmatched<'a>(theirs: &[&'a str], ours: &[&'a str]) -> (usize, Vec<&'a str>, Vec<&'a str>) {
    let (n, m) = (theirs.len(), ours.len());
    let mut table = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            table[i][j] = if theirs[i] == ours[j] { table[i + 1][j + 1] + 1 } else { table[i + 1][j].max(table[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut same) = (0, 0, 0);
    let (mut only_theirs, mut only_ours) = (Vec::new(), Vec::new());
    while i < n && j < m {
        if theirs[i] == ours[j] {
            same += 1;
            i += 1;
            j += 1;
        } else if table[i + 1][j] >= table[i][j + 1] {
            only_theirs.push(theirs[i]);
            i += 1;
        } else {
            only_ours.push(ours[j]);
            j += 1;
        }
    }
    only_theirs.extend(&theirs[i..]);
    only_ours.extend(&ours[j..]);
    (same, only_theirs, only_ours)
}

/// Identical lines, lines compared, and the unexplained differences of one dump at one level.
#[derive(Default)]
struct Tally {
    identical: usize,
    lines: usize,
    unexplained: Vec<String>,
    /// lspci's text, to check that the random functions reached every kind of line.
    seen: String,
}

/// Lines every run must have compared: each register block and its reserved or rare forms.
const MUST_SEE: &[&str] = &[
    "\tLatency: ", "\tInterrupt: pin ", "\tBIST result: ", "I/O ports at ", "(64-bit, prefetchable)", "Expansion ROM at ", "[disabled]",
    "\tSecondary status: ", "\tBridgeCtl: ", "!!! Unknown", "Masking: ", "Vector table: ", "PBA: ", "Status: D", "Bridge: PM",
    "DevCap:\tMaxPayload", "SlotPowerLimit", "BrConfRtry", " FLReset", "(downgraded)", "(overdriven)", "Speed unknown",
    "SltCap:\t", "SltCtl:\t", "SltSta:\t", "RootCap: ", "RootCtl: ", "RootSta: ", "MaxEETLPPrefixes", "LN System CLS",
    "AtomicOpsCap: Routing", "ARIFwd", "LnkCap2: ", "Selectable De-emphasis", "DownstreamComp: ", "Compliance Preset/De-emphasis: Unknown",
    "UESta:\t", "AERCap:\t", "HeaderLog: ", "RootCmd: ", "ErrorSrc: ", "Device Serial Number ", "ARICap:\t", "Max snoop latency: ",
    "Power Budgeting <?>", "Extended Capability ID 0x", "Rev=",  "Vendor Specific Information", "Capability ID 0x", "Express (v1)",
    "Root Complex Integrated Endpoint", "Root Complex Event Collector", "PCI-Express to PCI/PCI-X Bridge", "Legacy Endpoint",
];

fn compare(dump_text: &str, verbose: &str, tally: &mut Tally) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("random.dump");
    std::fs::write(&path, dump_text).unwrap();
    let Some(theirs) = lspci(&path, verbose) else { return false };
    let ours = pcieperf(&path, verbose);
    tally.seen += &theirs;
    let (theirs, ours) = (blocks(&theirs), blocks(&ours));
    assert_eq!(theirs.len(), ours.len(), "device counts differ");
    for (t, o) in theirs.iter().zip(&ours) {
        let (same, only_theirs, only_ours) = unmatched(t, o);
        tally.identical += same;
        tally.lines += t.len().max(o.len());
        for (side, line) in only_theirs.iter().map(|l| ("lspci", l)).chain(only_ours.iter().map(|l| ("pcieperf", l))) {
            if !EXPLAINED.iter().any(|(pattern, _)| line.contains(pattern)) {
                tally.unexplained.push(format!("{}: {side}: {line}", t[0]));
            }
        }
    }
    true
}

fn random_dumps(seed: u64, files: u32, per_file: u32) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..files)
        .map(|file| {
            let devices: Vec<(Bdf, Vec<u8>)> = (0..per_file)
                .map(|i| {
                    let (device, function) = if rng.chance(2) { (0, 0) } else { (rng.below(32) as u8, rng.below(8) as u8) };
                    (Bdf::new(file, i as u8, device, function).unwrap(), random_config(&mut rng))
                })
                .collect();
            let refs: Vec<(Bdf, &[u8])> = devices.iter().map(|(b, c)| (*b, c.as_slice())).collect();
            dump::write(&refs)
        })
        .collect()
}

/// This machine's own configuration spaces, when lspci can read them all (as root).
fn live_dump() -> Option<String> {
    let output = Command::new("lspci").arg("-xxxx").output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    // Without root lspci shows 64 bytes per function: nothing beyond the header to compare.
    (output.status.success() && text.contains("\n100:")).then_some(text)
}

fn check(verbose: &str) {
    if Command::new("lspci").arg("--version").output().is_err() {
        println!("skipped: lspci (Debian package pciutils, installed by .ci/run) is not installed");
        return;
    }
    let mut dumps = random_dumps(0x1d5_0000 + verbose.len() as u64, 5, 250);
    dumps.push(std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gen3x8-nic-at-x4.lspci")).unwrap());
    match live_dump() {
        Some(live) => dumps.push(live),
        None => println!("skipped part: this machine's lspci -xxxx (not root, or no PCI devices)"),
    }
    let mut tally = Tally::default();
    for text in &dumps {
        assert!(compare(text, verbose, &mut tally));
    }
    let share = 100.0 * tally.identical as f64 / tally.lines as f64;
    println!("inspect {verbose} vs lspci {verbose}: {} of {} lines identical ({share:.3} %), {} dumps", tally.identical, tally.lines, dumps.len());
    let unseen: Vec<&&str> = MUST_SEE.iter().filter(|line| !tally.seen.contains(**line)).collect();
    assert!(unseen.is_empty(), "the random functions never produced {unseen:?}");
    tally.unexplained.truncate(40);
    assert!(tally.unexplained.is_empty(), "unexplained differences:\n{}", tally.unexplained.join("\n"));
    assert!(share >= 99.5, "only {share:.3} % of lines identical");
}

#[test]
fn vv_is_lspci_line_for_line() {
    check("-vv");
}

#[test]
fn vvv_is_lspci_line_for_line() {
    check("-vvv");
}

/// lspci's bus-centric view (-b: addresses and IRQ from the card's registers) is what pcieperf
/// always prints.
#[test]
fn vvb_is_lspci_line_for_line() {
    check("-vvb");
}

#[test]
fn the_comparison_sees_a_changed_line() {
    let (same, theirs, ours) = unmatched(&["a", "b", "c"], &["a", "x", "c", "d"]);
    assert_eq!((same, theirs, ours), (2, vec!["b"], vec!["x", "d"]));
}

/// A live `-x`/`-xxx`/`-xxxx` shows as many bytes as lspci's, also of functions without a
/// capability list (lspci reads 256 bytes for `-xxx` whatever the header says, and for `-xxxx`
/// as many as the kernel gives); `-vv` (the kernel's regions and IRQ) and the bus-centric
/// `-vvb` (the registers') are lspci's line for line.
#[test]
fn live_hex_dumps_are_lspci_byte_for_byte() {
    let Some(live) = live_dump() else {
        println!("skipped: this machine's configuration spaces are not readable whole (not root, or no lspci)");
        return;
    };
    assert!(live.contains("\n40:"));
    for level in ["-x", "-xxx", "-xxxx", "-k", "-vv", "-vvb"] {
        let output = Command::new("lspci").args(["-O", "hwdb.disable=1", level]).output().unwrap().stdout;
        // `Kernel modules:` lines included: pcieperf reads modules.alias as libkmod does.
        let theirs = String::from_utf8_lossy(&output).into_owned();
        let ours = Command::cargo_bin("pcieperf").unwrap().args(["inspect", level]).output().unwrap();
        assert!(ours.status.success());
        let ours: String = String::from_utf8_lossy(&ours.stdout).lines().filter(|l| !l.contains("\tpcieperf:")).map(|l| format!("{l}\n")).collect();
        assert_eq!(ours, theirs, "{level}");
    }
}
