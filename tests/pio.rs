//! `pcieperf pio` and the `bar` engine on this machine (no BARs here): the simulator, and a
//! regular file standing in for sysfs `resourceN` in a fake sysfs tree.

use std::path::Path;

use assert_cmd::Command;
use pcieperf::engine::{open, EngineError, OpenOptions, Width};
use predicates::prelude::*;

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

fn pio_json(args: &[&str]) -> serde_json::Value {
    let out = pcieperf().arg("pio").args(args).arg("--json").assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).unwrap()
}

fn test_of(run: &serde_json::Value, number: u64) -> &serde_json::Value {
    run["tests"].as_array().unwrap().iter().find(|t| t["number"] == number).unwrap()
}

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a / b - 1.0).abs() <= tolerance
}

/// Document 000's published figures. Calibrated inputs of the `doc000` preset: Test 1 (110 ns
/// write spacing), Test 2 (1520 ns read), Test 16 (150 ns stopwatch). Everything else is a
/// prediction of the simulator from those and the model.
#[test]
fn sim_doc000_reproduces_document_000_tests() {
    let run = pio_json(&["--target", "sim:doc000", "--tests", "1..16", "--count", "500"]);
    assert_eq!(run["schema"], "pcieperf.pio/2");
    assert_eq!(run["simulated"], true);
    let median = |n: u64, case: usize| test_of(&run, n)["cases"][case]["delay"]["median"].as_f64().unwrap();
    let mbps = |n: u64, case: usize| test_of(&run, n)["cases"][case]["MBps"].as_f64().unwrap();
    // Calibrated.
    assert_eq!(median(1, 0), 110.0);
    assert!(close(median(2, 0), 1520.0, 0.001), "{}", median(2, 0));
    assert_eq!(run["stopwatch"]["min_ns"], 150.0);
    assert_eq!(run["stopwatch"]["subtracted_ns"], 150.0);
    // Predicted: Test 15's reads of 1, 2, 4, 8 bytes (published 0.65, 1.30, 2.61, 5.15 MB/s).
    for (case, published) in [0.65, 1.30, 2.61, 5.15].into_iter().enumerate() {
        assert!(close(mbps(15, case), published, 0.02), "Test 15 case {case}: {} vs {published}", mbps(15, case));
    }
    // Predicted: Test 11's 64-bit reads (published ≈1594 ns) and Test 10's writes (published ≈62 MB/s,
    // the simulator gives the link's 71 MB/s: the document's FPGA bridge is slower than its link).
    assert!(close(median(11, 0), 1594.0, 0.05), "{}", median(11, 0));
    assert!(mbps(10, 0) > 62.0 && mbps(10, 0) < 72.0);
    // Test 14's shape: 8, 16, 32 B at the 8-byte rate; 64 B and up at the 64-byte rate (rates
    // from the median delay: a timer interrupt may land in any size's mean).
    let wc: Vec<f64> = (0..13).map(|case| (1u64 << case) as f64 * 1e3 / median(14, case)).collect();
    assert!(close(wc[4], wc[3], 0.01) && close(wc[5], wc[3], 0.01), "{wc:?}");
    for size in 7..13 {
        assert!(close(wc[size], wc[6], 0.02), "{wc:?}");
    }
    assert!(wc[6] > 2.0 * wc[3]);
    // Each figure sits beside the model with the gap explained.
    let case = &test_of(&run, 2)["cases"][0];
    assert!(case["predicted"]["delay_ns"].as_f64().unwrap() > 600.0);
    assert!(case["gap"].as_str().unwrap().contains("host's own part"));
}

#[test]
fn timer_interrupts_are_counted_and_their_accesses_marked() {
    let run = pio_json(&["--target", "sim:doc000", "--tests", "7", "--count", "20000"]);
    let case = &test_of(&run, 7)["cases"][0];
    let counted = case["engine_interrupts"].as_u64().unwrap();
    assert!(counted >= 5, "20000 reads of 1.5 µs span 30 ms: the 4 ms timer fires: {counted}");
    let marked = case["interrupted"].as_array().unwrap();
    assert!(!marked.is_empty() && marked.len() as u64 <= counted);
    let trace = &case["trace"];
    assert_eq!(trace["every"], 5, "20000 accesses decimated to the 4096 limit");
    for index in marked {
        let at = trace["index"].as_array().unwrap().iter().position(|i| i == index).expect("marked accesses stay in the trace");
        assert!(trace["delay_ns"][at].as_f64().unwrap() > 5000.0, "a timer interrupt holds the CPU for microseconds");
    }
    let buckets = case["histogram"].as_array().unwrap();
    assert_eq!(buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum::<u64>(), 20000);
}

