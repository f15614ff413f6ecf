//! The `pcieperf inspect` command line: views, JSON schema, selection, exit codes, bad input.

#[path = "data/pci/fixture.rs"]
mod fixture;

use assert_cmd::Command;
use fixture::{config, Pcie, ENDPOINT, ROOT_PORT};
use predicates::prelude::*;
use pcieperf::pci::{dump, Bdf};

/// A root port with a Gen3 x8 NIC trained at x4 below it, as a 4096-byte dump.
fn dump_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let port = config(0x8086, 0x1901, &Pcie::new(ROOT_PORT, 3, 8).trained(3, 4).bridge(0, 1, 1), 0);
    let nic = config(0x8086, 0x1572, &Pcie::new(ENDPOINT, 3, 8).trained(3, 4), 0);
    let devices: Vec<(Bdf, &[u8])> = vec![("00:01.0".parse().unwrap(), &port), ("01:00.0".parse().unwrap(), &nic)];
    let path = dir.path().join("machine.dump");
    std::fs::write(&path, dump::write(&devices)).unwrap();
    path
}

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

#[test]
fn default_view_is_one_line_per_device() {
    let dir = tempfile::tempdir().unwrap();
    let output = pcieperf().args(["inspect", "--dump"]).arg(dump_file(&dir)).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(output).unwrap();
    let nic = text.lines().find(|l| l.starts_with("0000:01:00.0")).expect(&text);
    assert!(nic.contains("8GT/s x4") && nic.contains("8GT/s x8") && nic.contains("256/512"), "{nic}");
}

#[test]
fn json_follows_the_documented_schema() {
    let dir = tempfile::tempdir().unwrap();
    let output = pcieperf().args(["inspect", "--json", "--pci-ids", "/nonexistent", "--dump"]).arg(dump_file(&dir)).assert().success().get_output().stdout.clone();
    let json: serde_json::Value = serde_json::from_slice(&output).unwrap();
    assert_eq!(json["schema"], "pcieperf.inspect/1");
    assert!(json.get("version").is_none(), "the major version is in the schema name");
    let nic = &json["devices"][1];
    for key in ["bdf", "vendor_id", "device_id", "name", "port_type", "max_payload_supported_bytes", "max_payload_bytes", "max_read_request_bytes", "link_capable", "link_status", "target_speed_gts", "aer", "path", "ceiling", "warnings"] {
        assert!(nic.get(key).is_some(), "missing {key}");
    }
    assert_eq!(nic["bdf"], "0000:01:00.0");
    assert_eq!(nic["name"], "Device 8086:1572", "no pci.ids → numeric IDs");
    assert_eq!(nic["port_type"], "Endpoint");
    assert_eq!(nic["link_capable"]["speed_gts"], 8.0);
    assert_eq!(nic["link_status"]["width"], 4);
    assert_eq!(nic["target_speed_gts"], 8.0);
    assert_eq!(nic["path"][0]["bdf"], "0000:00:01.0", "parent inferred from the bridge's secondary bus");
    assert_eq!(
        nic["bandwidth"]["message"],
        "31.504 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at 0000:00:01.0 (capable of 63.008 Gb/s with 8.0 GT/s PCIe x8 link)"
    );
    assert!(nic["ceiling"]["trained"]["write_MBps"].as_f64().unwrap() > 3000.0);
    assert_eq!(nic["warnings"][0]["code"], "link_width_below_capability");
    assert_eq!(nic["aer"]["status"]["correctable_errors"], serde_json::json!([]));
}

#[test]
fn selection_verbosity_and_strict_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dump_file(&dir);
    // Graded as lspci: -v headings and pcieperf's analysis, -vv every field in lspci's text,
    // -vvv disabled bridge windows' addresses too.
    pcieperf().args(["inspect", "-s", "01:00.0", "-v", "--dump"]).arg(&dump).assert().success()
        .stdout(predicate::str::contains("\tCapabilities: [40] Express Endpoint, MSI 00"))
        .stdout(predicate::str::contains("pcieperf: warning [link_width_below_capability]"))
        .stdout(predicate::str::contains("0000:00:01.0").and(predicate::str::contains("LnkSta:").not()).and(predicate::str::contains("Control:").not()));
    pcieperf().args(["inspect", "-s", "01:00.0", "-vv", "--dump"]).arg(&dump).assert().success()
        .stdout(predicate::str::contains("\t\tLnkSta:\tSpeed 8GT/s, Width x4 (downgraded)\n\t\t\tTrErr-").and(predicate::str::contains("\tControl: I/O-")).and(predicate::str::contains("\tRegion 0: Memory at ")));
    pcieperf().args(["inspect", "-s", "01:00.0", "-v", "--dump"]).arg(&dump).assert().success().stdout(predicate::str::contains("\tFlags: bus master, fast devsel, latency 0\n"));
    pcieperf().args(["inspect", "--strict", "--dump"]).arg(&dump).assert().code(1);
    pcieperf().args(["inspect", "--strict", "-s", "00:01.0", "--dump"]).arg(&dump).assert().code(0);
    // As lspci: a selector matching nothing prints nothing and exits 0; a bad one exits 2.
    pcieperf().args(["inspect", "-s", "07:00.0", "--dump"]).arg(&dump).assert().code(0).stdout("");
    pcieperf().args(["inspect", "-d", "10ee:", "--dump"]).arg(&dump).assert().code(0).stdout("");
    pcieperf().args(["inspect", "-d", "8086:1572", "-n", "--dump"]).arg(&dump).assert().success().stdout(predicate::str::contains("8086:1572"));
    pcieperf().args(["inspect", "-s", "zz:00.0", "--dump"]).arg(&dump).assert().code(2).stderr(predicate::str::contains("Invalid bus number"));
    let table = pcieperf().args(["inspect", "--dump"]).arg(&dump).assert().success().get_output().stdout.clone();
    let widest = String::from_utf8(table).unwrap().lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 100, "the default table is {widest} columns wide");
}

