//! `pcieperf model` as a user runs it: printed reference figures, JSON schema, errors.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

fn json(args: &[&str]) -> Value {
    let output = pcieperf().args(args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn cli_table_1_documents_convention_prints_11_90_and_248_79() {
    pcieperf()
        .args(["model", "--link", "gen1x1", "--mps", "4096", "--byte-exact", "--exclude", "skp,dllp", "--sizes", "1,4096"])
        .assert()
        .success()
        .stdout(predicate::str::contains("11.90"))
        .stdout(predicate::str::contains("248.79"))
        .stdout(predicate::str::contains("11.09").not())
        .stdout(predicate::str::contains("MB/s (1 MB/s = 10^6 bytes/s)"));
}

#[test]
fn cli_default_link_is_named() {
    pcieperf().arg("model").assert().success().stdout(predicate::str::contains("Gen3 x8 (default link"));
}

#[test]
fn cli_example_1_record_prints_41_46_and_165_84() {
    pcieperf()
        .args(["model", "mmio", "--link", "gen1x1", "--mps", "128", "--byte-exact", "--dllp-every", "1", "--record", "100"])
        .assert()
        .success()
        .stdout(predicate::str::contains("9648 ns"))
        .stdout(predicate::str::contains("payload 41.46 MB/s"))
        .stdout(predicate::str::contains("165.84 MB/s (66.3 %)"));
}

#[test]
fn cli_mmio_reads_print_1_51_2_99_5_92_11_56() {
    let out = json(&["model", "mmio", "--link", "gen1x1", "--mps", "128", "--byte-exact", "--exclude", "skp,dllp", "--json"]);
    let reads: Vec<String> =
        out["rows"].as_array().unwrap().iter().map(|r| format!("{:.2}", r["read_MBps"].as_f64().unwrap())).collect();
    assert_eq!(reads, ["1.51", "2.99", "5.92", "11.56"]);
    assert_eq!(out["schema"], "pcieperf.model/2");
}

#[test]
fn cli_fit_reproduces_document_002() {
    pcieperf()
        .args(["model", "fit", "--point", "1MB=983", "--point", "2MB=992.8", "--bus-MBps", "2000", "--predict", "4MB,8MB,128"])
        .assert()
        .success()
        .stdout(predicate::str::contains("f = 0.501398684"))
        .stdout(predicate::str::contains("m = 20.08356"))
        .stdout(predicate::str::contains("997.773"))
        .stdout(predicate::str::contains("1000.279"));
}

#[test]
fn cli_fit_json_has_f_m_n_half_and_predictions() {
    let out = json(&["model", "fit", "--point", "1MB=983", "--point", "2MB=992.8", "--bus-MBps", "2000", "--predict", "4MB,8MB,128", "--json"]);
    assert!((out["f"].as_f64().unwrap() - 0.501398684).abs() < 1e-9);
    assert!((out["m_us"].as_f64().unwrap() - 20.08356).abs() < 1e-5);
    assert!(out["n_half_bytes"].as_f64().unwrap() > 0.0);
    let predictions = out["predictions"].as_array().unwrap();
    assert_eq!(predictions.len(), 3);
    assert_eq!(predictions[0]["size_bytes"], 128);
    assert_eq!(format!("{:.2}", predictions[0]["MBps"].as_f64().unwrap()), "6.33");
}

#[test]
fn cli_status_word_decodes() {
    pcieperf()
        .args(["model", "status", "0x90412100"])
        .assert()
        .success()
        .stdout(predicate::str::contains("128 bytes"))
        .stdout(predicate::str::contains("512 bytes"))
        .stdout(predicate::str::contains("2.5 GT/s"))
        .stdout(predicate::str::contains("x4"));
    let out = json(&["model", "status", "2420187392", "--json"]);
    assert_eq!(out["status"]["link_width"], 4);
    assert_eq!(out["status"]["msi_enabled"], true);
}

#[test]
fn cli_message_overhead_prints_6_727_gbps_and_840_87() {
    pcieperf()
        .args(["model", "message", "--link", "gen1x4", "--mps", "128", "--header", "4dw", "--byte-exact", "--exclude", "skp,dllp"])
        .assert()
        .success()
        .stdout(predicate::str::contains("840.87 MB/s"))
        .stdout(predicate::str::contains("6.727 Gb/s"));
}

#[test]
fn cli_write_combining_plateaus() {
    let out = json(&["model", "wc", "--link", "gen1x1", "--byte-exact", "--exclude", "skp,dllp", "--sizes", "16,4096", "--json"]);
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(format!("{:.2}", rows[0]["write_combining_MBps"].as_f64().unwrap()), "71.43");
    assert_eq!(format!("{:.3}", rows[1]["write_combining_MBps"].as_f64().unwrap()), "190.476");
    assert_eq!(format!("{:.3}", rows[1]["one_tlp_MBps"].as_f64().unwrap()), "248.785");
}

#[test]
fn cli_json_rows_have_the_documented_fields() {
    let out = json(&["model", "--gen", "4", "--width", "16", "--sizes", "4KiB..16KiB", "--json"]);
    assert_eq!(out["schema"], "pcieperf.model/2");
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for key in ["size_bytes", "write_MBps", "read_MBps", "write_efficiency", "read_efficiency", "bidir_write_MBps", "bidir_read_MBps", "limit"] {
        assert!(!rows[0][key].is_null(), "missing {key}");
    }
    assert_eq!(rows[0]["limit"]["write"], "link");
}

#[test]
fn cli_csv_and_units() {
    pcieperf()
        .args(["model", "--link", "gen1x4", "--sizes", "4KiB", "--csv", "--unit", "Gbps"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("size_bytes,write_Gbps,write_efficiency"));
    pcieperf()
        .args(["model", "--link", "gen5x16", "--sizes", "1MiB", "--unit", "GBps"])
        .assert()
        .success()
        .stdout(predicate::str::contains("GB/s (1 GB/s = 10^9 bytes/s)"));
}

#[test]
fn cli_explain_prints_every_step() {
    pcieperf()
        .args(["model", "--link", "gen6x16", "--explain", "64KiB", "--msg-bytes", "4096", "--msg-overhead-bytes", "64"])
        .assert()
        .success()
        .stdout(predicate::str::contains("raw signalling (64 GT/s x16)"))
        .stdout(predicate::str::contains("flit DLP/CRC/FEC"))
        .stdout(predicate::str::contains("after SKP ordered sets"))
        .stdout(predicate::str::contains("after DLLPs"))
        .stdout(predicate::str::contains("after TLP framing and headers"))
        .stdout(predicate::str::contains("after data alignment"))
        .stdout(predicate::str::contains("after software/message overhead"));
}

#[test]
fn cli_invalid_input_is_one_line_and_exit_code_2() {
    let cases: [(&[&str], &str); 6] = [
        (&["model", "--link", "gen3x3"], "allowed x1, x2, x4, x8, x12, x16, x32"),
        (&["model", "--gen", "9", "--width", "4"], "allowed 1, 2, 3, 4, 5, 6"),
        (&["model", "--mps", "100"], "allowed 128, 256, 512, 1024, 2048, 4096"),
        (&["model", "--read-latency-ns", "-5"], "must be 0 or more"),
        (&["model", "--mrrs", "8192"], "allowed 128, 256, 512, 1024, 2048, 4096"),
        (&["model", "--rcb", "32"], "allowed 64, 128"),
    ];
    for (args, message) in cases {
        let output = pcieperf().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(output.stdout.is_empty());
    }
}
