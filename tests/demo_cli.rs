//! `pcieperf demo` on the command line.

use assert_cmd::Command;
use predicates::prelude::*;

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

#[test]
fn json_output_is_labelled_simulated_and_complete() {
    let out = pcieperf().args(["demo", "--target", "sim:doc001", "--json"]).assert().success().get_output().stdout.clone();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["schema"], "pcieperf.demo/2");
    assert_eq!(json["simulated"], true);
    assert_eq!(json["engine"]["simulated"], true);
    assert_eq!(json["demo"]["bytes"], 21_913_010_176u64);
    assert_eq!(json["demo"]["status"]["raw"], 0x9041_2100u32);
    let results = json["demo"]["results"].as_array().unwrap();
    let modes: Vec<&str> = results.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["write", "read", "read_write"]);
    assert!(results.iter().all(|r| r["MBps"].as_f64().unwrap() > 0.0 && r["theory_MBps"].as_f64().unwrap() > 0.0));
}

#[test]
fn text_output_shows_the_gui_fields() {
    pcieperf()
        .args(["demo", "--target", "sim:doc001", "--write"])
        .assert()
        .success()
        .stdout(predicate::str::contains("usable bandwidth MB/s (simulated)"))
        .stdout(predicate::str::contains("Payload size:  128 bytes"))
        .stdout(predicate::str::contains("21913010176"))
        .stdout(predicate::str::contains("stalls > 50.0 µs"))
        .stdout(predicate::str::contains("(90412100)"))
        .stdout(predicate::str::contains("read (h2d)").not());
}

#[test]
fn bad_targets_exit_2_with_one_line() {
    pcieperf()
        .args(["demo", "--target", "sim:doc009"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("doc001").and(predicate::str::contains("panicked").not()));
    pcieperf().args(["demo", "--target", "sim:gen3x8,mps=3"]).assert().code(2);
    pcieperf().args(["demo", "--target", "nosuch"]).assert().code(2);
}
