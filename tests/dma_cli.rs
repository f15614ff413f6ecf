//! The command line: bad input gives one clear line and exit code 2; `report` re-renders and
//! compares saved runs.

mod support;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use assert_cmd::Command;
use predicates::prelude::*;
use predicates::str::contains;

use pcieperf::bench::dma::{measure, DmaOptions, Quiet};
use pcieperf::bench::results::Mode;
use pcieperf::engine::DataModel;
use pcieperf::report::json;
use support::TestEngine;

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

fn saved_run(dir: &std::path::Path, name: &str, rate_mbps: f64, corrupt: bool) -> std::path::PathBuf {
    let mut engine = TestEngine::new(DataModel::Generator, 1);
    engine.rate_mbps = rate_mbps;
    if corrupt {
        engine.corrupt_d2h_at = Some(100);
    }
    let mut o = DmaOptions::new(vec![Mode::D2h], vec![4096, 1 << 20]);
    o.duration = Duration::from_millis(50);
    let r = measure(&mut engine, &o, &AtomicBool::new(false), &mut Quiet).unwrap();
    let path = dir.join(name);
    json::write(&path, &r).unwrap();
    path
}

#[test]
fn bad_input_is_one_clear_line_and_exit_code_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["dma", "--target", "nope"], "unknown target 'nope'"),
        (&["dma", "--sizes", "0"], "0 bytes"),
        (&["dma", "--sizes", "4k"], "ambiguous size"),
        (&["dma", "--sizes", "64MiB..4KiB"], "invalid range"),
        (&["dma", "--sizes", "2000GiB"], "1 TiB limit"),
        (&["dma", "--dir", "sideways"], "invalid value 'sideways'"),
        (&["dma", "--verify", "maybe"], "invalid value 'maybe'"),
        (&["dma", "--duration", "5parsec"], "invalid duration"),
        (&["dma", "--deadline", "0s"], "more than 0"),
        (&["dma", "--ci-target", "101"], "--ci-target"),
        (&["run", "--target", "nope:x"], "unknown target 'nope:x'"),
        (&["report", "/nonexistent/run.json"], "cannot read"),
    ];
    for (args, message) in cases {
        pcieperf().args(*args).assert().code(2).stderr(contains(*message)).stderr(contains("panicked").not());
    }
}

#[test]
fn report_refuses_documents_that_are_not_results() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.json");
    std::fs::write(&path, "{\"schema\": \"something/9\"}").unwrap();
    pcieperf().arg("report").arg(&path).assert().code(2).stderr(contains("unsupported results schema"));
    std::fs::write(&path, "not json").unwrap();
    pcieperf().arg("report").arg(&path).assert().code(2).stderr(contains("not a JSON document"));
}

#[test]
fn report_re_renders_a_saved_run_as_text_csv_html_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let run = saved_run(dir.path(), "run.json", 1000.0, false);
    pcieperf().arg("report").arg(&run).assert().success().stdout(contains("SIMULATED")).stdout(contains("MB/s (simulated)"));
    pcieperf().arg("report").arg(&run).arg("--csv").assert().success().stdout(contains("simulated,target,mode")).stdout(contains("true,test,d2h,4096"));
    let html = dir.path().join("run.html");
    let metrics = dir.path().join("run.prom");
    pcieperf().arg("report").arg(&run).arg("--html").arg(&html).arg("--metrics").arg(&metrics).assert().success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<title>pcieperf results (simulated)") && page.contains("<svg"));
    assert!(std::fs::read_to_string(&metrics).unwrap().contains("pcieperf_throughput_bytes_per_second{"));
}

#[test]
fn report_compares_two_runs() {
    let dir = tempfile::tempdir().unwrap();
    let a = saved_run(dir.path(), "a.json", 1000.0, false);
    let b = saved_run(dir.path(), "b.json", 2000.0, false);
    pcieperf()
        .arg("report")
        .arg(&a)
        .arg(&b)
        .assert()
        .success()
        .stdout(contains("Conditions that differ"))
        .stdout(contains("B/A"))
        .stdout(predicate::str::is_match(r"d2h\s+1MiB\s+\S+\s+\S+\s+1\.9\d\d").unwrap());
    pcieperf().arg("report").arg(&a).arg(&b).arg("--csv").assert().code(2);
}

#[test]
fn a_saved_run_with_a_verification_failure_shows_offset_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let run = saved_run(dir.path(), "bad.json", 1000.0, true);
    pcieperf()
        .arg("report")
        .arg(&run)
        .assert()
        .success()
        .stdout(contains("first failure: d2h pattern check failed at offset 100 (0x64): expected 0x"));
}

/// Flags an engine declares for itself (xdma's) are offered by `dma` and `run`, and a value the
/// engine's own parser refuses is bad input before anything opens.
#[test]
fn engine_declared_flags_are_offered_and_checked() {
    for command in ["dma", "run"] {
        let help = pcieperf().args([command, "--help"]).assert().success().get_output().stdout.clone();
        let help = String::from_utf8_lossy(&help);
        assert!(help.contains("--channels <N>") && help.contains("--card-addr <ADDR>") && help.contains("--device-clock <HZ>"), "{help}");
    }
    for (flag, value) in [("--channels", "0"), ("--card-addr", "0xZZ"), ("--device-clock", "-5")] {
        let assert = pcieperf().args(["dma", "--target", "sim", &format!("{flag}={value}")]).assert().code(2);
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
        assert!(stderr.contains(flag), "{stderr}");
    }
}
