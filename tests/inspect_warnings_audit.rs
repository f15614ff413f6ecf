//! The findings audit for `inspect`'s warnings (docs/findings.md): the kinds that no other
//! inspect test shows both ways, each on a fake sysfs tree where it must fire and the same tree
//! without the condition, where it must stay silent.

#[path = "data/pci/fixture.rs"]
mod fixture;

use fixture::{config, Pcie, Tree, ENDPOINT, ROOT_PORT};
use pcieperf::pci::{inspect_device, DeviceReport, InspectOptions, Source};

/// A Gen3 x4 endpoint below a Gen3 x4 root port, healthy unless `change` makes it otherwise;
/// `vendor`, the endpoint's config bytes and its sysfs attributes are the scenario.
fn endpoint(vendor: u16, change: impl Fn(&mut Pcie), edit_bytes: impl Fn(&mut Vec<u8>), attributes: &[(&str, &str)]) -> DeviceReport {
    let tree = Tree::new();
    tree.add(&["0000:00:01.0"], &config(0x8086, 0x1901, &Pcie::new(ROOT_PORT, 3, 4).bridge(0, 1, 1), 0), &[]);
    let mut pcie = Pcie::new(ENDPOINT, 3, 4);
    change(&mut pcie);
    let mut bytes = config(vendor, 0x7038, &pcie, 0);
    edit_bytes(&mut bytes);
    tree.add(&["0000:00:01.0", "0000:01:00.0"], &bytes, attributes);
    let options = InspectOptions { source: Source::Sysfs(tree.root().to_path_buf()), pci_ids: Some("/nonexistent".into()), selector: None, ids: None };
    inspect_device(&"0000:01:00.0".parse().unwrap(), &options).unwrap()
}

fn healthy() -> DeviceReport {
    endpoint(0x10ee, |_| {}, |_| {}, &[])
}

fn codes(report: &DeviceReport) -> Vec<&'static str> {
    report.warnings.iter().map(|w| w.code).collect()
}

#[test]
fn the_healthy_endpoint_has_no_warning() {
    assert!(healthy().warnings.is_empty(), "{:?}", healthy().warnings);
}

#[test]
fn a_reserved_max_payload_is_named_only_when_devctl_holds_one() {
    assert!(!codes(&healthy()).contains(&"max_payload_reserved"));
    let reserved = endpoint(0x10ee, |p| p.mps = 6, |_| {}, &[]);
    assert!(codes(&reserved).contains(&"max_payload_reserved"), "{:?}", reserved.warnings);
    assert!(!codes(&reserved).contains(&"max_payload_below_supported"), "a reserved value is not compared with the path's");
}

#[test]
fn relaxed_ordering_disabled_fires_only_for_an_endpoint_without_it() {
    assert!(!codes(&healthy()).contains(&"relaxed_ordering_disabled"));
    let without = endpoint(0x10ee, |p| p.relaxed_ordering = false, |_| {}, &[]);
    assert_eq!(codes(&without), ["relaxed_ordering_disabled"], "{:?}", without.warnings);
}

#[test]
fn uncorrectable_errors_fire_only_when_counted_or_unmasked() {
    let zero = [("aer_dev_correctable", "TOTAL_ERR_COR 0"), ("aer_dev_fatal", "TOTAL_ERR_FATAL 0"), ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 0")];
    let quiet = endpoint(0x10ee, |_| {}, |_| {}, &zero);
    assert!(quiet.warnings.is_empty(), "{:?}", quiet.warnings);
    let counted = [("aer_dev_correctable", "TOTAL_ERR_COR 0"), ("aer_dev_fatal", "TOTAL_ERR_FATAL 0"), ("aer_dev_nonfatal", "CmpltTO 2\nTOTAL_ERR_NONFATAL 2")];
    let found = endpoint(0x10ee, |_| {}, |_| {}, &counted);
    assert_eq!(codes(&found), ["aer_uncorrectable_errors"], "{:?}", found.warnings);
    assert!(found.warnings[0].message.starts_with("2 uncorrectable errors counted"), "{}", found.warnings[0].message);
    // Uncorrectable Error Status (AER + 0x04), Completion Timeout (bit 14) set and not masked.
    let status = endpoint(0x10ee, |_| {}, |b| b[0x104..0x108].copy_from_slice(&(1u32 << 14).to_le_bytes()), &[]);
    assert_eq!(codes(&status), ["aer_uncorrectable_errors"], "{:?}", status.warnings);
    // The same bit masked (Uncorrectable Error Mask, AER + 0x08): the device reports nothing.
    let masked = endpoint(
        0x10ee,
        |_| {},
        |b| {
            b[0x104..0x108].copy_from_slice(&(1u32 << 14).to_le_bytes());
            b[0x108..0x10c].copy_from_slice(&(1u32 << 14).to_le_bytes());
        },
        &[],
    );
    assert!(masked.warnings.is_empty(), "{:?}", masked.warnings);
}

#[test]
fn an_emulated_device_is_named_by_its_hypervisor_ids_only() {
    assert!(!codes(&healthy()).contains(&"emulated_device"));
    let qemu = endpoint(0x1b36, |_| {}, |_| {}, &[]);
    assert_eq!(codes(&qemu), ["emulated_device"], "{:?}", qemu.warnings);
    assert!(qemu.emulated_by.as_deref().is_some_and(|e| e.contains("0x1b36")), "{:?}", qemu.emulated_by);
}

#[test]
fn a_capability_list_that_loops_is_named_and_a_sound_one_is_not() {
    assert!(!codes(&healthy()).contains(&"capability_list_corrupt"));
    // The PCI Express capability at 0x40 points back to itself.
    let looped = endpoint(0x10ee, |_| {}, |b| b[0x41] = 0x40, &[]);
    let corrupt: Vec<_> = looped.warnings.iter().filter(|w| w.code == "capability_list_corrupt").collect();
    assert_eq!(corrupt.len(), 1, "{:?}", looped.warnings);
    assert!(corrupt[0].message.contains("loops back to 0x40"), "{}", corrupt[0].message);
    // An unprivileged read stops at 64 bytes: the list is unavailable, not corrupt.
    let short = endpoint(0x10ee, |_| {}, |b| b.truncate(64), &[]);
    assert!(!codes(&short).contains(&"capability_list_corrupt"), "{:?}", short.warnings);
}
