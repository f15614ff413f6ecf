//! pcieperf's `block` engine against fio on the same file, in the same run: same block size,
//! queue depth and engine (io_uring, direct=1), sequential over the whole file. Prints MB/s
//! (10^6 B/s) of each and the ratio pcieperf/fio.
//!
//! fio (default options: no fixedbufs, registerfiles, hipri or sqthread; `iodepth_batch=1`)
//! cycles through `iodepth × bs` of I/O buffers that stay in the CPU caches. pcieperf is measured
//! with the same buffer policy (`BlockEngine::transfer_reusing` over a `QD × bs` aligned buffer:
//! the like-for-like column) and, to show what a distinct page per I/O costs, with the whole
//! file-sized buffer, page-aligned (zero copy) and as a plain `Vec` (bounce slots).
//!
//! A second table is the whole `pcieperf dma` command against fio on a 1 MiB region written as
//! 128 KiB I/Os at queue depth 8 (fio time-based over the region, pcieperf for the same time),
//! with pcieperf's default verification and with `--verify none`: pcieperf's per-transfer
//! median and its sustained rate (bytes over the wall time from the first timed transfer's
//! start to the last one's end, verification work between included) against fio's rate.
//!
//! `cargo bench --bench block_vs_fio` runs the comparison (file of 256 MiB under Cargo's target
//! tmpdir, on the machine's disk; `BLOCK_VS_FIO_MIB` and `BLOCK_VS_FIO_QD` override size and
//! queue depth; `BLOCK_VS_FIO_ONLY=region` runs only the second table). Under `cargo test` it
//! runs once on a small file as a smoke test.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pcieperf::engine::pattern::Pattern;
use pcieperf::engine::block::{self, BlockEngine};
use pcieperf::engine::{AlignedBuf, Io, OpenOptions};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

#[derive(Clone, Copy, PartialEq)]
enum Buffer {
    /// `QD × bs` page-aligned bytes reused for the whole file, as fio's I/O buffers are.
    Reused,
    /// Page-aligned caller buffer of the file's size: O_DIRECT straight into it.
    Aligned,
    /// An ordinary Vec: the engine's bounce slots are used.
    Vec,
}

/// The aligned buffer, or the Vec shifted so it is never page-aligned.
fn host_buffer<'a>(aligned: &'a mut Option<AlignedBuf>, plain: &'a mut [u8]) -> &'a mut [u8] {
    match aligned {
        Some(buf) => buf,
        None => {
            let skip = if pcieperf::engine::devfile::is_page_aligned(plain.as_ptr()) { 16 } else { 0 };
            let len = plain.len() - 16;
            &mut plain[skip..skip + len]
        }
    }
}

/// One engine and one buffer, reused for every timed run (fio, too, reuses buffers it touched
/// before its clock starts).
struct Ours {
    engine: BlockEngine,
    aligned: Option<AlignedBuf>,
    plain: Vec<u8>,
    write: bool,
    /// Bytes moved per run (the file), whatever the buffer's size.
    size: u64,
}

impl Ours {
    fn new(path: &Path, write: bool, bs: u64, qd: usize, buffer: Buffer, size: u64) -> Ours {
        // The bench's own scratch file: writes need the consent a user's file would.
        let options = OpenOptions { queue_depth: qd, io_bytes: bs, destructive: write, ..OpenOptions::default() };
        let engine = block::open(&path.display().to_string(), &options).expect("open block engine");
        let (aligned, plain) = match buffer {
            Buffer::Reused => (Some(AlignedBuf::new(qd * bs as usize)), Vec::new()),
            Buffer::Aligned => (Some(AlignedBuf::new(size as usize)), Vec::new()),
            // As the allocator gives it (16-byte aligned): the bounce path.
            Buffer::Vec => (None, vec![0u8; size as usize + 16]),
        };
        let mut ours = Ours { engine, aligned, plain, write, size };
        if write {
            Pattern::lfsr(1).fill(0, ours.buf());
        }
        ours.run(); // untimed: faults the buffer in
        ours
    }

    fn buf(&mut self) -> &mut [u8] {
        host_buffer(&mut self.aligned, &mut self.plain)
    }

    /// MB/s of one transfer after the disk was left idle for `idle`.
    fn run_after(&mut self, idle: Duration) -> f64 {
        std::thread::sleep(idle);
        self.run()
    }

