//! `pcieperf inspect` on fake sysfs trees: the path to the root, the kernel's bandwidth line,
//! warnings with causes, the model ceiling, unprivileged reads and devices that vanish.

#[path = "data/pci/fixture.rs"]
mod fixture;

use fixture::{config, Pcie, Tree, DOWNSTREAM, ENDPOINT, ROOT_PORT, UPSTREAM};
use pcieperf::model::{read_throughput, write_throughput, Link, LinkParams};
use pcieperf::pci::{inspect, inspect_device, inspect_machine, InspectOptions, Source};

fn options(tree: &Tree) -> InspectOptions {
    InspectOptions { source: Source::Sysfs(tree.root().to_path_buf()), pci_ids: Some("/nonexistent".into()), selector: None, ids: None }
}

fn codes(report: &pcieperf::pci::DeviceReport) -> Vec<&'static str> {
    report.warnings.iter().map(|w| w.code).collect()
}

/// A Gen4 x16 GPU in a slot wired x8.
fn gpu_in_x8_slot() -> Tree {
    let tree = Tree::new();
    tree.add(&["0000:00:01.0"], &config(0x8086, 0x1901, &Pcie::new(ROOT_PORT, 4, 8).bridge(0, 1, 1), 0), &[]);
    let gpu = Pcie::new(ENDPOINT, 4, 16).trained(4, 8);
    tree.add(&["0000:00:01.0", "0000:01:00.0"], &config(0x10de, 0x2204, &gpu, 0), &[("numa_node", "0")]);
    tree
}

#[test]
fn narrow_slot_is_named_with_the_kernel_wording() {
    let tree = gpu_in_x8_slot();
    let gpu = inspect_device(&"0000:01:00.0".parse().unwrap(), &options(&tree)).unwrap();
    assert_eq!(gpu.path.len(), 1);
    assert_eq!(gpu.path[0].bdf.to_string(), "0000:00:01.0");
    assert_eq!(
        gpu.bandwidth.as_ref().unwrap().message,
        "126.024 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x8 link at 0000:00:01.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)"
    );
    assert_eq!(codes(&gpu), vec!["link_width_below_capability"]);
    assert!(gpu.warnings[0].message.contains("the other end (0000:00:01.0) has only x8"), "{}", gpu.warnings[0].message);
    // The ceiling halves: the model at 4 MiB, MPS 256, MRRS 512 for Gen4 x8 and Gen4 x16.
    let ceiling = gpu.ceiling.unwrap();
    let model = |link: &str| write_throughput(&LinkParams::typical(link.parse::<Link>().unwrap()), 4 << 20).mbps;
    assert_eq!(ceiling.trained.as_ref().unwrap().write_mbps, model("gen4x8"));
    assert_eq!(ceiling.capable.as_ref().unwrap().write_mbps, model("gen4x16"));
    // Reads: ExtTag is enabled in the fixture, so 256 tags; completions split at the port's RCB.
    assert_eq!((ceiling.tags, ceiling.read_completion_boundary_bytes), (256, 64));
    let read = read_throughput(&LinkParams { tags: 256, ..LinkParams::typical("gen4x8".parse().unwrap()) }, 4 << 20).mbps;
    assert_eq!(ceiling.trained.as_ref().unwrap().read_mbps, read);
    assert!((ceiling.capable.unwrap().write_mbps / ceiling.trained.unwrap().write_mbps - 2.0).abs() < 1e-9);
    assert_eq!(gpu.numa_node, Some(0));
}

