//! `pcieperf inspect` against `lspci` on the same work: both as processes on the same dump
//! (`-F`), interleaved (ours, lspci, ours, lspci …), each repeat giving a time ratio and a
//! peak-memory ratio (the child's `ru_maxrss` from `wait4`, each child started by a small
//! spawner process so the bench's own memory is not counted: see `Spawner`). Rows: median
//! (min–max). A last row per size runs ours on the deep dump against ours on the flat one: the
//! cost of depth.
//!
//! Inputs, generated here: 250, 4096 and 65,536 devices with 256-byte configuration spaces
//! (`-xxx`), in two shapes:
//! - *flat*: root ports on bus 0, each opening a bus of endpoints (depth 1);
//! - *deep*: a chain of bridges (a root port, then switch ports) 255 long — 125 at 250 devices,
//!   where 255 would not fit — with the endpoints spread over every bus of the chain, so the
//!   mean endpoint sits about half the chain deep.
//!
//! Same work: lspci looks up names missing from pci.ids in udev's hwdb (the generated device
//! IDs mostly are); pcieperf has no hwdb. Every goal row runs `lspci -O hwdb.disable=1` (also
//! `-t` and `-n`, which print no names); one row per size keeps hwdb on for comparison, and each
//! row says which. Both read the same pci.ids.
//!
//! Run with `cargo bench --bench inspect_vs_lspci` (under `cargo test` it runs once on the live
//! machine and the 250-device dumps, as a smoke test); `INSPECT_DUMPS=DIR` keeps the dumps.

#[path = "../tests/data/pci/fixture.rs"]
mod fixture;
mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{child_cost, full, header, spread, Cost, Ratio, Row};
use pcieperf::pci::{dump, Bdf};


/// Runs commands for the bench from a small process of its own. A child's `ru_maxrss` is its
/// high-water mark since the fork, before it executes the command: forked from the bench, which
/// holds ~100 MiB after generating a 65,536-device dump, every child would read at least that.
/// The spawner is this bench binary executed afresh (`--spawner`) before the bench allocates
/// anything, so a child starts from the spawner's few MiB ([`Spawner::floor`] shows how many).
struct Spawner {
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

/// Separates a command's words on the spawner's input (never in a path or flag used here).
const WORD: char = '\u{1f}';

impl Spawner {
    fn start() -> Spawner {
        let mut child = Command::new(std::env::current_exe().expect("the bench's own path")).arg("--spawner").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn the spawner");
        Spawner { input: child.stdin.take().unwrap(), output: std::io::BufReader::new(child.stdout.take().unwrap()) }
    }

    /// Run `program args…` to its end with output discarded: its time and `ru_maxrss`, or how
    /// it failed.
    fn cost(&mut self, program: &str, args: &[&str]) -> Result<Cost, String> {
        use std::io::{BufRead, Write};
        let line: Vec<&str> = std::iter::once(program).chain(args.iter().copied()).collect();
        writeln!(self.input, "{}", line.join(&WORD.to_string())).expect("write to the spawner");
        let mut answer = String::new();
        self.output.read_line(&mut answer).expect("read from the spawner");
        let mut fields = answer.split_whitespace();
        match (fields.next(), fields.next(), fields.next()) {
            (Some("ok"), Some(seconds), Some(kib)) => Ok(Cost { seconds: seconds.parse().unwrap(), max_rss_kib: kib.parse().unwrap() }),
            _ => Err(answer.trim().to_string()),
        }
    }

    /// The peak RSS a child of the spawner reads when it does nothing (`true`): the floor under
    /// every figure, and the check that the bench's own memory is not counted.
    fn floor(&mut self) -> f64 {
        self.cost("true", &[]).expect("true runs").max_rss_kib / 1024.0
    }
}

/// The spawner's side: one command a line, answered `ok SECONDS MAXRSS_KIB` or why it failed.
fn serve_spawner() {
    use std::io::{BufRead, Write};
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("read a command");
        let words: Vec<&str> = line.split(WORD).collect();
        let answer = match child_cost(std::path::Path::new(words[0]), &words[1..]) {
            Ok(cost) => format!("ok {} {}", cost.seconds, cost.max_rss_kib),
            Err(why) => why,
        };
        writeln!(out, "{answer}").and_then(|_| out.flush()).expect("answer the bench");
    }
}

/// Time and memory of `pcieperf ours…` against `lspci theirs…`, interleaved, as two rows (one
/// saying why, when lspci cannot do the work).
fn compare(spawner: &mut Spawner, what: &str, repeats: usize, ours: &[&str], theirs: &[&str], goal_time: &str, goal_memory: &str) {
    // The peer's flags, without the `-F FILE` the dump rows end with.
    let peer = format!("lspci {}", theirs.iter().take_while(|a| **a != "-F").copied().collect::<Vec<_>>().join(" "));
    compare_with(spawner, what, repeats, ours, (&peer, "lspci", theirs), goal_time, goal_memory);
}