    /// MB/s of one transfer of the whole file.
    fn run(&mut self) -> f64 {
        let write = self.write;
        let buf = host_buffer(&mut self.aligned, &mut self.plain);
        let io = if write { Io::H2d(buf) } else { Io::D2h(buf) };
        let transfer = self.engine.transfer_reusing(io, 0, self.size, Duration::from_secs(600)).expect("transfer");
        transfer.bytes as f64 / transfer.host_ns() * 1e3
    }
}

fn fio_mbps(path: &Path, write: bool, bs: u64, qd: usize, size: u64) -> Option<f64> {
    let rw = if write { "write" } else { "read" };
    let output = Command::new("fio")
        .args(["--name=peer", "--ioengine=io_uring", "--direct=1", "--output-format=json"])
        .arg(format!("--filename={}", path.display()))
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={bs}"))
        .arg(format!("--iodepth={qd}"))
        .arg(format!("--size={size}"))
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!("fio failed: {}", String::from_utf8_lossy(&output.stderr));
        return None;
    }
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let bytes_per_s = json["jobs"][0][rw]["bw_bytes"].as_f64()?;
    Some(bytes_per_s / 1e6)
}

/// fio writing `region` bytes of `path` over and over for `seconds`, as 128 KiB I/Os at QD 8.
fn fio_region_write_mbps(path: &Path, region: u64, seconds: u64) -> Option<f64> {
    let output = Command::new("fio")
        .args(["--name=peer", "--ioengine=io_uring", "--direct=1", "--output-format=json", "--rw=write", "--bs=128k", "--iodepth=8", "--time_based"])
        .arg(format!("--filename={}", path.display()))
        .arg(format!("--size={region}"))
        .arg(format!("--runtime={seconds}"))
        .output()
        .ok()?;
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    Some(json["jobs"][0]["write"]["bw_bytes"].as_f64()? / 1e6)
}

/// `pcieperf dma` h2d on the region: (median MB/s, sustained MB/s, samples).
fn pcieperf_region_write(path: &Path, region: u64, seconds: u64, verify: &str) -> (f64, f64, u64) {
    let output = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["dma", "--dir", "h2d", "--destructive", "--io-size", "128KiB", "--queue-depth", "8", "--json", "--verify", verify])
        .arg(format!("--target=block:{}", path.display()))
        .arg(format!("--sizes={region}"))
        .arg(format!("--duration={seconds}s"))
        .output()
        .expect("run pcieperf");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("pcieperf --json");
    let point = &json["points"][0];
    let summary = &point["summary"];
    (summary["median_MBps"].as_f64().unwrap(), summary["sustained_MBps"].as_f64().unwrap(), point["samples"].as_array().unwrap().len() as u64)
}

