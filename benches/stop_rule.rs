//! The stop rule's time to a figure: how long a large point takes before `dma` reports a
//! stable median (or a drift), against its `--duration` budget of 10 s, with the default rule
//! (± 1 % interval of the median). Points: block-file reads of 64 MiB and 512 MiB (this
//! machine's disk) and a simulated 4 MiB and 64 MiB d2h (virtual time; the figure is wall time).
//!
//! Each row: the wall time to a figure ÷ the 10 s budget (goal: ≤ 0.3, a figure within 3 s),
//! median (min–max) over repeats, with how the points stopped (`stable`, `drifting` with its
//! drift per second, or `duration` when neither came) and the samples the figure rests on.
//!
//! `cargo bench --bench stop_rule` runs it; under `cargo test` it runs once with a 1 s budget.

mod common;

use std::path::Path;
use std::process::Command;

const MIB: u64 = 1024 * 1024;

/// One point's stop: (wall s, stop reason with its drift, samples, CoV of its times).
fn point(target: &str, size: u64, budget_s: u64, destructive: bool) -> (f64, String, u64, f64) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pcieperf"));
    command.args(["dma", "--json", "--dir", "d2h"]).arg(format!("--target={target}")).arg(format!("--sizes={size}")).arg(format!("--duration={budget_s}s"));
    if destructive {
        command.arg("--destructive");
    }
    let output = command.output().expect("run pcieperf");
    assert!(output.status.success(), "pcieperf dma failed: {}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("pcieperf --json");
    let c = &json["points"][0]["convergence"];
    let reason = c["stop_reason"].as_str().unwrap_or("?").to_string();
    let reason = match c["drift"]["percent_per_s"].as_f64() {
        Some(per_s) => format!("{reason} {per_s:+.1} %/s"),
        None => reason,
    };
    let cov = json["points"][0]["summary"]["time_ns"]["cov"].as_f64().unwrap_or(0.0);
    (c["wall_ns"].as_f64().unwrap() / 1e9, reason, c["samples"].as_u64().unwrap(), cov)
}

/// Samples a ± `target` 95 % interval of the median needs at this spread (the median's standard
/// error is about 1.25 σ/√n for a normal spread): why a noisy point runs its budget.
fn samples_needed(cov: f64, target: f64) -> f64 {
    (1.96 * 1.2533 * cov / target).powi(2)
}

fn row(what: &str, target: &str, size: u64, budget_s: u64, repeats: usize, destructive: bool) {
    let (mut ratios, mut seconds, mut reasons, mut samples, mut covs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats {
        let (wall_s, reason, n, cov) = point(target, size, budget_s, destructive);
        covs.push(cov);
        ratios.push(wall_s / budget_s as f64);
        seconds.push(wall_s);
        reasons.push(reason);
        samples.push(n as f64);
    }
    let (s, s_min, s_max) = common::spread(seconds);
    let (n, n_min, n_max) = common::spread(samples);
    let (cov, _, _) = common::spread(covs);
    common::Row {
        what: format!("{what}: wall time to a figure, `--duration {budget_s}s`"),
        ours: format!(
            "{s:.2} s ({s_min:.2}–{s_max:.2}); {n:.0} samples ({n_min:.0}–{n_max:.0}); stopped: {}; CoV of transfer times {:.1} % (± 1 % needs ~{:.0} samples)",
            reasons.join(", "),
            cov * 100.0,
            samples_needed(cov, 0.01).max(6.0)
        ),
        peer: format!("its {budget_s} s budget"),
        ratio: common::Ratio::Time,
        ratios,
        goal: "≤ 0.3 (3 s)".into(),
    }
    .print();
}

fn main() {
    let full = common::full();
    let budget_s = if full { 10 } else { 1 };
    let repeats = common::repeats(3);
    // On the machine's disk (Cargo's target dir), not a tmpfs: O_DIRECT needs a real filesystem.
    let dir = tempfile::Builder::new().prefix("stop-rule").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("data");
    let sizes: &[u64] = if full { &[64 * MIB, 512 * MIB] } else { &[64 * MIB] };
    let largest = *sizes.iter().max().unwrap();
    write_file(&file, largest);
    println!("stop rule: default `pcieperf dma` rule (± 1 % interval of the median, drift beyond 20 standard errors), {repeats} repeats, this machine");
    common::header();
    let target = format!("block:{}", file.display());
    for &size in sizes {
        row(&format!("block read {} MiB (this VM's virtio disk)", size / MIB), &target, size, budget_s, repeats, true);
    }
    for size in [4 * MIB, 64 * MIB] {
        row(&format!("simulated d2h {} MiB (sim, virtual time; wall time shown)", size / MIB), "sim", size, budget_s, repeats, false);
    }
}

/// A file of `bytes` written and flushed, so reads find it allocated and nothing dirty.
fn write_file(path: &Path, bytes: u64) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5au8; MIB as usize];
    for _ in 0..bytes / MIB {
        file.write_all(&chunk).unwrap();
    }
    file.sync_all().unwrap();
}
