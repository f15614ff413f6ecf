//! End to end: `pcieperf run` and `pcieperf dma` on the simulated endpoint and through the
//! fault-injecting wrapper. Every injected fault must be caught and reported, and results must
//! survive the failure.

use assert_cmd::Command;
use serde_json::Value;

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn run_with_no_target_measures_the_simulated_default_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let assert = pcieperf().args(["run", "--quick", "--out"]).arg(&out).assert().success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(stdout.contains("SIMULATED"), "{stdout}");
    assert!(stdout.contains("What limits the result"), "{stdout}");
    let doc = read_json(&out);
    assert_eq!(doc["schema"], "pcieperf.results/3");
    assert_eq!(doc["simulated"], true);
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["conditions"]["target"], "sim");
    assert!(doc["conditions"]["machine"].is_object(), "run keeps what it inspected");
    let modes: Vec<&str> = doc["points"].as_array().unwrap().iter().map(|p| p["mode"].as_str().unwrap()).collect();
    for mode in ["d2h", "h2d", "both"] {
        assert!(modes.contains(&mode), "run measures {mode}: {modes:?}");
    }
    assert_eq!(doc["fits"].as_array().unwrap().len(), 3, "one T(N) fit per mode");
    assert_eq!(doc["verification"]["failed"], 0);
    assert!(doc["verification"]["passed"].as_u64().unwrap() > 0);
}

#[test]
fn every_injected_fault_fails_verification_with_its_offset() {
    for kind in ["bitflip", "drop", "dup", "reorder"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("fault.json");
        let target = format!("fault:{kind}:sim:gen3x8");
        let assert = pcieperf()
            .args(["dma", "--target", &target, "--dir", "d2h", "--sizes", "64KiB", "--duration", "50ms", "--out"])
            .arg(&out)
            .assert()
            .code(1);
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        assert!(stderr.contains("verification failed"), "{kind}: {stderr}");
        assert!(stderr.contains("offset"), "{kind}: the first bad offset is named: {stderr}");
        let doc = read_json(&out);
        assert!(doc["verification"]["failed"].as_u64().unwrap() > 0, "{kind}");
    }
}

#[test]
fn corrupted_h2d_data_is_caught_by_the_device_crc() {
    pcieperf()
        .args(["dma", "--target", "fault:bitflip:sim", "--dir", "h2d", "--sizes", "16KiB", "--duration", "50ms"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("verification failed"));
}

#[test]
fn a_hung_device_times_out_and_the_partial_results_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hang.json");
    let assert = pcieperf()
        .args(["dma", "--target", "fault:hang,skip=3:sim", "--sizes", "4KiB,8KiB", "--deadline", "100ms", "--out"])
        .arg(&out)
        .assert()
        .code(1);
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("did not answer"), "{stderr}");
    let doc = read_json(&out);
    assert_eq!(doc["complete"], false);
    assert_eq!(doc["stopped"]["reason"], "error");
}

#[test]
fn the_saved_run_renders_again_as_csv_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    pcieperf().args(["dma", "--target", "sim:doc001", "--sizes", "64KiB..256KiB", "--duration", "50ms", "--out"]).arg(&out).assert().success();
    let csv = pcieperf().arg("report").arg(&out).arg("--csv").assert().success().get_output().stdout.clone();
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.lines().count() >= 4, "{csv}");
    assert!(csv.contains("simulated"), "{csv}");
    let html = dir.path().join("run.html");
    pcieperf().arg("report").arg(&out).arg("--html").arg(&html).assert().success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("simulated"));
}

#[test]
fn a_target_that_names_nothing_is_bad_input_said_once() {
    let assert = pcieperf().args(["dma", "--target", "block:/nonexistent/disk"]).assert().code(2);
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("/nonexistent/disk does not exist"), "{stderr}");
}