/// The row: a 1 MiB region as 128 KiB writes at QD 8, whole commands, interleaved.
fn region_writes(dir: &Path, repeats: usize) {
    let region = MIB;
    let path = dir.join("region");
    std::fs::write(&path, vec![0u8; region as usize]).unwrap();
    let seconds = if common::full() { 3 } else { 1 };
    println!();
    println!("1 MiB region, 128 KiB writes at QD 8: whole commands, fio --time_based for {seconds} s, pcieperf dma --duration {seconds}s (it may stop earlier, when its median is stable)");
    common::header();
    for verify in ["lfsr", "none"] {
        let (mut median_ratios, mut sustained_ratios, mut fio, mut ours, mut sustained, mut samples) = (vec![], vec![], vec![], vec![], vec![], 0);
        for _ in 0..repeats {
            let Some(peer) = fio_region_write_mbps(&path, region, seconds) else { return };
            let (median, rate, n) = pcieperf_region_write(&path, region, seconds, verify);
            median_ratios.push(median / peer);
            sustained_ratios.push(rate / peer);
            fio.push(peer);
            ours.push(median);
            sustained.push(rate);
            samples += n;
        }
        let fio = format!("fio {:.0} MB/s", median(fio));
        let what = |figure: &str| format!("block h2d 1 MiB region, 128 KiB I/Os, QD 8, `--verify {verify}`: {figure} ({} samples per run)", samples / repeats as u64);
        let goal = if verify == "lfsr" { "≥ 0.97" } else { "" };
        common::Row { what: what("median"), ours: format!("{:.0} MB/s", median(ours)), peer: fio.clone(), ratio: common::Ratio::Rate, ratios: median_ratios, goal: goal.into() }.print();
        common::Row { what: what("sustained"), ours: format!("{:.0} MB/s", median(sustained)), peer: fio, ratio: common::Ratio::Rate, ratios: sustained_ratios, goal: goal.into() }.print();
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let size = std::env::var("BLOCK_VS_FIO_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(if full { 256 } else { 8 }) * MIB;
    let qd: usize = std::env::var("BLOCK_VS_FIO_QD").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let repeats = if full { 11 } else { 1 };
    // fio spends most of a second starting up before its first I/O; a virtualised or cached disk
    // uses such a pause to write back. Each pcieperf run gets the same rest, or writes would be
    // compared on a busier disk than fio's.
    let idle = if full { Duration::from_millis(800) } else { Duration::ZERO };
    let block_sizes: &[u64] = if full { &[4 * KIB, 128 * KIB, MIB] } else { &[128 * KIB] };

    let dir = tempfile::Builder::new().prefix("block-vs-fio").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("data");
    // Written and flushed before any tool runs: allocated, not sparse, nothing dirty in the
    // page cache (fio, too, starts by invalidating the file's cached pages).
    std::fs::write(&path, vec![0x5a; size as usize]).unwrap();
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    let have_fio = Command::new("fio").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have_fio {
        println!("fio not found: install it (Debian package fio) for the comparison; pcieperf alone follows");
    }

    println!("block engine vs fio: {} MiB file on {}, io_uring, O_DIRECT, queue depth {qd}, median of {repeats} interleaved repeats (ratio: median over repeats of pcieperf/fio within a repeat)", size / MIB, dir.path().display());
    println!("MB/s = 10^6 B/s; pcieperf buffers: QD x bs reused (as fio's), whole file aligned (zero copy), whole file Vec (bounce slots)");
    println!(
        "{:<6} {:>8} {:>10} {:>14} {:>7} {:>14} {:>7} {:>14} {:>7}",
        "op", "bs", "fio MB/s", "QD x bs MB/s", "ratio", "aligned MB/s", "ratio", "Vec MB/s", "ratio"
    );
    // Vec last: in the smoke test it runs last and leaves the whole pattern in the file.
    let buffers = [Buffer::Reused, Buffer::Aligned, Buffer::Vec];
    // BLOCK_VS_FIO_ONLY=region runs only the second table.
    let region_only = std::env::var("BLOCK_VS_FIO_ONLY").is_ok_and(|v| v == "region");
    for &write in if region_only { &[][..] } else { &[false, true][..] } {
        for &bs in block_sizes {
            let mut ours: Vec<Ours> = buffers.iter().map(|&b| Ours::new(&path, write, bs, qd, b, size)).collect();
            let mut theirs = Vec::new();
            let mut mbps = vec![Vec::new(); ours.len()];
            let mut ratios = vec![Vec::new(); ours.len()];
            // Interleaved, the order rotating every repeat, so a drift of the disk (host caches,
            // write-back) hits every tool alike; ratios are taken between runs of one repeat.
            let tools = ours.len() + 1;
            for repeat in 0..repeats {
                let mut fio = None;
                let mut run = vec![0.0; ours.len()];
                for slot in 0..tools {
                    match (slot + repeat) % tools {
                        0 if have_fio => fio = fio_mbps(&path, write, bs, qd, size),
                        0 => {}
                        tool => run[tool - 1] = ours[tool - 1].run_after(idle),
                    }
                }
                for (i, v) in run.into_iter().enumerate() {
                    mbps[i].push(v);
                    ratios[i].extend(fio.map(|fio| v / fio));
                }
                theirs.extend(fio);
            }
            let fio = (!theirs.is_empty()).then(|| median(theirs));
            let mut line = format!(
                "{:<6} {:>8} {:>10}",
                if write { "write" } else { "read" },
                pcieperf::units::format_size(bs),
                fio.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into())
            );
            for (values, ratios) in mbps.into_iter().zip(ratios) {
                let ratio = if ratios.is_empty() { "-".to_string() } else { format!("{:.3}", median(ratios)) };
                line.push_str(&format!(" {:>14.1} {:>7}", median(values), ratio));
            }
            println!("{line}");
        }
    }
    if have_fio {
        region_writes(dir.path(), if full { 7 } else { 1 });
    }
    if !full && !region_only {
        // Smoke test: the last write left the pattern in the file.
        let back = std::fs::read(&path).unwrap();
        assert_eq!(Pattern::lfsr(1).check(0, &back), None, "the engine's writes did not reach the file");
    }
}