/// Root port → switch → endpoint trained at Gen1 with small payloads, ASPM and errors.
fn degraded_behind_switch() -> Tree {
    let tree = Tree::new();
    let chain = ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"];
    tree.add(&chain[..1], &config(0x8086, 1, &Pcie::new(ROOT_PORT, 3, 16).bridge(0, 1, 3), 0), &[]);
    tree.add(&chain[..2], &config(0x10b5, 2, &Pcie::new(UPSTREAM, 3, 16).bridge(1, 2, 3), 0), &[]);
    tree.add(&chain[..3], &config(0x10b5, 3, &Pcie::new(DOWNSTREAM, 3, 4).trained(1, 4).bridge(2, 3, 3), 0), &[]);
    let mut fpga = Pcie::new(ENDPOINT, 3, 4).trained(1, 4);
    fpga.mps = 0;
    fpga.mrrs = 0;
    fpga.aspm_control = 2;
    let aer = "RxErr 7\nBadTLP 2\nTOTAL_ERR_COR 9";
    tree.add(&chain, &config(0x10ee, 0x7038, &fpga, 1), &[("aer_dev_correctable", aer), ("aer_dev_fatal", "TOTAL_ERR_FATAL 0"), ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 0")]);
    tree
}

#[test]
fn every_cause_is_named_behind_a_switch() {
    let tree = degraded_behind_switch();
    let reports = inspect_machine(&options(&tree)).unwrap();
    assert_eq!(reports.len(), 4);
    let fpga = &reports[3];
    assert_eq!(fpga.path.iter().map(|h| h.bdf.to_string()).collect::<Vec<_>>(), ["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"]);
    assert_eq!(
        fpga.bandwidth.as_ref().unwrap().message,
        "8.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x4 link at 0000:02:00.0 (capable of 31.504 Gb/s with 8.0 GT/s PCIe x4 link)"
    );
    let codes = codes(fpga);
    for expected in ["link_speed_below_capability", "max_payload_below_supported", "max_read_request_small", "aspm_enabled", "aer_correctable_errors"] {
        assert!(codes.contains(&expected), "{expected} missing from {codes:?}");
    }
    let speed = &fpga.warnings.iter().find(|w| w.code == "link_speed_below_capability").unwrap().message;
    assert!(speed.contains("both ends support 8GT/s"), "{speed}");
    assert_eq!(fpga.aer.status.as_ref().expect("extended space read for a PCIe device").correctable_errors, vec!["RxErr"]);
    let aer = &fpga.warnings.iter().find(|w| w.code == "aer_correctable_errors").unwrap().message;
    assert!(aer.starts_with("9 correctable errors"), "{aer}");
    assert_eq!((fpga.max_payload_bytes, fpga.path_max_payload_supported_bytes, fpga.max_read_request_bytes), (Some(128), Some(256), Some(128)));
    // Ports do not repeat their child's link warning, and the healthy ones have none.
    assert!(reports[..3].iter().all(|r| r.warnings.is_empty()), "{:?}", reports[..3].iter().map(|r| &r.warnings).collect::<Vec<_>>());
    // The ceiling uses the MPS and MRRS the device is configured with.
    let ceiling = fpga.ceiling.as_ref().unwrap();
    assert_eq!((ceiling.max_payload_bytes, ceiling.max_read_request_bytes), (128, 128));
    assert_eq!(ceiling.trained.as_ref().unwrap().link, "Gen1 x4");
}

#[test]
fn unprivileged_reads_fall_back_to_sysfs_and_say_root_is_needed() {
    let tree = Tree::new();
    let full = config(0x10ee, 0x9038, &Pcie::new(ENDPOINT, 4, 16).trained(3, 4), 0);
    let attributes = [
        ("current_link_speed", "8.0 GT/s PCIe"),
        ("current_link_width", "4"),
        ("max_link_speed", "16.0 GT/s PCIe"),
        ("max_link_width", "16"),
    ];
    tree.add(&["0000:00:02.0"], &full[..64], &attributes);
    let report = &inspect_machine(&options(&tree)).unwrap()[0];
    assert_eq!((report.link_status.speed_gts, report.link_status.width, report.link_status.source), (Some(8.0), Some(4), "sysfs"));
    assert_eq!((report.link_capable.speed_gts, report.link_capable.width), (Some(16.0), Some(16)));
    assert_eq!(report.max_payload_bytes, None);
    assert!(report.unavailable.iter().any(|u| u.contains("MaxPayload") && u.contains("root")), "{:?}", report.unavailable);
    let codes = codes(report);
    assert!(codes.contains(&"link_speed_below_capability") && codes.contains(&"link_width_below_capability"), "{codes:?}");
    assert!(report.bandwidth.as_ref().unwrap().message.starts_with("31.504 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at 0000:00:02.0"));
}

#[test]
fn vanished_devices_and_missing_trees_are_reported_not_fatal() {
    let tree = gpu_in_x8_slot();
    std::os::unix::fs::symlink("../../../devices/pci0000:00/0000:00:09.0", tree.root().join("bus/pci/devices/0000:00:09.0")).unwrap();
    std::fs::write(tree.root().join("bus/pci/devices/not-a-device"), "").unwrap();
    let inspection = inspect(&options(&tree)).unwrap();
    assert_eq!(inspection.devices.len(), 2);
    assert!(inspection.notes.iter().any(|n| n.contains("0000:00:09.0") && n.contains("vanished")), "{:?}", inspection.notes);
    assert!(inspection.notes.iter().any(|n| n.contains("not-a-device")));

    let missing = InspectOptions { source: Source::Sysfs("/nonexistent/sys".into()), ..InspectOptions::default() };
    let error = inspect(&missing).unwrap_err();
    assert!(error.downcast_ref::<pcieperf::error::InvalidInput>().is_some(), "{error}");
}

#[test]
fn a_device_without_config_file_is_still_listed_with_a_note() {
    let tree = gpu_in_x8_slot();
    std::fs::remove_file(tree.root().join("devices/pci0000:00/0000:00:01.0/0000:01:00.0/config")).unwrap();
    let gpu = inspect_device(&"0000:01:00.0".parse().unwrap(), &options(&tree)).unwrap();
    assert!(gpu.notes.iter().any(|n| n.starts_with("config:")), "{:?}", gpu.notes);
    assert_eq!(gpu.unavailable, vec!["config space: not readable".to_string()]);
    assert!(inspect_device(&"0000:05:00.0".parse().unwrap(), &options(&tree)).is_err());
}

#[test]
fn link_down_slow_partner_and_target_speed_are_told_apart() {
    let tree = Tree::new();
    // 00:01.0 (Gen2 root port) → 01:00.0, a Gen3 card: the other end is the limit.
    tree.add(&["0000:00:01.0"], &config(0x8086, 1, &Pcie::new(ROOT_PORT, 2, 4).bridge(0, 1, 1), 0), &[]);
    tree.add(&["0000:00:01.0", "0000:01:00.0"], &config(0x10ee, 1, &Pcie::new(ENDPOINT, 3, 4).trained(2, 4), 0), &[]);
    // 00:02.0 (Gen3) → 02:00.0, a Gen3 card whose LnkCtl2 target is Gen1.
    tree.add(&["0000:00:02.0"], &config(0x8086, 2, &Pcie::new(ROOT_PORT, 3, 4).bridge(0, 2, 2), 0), &[]);
    let mut targeted = config(0x10ee, 2, &Pcie::new(ENDPOINT, 3, 4).trained(1, 4), 0);
    targeted[0x70] = 1;
    tree.add(&["0000:00:02.0", "0000:02:00.0"], &targeted, &[]);
    // 00:03.0 → 03:00.0 with no link.
    tree.add(&["0000:00:03.0"], &config(0x8086, 3, &Pcie::new(ROOT_PORT, 3, 4).trained(0, 0).bridge(0, 3, 3), 0), &[]);
    tree.add(&["0000:00:03.0", "0000:03:00.0"], &config(0x10ee, 3, &Pcie::new(ENDPOINT, 3, 4).trained(0, 0), 0), &[]);
    let reports = inspect_machine(&options(&tree)).unwrap();
    let message = |bdf: &str, code: &str| {
        let report = reports.iter().find(|r| r.bdf.to_string() == bdf).unwrap();
        report.warnings.iter().find(|w| w.code == code).unwrap_or_else(|| panic!("{bdf}: no {code} in {:?}", report.warnings)).message.clone()
    };
    assert!(message("0000:01:00.0", "link_speed_below_capability").contains("the other end (0000:00:01.0) is capable of only 5GT/s"));
    assert!(message("0000:02:00.0", "link_speed_below_capability").contains("0000:02:00.0 has LnkCtl2 Target Link Speed 2.5GT/s"));
    assert!(message("0000:03:00.0", "link_down").contains("link is down"));
    let root_port_3 = reports.iter().find(|r| r.bdf.to_string() == "0000:00:03.0").unwrap();
    assert!(root_port_3.warnings.is_empty(), "a port does not repeat its child's link warning");
}

/// An unreadable `config` (mode 000) is a per-device note naming the privilege, not a failure.
/// As root the check runs the binary as `nobody` (setpriv), since root reads any file.
#[test]
fn permission_denied_is_a_note() {
    use std::os::unix::fs::PermissionsExt;
    let tree = gpu_in_x8_slot();
    let config = tree.root().join("devices/pci0000:00/0000:00:01.0/0000:01:00.0/config");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(tree.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = env!("CARGO_BIN_EXE_pcieperf");
    let root = tree.root().to_str().unwrap();
    let mut command = if pcieperf::pci::sysfs::is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin]);
        c
    } else {
        std::process::Command::new(bin)
    };
    let output = command.args(["inspect", "--json", "--pci-ids", "/nonexistent", "--sysfs-root", root]).output().expect("setpriv (util-linux) runs the check as nobody");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let gpu = json["devices"].as_array().unwrap().iter().find(|d| d["bdf"] == "0000:01:00.0").unwrap();
    let notes = gpu["notes"].to_string();
    assert!(notes.contains("permission denied"), "{notes}");
    assert_eq!(gpu["unavailable"][0], "config space: not readable");
}
