//! `pcieperf inspect` against `lspci` on the same work: both as processes on the same dump
//! (`-F`), interleaved (ours, lspci, ours, lspci …), each repeat giving a time ratio and a
//! peak-memory ratio (the child's `ru_maxrss` from `wait4`). Rows: median (min–max).
//!
//! Inputs, generated here: 250, 4096 and 65,536 devices with 256-byte configuration spaces
//! (`-xxx`), in two shapes:
//! - *flat*: root ports on bus 0, each opening a bus of endpoints (depth 1);
//! - *deep*: a chain of bridges (a root port, then switch ports) 255 long — 125 at 250 devices,
//!   where 255 would not fit — with the endpoints spread over every bus of the chain, so the
//!   mean endpoint sits about half the chain deep.
//!
//! Same work: lspci looks up names missing from pci.ids in udev's hwdb (the generated device
//! IDs mostly are); pcieperf has no hwdb. The goal rows run `lspci -O hwdb.disable=1`; one row
//! per size keeps hwdb on for comparison, and each row says which. Both read the same pci.ids.
//!
//! Run with `cargo bench --bench inspect_vs_lspci` (under `cargo test` it runs once on the live
//! machine and the 250-device dumps, as a smoke test); `INSPECT_DUMPS=DIR` keeps the dumps.

#[path = "../tests/data/pci/fixture.rs"]
mod fixture;
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use common::{full, header, spread, Ratio, Row};
use pcieperf::pci::{dump, Bdf};

/// One run of a child: wall time and peak resident memory.
struct Cost {
    seconds: f64,
    max_rss_kib: f64,
}

/// Run `command` to its end with output discarded; its time and `ru_maxrss` (KiB on Linux), or
/// how it failed.
fn cost(command: &mut Command) -> Result<Cost, String> {
    let start = Instant::now();
    let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
    let (mut status, mut usage) = (0i32, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child; status and usage are valid out-pointers.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let seconds = start.elapsed().as_secs_f64();
    match pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        true => Ok(Cost { seconds, max_rss_kib: usage.ru_maxrss as f64 }),
        false if libc::WIFSIGNALED(status) => Err(format!("killed by signal {}", libc::WTERMSIG(status))),
        false => Err(format!("exit status {}", libc::WEXITSTATUS(status))),
    }
}

/// Time and memory of `ours` against `theirs`, interleaved, as two rows (one saying why, when
/// lspci cannot do the work).
fn compare(what: &str, repeats: usize, ours: &[&str], theirs: &[&str], goal_time: &str, goal_memory: &str) {
    let bin = env!("CARGO_BIN_EXE_pcieperf");
    // The peer's flags, without the `-F FILE` the dump rows end with.
    let peer = format!("lspci {}", theirs.iter().take_while(|a| **a != "-F").copied().collect::<Vec<_>>().join(" "));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        a.push(cost(Command::new(bin).args(ours)).unwrap_or_else(|e| panic!("pcieperf {ours:?}: {e}")));
        match cost(Command::new("lspci").args(theirs)) {
            Ok(c) => b.push(c),
            Err(why) => {
                let ms = a[0].seconds * 1e3;
                println!("| {what} | {ms:.1} ms, {:.1} MiB | {peer}: fails ({why}) | — | {goal_time} |", a[0].max_rss_kib / 1024.0);
                return;
            }
        }
    }
    let median = |costs: &[Cost], f: fn(&Cost) -> f64| spread(costs.iter().map(f).collect()).0;
    let ratios = |f: fn(&Cost) -> f64| a.iter().zip(&b).map(|(x, y)| f(x) / f(y)).collect::<Vec<f64>>();
    let (seconds, rss): (fn(&Cost) -> f64, fn(&Cost) -> f64) = (|c| c.seconds, |c| c.max_rss_kib);
    let mib = |kib: f64| format!("{:.1} MiB", kib / 1024.0);
    Row { what: format!("{what}, time"), ours: format!("{:.1} ms", median(&a, seconds) * 1e3), peer: format!("{peer}: {:.1} ms", median(&b, seconds) * 1e3), ratio: Ratio::Time, ratios: ratios(seconds), goal: goal_time.into() }.print();
    Row { what: format!("{what}, peak RSS"), ours: mib(median(&a, rss)), peer: format!("{peer}: {}", mib(median(&b, rss))), ratio: Ratio::Memory, ratios: ratios(rss), goal: goal_memory.into() }.print();
}

fn slot(bus: usize, index: usize) -> Bdf {
    Bdf::new(0, bus as u8, (index / 8) as u8, (index % 8) as u8).unwrap()
}

fn endpoint(index: usize) -> Vec<u8> {
    let pcie = fixture::Pcie::new(fixture::ENDPOINT, 1 + (index % 4) as u32, [1, 2, 4, 8, 16][index % 5]).trained(1, 1);
    fixture::config(0x10de, index as u16, &pcie, 0)[..256].to_vec()
}

