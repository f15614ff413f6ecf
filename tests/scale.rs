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
