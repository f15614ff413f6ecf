//! Whole-machine decode time: `pcieperf inspect -vv` against `lspci -vv` in the same run, on the
//! live machine, on a 256-device `lspci -xxxx` dump (`-F`), and on generated trees of about 4000
//! and 65,536 devices (`-xxx`, 256 bytes each: root ports on bus 0, endpoints behind them, so
//! every endpoint has a parent to find). Ratio = pcieperf time / lspci time (below 1 = faster),
//! median and min–max over interleaved repeats.
//!
//! Run with `cargo bench --bench inspect_vs_lspci` (under `cargo test` it runs once on the live
//! machine and the 256-device dump, as a smoke test). Both tools run as processes, interleaved,
//! so start-up, pci.ids loading and output are charged to both alike.

#[path = "../tests/data/pci/fixture.rs"]
mod fixture;
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{full, header, spread, Ratio, Row};
use pcieperf::pci::{dump, Bdf};

fn time(command: &mut Command) -> Duration {
    let start = Instant::now();
    let status = command.stdout(Stdio::null()).stderr(Stdio::null()).status().expect("run");
    let elapsed = start.elapsed();
    assert!(status.success(), "{command:?} failed");
    elapsed
}

fn compare(label: &str, repeats: usize, ours: impl Fn() -> Command, theirs: impl Fn() -> Command, goal: &str) {
    let (mut a, mut b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats {
        let (ours, theirs) = (time(&mut ours()).as_secs_f64(), time(&mut theirs()).as_secs_f64());
        a.push(ours);
        b.push(theirs);
        ratios.push(ours / theirs);
    }
    let ms = |values: Vec<f64>| format!("{:.1} ms", spread(values).0 * 1e3);
    Row { what: format!("inspect -vv, {label}"), ours: ms(a), peer: format!("lspci -vv {}", ms(b)), ratio: Ratio::Time, ratios, goal: goal.into() }.print();
}

/// A dump of `roots` root ports on bus 0, each opening its own bus with `per_bus` endpoints,
/// plus `extra_on_bus0` endpoints on bus 0; configuration spaces cut to `bytes`.
fn tree_dump(roots: usize, per_bus: usize, extra_on_bus0: usize, bytes: usize) -> String {
    let slot = |bus: usize, index: usize| Bdf::new(0, bus as u8, (index / 8) as u8, (index % 8) as u8).unwrap();
    let mut configs: Vec<(Bdf, Vec<u8>)> = Vec::new();
    for r in 0..roots {
        let bus = r + 1;
        let port = fixture::Pcie::new(fixture::ROOT_PORT, 4, 16).bridge(0, bus as u8, bus as u8);
        configs.push((slot(0, r), fixture::config(0x8086, 0x1000 + r as u16, &port, 0)[..bytes].to_vec()));
        for e in 0..per_bus {
            let endpoint = fixture::Pcie::new(fixture::ENDPOINT, 1 + (e % 4) as u32, [1, 2, 4, 8, 16][e % 5]).trained(1, 1);
            configs.push((slot(bus, e), fixture::config(0x10de, e as u16, &endpoint, 0)[..bytes].to_vec()));
        }
    }
    for e in 0..extra_on_bus0 {
        let endpoint = fixture::Pcie::new(fixture::ENDPOINT, 3, 8);
        configs.push((slot(0, roots + e), fixture::config(0x1af4, e as u16, &endpoint, 0)[..bytes].to_vec()));
    }
    configs.sort_by_key(|(bdf, _)| *bdf);
    let refs: Vec<(Bdf, &[u8])> = configs.iter().map(|(b, c)| (*b, c.as_slice())).collect();
    dump::write(&refs)
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
    let repeats = |n| if full() { n } else { 1 };
    header();
    compare("live machine", repeats(30), || command(bin, &["inspect", "-vv"]), || command("lspci", &["-vv"]), "");

    let dir = tempfile::tempdir().unwrap();
    let mut dumps = vec![("256-device dump (-xxxx)", tree_dump(0, 0, 0, 4096), 30, "≤ 1.0")];
    let configs: Vec<(Bdf, Vec<u8>)> = (0..256u32)
        .map(|i| {
            let pcie = fixture::Pcie::new(fixture::ENDPOINT, 1 + i % 5, [1, 2, 4, 8, 16][i as usize % 5]).trained(1, 1);
            (Bdf::new(0, (i / 4) as u8 + 1, 0, (i % 4) as u8).unwrap(), fixture::config(0x8086, i as u16, &pcie, i))
        })
        .collect();
    let refs: Vec<(Bdf, &[u8])> = configs.iter().map(|(b, c)| (*b, c.as_slice())).collect();
    dumps[0].1 = dump::write(&refs);
    if full() {
        dumps.push(("4016-device tree (-xxx)", tree_dump(16, 250, 0, 256), 9, "≤ 1.0"));
        dumps.push(("65,536-device tree (-xxx)", tree_dump(255, 256, 1, 256), 3, "≤ 1.0"));
    }
    for (label, text, n, goal) in dumps {
        let path = dir.path().join("machine.dump");
        std::fs::write(&path, text).unwrap();
        let dump_path = path.to_str().unwrap();
        compare(label, repeats(n), || command(bin, &["inspect", "-vv", "--dump", dump_path]), || command("lspci", &["-vv", "-F", dump_path]), goal);
    }
}
