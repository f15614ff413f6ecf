//! `--numa`: the measuring thread pinned and the DMA buffers bound to a node, the placement
//! read back with getcpu and move_pages and reported (text and `conditions.numa`), on this
//! machine's real nodes; a node that does not exist is one line and exit code 2.

mod support;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

use pcieperf::bench::dma::{measure, DmaOptions, Quiet};
use pcieperf::bench::results::Mode;
use pcieperf::engine::numa::Request;
use pcieperf::engine::DataModel;
use support::TestEngine;

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

/// This machine's first node with CPUs and its CPU list, or None (the caller skips).
fn real_node() -> Option<(u32, String)> {
    (0..64).find_map(|n| std::fs::read_to_string(format!("/sys/devices/system/node/node{n}/cpulist")).ok().map(|cpus| (n, cpus)))
}

fn dma_json(extra: &[&str]) -> Value {
    let mut args = vec!["dma", "--target", "sim", "--dir", "both", "--sizes", "64KiB,4MiB", "--duration", "50ms", "--json"];
    args.extend_from_slice(extra);
    let output = pcieperf().args(&args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_node_asked_for_is_placed_checked_on_every_buffer_and_reported_held() {
    let Some((node, _)) = real_node() else {
        println!("skipped: no NUMA node with CPUs in /sys/devices/system/node");
        return;
    };
    let r = dma_json(&["--numa", &node.to_string()]);
    let numa = &r["conditions"]["numa"];
    assert_eq!(numa["requested"], node.to_string(), "{numa}");
    assert_eq!(numa["node"], node, "{numa}");
    assert_eq!(numa["held"], true, "{numa}");
    assert_eq!(numa["thread_node"], node, "{numa}");
    assert_eq!(numa["buffer_nodes"], serde_json::json!([node]), "{numa}");
    // Two points of both directions: two DMA buffers each, 64 KiB (16 pages) and 4 MiB (64 sampled).
    let pages = &numa["buffer_pages"];
    assert_eq!(pages["buffers"], 4, "{pages}");
    assert_eq!(pages["by_node"][node.to_string()], 2 * 16 + 2 * 64, "{pages}");
    let text = pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--duration", "50ms", "--numa", &node.to_string()]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let line = text.lines().find(|l| l.starts_with("NUMA:")).unwrap_or_else(|| panic!("no NUMA line:\n{text}"));
    assert!(line.contains(&format!("--numa {node}: placed on node {node} (CPUs ")) && line.contains("): held;"), "{line}");
    assert!(line.contains(&format!("measuring thread on node {node}, buffers on node {node} (16 of 16 sampled pages in 1 buffer(s))")), "{line}");
}

#[test]
fn without_a_device_auto_is_not_applicable_and_off_places_nothing_but_still_reports() {
    if real_node().is_none() {
        println!("skipped: no NUMA node with CPUs in /sys/devices/system/node");
        return;
    }
    let auto = dma_json(&[]);
    let numa = &auto["conditions"]["numa"];
    assert_eq!((numa["requested"].as_str(), numa["node"].is_null(), numa["held"].is_null()), (Some("auto"), true, true), "{numa}");
    assert_eq!(numa["note"], "not applicable: the sim engine has no PCI device");
    let off = dma_json(&["--numa", "off"]);
    let numa = &off["conditions"]["numa"];
    assert_eq!(numa["note"], "off (--numa off)", "{numa}");
    assert!(numa["thread_node"].is_u64() && numa["buffer_nodes"].as_array().is_some_and(|n| !n.is_empty()), "where things ran is still said: {numa}");
}

#[test]
fn a_node_that_does_not_exist_is_one_line_and_exit_2() {
    let output = pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--numa", "999"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--numa 999: no NUMA node 999 with CPUs on this machine (nodes with CPUs: "), "{stderr}");
    assert!(output.stdout.is_empty());
    let output = pcieperf().args(["run", "--target", "sim", "--numa", "999"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "run takes the flag too");
}

/// `auto` on an engine with a PCI device: the device's node from (fake) sysfs, whose node lists
/// this machine's real CPUs, so the pin and the bind are real.
#[test]
fn auto_places_on_the_devices_node() {
    let Some((node, cpus)) = real_node() else {
        println!("skipped: no NUMA node with CPUs in /sys/devices/system/node");
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let device = root.path().join("bus/pci/devices/0000:41:00.0");
    std::fs::create_dir_all(&device).unwrap();
    std::fs::write(device.join("numa_node"), format!("{node}\n")).unwrap();
    let dir = root.path().join(format!("devices/system/node/node{node}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cpulist"), cpus).unwrap();
    std::fs::write(dir.join("distance"), "10\n").unwrap();
    let mut engine = TestEngine::new(DataModel::Generator, 1);
    engine.info.pci_address = Some("0000:41:00.0".into());
    let mut options = DmaOptions::new(vec![Mode::H2d], vec![1 << 20]);
    options.duration = Duration::from_millis(30);
    options.sysfs_root = root.path().to_path_buf();
    assert_eq!(options.numa, Request::Auto);
    let r = measure(&mut engine, &options, &AtomicBool::new(false), &mut Quiet).unwrap();
    let numa = r.conditions.numa.expect("recorded");
    assert_eq!((numa.device_node, numa.node, numa.held), (Some(node), Some(node), Some(true)), "{numa:?}");
    assert_eq!((numa.local_distance, numa.remote_distance), (Some(10), None));
    assert!(!Path::new(&format!("/sys/devices/system/node/node{}", node + 1)).exists() || numa.buffer_nodes == [node]);
}
