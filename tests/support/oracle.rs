//! Running lspci (the oracle) and pcieperf on the same dump with the same pci.ids. When lspci is
//! missing the test prints that it was skipped and why. Included with `#[path]`.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// lspci, or `None` after printing why the test is skipped.
pub fn lspci_or_skip(test: &str) -> Option<&'static str> {
    match Command::new("lspci").arg("--version").output() {
        Ok(out) if out.status.success() => Some("lspci"),
        _ => {
            eprintln!("{test}: SKIPPED: lspci (Debian package pciutils, installed by .ci/run) is not available, so there is no oracle to compare with");
            None
        }
    }
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program} could not be run: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `lspci -F DUMP ARGS` reading names only from `ids` (udev's hwdb off, so both tools see the
/// same names).
pub fn lspci(dump: &Path, ids: &Path, args: &[&str]) -> String {
    let mut all = vec!["-O", "hwdb.disable=1", "-i", ids.to_str().unwrap(), "-F", dump.to_str().unwrap()];
    all.extend_from_slice(args);
    run("lspci", &all)
}

/// `pcieperf inspect -F DUMP ARGS --pci-ids IDS`.
pub fn pcieperf(dump: &Path, ids: &Path, args: &[&str]) -> String {
    let mut all = vec!["inspect", "--pci-ids", ids.to_str().unwrap(), "-F", dump.to_str().unwrap()];
    all.extend_from_slice(args);
    run(env!("CARGO_BIN_EXE_pcieperf"), &all)
}

/// A dump of (address, config bytes), rows of 16 bytes as lspci -x writes them.
pub fn dump_text(devices: &[(String, Vec<u8>)]) -> String {
    let mut text = String::new();
    for (address, bytes) in devices {
        text += &format!("{address} Device\n");
        for (i, row) in bytes.chunks(16).enumerate() {
            let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
            text += &format!("{:02x}: {}\n", i * 16, hex.join(" "));
        }
        text += "\n";
    }
    text
}