#[test]
fn help_names_every_test() {
    pcieperf()
        .args(["pio", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("14  write combining"))
        .stdout(predicate::str::contains("16  stopwatch cost and TSC calibration"));
}

#[test]
fn bad_test_lists_and_widths_exit_2() {
    pcieperf().args(["pio", "--tests", "17"]).assert().code(2).stderr(predicate::str::contains("1 to 16"));
    pcieperf().args(["pio", "--width", "3"]).assert().code(2);
    pcieperf().args(["pio", "--offset", "0x8000", "--tests", "2"]).assert().code(2).stderr(predicate::str::contains("beyond the BAR"));
    pcieperf().args(["pio", "--offset", "0x2", "--tests", "2"]).assert().code(2).stderr(predicate::str::contains("aligned"));
}

#[test]
fn html_report_and_comparison_of_two_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, html) = (dir.path().join("a.json"), dir.path().join("b.json"), dir.path().join("r.html"));
    for (path, seed) in [(&a, "1"), (&b, "2")] {
        pcieperf().args(["pio", "--tests", "2,14", "--destructive", "--count", "50", "--seed", seed, "--out"]).arg(path).assert().success();
    }
    pcieperf().arg("report").arg(&a).arg("--html").arg(&html).assert().success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("delay histogram (log axis)") && page.contains("delay over time") && page.contains("Simulated"));
    assert!(page.matches("<svg").count() >= 2 * 14);
    pcieperf().arg("report").arg(&a).assert().success().stdout(predicate::str::contains("Test 14: write combining"));
    pcieperf().arg("report").arg(&a).arg("--csv").assert().success().stdout(predicate::str::contains("test,name,simulated"));
    pcieperf()
        .arg("report")
        .arg(&a)
        .arg(&b)
        .assert()
        .success()
        .stdout(predicate::str::contains("B/A MB/s"))
        .stdout(predicate::str::contains("14 write combining"));
}

#[path = "support/fake_bar.rs"]
mod fake_bar;
use fake_bar::{fake, BDF};

const MEM: u64 = 0x40200;

fn options(root: &Path) -> OpenOptions {
    OpenOptions { sysfs_root: Some(root.to_path_buf()), ..OpenOptions::default() }
}

