//! Capability headings on dumps that do not hold the whole list, as lspci (pciutils 3.9)
//! prints them: 64-byte dumps of devices with capabilities (`Capabilities: <access denied>`),
//! other lengths that cut a capability off, pointers past the end, into the header or to
//! themselves (`<chain looped>`), an ID of ff (`<chain broken>`), extended lists that loop or
//! point below 0x100, at `-v` (`[100]`) and `-vv` (`[100 v1]`). Every `Capabilities:` line of
//! `pcieperf inspect -F DUMP -v/-vv` must equal lspci's on the same file.

use std::path::Path;

#[path = "support/oracle.rs"]
mod oracle;
#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// Capabilities pcieperf names as lspci does (decoded: PM, MSI, PCI Express, MSI-X,
/// vendor-specific, Subsystem ID; named from the upper word: Null, Slot ID, hot-swap, Debug
/// port, CompactPCI CRC, Hot-plug, AGP3, Secure; unknown IDs). lspci's decoders of AGP, VPD,
/// PCI-X, HyperTransport, SATA, AF and EA are not matched by pcieperf.
const IDS: [u8; 16] = [0x01, 0x05, 0x10, 0x11, 0x09, 0x0d, 0x00, 0x04, 0x06, 0x0a, 0x0b, 0x0c, 0x0e, 0x0f, 0x15, 0xc3];
/// Header offsets a bad pointer of the standard list (of the extended list) may reach without
/// changing what the header says about the list.
const HEADER_TARGETS: [u8; 5] = [0x10, 0x14, 0x18, 0x1c, 0x20];
const EXT_HEADER_TARGETS: [u8; 4] = [0x24, 0x28, 0x2c, 0x30];

fn put(b: &mut [u8], at: usize, data: &[u8]) {
    if at + data.len() <= b.len() {
        b[at..at + data.len()].copy_from_slice(data);
    }
}

/// A chain of 1–5 capabilities at random aligned offsets; its last pointer sometimes goes
/// somewhere odd (past the end, into the header, back to the start, to an ff byte).
fn standard_list(rng: &mut Rng, b: &mut [u8], len: usize) {
    let count = 1 + rng.below(5) as usize;
    let mut offsets: Vec<usize> = (0..count).map(|_| 0x40 + 4 * rng.below(0x2f) as usize).collect();
    offsets.dedup();
    let cut_ssvid = len < 256 && rng.chance(3);
    if cut_ssvid {
        offsets.insert(0, len - 4); // a Subsystem ID capability whose IDs are cut off
    }
    b[0x34] = offsets[0] as u8;
    for (i, &at) in offsets.iter().enumerate() {
        let next = offsets.get(i + 1).copied().unwrap_or(0);
        put(b, at, &[IDS[rng.below(IDS.len() as u64) as usize], next as u8]);
    }
    if cut_ssvid {
        b[len - 4] = 0x0d;
    }
    let last = *offsets.last().unwrap();
    let odd = match rng.below(6) {
        0 => {
            // Past a short dump; in a longer one, a last entry.
            let target = 0xf0 + 4 * rng.below(4) as usize;
            put(b, target, &[IDS[rng.below(IDS.len() as u64) as usize], 0]);
            target as u8
        }
        1 => {
            // Into the header, where lspci reads a capability too.
            let target = HEADER_TARGETS[rng.below(HEADER_TARGETS.len() as u64) as usize];
            put(b, usize::from(target), &[IDS[rng.below(IDS.len() as u64) as usize], [0, offsets[0] as u8][rng.below(2) as usize]]);
            target
        }
        2 => offsets[0] as u8, // a loop
        _ => 0,
    };
    put(b, last + 1, &[odd]);
    if rng.chance(8) {
        put(b, offsets[rng.below(offsets.len() as u64) as usize], &[0xff]); // chain broken
    }
}

/// Extended capabilities named as lspci names them: AER, ones lspci lists as `<?>`, and IDs it
/// does not know.
const EXT_IDS: [u32; 8] = [0x0001, 0x0004, 0x0016, 0x0029, 0x000c, 0x002a, 0x0030, 0xbeef];

