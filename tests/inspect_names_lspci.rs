//! Names as lspci (pciutils 3.9) prints them: the `Subsystem:` line from pci.ids' subsystem
//! entries (two tabs under a device), with lspci's fallbacks (`Vendor Device [ssvid:ssid]`,
//! `Device ssvid:ssid`, the device's own name when the subsystem repeats its IDs), for bridges
//! too (Subsystem ID capability), under `-v`, `-vv -nn` and `-v -n`; and the device line. The
//! IDs are sampled from the installed pci.ids (and a small generated one with edge cases); both
//! tools read the same file, lspci with udev's hwdb off.

use std::collections::BTreeSet;
use std::path::Path;

#[path = "support/oracle.rs"]
mod oracle;
#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// (vendor, device, subsystem vendor, subsystem) entries of a pci.ids text, and its vendors.
fn subsystem_entries(text: &str) -> (Vec<[u16; 4]>, BTreeSet<u16>) {
    let hex = |s: &str| u16::from_str_radix(s.get(..4)?, 16).ok();
    let (mut entries, mut vendors, mut vendor, mut device) = (Vec::new(), BTreeSet::new(), None, None);
    for line in text.lines().take_while(|l| !l.starts_with("C ")) {
        if let Some(sub) = line.strip_prefix("\t\t") {
            if let (Some(v), Some(d), Some(sv), Some(sd)) = (vendor, device, hex(sub), sub.get(5..).and_then(hex)) {
                entries.push([v, d, sv, sd]);
            }
        } else if let Some(dev) = line.strip_prefix('\t') {
            device = hex(dev);
        } else if !line.starts_with('#') {
            vendor = hex(line);
            vendors.extend(vendor);
            device = None;
        }
    }
    (entries, vendors)
}

/// A function with these IDs: a type 0 header, or a bridge with a Subsystem ID capability.
fn function(rng: &mut Rng, [vendor, device, sub_vendor, sub_device]: [u16; 4]) -> Vec<u8> {
    let mut b = vec![0u8; 256];
    let le = |x: u16| x.to_le_bytes();
    b[0..2].copy_from_slice(&le(vendor));
    b[2..4].copy_from_slice(&le(device));
    b[0x08] = rng.below(3) as u8;
    if rng.chance(4) {
        b[0x0a..0x0c].copy_from_slice(&[0x04, 0x06]);
        b[0x0e] = 1;
        b[0x06] = 0x10;
        b[0x34] = 0x40;
        b[0x40] = 0x0d;
        b[0x44..0x46].copy_from_slice(&le(sub_vendor));
        b[0x46..0x48].copy_from_slice(&le(sub_device));
    } else {
        b[0x0a..0x0c].copy_from_slice(&[0x00, 0x02]);
        b[0x2c..0x2e].copy_from_slice(&le(sub_vendor));
        b[0x2e..0x30].copy_from_slice(&le(sub_device));
    }
    b
}

/// Known entries and the ways a subsystem can miss: another subsystem ID, a vendor pci.ids
/// does not list, the device's own IDs, no subsystem (0 and ffff).
fn variant(rng: &mut Rng, entry: [u16; 4], vendors: &BTreeSet<u16>) -> [u16; 4] {
    let [v, d, sv, sd] = entry;
    let unknown_vendor = (0x0001..).find(|x| !vendors.contains(x) && rng.chance(3)).unwrap_or(0x0001);
    match rng.below(8) {
        0 => [v, d, sv, sd.wrapping_add(1 + rng.below(7) as u16)],
        1 => [v, d, unknown_vendor, sd],
        2 => [v, d, v, d],
        3 => [v, d, [0, 0xffff][rng.below(2) as usize], sd],
        4 => [v, d.wrapping_add(1), sv, sd],
        _ => entry,
    }
}

/// Device lines and `Subsystem:` lines, the lines that carry names.
fn named_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| (!l.starts_with('\t') && !l.is_empty()) || l.starts_with("\tSubsystem:")).collect()
}

fn compare(ids: &Path, entries: &[[u16; 4]], vendors: &BTreeSet<u16>, rng: &mut Rng, dir: &Path) {
    for case in 0..10 {
        let devices: Vec<(String, Vec<u8>)> = (0..20u8)
            .map(|slot| {
                let known = entries[rng.below(entries.len() as u64) as usize];
                let entry = variant(rng, known, vendors);
                (format!("{:02x}:{:02x}.0", case, slot), function(rng, entry))
            })
            .collect();
        let dump = dir.join(format!("names{case}.dump"));
        std::fs::write(&dump, oracle::dump_text(&devices)).unwrap();
        for args in [&["-v"][..], &["-vv", "-nn"], &["-v", "-n"]] {
            let theirs = oracle::lspci(&dump, ids, args);
            let ours = oracle::pcieperf(&dump, ids, args);
            assert_eq!(named_lines(&ours), named_lines(&theirs), "{} {args:?}: names differ from lspci's on this dump:\n{}", ids.display(), std::fs::read_to_string(&dump).unwrap());
        }
    }
}

#[test]
fn subsystem_names_as_lspci_prints_them() {
    let Some(_) = oracle::lspci_or_skip("subsystem_names_as_lspci_prints_them") else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5ab5_5eed);
    // Edge cases lspci's parser accepts: a tab between the IDs, a subsystem vendor listed after
    // the device, a device without subsystems.
    let generated = dir.path().join("pci.ids");
    std::fs::write(&generated, "1af4  Red Hat, Inc.\n\t1000  Virtio network device\n\t\t1af4 0001  Virtio network device (subsystem)\n\t\t1234\t0002  Tabbed\n\t1001  Virtio block device\n1234  Later Vendor\n\t0003  A device\n").unwrap();
    let (entries, vendors) = subsystem_entries(&std::fs::read_to_string(&generated).unwrap());
    compare(&generated, &entries, &vendors, &mut rng, dir.path());
    let installed = ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"].into_iter().map(Path::new).find(|p| p.exists());
    let Some(installed) = installed else {
        eprintln!("subsystem_names_as_lspci_prints_them: installed pci.ids part SKIPPED: no pci.ids installed (Debian package pci.ids)");
        return;
    };
    let (entries, vendors) = subsystem_entries(&std::fs::read_to_string(installed).unwrap());
    assert!(entries.len() > 1000, "{} lists only {} subsystems", installed.display(), entries.len());
    compare(installed, &entries, &vendors, &mut rng, dir.path());
}
