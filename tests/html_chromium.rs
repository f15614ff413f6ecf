//! The HTML report in a real browser: headless Chromium (Debian package `chromium`, installed by
//! `.ci/run`) renders a simulated run's report and a comparison page; the console must stay free
//! of errors, the DOM must hold the plots, and screenshots are kept as test artefacts in
//! `target/test-artefacts/` (look at them: `report.png`, `comparison.png`). Without chromium the
//! test says so and checks the pages' structure only.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn pcieperf(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_pcieperf")).args(args).stderr(Stdio::piped()).output().unwrap();
    assert!(out.status.success(), "pcieperf {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn artefacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artefacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Headless Chromium on `page`, with a fresh profile; `what` is `--screenshot=…` or
/// `--dump-dom`. `None` when chromium is not installed.
fn chromium(page: &Path, what: &str, profile: &Path) -> Option<Output> {
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"])
        .args(["--disable-component-update", "--disable-sync", "--enable-logging=stderr", "--v=0", "--window-size=1100,2400", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(what)
        .arg(format!("file://{}", page.display()))
        .output()
        .ok()?;
    Some(out)
}

/// Console messages of the page that are errors (Chromium logs them as `CONSOLE(line)`).
fn console_errors(stderr: &str) -> Vec<String> {
    stderr.lines().filter(|l| l.contains(":CONSOLE(") || l.contains("Uncaught")).map(str::to_string).collect()
}

fn check_in_browser(page: &Path, name: &str, svgs_at_least: usize) {
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.matches("<svg").count() >= svgs_at_least, "{name}: too few plots");
    let profile = tempfile::tempdir().unwrap();
    let shot = artefacts().join(format!("{name}.png"));
    let _ = std::fs::remove_file(&shot);
    let Some(out) = chromium(page, &format!("--screenshot={}", shot.display()), profile.path()) else {
        eprintln!("SKIPPED the browser part for {name}: no chromium (Debian package chromium, installed by .ci/run)");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(console_errors(&stderr).is_empty(), "{name}: console errors: {:?}", console_errors(&stderr));
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("{name}: no screenshot ({e}); chromium said: {stderr}"));
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{name}: the screenshot is not a rendered page");
    let profile = tempfile::tempdir().unwrap();
    let dom = chromium(page, "--dump-dom", profile.path()).unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.matches("<svg").count() >= svgs_at_least, "{name}: the browser's DOM lost plots");
    eprintln!("{name}: screenshot kept at {}", shot.display());
}

#[test]
fn the_report_and_the_comparison_render_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, target: &str| {
        let out = dir.path().join(name);
        let sizes = "4KiB..1MiB";
        pcieperf(&["dma", "--target", target, "--dir", "both", "--sizes", sizes, "--duration", "100ms", "--out", out.to_str().unwrap()]);
        pcieperf(&["dma", "--target", target, "--dir", "d2h", "--sizes", sizes, "--duration", "100ms", "--out", dir.path().join(format!("d2h-{name}")).to_str().unwrap()]);
        out
    };
    let a = run("a.json", "sim:gen3x8,stalls_per_s=2000,long_stalls_per_s=50");
    let b = run("b.json", "sim:gen4x16");
    let report = artefacts().join("report.html");
    let d2h = dir.path().join("d2h-a.json");
    pcieperf(&["report", d2h.to_str().unwrap(), "--html", report.to_str().unwrap()]);
    let html = std::fs::read_to_string(&report).unwrap();
    for needle in ["95 % confidence interval", "spread of the samples", "p99", "model ceiling (", "distribution of transfer times", "samples over time", "log scale"] {
        assert!(html.contains(needle), "the report lacks {needle}");
    }
    check_in_browser(&report, "report", 3);
    let comparison = artefacts().join("comparison.html");
    let json = pcieperf(&["report", a.to_str().unwrap(), b.to_str().unwrap(), "--html", comparison.to_str().unwrap(), "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["schema"], "pcieperf.comparison/1");
    assert!(json["rows"].as_array().unwrap().iter().all(|r| r["ratio"].as_f64().unwrap() > 1.0), "gen4x16 beats gen3x8 at every size");
    let first = json["differing_conditions"][0]["condition"].as_str().unwrap();
    assert!(!first.contains("start_time"), "conditions that matter come first, not {first}");
    check_in_browser(&comparison, "comparison", 1);
}
