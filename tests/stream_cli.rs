//! `pcieperf stream` from the command line: the document, bad input as one line with exit 2, a
//! sweep's overhead fit, and Ctrl-C writing the messages so far.

use assert_cmd::Command;
use serde_json::Value;

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

#[test]
fn the_document_is_simulated_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.json");
    let html = dir.path().join("s.html");
    let assert = pcieperf().args(["stream", "--preset", "doc003", "--messages", "300", "-o"]).arg(&out).arg("--html").arg(&html).assert().success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(stdout.contains("SIMULATED") && stdout.contains("6.727 Gb/s"), "{stdout}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(doc["schema"], "pcieperf.stream/1");
    assert_eq!(doc["simulated"], true);
    let point = &doc["points"][0];
    assert_eq!(point["messages"], 300);
    assert_eq!(point["dropped"], 0);
    assert!(point["latency"]["end_to_end"]["p99_9_ns"].as_f64().unwrap() > 0.0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("ring occupancy over time") && page.contains("latency CDF") && page.contains("<svg"), "plots drawn");
    let csv = pcieperf().args(["stream", "--messages", "50", "--csv"]).assert().success();
    let csv = String::from_utf8(csv.get_output().stdout.clone()).unwrap();
    assert!(csv.lines().nth(1).unwrap().starts_with("simulated,16352,50,"), "{csv}");
    let metrics = pcieperf().args(["stream", "--messages", "50", "--metrics"]).assert().success();
    assert!(String::from_utf8_lossy(&metrics.get_output().stdout).contains("pcieperf_stream_sustained_bytes_per_second{"));
}

/// Pull and h2d runs get their own model (reads one in flight; the host's writes and the
/// device's consume time), not the push model; only d2h push prints document 003's figure.
#[test]
fn pull_and_h2d_runs_get_their_own_model() {
    // h2d with a device that takes 60 µs per buffer: a device that consumes instantly bounds
    // nothing and is not listed (model::stream leaves out stages that take no time).
    for (args, bound) in [(&["--pull"][..], "  reads "), (&["--direction", "h2d", "--target", "sim:doc003,dwell_ns=60000"], "  device ")] {
        let text = pcieperf().arg("stream").args(args).args(["--messages", "50"]).assert().success();
        let text = String::from_utf8(text.get_output().stdout.clone()).unwrap();
        assert!(text.contains("model (TLP-accurate") && text.contains(bound) && !text.contains("6.727 Gb/s") && !text.contains("not shown"), "{args:?}: {text}");
        let json = pcieperf().arg("stream").args(args).args(["--messages", "50", "--json"]).assert().success();
        let doc: Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
        let model = &doc["points"][0]["model"]["tlp_accurate"];
        assert!(model["MBps"].as_f64().unwrap() > 0.0 && model["bounds"].as_array().unwrap().len() == 3, "{args:?}: {model}");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        &["--msg-size", "20000"][..],
        &["--host-bufs", "0"],
        &["--dev-bufs", "0"],
        &["--host-bufs", "4000000000"],
        &["--msg-size", "0"],
    ] {
        let assert = pcieperf().arg("stream").args(args).assert().code(2);
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_sweep_fits_the_per_message_overhead() {
    let assert = pcieperf().args(["stream", "--msg-size", "64,128,192,256,1KiB,4KiB", "--buf-size", "4KiB", "--messages", "200", "--json"]).assert().success();
    let doc: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    assert_eq!(doc["points"].as_array().unwrap().len(), 6);
    let fit = &doc["overhead_fit"];
    // Each TLP costs its 16-byte header and 8 bytes of framing (Gen1, 4DW) and a little of the
    // SKPs and DLLPs; the per-message overhead holds the metadata and flag TLPs (40 + 28 bytes).
    let per_tlp = fit["per_tlp_bytes"].as_f64().unwrap();
    let per_message = fit["per_message_bytes"].as_f64().unwrap();
    assert!((23.0..28.0).contains(&per_tlp), "{fit}");
    assert!((60.0..120.0).contains(&per_message), "{fit}");
}

#[test]
fn ctrl_c_ends_promptly_with_the_messages_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.json");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pcieperf"))
        .args(["stream", "--msg-size", "64", "--buf-size", "64", "--messages", "1000000000", "-o"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "ended promptly");
    assert_eq!(status.code(), Some(130));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(doc["stopped_early"], "interrupted");
    assert!(doc["points"][0]["messages"].as_u64().unwrap() > 0);
}

