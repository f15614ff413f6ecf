//! On a live machine lspci prints the kernel's view of a function: its regions from sysfs
//! `resource` (with `[virtual]` and `<ignored>` read off the registers) and its IRQ from sysfs
//! `irq`, not the registers a dump holds. The functions here are a Firecracker guest's with an
//! NVIDIA H100, captured from the machine's sysfs on 2026-11-27 (its serial number zeroed): there
//! BAR 1 holds the upper half of BAR 0 (lspci prints it from a dump, not live) and the GPU's
//! Interrupt Line reads 255 where the kernel routed IRQ 41. Both tools read the same tree.

use std::path::Path;
use std::process::Command;

#[path = "data/pci/fixture.rs"]
mod fixture;
#[path = "support/oracle.rs"]
mod oracle;

const CAPTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pci/firecracker-h100");
const ATTRIBUTES: &[&str] = &[
    "resource", "irq", "vendor", "device", "class", "revision", "subsystem_vendor", "subsystem_device", "numa_node",
    "current_link_speed", "current_link_width", "max_link_speed", "max_link_width",
];

/// The captured functions as a sysfs tree (all on the root bus, as in the guest).
fn captured_tree() -> fixture::Tree {
    let tree = fixture::Tree::new();
    let mut functions: Vec<_> = std::fs::read_dir(CAPTURE).unwrap().map(|e| e.unwrap().path()).collect();
    functions.sort();
    for dir in functions {
        let bdf = dir.file_name().unwrap().to_str().unwrap().to_string();
        let config = std::fs::read(dir.join("config")).unwrap();
        let attributes: Vec<(&str, String)> = ATTRIBUTES
            .iter()
            .filter_map(|name| std::fs::read_to_string(dir.join(name)).ok().map(|text| (*name, text.trim_end().to_string())))
            .collect();
        let attributes: Vec<(&str, &str)> = attributes.iter().map(|(name, text)| (*name, text.as_str())).collect();
        tree.add(&[&bdf], &config, &attributes);
    }
    tree
}

fn lspci(root: &Path, verbose: &str) -> String {
    let sysfs = format!("sysfs.path={}/bus/pci", root.display());
    let output = Command::new("lspci").args(["-A", "linux-sysfs", "-O", &sysfs, "-O", "hwdb.disable=1", verbose]).output().unwrap();
    assert!(output.status.success(), "lspci: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn pcieperf(root: &Path, verbose: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pcieperf")).args(["inspect", "--sysfs-root", root.to_str().unwrap(), verbose]).output().unwrap();
    assert!(output.status.success(), "pcieperf: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().filter(|l| !l.contains("\tpcieperf:")).map(|l| format!("{l}\n")).collect()
}

#[test]
fn a_live_machine_shows_the_kernels_regions_and_irq_as_lspci_does() {
    let Some(_) = oracle::lspci_or_skip("a_live_machine_shows_the_kernels_regions_and_irq_as_lspci_does") else { return };
    let tree = captured_tree();
    for verbose in ["-v", "-vv", "-vvv", "-vvb"] {
        let theirs = lspci(tree.root(), verbose);
        assert_eq!(pcieperf(tree.root(), verbose), theirs, "{verbose}");
        if verbose == "-vv" {
            // What this case is about, so a change of lspci's output cannot hide it.
            assert!(theirs.contains("\tInterrupt: pin A routed to IRQ 41\n") && !theirs.contains("Region 1: Memory at <unassigned>"), "{theirs}");
            assert!(theirs.contains("Region 0: Memory at 102002000000 (64-bit, prefetchable) [size=16M]"), "{theirs}");
            assert!(theirs.contains("[2a4 v1] Vendor Specific Information: ID=0001 Rev=1 Len=014 <?>"), "{theirs}");
        }
    }
}
