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
//! A second table is the whole `pcieperf dma` command against fio doing the same work: a 1 MiB
//! region read and written as 128 KiB I/Os at queue depth 8 for the same time (3 s each,
//! pcieperf's stop rule off with `--ci-target 0`), with pcieperf's default verification and
//! with `--verify none`. Same request shape: pcieperf submits a transfer's 8 I/Os together and
//! reaps all of them before the next transfer, so fio runs with `iodepth_batch_submit` and
//! `iodepth_batch_complete_min` = 8 (with fio's defaults the block layer merged pcieperf's I/Os
//! ~4 per request and not fio's). Same buffer backing: 1 MiB on each side, below the 2 MiB
//! huge page, so neither is on huge pages. Each row shows what makes the work the same, measured
//! per run: the disk's requests and merged I/Os per MiB (/sys/block/DEV/stat of the whole disk
//! behind the file, before and after), the seconds measured and the huge pages in use mid-run.
//! Figures are sustained rates: bytes over the wall time of the timed transfers (pcieperf:
//! first start to last end, verification between included; fio: its runtime).
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

/// I/O size, queue depth and region of the whole-command comparison.
const REGION_IO_BYTES: u64 = 128 * KIB;
const REGION_QD: u64 = 8;
const REGION_BYTES: u64 = MIB;
/// Idle time before each run of the region table (under `cargo bench`).
const REST: Duration = Duration::from_secs(2);

/// One run of a whole command on the region: its sustained rate, how long it measured, what
/// the disk saw and how much of its memory was on huge pages.
struct RegionRun {
    mbps: f64,
    seconds: f64,
    disk: DiskDelta,
    huge_kib: u64,
}

/// The disk's counters (/sys/block/DEV/stat) over one run.
#[derive(Clone, Copy, Default)]
struct DiskDelta {
    /// Requests completed, I/Os merged into another request, bytes: reads, then writes.
    read: [u64; 3],
    write: [u64; 3],
}

impl DiskDelta {
    /// Requests completed and I/Os merged per MiB moved in one direction.
    fn per_mib(counts: [u64; 3]) -> (f64, f64) {
        let mib = counts[2] as f64 / MIB as f64;
        if mib == 0.0 { (0.0, 0.0) } else { (counts[0] as f64 / mib, counts[1] as f64 / mib) }
    }
}

/// The whole disk behind `path`: st_dev → /sys/dev/block/MAJ:MIN, its parent for a partition.
fn disk_stat_path(path: &Path) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let node = std::fs::canonicalize(format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev))).ok()?;
    let disk = if node.join("partition").exists() { node.parent()?.to_path_buf() } else { node };
    Some(disk.join("stat")).filter(|p| p.exists())
}

/// Reads completed, reads merged, sectors read, writes completed, writes merged, sectors written.
fn disk_counters(stat: &Path) -> [u64; 6] {
    let text = std::fs::read_to_string(stat).unwrap_or_default();
    let fields: Vec<u64> = text.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
    let at = |i: usize| fields.get(i).copied().unwrap_or(0);
    [at(0), at(1), at(2), at(4), at(5), at(6)]
}

/// Anonymous huge pages (KiB) of `pid` and its children (fio's jobs are forked processes).
fn huge_pages_kib(pid: u32) -> u64 {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    std::iter::once(pid.to_string())
        .chain(children.split_whitespace().map(String::from))
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok())
        .flat_map(|text| text.lines().filter(|l| l.starts_with("AnonHugePages:")).filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).collect::<Vec<_>>())
        .sum()
}

/// Run `command`, reading the disk's counters around it and the huge pages in use halfway.
fn run_counted(mut command: Command, stat: Option<&Path>, seconds: u64) -> Option<(Vec<u8>, DiskDelta, u64)> {
    // A rested disk for every run: a virtual disk writes back what the run before left it, and
    // whichever tool came next would pay for it.
    if common::full() {
        std::thread::sleep(REST);
    }
    let before = stat.map(disk_counters);
    let child = command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().ok()?;
    // Halfway through the timed part (both tools take well under a second to start).
    std::thread::sleep(Duration::from_millis(seconds * 500 + 500));
    let huge_kib = huge_pages_kib(child.id());
    let output = child.wait_with_output().ok()?;
    if !output.status.success() {
        eprintln!("{:?} failed: {}", command.get_program(), String::from_utf8_lossy(&output.stderr));
        return None;
    }
    let after = stat.map(disk_counters);
    let disk = match (before, after) {
        (Some(b), Some(a)) => {
            let d: Vec<u64> = a.iter().zip(&b).map(|(a, b)| a.saturating_sub(*b)).collect();
            DiskDelta { read: [d[0], d[1], d[2] * 512], write: [d[3], d[4], d[5] * 512] }
        }
        _ => DiskDelta::default(),
    };
    Some((output.stdout, disk, huge_kib))
}

/// fio on the region for `seconds`, with pcieperf's request shape: a transfer of the region is
/// QD I/Os submitted together and all reaped before the next (`iodepth_batch_submit` and
/// `iodepth_batch_complete_min` = QD).
fn fio_region(path: &Path, write: bool, seconds: u64, stat: Option<&Path>) -> Option<RegionRun> {
    let rw = if write { "write" } else { "read" };
    let mut command = Command::new("fio");
    command
        .args(["--name=peer", "--ioengine=io_uring", "--direct=1", "--output-format=json", "--time_based"])
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={REGION_IO_BYTES}"))
        .arg(format!("--iodepth={REGION_QD}"))
        .arg(format!("--iodepth_batch_submit={REGION_QD}"))
        .arg(format!("--iodepth_batch_complete_min={REGION_QD}"))
        .arg(format!("--filename={}", path.display()))
        .arg(format!("--size={REGION_BYTES}"))
        .arg(format!("--runtime={seconds}"));
    let (stdout, disk, huge_kib) = run_counted(command, stat, seconds)?;
    let json: serde_json::Value = serde_json::from_slice(&stdout).ok()?;
    let job = &json["jobs"][0][rw];
    Some(RegionRun { mbps: job["bw_bytes"].as_f64()? / 1e6, seconds: job["runtime"].as_f64()? / 1e3, disk, huge_kib })
}