#[test]
fn a_duration_is_virtual_time_on_the_simulator() {
    let assert = pcieperf().args(["stream", "--duration", "2ms", "--json"]).assert().success();
    let doc: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    let point = &doc["points"][0];
    // 16352-byte messages at ~19.6 µs each: about 100 in 2 ms of virtual time.
    let messages = point["messages"].as_u64().unwrap();
    assert!((95..=105).contains(&messages), "{messages}");
    assert!((point["duration_ns"].as_f64().unwrap() - 2e6).abs() < 25e3, "{}", point["duration_ns"]);
}

/// A long stream of small messages is fast-forwarded once its schedule repeats, and every view
/// says how many messages were copies of a simulated period; `fast_forward=0` copies none.
#[test]
fn fast_forwarded_messages_are_counted_in_the_views() {
    let run = |target: &str| {
        let assert = pcieperf().args(["stream", "--target", target, "--msg-size", "64", "--messages", "40000", "--json"]).assert().success();
        let doc: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
        doc["points"][0]["fast_forwarded"].as_u64().unwrap()
    };
    let copied = run("sim:doc003");
    assert!(copied > 10_000 && copied < 40_000, "{copied}");
    assert_eq!(run("sim:doc003,fast_forward=0"), 0);
    let text = pcieperf().args(["stream", "--target", "sim:doc003", "--msg-size", "64", "--messages", "40000"]).assert().success();
    let text = String::from_utf8(text.get_output().stdout.clone()).unwrap();
    assert!(text.contains(&format!("fast-forwarded: {copied} of 40000 messages")), "{text}");
}

