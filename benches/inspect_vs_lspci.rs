//! Whole-machine decode time: `pcieperf inspect -vv` against `lspci -vv` in the same run, on the
//! live machine and on a 256-device `lspci -xxxx` dump (`-F`), as a ratio (below 1 = faster).
//!
//! Run with `cargo bench --bench inspect_vs_lspci` (under `cargo test` it runs once, as a smoke
//! test). Both tools run as processes, interleaved, so start-up, pci.ids loading and output are
//! charged to both alike.

#[path = "../tests/data/pci/fixture.rs"]
mod fixture;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pcieperf::pci::{dump, Bdf};

/// `cargo bench` passes `--bench`; under `cargo test --all-targets` one round checks that both
/// commands run, without spending time on figures nobody reads.
fn rounds() -> usize {
    if std::env::args().any(|a| a == "--bench") { 30 } else { 1 }
}

fn time(command: &mut Command) -> Duration {
    let start = Instant::now();
    let status = command.stdout(Stdio::null()).stderr(Stdio::null()).status().expect("run");
    let elapsed = start.elapsed();
    assert!(status.success(), "{command:?} failed");
    elapsed
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn compare(label: &str, ours: impl Fn() -> Command, theirs: impl Fn() -> Command) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let rounds = rounds();
    for _ in 0..rounds {
        a.push(time(&mut ours()));
        b.push(time(&mut theirs()));
    }
    let (a, b) = (median(a), median(b));
    println!(
        "{label}: pcieperf inspect -vv {:.2} ms, lspci -vv {:.2} ms, ratio pcieperf/lspci = {:.2} (median of {rounds})",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        a.as_secs_f64() / b.as_secs_f64()
    );
}

fn command(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    command
}

fn main() {
    if Command::new("lspci").arg("--version").output().is_err() {
        eprintln!("lspci is required for this benchmark (Debian package pciutils)");
        std::process::exit(1);
    }
    let bin = env!("CARGO_BIN_EXE_pcieperf");
    compare("live machine", || command(bin, &["inspect", "-vv"]), || command("lspci", &["-vv"]));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("256-devices.dump");
    let configs: Vec<(Bdf, Vec<u8>)> = (0..256u32)
        .map(|i| {
            let pcie = fixture::Pcie::new(fixture::ENDPOINT, 1 + i % 5, [1, 2, 4, 8, 16][i as usize % 5]).trained(1, 1);
            (Bdf::new(0, (i / 4) as u8 + 1, 0, (i % 4) as u8).unwrap(), fixture::config(0x8086, i as u16, &pcie, i))
        })
        .collect();
    let refs: Vec<(Bdf, &[u8])> = configs.iter().map(|(b, c)| (*b, c.as_slice())).collect();
    std::fs::write(&path, dump::write(&refs)).unwrap();
    let dump_path = path.to_str().unwrap();
    compare("256-device dump", || command(bin, &["inspect", "-vv", "--dump", dump_path]), || command("lspci", &["-vv", "-F", dump_path]));
}