/// `pcieperf dma` on the region for `seconds`, its stop rule off (`--ci-target 0`): the
/// sustained rate (bytes of the timed transfers over the time from the first one's start to the
/// last one's end, verification between them included).
fn pcieperf_region(path: &Path, write: bool, seconds: u64, verify: &str, stat: Option<&Path>) -> Option<RegionRun> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pcieperf"));
    command
        .args(["dma", "--destructive", "--json", "--ci-target", "0", "--verify", verify])
        .args(["--dir", if write { "h2d" } else { "d2h" }])
        .arg(format!("--io-size={REGION_IO_BYTES}"))
        .arg(format!("--queue-depth={REGION_QD}"))
        .arg(format!("--target=block:{}", path.display()))
        .arg(format!("--sizes={REGION_BYTES}"))
        .arg(format!("--duration={seconds}s"));
    let (stdout, disk, huge_kib) = run_counted(command, stat, seconds)?;
    let json: serde_json::Value = serde_json::from_slice(&stdout).ok()?;
    let point = &json["points"][0];
    let mbps = point["summary"]["sustained_MBps"].as_f64()?;
    Some(RegionRun { mbps, seconds: point["convergence"]["engine_ns"].as_f64()? / 1e9, disk, huge_kib })
}

/// A cell: median rate, the disk's requests (and merged I/Os) per MiB in the run's direction,
/// seconds measured and huge pages seen.
fn region_cell(runs: &[RegionRun], write: bool) -> String {
    let med = |f: &dyn Fn(&RegionRun) -> f64| median(runs.iter().map(f).collect());
    let counts = |r: &RegionRun| DiskDelta::per_mib(if write { r.disk.write } else { r.disk.read });
    format!(
        "{:.0} MB/s; disk {:.2} requests + {:.2} merged per MiB; {:.1} s; huge pages {:.0} KiB",
        med(&|r| r.mbps),
        med(&|r| counts(r).0),
        med(&|r| counts(r).1),
        med(&|r| r.seconds),
        med(&|r| r.huge_kib as f64)
    )
}

/// The rows: a 1 MiB region as 128 KiB I/Os at QD 8, reads and writes, whole commands,
/// the same time each, interleaved (the order alternating each repeat).
fn region_runs(dir: &Path, repeats: usize) {
    let path = dir.join("region");
    std::fs::write(&path, vec![0u8; REGION_BYTES as usize]).unwrap();
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    let stat = disk_stat_path(&path);
    let seconds = if common::full() { 3 } else { 1 };
    println!();
    println!(
        "1 MiB region as 128 KiB I/Os at QD 8, io_uring, O_DIRECT, {seconds} s each: fio --time_based --iodepth_batch_submit=8 --iodepth_batch_complete_min=8 \
         (pcieperf's shape: a transfer's 8 I/Os submitted together, all reaped before the next), pcieperf dma --duration {seconds}s --ci-target 0 (stop rule off); \
         buffers: 1 MiB on both sides, below the 2 MiB huge page (huge pages measured mid-run from smaps_rollup); disk counters from {}",
        stat.as_ref().map_or("nowhere (no /sys/block stat for this file's disk)".into(), |s| s.display().to_string())
    );
    common::header();
    for write in [false, true] {
        let verifies = ["lfsr", "none"];
        let (mut fio, mut ours, mut ratios) = (Vec::new(), vec![Vec::new(), Vec::new()], vec![Vec::new(), Vec::new()]);
        for repeat in 0..repeats {
            // fio first on even repeats, last on odd ones.
            let fio_first = repeat % 2 == 0;
            let mut peer = if fio_first { fio_region(&path, write, seconds, stat.as_deref()) } else { None };
            let runs: Vec<Option<RegionRun>> = verifies.iter().map(|v| pcieperf_region(&path, write, seconds, v, stat.as_deref())).collect();
            if !fio_first {
                peer = fio_region(&path, write, seconds, stat.as_deref());
            }
            let Some(peer) = peer else { return };
            for (i, run) in runs.into_iter().enumerate() {
                let run = run.expect("pcieperf dma on the region");
                ratios[i].push(run.mbps / peer.mbps);
                ours[i].push(run);
            }
            fio.push(peer);
        }
        let op = if write { "write (h2d)" } else { "read (d2h)" };
        for (i, verify) in verifies.iter().enumerate() {
            common::Row {
                what: format!("block {op}, 1 MiB region, 128 KiB I/Os, QD 8, `--verify {verify}`: sustained, same request shape and time"),
                ours: region_cell(&ours[i], write),
                peer: format!("fio {}", region_cell(&fio, write)),
                ratio: common::Ratio::Rate,
                ratios: std::mem::take(&mut ratios[i]),
                goal: "≥ 0.97".into(),
            }
            .print();
        }
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
        region_runs(dir.path(), if full { 5 } else { 1 });
    }
    if !full && !region_only {
        // Smoke test: the last write left the pattern in the file.
        let back = std::fs::read(&path).unwrap();
        assert_eq!(Pattern::lfsr(1).check(0, &back), None, "the engine's writes did not reach the file");
    }
}
