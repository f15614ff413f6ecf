//! Metrics files pass `promtool check metrics` (Prometheus's own linter, Debian package
//! `prometheus`, installed by `.ci/run`): a run's (`dma --metrics`) and an inspection's
//! (`inspect --metrics`). Without promtool the test says so and checks only the conventions.

use std::io::Write;
use std::process::{Command, Stdio};

#[path = "data/pci/fixture.rs"]
mod fixture;

fn pcieperf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcieperf"))
}

/// `promtool check metrics` on `text`: `Some(problems)` or `None` when promtool is missing.
fn promtool(text: &str) -> Option<String> {
    let mut child = Command::new("promtool").args(["check", "metrics"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().ok()?;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let problems = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Some(if out.status.success() { problems } else { format!("promtool failed: {problems}") })
}

fn check(what: &str, text: &str) {
    for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts[3] == "counter", parts[2].ends_with("_total"), "{what}: {line}");
        assert!(!parts[2].contains("mbps") && !parts[2].contains("_us"), "{what}: {line} is not in base units");
    }
    match promtool(text) {
        Some(problems) => assert!(problems.trim().is_empty(), "{what}: {problems}\n{text}"),
        None => eprintln!("SKIPPED promtool part of {what}: promtool not found (Debian package prometheus, installed by .ci/run)"),
    }
}

#[test]
fn run_metrics_pass_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.prom");
    let status = pcieperf().args(["dma", "--target", "sim:doc001", "--sizes", "64KiB,256KiB", "--duration", "50ms", "--metrics"]).arg(&path).stdout(Stdio::null()).status().unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("pcieperf_throughput_bytes_per_second{"), "{text}");
    assert!(text.contains("pcieperf_run_timestamp_seconds{"), "{text}");
    check("dma --metrics", &text);
}

#[test]
fn inspection_metrics_pass_promtool_and_carry_link_health() {
    // A Gen3 x8 NIC trained at x4 under its root port, with AER counters.
    let tree = fixture::Tree::new();
    tree.add(&["0000:00:01.0"], &fixture::config(0x8086, 0x1901, &fixture::Pcie::new(fixture::ROOT_PORT, 3, 8).bridge(0, 1, 1), 0), &[]);
    let nic = fixture::Pcie::new(fixture::ENDPOINT, 3, 8).trained(3, 4);
    tree.add(&["0000:00:01.0", "0000:01:00.0"], &fixture::config(0x8086, 0x1572, &nic, 0), &[("aer_dev_correctable", "RxErr 3\nBadTLP 1\nTOTAL_ERR_COR 4\n")]);
    let out = pcieperf().args(["inspect", "--pci-ids", "/nonexistent", "--metrics", "-", "--sysfs-root"]).arg(tree.root()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with("pcieperf_pcie_link_width_lanes{") && l.ends_with(" 4")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("pcieperf_pcie_link_capable_width_lanes{") && l.ends_with(" 8")), "{text}");
    assert!(text.contains("pcieperf_pcie_warnings{") && text.contains("cause=\"link_width_below_capability\""), "{text}");
    assert!(text.contains("pcieperf_inspect_timestamp_seconds{"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("pcieperf_pcie_aer_errors_total{") && l.contains("severity=\"correctable\",type=\"RxErr\"") && l.ends_with(" 3")), "{text}");
    check("inspect --metrics", &text);
}

#[test]
fn stream_metrics_pass_promtool() {
    let out = pcieperf().args(["stream", "--messages", "50", "--metrics"]).stderr(Stdio::null()).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("pcieperf_stream_host_reaction_seconds{") && text.contains("percentile=\"99.9\""), "{text}");
    check("stream --metrics", &text);
}