/// [`compare`] against any program: `peer` is its label, program and arguments.
fn compare_with(spawner: &mut Spawner, what: &str, repeats: usize, ours: &[&str], peer: (&str, &str, &[&str]), goal_time: &str, goal_memory: &str) {
    let bin = env!("CARGO_BIN_EXE_pcieperf");
    let (label, program, theirs) = peer;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        a.push(spawner.cost(bin, ours).unwrap_or_else(|e| panic!("pcieperf {ours:?}: {e}")));
        match spawner.cost(program, theirs) {
            Ok(c) => b.push(c),
            Err(why) => {
                let ms = a[0].seconds * 1e3;
                println!("| {what} | {ms:.1} ms, {:.1} MiB | {label}: fails ({why}) | — | {goal_time} |", a[0].max_rss_kib / 1024.0);
                return;
            }
        }
    }
    let median = |costs: &[Cost], f: fn(&Cost) -> f64| spread(costs.iter().map(f).collect()).0;
    let ratios = |f: fn(&Cost) -> f64| a.iter().zip(&b).map(|(x, y)| f(x) / f(y)).collect::<Vec<f64>>();
    let (seconds, rss): (fn(&Cost) -> f64, fn(&Cost) -> f64) = (|c| c.seconds, |c| c.max_rss_kib);
    let mib = |kib: f64| format!("{:.1} MiB", kib / 1024.0);
    Row { what: format!("{what}, time"), ours: format!("{:.1} ms", median(&a, seconds) * 1e3), peer: format!("{label}: {:.1} ms", median(&b, seconds) * 1e3), ratio: Ratio::Time, ratios: ratios(seconds), goal: goal_time.into() }.print();
    Row { what: format!("{what}, peak RSS"), ours: mib(median(&a, rss)), peer: format!("{label}: {}", mib(median(&b, rss))), ratio: Ratio::Memory, ratios: ratios(rss), goal: goal_memory.into() }.print();
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
    if std::env::args().any(|a| a == "--spawner") {
        return serve_spawner();
    }
    // First, while this process is small: see [`Spawner`].
    let mut spawner = Spawner::start();
    let spawner = &mut spawner;
    if Command::new("lspci").arg("--version").output().is_err() {
        eprintln!("lspci is required for this benchmark (Debian package pciutils)");
        std::process::exit(1);
    }
    let repeats = |n| if full() { n } else { 1 };
    header();
    compare(spawner, "inspect -vv, live machine (lspci hwdb on)", repeats(15), &["inspect", "-vv"], &["-vv"], "", "");

    // INSPECT_DUMPS=DIR keeps the generated dumps there (for profiling either tool on them).
    let temporary = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("INSPECT_DUMPS").map_or(temporary.path().to_path_buf(), std::path::PathBuf::from);
    let sizes: &[(usize, &str, usize)] = if full() { &[(250, "250", 15), (4096, "4096", 7), (65_536, "65,536", 3)] } else { &[(250, "250", 1)] };
    let off = "hwdb.disable=1";
    for &(devices, label, n) in sizes {
        let mut files = Vec::new();
        for (shape, configs) in [("flat", flat(devices)), ("deep", deep(devices))] {
            assert_eq!(configs.len(), devices);
            let path = dir.join(format!("{shape}-{devices}.dump"));
            let last = write_dump(&path, configs).to_string();
            let file = path.to_str().unwrap();
            let input = format!("{label} devices, {shape}");
            compare(spawner, &format!("inspect -vv, {input} (lspci hwdb off)"), repeats(n), &["inspect", "-vv", "-F", file], &["-O", off, "-vv", "-F", file], "≤ 1.0", "≤ 1.5");
            if shape == "flat" {
                compare(spawner, &format!("inspect -vv, {input} (lspci hwdb on)"), repeats(n), &["inspect", "-vv", "-F", file], &["-vv", "-F", file], "", "");
            }
            compare(spawner, &format!("inspect -t, {input} (no names; lspci hwdb off)"), repeats(n), &["inspect", "-t", "-F", file], &["-O", off, "-t", "-F", file], "≤ 1.0", "≤ 1.5");
            compare(spawner, &format!("inspect -vv -n, {input} (no names; lspci hwdb off)"), repeats(n), &["inspect", "-vv", "-n", "-F", file], &["-O", off, "-vv", "-n", "-F", file], "≤ 1.0", "≤ 1.5");
            compare(spawner, &format!("inspect -vv -s {last}, {input} (lspci hwdb off)"), repeats(n), &["inspect", "-vv", "-s", &last, "-F", file], &["-O", off, "-vv", "-s", &last, "-F", file], "≤ 1.0", "≤ 1.5");
            files.push(path);
        }
        // Independent of depth: the deep dump against the flat one of the same size, both ours.
        let (flat_file, deep_file) = (files[0].to_str().unwrap(), files[1].to_str().unwrap());
        let peer = (&*format!("pcieperf inspect -vv, {label} devices flat"), env!("CARGO_BIN_EXE_pcieperf"), &["inspect", "-vv", "-F", flat_file][..]);
        compare_with(spawner, &format!("inspect -vv, {label} devices, deep ÷ flat"), repeats(n), &["inspect", "-vv", "-F", deep_file], peer, "≈ 1.0", "≈ 1.0");
    }
    println!("\nPeak RSS floor: `true` run the same way reads {:.1} MiB (the spawner's own, inherited at fork).", spawner.floor());
}
