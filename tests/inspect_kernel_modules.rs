//! `Kernel modules:` (`inspect -k`, `-v`, `-vmm -k`): a device's sysfs `modalias` matched
//! against `modules.alias` globs, as lspci asks libkmod. On fake trees with a fake
//! `modules.alias`; against libkmod itself (`modprobe -S VERSION -R MODALIAS`) on an installed
//! module directory; and against `lspci -k` on this machine where lspci can load libkmod.

#[path = "data/pci/fixture.rs"]
mod fixture;

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::prelude::*;
use fixture::{config, Pcie, Tree, ENDPOINT};
use pcieperf::pci::modules::{Aliases, DIR_ENV};

const NIC_ALIAS: &str = "pci:v00008086d000010D3sv00008086sd0000A01Fbc02sc00i00";

/// One Intel NIC and one device no alias matches.
fn tree() -> Tree {
    let tree = Tree::new();
    tree.add(&["0000:00:01.0"], &config(0x8086, 0x10d3, &Pcie::new(ENDPOINT, 1, 1), 0), &[("modalias", NIC_ALIAS)]);
    tree.add(&["0000:00:02.0"], &config(0x1234, 0x0001, &Pcie::new(ENDPOINT, 1, 1), 0), &[("modalias", "pci:v00001234d00000001sv00000000sd00000000bc00sc00i00")]);
    tree
}

fn modules_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("modules.alias"),
        "# Aliases extracted from modules themselves.\n\
         alias pci:v00008086d000010D3sv*sd*bc*sc*i* e1000e\n\
         alias pci:v00008086d*sv*sd*bc02sc00i* netdev_any\n\
         alias pci:v0000808[0-6]d000010D?sv*sd*bc*sc*i* e1000e\n\
         alias pci:v00008086d000010D[!3]sv*sd*bc*sc*i* never\n\
         alias pci:v00001234d00000002sv*sd*bc*sc*i* other\n",
    )
    .unwrap();
    dir
}

fn inspect(tree: &Tree, modules: &Path, flags: &[&str]) -> (String, String) {
    let output = Command::cargo_bin("pcieperf")
        .unwrap()
        .env(DIR_ENV, modules)
        .args(["inspect", "--pci-ids", "/nonexistent", "--sysfs-root"])
        .arg(tree.root())
        .args(flags)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    (String::from_utf8(output.stdout).unwrap(), String::from_utf8(output.stderr).unwrap())
}

#[test]
fn kernel_modules_line_as_lspci_prints_it() {
    let (tree, modules) = (tree(), modules_dir());
    for flags in [&["-k"][..], &["-v"], &["-vv"], &["-vk"]] {
        let (out, _) = inspect(&tree, modules.path(), flags);
        let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("\tKernel modules:")).collect();
        // e1000e matches twice and is named once, in file order; the device without a match has no line.
        assert_eq!(lines, ["\tKernel modules: e1000e, netdev_any"], "{flags:?}\n{out}");
    }
    let (out, _) = inspect(&tree, modules.path(), &["-vmm", "-k"]);
    let first_block = out.split("\n\n").next().unwrap();
    assert!(first_block.ends_with("Module:\te1000e\nModule:\tnetdev_any"), "{out}");
    // Without -k or -v nothing is looked up, as lspci.
    let (out, _) = inspect(&tree, modules.path(), &["-x"]);
    assert!(!out.contains("Kernel modules"), "{out}");
}

#[test]
fn a_missing_modules_alias_is_one_note_and_no_line() {
    let tree = tree();
    let empty = tempfile::tempdir().unwrap();
    let (out, err) = inspect(&tree, empty.path(), &["-k"]);
    assert!(!out.contains("Kernel modules"), "{out}");
    assert_eq!(err.lines().filter(|l| l.contains("kernel modules not shown")).count(), 1, "{err}");
    assert!(err.contains("modules.alias"), "{err}");
}

/// A dump has no modalias: no modules, even with a module directory.
#[test]
fn a_dump_has_no_kernel_modules() {
    let modules = modules_dir();
    let output = Command::cargo_bin("pcieperf").unwrap().env(DIR_ENV, modules.path()).args(["inspect", "-F", "examples/gen3x8-nic-at-x4.lspci", "-vk"]).output().unwrap();
    assert!(output.status.success());
    assert!(!String::from_utf8_lossy(&output.stdout).contains("Kernel modules"));
}

