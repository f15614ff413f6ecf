//! `report` on large results files: peak memory (the child's `ru_maxrss`) ÷ the file's size and
//! wall time, for the text summary, `--csv`, `--html` and a comparison of the file with itself;
//! and the same at a quarter, a half and the whole of the points, to show both grow linearly
//! with the points (time and memory per point stay flat). Goal: memory ≤ 1.5× the file.
//!
//! The file: a simulated d2h sweep of many sizes (sim:gen3x8, `--verify none`, a budget per size
//! long enough for the stop rule's 2,000 samples), written by the same `pcieperf`; about 160 MB
//! at the whole. Peer in the same run, when `PCIEPERF_BEFORE` names another pcieperf binary
//! (e.g. one built from an earlier commit): the same commands with it, interleaved, and the
//! ratio ours ÷ before. `cargo bench --bench report_memory`; under `cargo test` it runs once on
//! a small file.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Peak RSS (bytes) and wall time of `binary args…`, its output discarded; panics unless it
/// exits 0.
fn measure(binary: &Path, args: &[&str]) -> (u64, Duration) {
    let cost = common::child_cost(binary, args).unwrap_or_else(|why| panic!("{} {args:?} failed: {why}", binary.display()));
    (cost.max_rss_kib as u64 * 1024, Duration::from_secs_f64(cost.seconds))
}

/// A results file of `sizes` sizes, each with up to 2,000 samples.
fn results_file(dir: &Path, sizes: usize, budget: &str) -> PathBuf {
    let path = dir.join(format!("sweep{sizes}.json"));
    let list: Vec<String> = (0..sizes as u64).map(|i| (4096 + 64 * i).to_string()).collect();
    let status = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["-q", "dma", "--target", "sim:gen3x8", "--dir", "d2h", "--verify", "none", "--ci-target", "0.0001", "--duration", budget, "--sizes", &list.join(","), "--out"])
        .arg(&path)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    path
}

/// Samples in a results file, counted as it streams by: this process stays small, as a child's
/// `ru_maxrss` starts from its parent's high-water mark (the child shares the parent's memory
/// until it executes pcieperf).
fn samples_in(path: &Path) -> u64 {
    #[derive(serde::Deserialize)]
    struct Run {
        points: Vec<Point>,
    }
    #[derive(serde::Deserialize)]
    struct Point {
        samples: Vec<serde::de::IgnoredAny>,
    }
    let run: Run = serde_json::from_reader(std::io::BufReader::new(std::fs::File::open(path).unwrap())).unwrap();
    run.points.iter().map(|p| p.samples.len() as u64).sum()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (sizes, budget, repeats) = if full { (500, "150ms", 3) } else { (8, "20ms", 1) };
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_pcieperf"));
    let before = std::env::var_os("PCIEPERF_BEFORE").map(PathBuf::from);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let html = dir.path().join("out.html");
    let html = html.to_str().unwrap();

    let whole = results_file(dir.path(), sizes, budget);
    let file_bytes = std::fs::metadata(&whole).unwrap().len();
    let file = whole.to_str().unwrap();
    println!("results file: {sizes} sizes, {} samples, {:.1} MB (sim:gen3x8 d2h, --verify none, --duration {budget})", samples_in(&whole), file_bytes as f64 / 1e6);
    let (floor, _) = measure(Path::new("/bin/true"), &[]);
    println!("a child's floor here (`true`: this process's high-water mark): {:.1} MB", floor as f64 / 1e6);
    let views: [(&str, Vec<&str>); 4] = [
        ("report FILE (text)", vec!["report", file]),
        ("report FILE --csv", vec!["report", file, "--csv"]),
        ("report FILE --html OUT", vec!["report", file, "--html", html]),
        ("report FILE FILE (compare)", vec!["report", file, file]),
    ];
    for (name, args) in &views {
        let (mut rss, mut time, mut rss_before, mut time_before) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..repeats {
            let (r, t) = measure(&ours, args);
            rss.push(r as f64);
            time.push(t.as_secs_f64());
            if let Some(before) = &before {
                let _ = std::fs::remove_file(html);
                let (r, t) = measure(before, args);
                rss_before.push(r as f64);
                time_before.push(t.as_secs_f64());
            }
            let _ = std::fs::remove_file(html);
        }
        let (rss, time) = (median(rss), median(time));
        let mut line = format!("{name}: peak RSS {:.1} MB = {:.2}× the file (goal ≤ 1.5), {:.2} s", rss / 1e6, rss / file_bytes as f64, time);
        if before.is_some() {
            let (rss_b, time_b) = (median(rss_before), median(time_before));
            line += &format!(
                "; before: {:.1} MB = {:.2}× the file, {:.2} s; ratio now ÷ before: memory {:.2}, time {:.2}",
                rss_b / 1e6,
                rss_b / file_bytes as f64,
                time_b,
                rss / rss_b,
                time / time_b
            );
        }
        println!("{line} (median of {repeats})");
    }

    // Linear in the points: the text summary of a quarter, a half and the whole sweep.
    for part in [sizes / 4, sizes / 2, sizes] {
        let path = if part == sizes { whole.clone() } else { results_file(dir.path(), part.max(1), budget) };
        let samples = samples_in(&path);
        let bytes = std::fs::metadata(&path).unwrap().len();
        let runs: Vec<(u64, Duration)> = (0..repeats).map(|_| measure(&ours, &["report", path.to_str().unwrap()])).collect();
        let rss = median(runs.iter().map(|r| r.0 as f64).collect());
        let time = median(runs.iter().map(|r| r.1.as_secs_f64()).collect());
        println!(
            "report (text) of {part} sizes, {samples} samples ({:.1} MB): {:.2} s, peak RSS {:.1} MB; per sample {:.2} µs and {:.0} bytes",
            bytes as f64 / 1e6,
            time,
            rss / 1e6,
            time * 1e6 / samples as f64,
            rss / samples as f64
        );
    }
}