#[test]
fn a_regular_file_stands_in_for_resource0_at_every_width() {
    let device = fake("abcd", "0001", MEM, 4096, true);
    let mut engine = open(&format!("bar:{BDF}"), &options(&device.root)).unwrap();
    assert!(!engine.info().simulated);
    assert_eq!(engine.info().capacity_bytes, Some(4096));
    let mmio = engine.mmio().unwrap();
    mmio.write(0, 0x10, Width::B8, 0x1122_3344_5566_7788).unwrap();
    mmio.write(0, 0x20, Width::B1, 0x1ff).unwrap();
    mmio.write(0, 0x22, Width::B2, 0xbeef).unwrap();
    mmio.write32(0, 0x24, 0xcafe_f00d).unwrap();
    assert_eq!(mmio.read(0, 0x10, Width::B1).unwrap(), 0x88);
    assert_eq!(mmio.read(0, 0x12, Width::B2).unwrap(), 0x5566);
    assert_eq!(mmio.read(0, 0x14, Width::B4).unwrap(), 0x1122_3344);
    assert_eq!(mmio.read(0, 0x20, Width::B8).unwrap(), 0xcafe_f00d_beef_00ff, "a 1-byte write stores one byte");
    drop(engine);
    let bytes = std::fs::read(device.dev.join("resource0")).unwrap();
    assert_eq!(&bytes[0x10..0x18], &0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(bytes[0x21], 0, "nothing beyond the 1-byte write changed");
}

#[test]
fn out_of_range_unaligned_and_missing_bars_are_refused() {
    let device = fake("abcd", "0001", MEM, 4096, true);
    let mut engine = open(&format!("bar:{BDF}"), &options(&device.root)).unwrap();
    let mmio = engine.mmio().unwrap();
    let refused = |e: EngineError| matches!(e, EngineError::InvalidInput(_));
    assert!(refused(mmio.read(0, 4096, Width::B1).unwrap_err()));
    assert!(refused(mmio.read(0, 4092, Width::B8).unwrap_err()));
    assert!(refused(mmio.read(0, u64::MAX - 2, Width::B4).unwrap_err()));
    assert!(refused(mmio.write(0, 0x3, Width::B2, 0).unwrap_err()));
    assert!(mmio.read(6, 0, Width::B4).is_err());
    let no_bar2 = mmio.read(2, 0, Width::B4).unwrap_err().to_string();
    assert!(no_bar2.contains("not implemented"), "{no_bar2}");
    assert!(mmio.write_combined(0, 0, &[1; 64]).unwrap_err().to_string().contains("uncached"));
}

#[test]
fn targets_that_cannot_be_mapped_say_why() {
    let io_bar = fake("abcd", "0001", 0x40101, 256, true);
    let err = open(&format!("bar:{BDF}"), &options(&io_bar.root)).err().unwrap().to_string();
    assert!(err.contains("I/O-port BAR"), "{err}");
    let device = fake("abcd", "0001", MEM, 4096, true);
    let err = open(&format!("bar:{BDF},wc"), &options(&device.root)).err().unwrap().to_string();
    assert!(err.contains("not prefetchable"), "{err}");
    let err = open("bar:0000:00:05.0", &options(&device.root)).err().unwrap().to_string();
    assert!(err.contains("not present, removed or hot-unplugged"), "{err}");
    for bad in ["bar:", "bar:zz", &format!("bar:{BDF},bar=9"), &format!("bar:{BDF},via=pci"), &format!("bar:{BDF},via=uio,wc")] {
        assert!(matches!(open(bad, &options(&device.root)), Err(EngineError::InvalidInput(_))), "{bad}");
    }
}

#[test]
fn memory_decoding_that_stays_off_is_reported() {
    let device = fake("abcd", "0001", MEM, 4096, false);
    let err = open(&format!("bar:{BDF}"), &options(&device.root)).err().unwrap().to_string();
    assert!(err.contains("memory decoding is off"), "{err}");
    assert_eq!(std::fs::read_to_string(device.dev.join("enable")).unwrap(), "1", "enabled the way the kernel expects");
}

#[test]
fn paths_needing_a_driver_print_the_bind_commands() {
    let device = fake("1234", "11e8", MEM, 4096, true);
    for (target, driver) in [(format!("bar:{BDF},via=uio"), "uio_pci_generic"), (format!("bar:{BDF},via=vfio"), "vfio-pci"), (format!("vfio:{BDF},personality=edu"), "vfio-pci")] {
        let err = open(&target, &options(&device.root)).err().unwrap().to_string();
        assert!(err.contains(&format!("echo {driver} | sudo tee")) && err.contains("driver_override"), "{err}");
        assert!(err.contains("drivers_probe") && err.contains("never rebinds"), "{err}");
    }
    let err = open(&format!("vfio:{BDF},personality=xdma"), &options(&device.root)).err().unwrap().to_string();
    assert!(err.contains("known personalities: edu"), "{err}");
    // Without an IOMMU group, VFIO needs an IOMMU (or no-IOMMU mode) before any binding.
    std::fs::remove_file(device.dev.join("iommu_group")).unwrap();
    let err = open(&format!("bar:{BDF},via=vfio"), &options(&device.root)).err().unwrap().to_string();
    assert!(err.contains("no IOMMU group"), "{err}");
}

#[test]
fn writes_need_destructive_unless_a_profile_names_the_offset_scratch() {
    let edu = fake("1234", "11e8", MEM, 4096, true);
    let run = |args: &[&str]| pcieperf().args(["pio", "--target", &format!("bar:{BDF}"), "--sysfs-root"]).arg(&edu.root).args(args).args(["--count", "10"]).assert();
    // Test 6 stays on edu's liveness register: scratch.
    run(&["--tests", "6", "--offset", "0x4"]).success().stdout(predicate::str::contains("Test 6: n writes to one address"));
    // Test 3 walks past it.
    run(&["--tests", "3", "--offset", "0x4"]).code(2).stderr(predicate::str::contains("--destructive"));
    run(&["--tests", "6", "--offset", "0x0"]).code(2).stderr(predicate::str::contains("scratch"));
    run(&["--tests", "3", "--offset", "0x0", "--destructive"]).success();
    // Read-only tests by default, on the real (file-backed) stopwatch.
    let out = run(&["--offset", "0x8", "--json"]).success().get_output().stdout.clone();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["simulated"], false);
    let numbers: Vec<u64> = json["tests"].as_array().unwrap().iter().map(|t| t["number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [2, 4, 7, 9, 11, 13, 15, 16]);
    assert!(json["stopwatch"]["min_ns"].as_f64().unwrap() >= 0.0);
    assert!(json["model_conditions"].is_null(), "a device without a PCIe link gets no prediction");
}

#[test]
fn demo_through_a_bar_reads_the_version_before_writing_anything() {
    use pcieperf::bench::demo::{run_demo, DemoOptions};
    let device = fake("abcd", "0001", MEM, 4096, true);
    let mut engine = open(&format!("bar:{BDF}"), &options(&device.root)).unwrap();
    let conditions = pcieperf::model::Conditions {
        params: pcieperf::model::LinkParams::typical("gen1x4".parse().unwrap()),
        capable: None,
        source: "test".into(),
        assumed: Vec::new(),
        credits: None,
    };
    std::fs::write(device.dev.join("resource0"), vec![0xAB; 4096]).unwrap();
    let err = run_demo(engine.mmio().unwrap(), &conditions, &DemoOptions::default(), &std::sync::atomic::AtomicBool::new(false)).unwrap_err().to_string();
    assert!(err.contains("0xabababab") && err.contains("not the performance-demo endpoint"), "{err}");
    drop(engine);
    assert!(std::fs::read(device.dev.join("resource0")).unwrap().iter().all(|&b| b == 0xAB), "nothing was written");
}