/// An installed module directory that libkmod (through modprobe) can read.
fn installed_modules() -> Option<(String, PathBuf)> {
    let modprobe = ["/usr/sbin/modprobe", "/sbin/modprobe"].into_iter().find(|p| Path::new(p).exists())?;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/lib/modules").ok()?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    let dir = dirs.into_iter().find(|d| d.join("modules.alias").exists() && d.join("modules.alias.bin").exists())?;
    Some((modprobe.to_string(), dir))
}

/// Modaliases that match the installed patterns, nearly match them, or are this machine's.
fn sample_modaliases(aliases_text: &str, count: usize) -> Vec<String> {
    let patterns: Vec<&str> = aliases_text.lines().filter_map(|l| l.strip_prefix("alias pci:")).filter_map(|l| l.split_whitespace().next()).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const HEX: &[u8] = b"0123456789ABCDEF";
    let mut out: Vec<String> = std::fs::read_dir("/sys/bus/pci/devices")
        .map(|d| d.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("modalias")).ok()).map(|s| s.trim().to_string()).collect())
        .unwrap_or_default();
    for _ in 0..count {
        let pattern = patterns[(next() % patterns.len() as u64) as usize].as_bytes();
        let mut text = String::from("pci:");
        let mut i = 0;
        while i < pattern.len() {
            match pattern[i] {
                b'*' => (0..next() % 9).for_each(|_| text.push(HEX[(next() % 16) as usize] as char)),
                b'?' => text.push(HEX[(next() % 16) as usize] as char),
                b'[' => {
                    let end = pattern[i..].iter().position(|&c| c == b']').map_or(pattern.len(), |p| i + p);
                    text.push(HEX[(next() % 16) as usize] as char);
                    i = end;
                }
                c => text.push(c as char),
            }
            i += 1;
        }
        if next() % 4 == 0 {
            // A near miss: one character changed.
            let mut bytes = text.into_bytes();
            let at = 4 + (next() as usize % (bytes.len() - 4));
            bytes[at] = HEX[(next() % 16) as usize];
            text = String::from_utf8(bytes).unwrap();
        }
        out.push(text);
    }
    out
}

/// libkmod's answer, with lspci's filter (a name equal to the one before is dropped).
fn libkmod_modules(modprobe: &str, dir: &Path, modalias: &str) -> Vec<String> {
    let version = dir.file_name().unwrap().to_str().unwrap();
    let output = Command::new(modprobe).args(["-S", version, "-R", modalias]).output().unwrap();
    let mut names: Vec<String> = String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect();
    names.dedup();
    names
}

#[test]
fn modules_are_libkmods_for_installed_aliases() {
    let Some((modprobe, dir)) = installed_modules() else {
        println!("skipped: no modprobe, or no /lib/modules/*/modules.alias with its .bin index");
        return;
    };
    let text = std::fs::read_to_string(dir.join("modules.alias")).unwrap();
    let aliases = Aliases::parse(&text);
    let (mut compared, mut matched, mut builtin_only) = (0, 0, Vec::new());
    for modalias in sample_modaliases(&text, 400) {
        let ours = aliases.modules_for(&modalias);
        let theirs = libkmod_modules(&modprobe, &dir, &modalias);
        compared += 1;
        if ours.is_empty() && !theirs.is_empty() {
            // libkmod falls back to built-in modules' aliases, which pcieperf does not read.
            builtin_only.push(modalias);
            continue;
        }
        assert_eq!(ours, theirs, "{modalias} in {}", dir.display());
        matched += usize::from(!ours.is_empty());
    }
    println!("{compared} modaliases against libkmod ({}): {matched} with modules, identical; {} only built-in: {builtin_only:?}", dir.display(), builtin_only.len());
    assert!(matched > compared / 4, "the sample should mostly match: {matched} of {compared}");
    assert!(builtin_only.len() < compared / 20, "{builtin_only:?}");
}

/// This machine: `inspect -k` is `lspci -k`, `Kernel modules:` lines included.
#[test]
fn live_k_is_lspci_k() {
    let Ok(lspci) = Command::new("lspci").args(["-O", "hwdb.disable=1", "-k"]).output() else {
        println!("skipped: no lspci");
        return;
    };
    let stderr = String::from_utf8_lossy(&lspci.stderr);
    if stderr.contains("Unable to load libkmod resources") {
        println!("skipped: lspci cannot load libkmod resources here ({}): no Kernel modules: line to compare", stderr.trim());
        return;
    }
    let ours = Command::cargo_bin("pcieperf").unwrap().env_remove(DIR_ENV).args(["inspect", "-k"]).output().unwrap();
    assert!(ours.status.success());
    assert_eq!(String::from_utf8_lossy(&ours.stdout), String::from_utf8_lossy(&lspci.stdout));
}