fn extended_header(rng: &mut Rng, next: u32) -> [u8; 4] {
    (EXT_IDS[rng.below(EXT_IDS.len() as u64) as usize] | (1 + rng.below(2) as u32) << 16 | next << 20).to_le_bytes()
}

/// An extended list at 0x100 (the rest of the space cleared) of 1–4 entries whose last points
/// nowhere, back, or into the header (where lspci reads an entry too).
fn extended_list(rng: &mut Rng, b: &mut [u8]) {
    b[0x100..].fill(0);
    let mut at = 0x100;
    for _ in 0..1 + rng.below(4) {
        let next: u32 = match rng.below(5) {
            0 => 0x100,
            1 => {
                let target = EXT_HEADER_TARGETS[rng.below(EXT_HEADER_TARGETS.len() as u64) as usize];
                let back = [0, 0x100][rng.below(2) as usize];
                let header = extended_header(rng, back);
                put(b, usize::from(target), &header);
                u32::from(target)
            }
            2 => 0,
            _ => 0x104 + 4 * rng.below(0x3c0) as u32,
        };
        let header = extended_header(rng, next);
        put(b, at, &header);
        if next < 0x104 {
            break;
        }
        at = next as usize;
    }
}

fn random_function(rng: &mut Rng) -> Vec<u8> {
    let len = [64, 64, 128, 200, 256, 256, 4096][rng.below(7) as usize];
    let mut b: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    b[0x0e] = if rng.chance(4) { 1 } else { 0 };
    b[0x06] |= 0x10;
    standard_list(rng, &mut b, len);
    // A PCI Express capability at 0x40 makes lspci walk the extended list.
    if rng.chance(2) {
        put(&mut b, 0x40, &[0x10]);
        put(&mut b, 0x42, &[0x02, 0x00]);
    }
    extended_list(rng, &mut b);
    b.truncate(len);
    b
}

fn headings(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("\tCapabilities:") || l.starts_with(|c: char| c.is_ascii_hexdigit())).collect()
}

#[test]
fn headings_of_cut_and_broken_lists_as_lspci() {
    let Some(_) = oracle::lspci_or_skip("headings_of_cut_and_broken_lists_as_lspci") else { return };
    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("pci.ids");
    std::fs::write(&ids, "").unwrap();
    let mut rng = Rng(0xcab5_5eed);
    let mut seen = std::collections::BTreeMap::new();
    for case in 0..80 {
        let devices: Vec<(String, Vec<u8>)> = (0..6u8).map(|slot| (format!("{case:02x}:{slot:02x}.0"), random_function(&mut rng))).collect();
        let dump = dir.path().join(format!("caps{case}.dump"));
        std::fs::write(&dump, oracle::dump_text(&devices)).unwrap();
        for args in [&["-v"][..], &["-vv"]] {
            let theirs = compare(&dump, &ids, args, case);
            for (kind, _) in KINDS.iter().filter(|(_, found)| found(&theirs)) {
                *seen.entry(*kind).or_insert(0) += 1;
            }
        }
    }
    // The cases this test exists for did occur.
    assert_eq!(seen.len(), KINDS.len(), "lines seen: {seen:?}");
}

/// lspci's lines for lists it could not follow, a heading run into the next, and entries in
/// the header read through a bad pointer.
const KINDS: [(&str, fn(&str) -> bool); 6] = [
    ("access denied", |t| t.contains("Capabilities: <access denied>")),
    ("looped", |t| t.contains("<chain looped>")),
    ("broken", |t| t.contains("<chain broken>")),
    ("run into the next", |t| t.contains("] \tCapabilities:")),
    ("standard entry in the header", |t| ["10", "14", "18", "1c", "20"].iter().any(|o| t.contains(&format!("Capabilities: [{o}] ")))),
    ("extended entry in the header", |t| ["024", "028", "02c", "030"].iter().any(|o| t.contains(&format!("Capabilities: [{o}")))),
];

fn compare(dump: &Path, ids: &Path, args: &[&str], case: usize) -> String {
    let theirs = oracle::lspci(dump, ids, args);
    let ours = oracle::pcieperf(dump, ids, args);
    assert_eq!(headings(&ours), headings(&theirs), "case {case} {args:?}: capability headings differ from lspci's on this dump:\n{}", std::fs::read_to_string(dump).unwrap());
    theirs
}
