//! Runs of any size render: a sweep of 16,000 sizes (the reproduction that made a table cell
//! wider than a format width can be, and panicked) measures, writes, and re-renders, and no line
//! of its text is wider than a terminal's worth of columns per column of the table.

use std::process::Command;

#[test]
fn a_sweep_of_sixteen_thousand_sizes_renders_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("big.json");
    let sizes: Vec<String> = (1..=16_000u64).map(|i| (i * 4).to_string()).collect();
    let run = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["-q", "dma", "--target", "sim:gen3x8", "--dir", "d2h", "--duration", "1ms", "--sizes", &sizes.join(","), "--out"])
        .arg(&results)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let report = Command::new(env!("CARGO_BIN_EXE_pcieperf")).arg("report").arg(&results).output().unwrap();
    assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
    let text = String::from_utf8(report.stdout).unwrap();
    assert!(text.lines().filter(|l| l.starts_with("d2h ") || l.trim_start().starts_with(char::is_numeric)).count() >= 16_000, "every size has its row");
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest < 400, "the widest line has {widest} characters");
    assert!(text.contains("16000 sizes: rms"), "the fit's residuals are summarised");
}

/// The other axis: a few sizes with the stop rule's 2,000 samples each (16,000 sizes × 2,000
/// samples would be a 6 GB file; `benches/report_memory.rs` shows time and memory linear in the
/// points instead). Every view of the run and a comparison render, and every sample is kept.
#[test]
fn sizes_of_two_thousand_samples_render_in_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("samples.json");
    let run = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["-q", "dma", "--target", "sim:gen3x8", "--dir", "d2h", "--verify", "none", "--ci-target", "0.0001", "--duration", "1s", "--sizes", "4KiB,8KiB,64KiB", "--out"])
        .arg(&results)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&results).unwrap()).unwrap();
    for point in doc["points"].as_array().unwrap() {
        assert_eq!(point["samples"].as_array().unwrap().len(), 2000, "the stop rule's most samples at {}", point["size_bytes"]);
    }
    let html = dir.path().join("samples.html");
    let views: [Vec<&std::ffi::OsStr>; 4] = [
        vec!["report".as_ref(), results.as_ref()],
        vec!["report".as_ref(), results.as_ref(), "--csv".as_ref()],
        vec!["report".as_ref(), results.as_ref(), "--html".as_ref(), html.as_ref(), "--metrics".as_ref(), "-".as_ref()],
        vec!["report".as_ref(), results.as_ref(), results.as_ref()],
    ];
    for args in views {
        let out = Command::new(env!("CARGO_BIN_EXE_pcieperf")).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).lines().count() > 3, "{args:?} printed its view");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("simulated") || page.contains("SIMULATED"), "the page says the figures are simulated");
}