/// `--direction both`: each direction's point, and their sum, in every view; engines without
/// two rings at once refuse in one line.
#[test]
fn both_directions_at_once() {
    let json = pcieperf().args(["stream", "--direction", "both", "--messages", "50", "--json"]).assert().success();
    let doc: Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
    assert_eq!(doc["schema"], "pcieperf.stream/1");
    assert_eq!(doc["points"][0]["messages"], 50);
    assert_eq!(doc["both"]["h2d_points"][0]["messages"], 50);
    let sum = &doc["both"]["sum"][0];
    let (d, h, total) = (sum["d2h_MBps"].as_f64().unwrap(), sum["h2d_MBps"].as_f64().unwrap(), sum["sum_MBps"].as_f64().unwrap());
    assert!(d > 0.0 && h > 0.0 && (total - d - h).abs() < 1e-6, "{sum}");
    let text = pcieperf().args(["stream", "--direction", "both", "--messages", "50"]).assert().success();
    let text = String::from_utf8(text.get_output().stdout.clone()).unwrap();
    assert!(text.contains("== d2h: messages") && text.contains("== h2d: messages") && text.contains("sum ") && text.contains("SIMULATED"), "{text}");
    let csv = pcieperf().args(["stream", "--direction", "both", "--messages", "50", "--csv"]).assert().success();
    let csv = String::from_utf8(csv.get_output().stdout.clone()).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.lines().nth(1).unwrap().ends_with(",d2h") && csv.lines().nth(2).unwrap().ends_with(",h2d"), "{csv}");
    // --pull and --lossy apply to both rings: each direction its own model (pull: the reads
    // name the limit) and its own drops, the CSV and metrics per direction.
    let json = pcieperf().args(["stream", "--direction", "both", "--pull", "--messages", "20", "--json"]).assert().success();
    let doc: Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
    assert_eq!((doc["plan"]["transport"].as_str(), doc["points"][0]["messages"].as_u64()), (Some("pull"), Some(20)), "{}", doc["plan"]);
    let bound = |point: &Value| point["model"]["tlp_accurate"]["bounds"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert!(bound(&doc["points"][0]).contains(&"reads".to_string()) && bound(&doc["both"]["h2d_points"][0]).contains(&"reads".to_string()), "{}", doc["points"][0]["model"]);
    assert_eq!(doc["both"]["h2d_points"][0]["messages"], 20);
    // Lossy: a host away every 10th message and a slow device consumer make both producers drop.
    let target = "sim:doc003,host_stall_every=10,host_stall_ns=200000,dwell_ns=20000";
    let json = pcieperf().args(["stream", "--direction", "both", "--lossy", "--host-bufs", "4", "--messages", "100", "--json", "--target", target]).assert().success();
    let doc: Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
    let drops = |point: &Value| point["dropped_by_producer"].as_u64().unwrap();
    assert!(drops(&doc["points"][0]) > 0 && drops(&doc["both"]["h2d_points"][0]) > 0, "{}", doc["both"]["h2d_points"][0]);
    let metrics = pcieperf().args(["stream", "--direction", "both", "--lossy", "--host-bufs", "4", "--messages", "100", "--metrics", "--target", target]).assert().success();
    let metrics = String::from_utf8(metrics.get_output().stdout.clone()).unwrap();
    assert!(metrics.contains("direction=\"d2h\"") && metrics.contains("direction=\"h2d\""), "{metrics}");
    // A one-direction document has no `both`.
    let one = pcieperf().args(["stream", "--messages", "50", "--json"]).assert().success();
    let one: Value = serde_json::from_slice(&one.get_output().stdout).unwrap();
    assert!(one.get("both").is_none());
    // A FIFO pair streams both ways at once: the test's device drains the write FIFO and
    // writes stamped messages into the read FIFO; each direction its own point, not simulated.
    let dir = tempfile::tempdir().unwrap();
    let (w, r) = (dir.path().join("w"), dir.path().join("r"));
    for fifo in [&w, &r] {
        let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path in our temporary directory.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo {}", fifo.display());
    }
    let target = format!("chardev:{},{}", w.display(), r.display());
    let device = std::thread::spawn({
        let (w, r) = (w.clone(), r.clone());
        move || {
            use std::io::{Read, Write};
            let mut output = std::fs::OpenOptions::new().write(true).open(&r).unwrap();
            let mut message = vec![0; 64];
            for sequence in 0..50u64 {
                pcieperf::engine::msgstream::stamp(&mut message, sequence, 0);
                output.write_all(&message).unwrap();
            }
            let mut taken = Vec::new();
            std::fs::File::open(&w).unwrap().read_to_end(&mut taken).unwrap();
            taken.len()
        }
    });
    let both = pcieperf().args(["stream", "--direction", "both", "--messages", "50", "--msg-size", "64", "--buf-size", "64", "--json", "--target", &target]).assert().success();
    let doc: Value = serde_json::from_slice(&both.get_output().stdout).unwrap();
    assert_eq!(device.join().unwrap(), 50 * 64);
    assert_eq!((doc["simulated"].as_bool(), doc["points"][0]["messages"].as_u64(), doc["both"]["h2d_points"][0]["messages"].as_u64()), (Some(false), Some(50), Some(50)), "{doc}");
    assert_eq!(doc["points"][0]["dropped"], 0);
    // One node cannot be written and read as two streams: one line, exit 2.
    let _peer = std::fs::OpenOptions::new().read(true).write(true).open(&w).unwrap();
    let refused = pcieperf().args(["stream", "--direction", "both", "--messages", "5", "--msg-size", "64", "--buf-size", "64", "--target", &format!("chardev:{}", w.display())]).assert().code(2);
    let stderr = String::from_utf8(refused.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("one node") && stderr.trim_end().lines().count() == 1, "{stderr}");
}