fn bridge(port_type: u16, vendor_device: u16, buses: (u8, u8, u8)) -> Vec<u8> {
    let port = fixture::Pcie::new(port_type, 4, 16).bridge(buses.0, buses.1, buses.2);
    fixture::config(0x8086, vendor_device, &port, 0)[..256].to_vec()
}

/// `devices` functions: root ports on bus 0 (one per 256 devices, at least one per 25), each
/// opening a bus of endpoints.
fn flat(devices: usize) -> Vec<(Bdf, Vec<u8>)> {
    let roots = devices.div_ceil(256).max(devices / 25).min(255);
    let mut configs = Vec::new();
    for r in 0..roots {
        configs.push((slot(0, r), bridge(fixture::ROOT_PORT, 0x1000 + r as u16, (0, r as u8 + 1, r as u8 + 1))));
    }
    // Endpoints fill the buses behind the root ports in turn; what does not fit goes on bus 0.
    for e in 0..devices - roots {
        let (bus, index) = if e < roots * 256 { (1 + e % roots, e / roots) } else { (0, roots + e - roots * 256) };
        configs.push((slot(bus, index), endpoint(e)));
    }
    configs
}

/// `devices` functions: a chain of `min(255, devices / 2)` bridges (the root port on bus 0,
/// then alternately upstream and downstream switch ports), each at slot 00.0 of its bus opening
/// the next; endpoints spread in turn over every bus of the chain.
fn deep(devices: usize) -> Vec<(Bdf, Vec<u8>)> {
    let depth = (devices / 2).min(255);
    let mut configs = Vec::new();
    for bus in 0..depth {
        let kind = if bus == 0 { fixture::ROOT_PORT } else if bus % 2 == 1 { fixture::UPSTREAM } else { fixture::DOWNSTREAM };
        configs.push((slot(bus, 0), bridge(kind, 0x2000 + bus as u16, (bus as u8, bus as u8 + 1, depth as u8))));
    }
    let buses = depth + 1;
    let mut next_free = vec![1usize; buses];
    next_free[depth] = 0;
    for e in 0..devices - depth {
        // Round-robin over the buses, skipping full ones (256 functions a bus).
        let mut bus = e % buses;
        while next_free[bus] == 256 {
            bus = (bus + 1) % buses;
        }
        configs.push((slot(bus, next_free[bus]), endpoint(e)));
        next_free[bus] += 1;
    }
    configs
}

fn write_dump(path: &Path, mut configs: Vec<(Bdf, Vec<u8>)>) -> Bdf {
    configs.sort_by_key(|(bdf, _)| *bdf);
    let refs: Vec<(Bdf, &[u8])> = configs.iter().map(|(b, c)| (*b, c.as_slice())).collect();
    std::fs::write(path, dump::write(&refs)).unwrap();
    // The -s row selects the deepest, last function.
    configs.last().unwrap().0
}

fn main() {
    if Command::new("lspci").arg("--version").output().is_err() {
        eprintln!("lspci is required for this benchmark (Debian package pciutils)");
        std::process::exit(1);
    }
    let repeats = |n| if full() { n } else { 1 };
    header();
    compare("inspect -vv, live machine (lspci hwdb on)", repeats(15), &["inspect", "-vv"], &["-vv"], "", "");

    // INSPECT_DUMPS=DIR keeps the generated dumps there (for profiling either tool on them).
    let temporary = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("INSPECT_DUMPS").map_or(temporary.path().to_path_buf(), std::path::PathBuf::from);
    let sizes: &[(usize, &str, usize)] = if full() { &[(250, "250", 15), (4096, "4096", 7), (65_536, "65,536", 3)] } else { &[(250, "250", 1)] };
    for &(devices, label, n) in sizes {
        for (shape, configs) in [("flat", flat(devices)), ("deep", deep(devices))] {
            assert_eq!(configs.len(), devices);
            let path = dir.join(format!("{shape}-{devices}.dump"));
            let last = write_dump(&path, configs).to_string();
            let file = path.to_str().unwrap();
            let input = format!("{label} devices, {shape}");
            let off = "hwdb.disable=1";
            compare(&format!("inspect -vv, {input} (lspci hwdb off)"), repeats(n), &["inspect", "-vv", "-F", file], &["-O", off, "-vv", "-F", file], "≤ 1.0", "≤ 1.5");
            if shape == "flat" {
                compare(&format!("inspect -vv, {input} (lspci hwdb on)"), repeats(n), &["inspect", "-vv", "-F", file], &["-vv", "-F", file], "", "");
            }
            compare(&format!("inspect -t, {input} (no names)"), repeats(n), &["inspect", "-t", "-F", file], &["-t", "-F", file], "≤ 1.0", "≤ 1.5");
            compare(&format!("inspect -vv -n, {input} (no names)"), repeats(n), &["inspect", "-vv", "-n", "-F", file], &["-vv", "-n", "-F", file], "≤ 1.0", "≤ 1.5");
            compare(&format!("inspect -vv -s {last}, {input} (lspci hwdb off)"), repeats(n), &["inspect", "-vv", "-s", &last, "-F", file], &["-O", off, "-vv", "-s", &last, "-F", file], "≤ 1.0", "≤ 1.5");
        }
    }
}
