//! Real lspci output parses: `lspci -xxx` of this machine gives the same devices and bytes as
//! `lspci -vvxxx` (verbose text interleaved), and our own dump writer is read back by `lspci -F`.

use std::process::Command;

use pcieperf::pci::dump;

fn lspci(args: &[&str]) -> String {
    let output = Command::new("lspci").args(args).output().unwrap_or_else(|e| {
        panic!("lspci is required for this test (Debian package pciutils, installed by .ci/run) but could not be run: {e}")
    });
    assert!(output.status.success(), "lspci {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn this_machines_lspci_dumps_parse_with_and_without_verbose_text() {
    if !std::path::Path::new("/sys/bus/pci/devices").exists() {
        // A container without PCI sysfs: lspci has nothing to list; the other tests cover dumps.
        eprintln!("no /sys/bus/pci/devices here: nothing to compare");
        return;
    }
    let plain = dump::parse(&lspci(&["-D", "-xxx"])).expect("lspci -xxx output parses").devices;
    let verbose = dump::parse(&lspci(&["-D", "-vvxxx"])).expect("lspci -vvxxx output parses").devices;
    let listed = lspci(&["-D", "-n"]).lines().filter(|l| !l.is_empty()).count();
    assert_eq!(plain.len(), listed, "one device per line of lspci -n");
    let contents = |devices: &[dump::DumpDevice]| devices.iter().map(|d| (d.bdf, d.config.clone())).collect::<Vec<_>>();
    assert_eq!(contents(&plain), contents(&verbose));
    for device in &plain {
        let ids = lspci(&["-D", "-n", "-s", &device.bdf.to_string()]);
        let expected = format!("{:04x}:{:04x}", device.config.vendor_id().unwrap(), device.config.device_id().unwrap());
        assert!(ids.contains(&expected), "{}: lspci -n says {ids}, we read {expected}", device.bdf);
    }
}

#[test]
fn lspci_reads_back_what_we_write() {
    let mut bytes = vec![0u8; 256];
    bytes[..4].copy_from_slice(&[0xee, 0x10, 0x38, 0x70]);
    let mut other = bytes.clone();
    other[..4].copy_from_slice(&[0x86, 0x80, 0x72, 0x15]);
    let devices: Vec<(pcieperf::pci::Bdf, &[u8])> = vec![("0000:7f:00.0".parse().unwrap(), &bytes), ("0001:02:1f.7".parse().unwrap(), &other)];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ours.dump");
    std::fs::write(&path, dump::write(&devices)).unwrap();
    let back = dump::parse(&lspci(&["-D", "-xxx", "-F", path.to_str().unwrap()])).unwrap().devices;
    assert_eq!(back.len(), devices.len());
    for ((bdf, bytes), read) in devices.iter().zip(&back) {
        assert_eq!((*bdf, *bytes), (read.bdf, read.config.bytes()));
    }
}