#[test]
fn bad_dumps_exit_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("00:00.0 Host\n00: 86 80 zz\n", "line 2"),
        ("00: 86 80\n", "no device"),
        ("this is not a dump\n", "no device"),
    ];
    for (text, expected) in cases {
        let path = dir.path().join("bad.dump");
        std::fs::write(&path, text).unwrap();
        pcieperf().args(["inspect", "--dump"]).arg(&path).assert().code(2).stderr(predicate::str::contains(expected));
    }
    pcieperf().args(["inspect", "--dump", "/nonexistent.dump"]).assert().code(2).stderr(predicate::str::contains("cannot read dump"));
    pcieperf().args(["inspect", "--sysfs-root", "/nonexistent"]).assert().code(2);
}

#[test]
fn names_come_from_pci_ids_when_given() {
    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("pci.ids");
    std::fs::write(&ids, "8086  Intel Corporation\n\t1572  Ethernet Controller X710 for 10GbE SFP+\n").unwrap();
    pcieperf().args(["inspect", "-v", "--pci-ids"]).arg(&ids).arg("--dump").arg(dump_file(&dir)).assert().success()
        .stdout(predicate::str::contains("Intel Corporation Ethernet Controller X710 for 10GbE SFP+"));
}

#[test]
fn the_live_machine_view_lists_measurement_targets_and_a_dump_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let from_dump = pcieperf().arg("inspect").arg("--dump").arg(dump_file(&dir)).arg("--json").assert().success();
    let from_dump: serde_json::Value = serde_json::from_slice(&from_dump.get_output().stdout).unwrap();
    assert_eq!(from_dump["targets"], serde_json::json!([]), "a dump comes from another machine: no targets");
    if !std::path::Path::new("/sys/bus/pci/devices").is_dir() {
        eprintln!("no /sys/bus/pci/devices here: live half of this test not applicable");
        return;
    }
    let live = pcieperf().args(["inspect", "--json"]).assert().success();
    let live: serde_json::Value = serde_json::from_slice(&live.get_output().stdout).unwrap();
    let targets = live["targets"].as_array().expect("live inspection lists the targets detection found");
    for target in targets {
        assert!(target["target"].as_str().unwrap().contains(':'), "ENGINE:ARGUMENT: {target}");
        assert!(!target["reason"].as_str().unwrap().is_empty(), "every target says why it is (not) usable");
    }
}

#[test]
fn a_masked_aer_error_is_not_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mut nic = config(0x8086, 0x1572, &Pcie::new(ENDPOINT, 3, 8), 1 << 6); // CESta BadTLP
    let path = dir.path().join("aer.dump");
    let write = |bytes: &[u8]| std::fs::write(&path, dump::write(&[("01:00.0".parse().unwrap(), bytes)])).unwrap();
    write(&nic);
    pcieperf().args(["inspect", "-v", "--dump"]).arg(&path).assert().success().stdout(predicate::str::contains("AER correctable error status set: BadTLP"));
    nic[0x114] |= 1 << 6; // CEMsk masks BadTLP: the device does not report it
    write(&nic);
    pcieperf().args(["inspect", "-v", "--dump"]).arg(&path).assert().success().stdout(predicate::str::contains("AER correctable").not());
}

/// The "partly decoded" note names only what the dump lacks: a 256-byte dump has MaxPayload and
/// ASPM but not AER; a 64-byte one lacks MaxPayload and ASPM (and cannot tell about AER).
#[test]
fn the_partly_decoded_note_names_what_is_missing() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gen3x8-nic-at-x4.lspci");
    let stderr = |path: &str| String::from_utf8(pcieperf().args(["inspect", "-F", path]).assert().success().get_output().stderr.clone()).unwrap();
    let full = stderr(example);
    assert!(full.contains("a 4096-byte dump (lspci -xxxx as root) is needed for AER") && !full.contains("MaxPayload"), "{full}");
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short.lspci");
    let text = std::fs::read_to_string(example).unwrap();
    // Rows past 0x3f dropped: a 64-byte (`lspci -x`) dump.
    let row_offset = |l: &str| l.split_once(": ").and_then(|(offset, _)| u32::from_str_radix(offset, 16).ok());
    let header: String = text.lines().filter(|l| row_offset(l).is_none_or(|offset| offset < 0x40)).map(|l| format!("{l}\n")).collect();
    std::fs::write(&short, header).unwrap();
    let partial = stderr(short.to_str().unwrap());
    assert!(partial.contains("a longer dump (lspci -xxx or -xxxx as root) is needed for MaxPayload and ASPM"), "{partial}");
}

/// `-t` prints no names, so it does not read pci.ids at all (as `lspci -t`): a pci.ids that
/// cannot be read stops `-tv`, which needs it, and not `-t`.
#[test]
fn the_tree_without_names_does_not_read_pci_ids() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dump_file(&dir);
    let unreadable = dir.path().join("pci.ids");
    std::fs::create_dir(&unreadable).unwrap(); // a directory: refused when read
    let tree = |flag: &str| pcieperf().args(["inspect", flag, "--pci-ids"]).arg(&unreadable).arg("--dump").arg(&dump).assert();
    tree("-t").success();
    tree("-tv").code(2);
}
