//! pcieperf's `block` engine against fio on the same file, in the same run: same block size,
//! queue depth and engine (io_uring, direct=1), sequential over the whole file. Prints MB/s
//! (10^6 B/s) of each and the ratio pcieperf/fio.
//!
//! `cargo bench --bench block_vs_fio` runs the comparison (file of 256 MiB under Cargo's target
//! tmpdir, on the machine's disk; `BLOCK_VS_FIO_MIB` and `BLOCK_VS_FIO_QD` override size and
//! queue depth). Under `cargo test` it runs once on a small file as a smoke test.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pcieperf::engine::pattern::Pattern;
use pcieperf::engine::{self, AlignedBuf, Io, OpenOptions};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

#[derive(Clone, Copy, PartialEq)]
enum Buffer {
    /// Page-aligned caller buffer: O_DIRECT straight into it, as fio does.
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
    engine: Box<dyn engine::Engine>,
    aligned: Option<AlignedBuf>,
    plain: Vec<u8>,
    write: bool,
}

impl Ours {
    fn new(path: &Path, write: bool, bs: u64, qd: usize, buffer: Buffer, size: u64) -> Ours {
        let options = OpenOptions { queue_depth: qd, io_bytes: bs, ..OpenOptions::default() };
        let engine = engine::open(&format!("block:{}", path.display()), &options).expect("open block engine");
        let mut ours = match buffer {
            Buffer::Aligned => Ours { engine, aligned: Some(AlignedBuf::new(size as usize)), plain: Vec::new(), write },
            // As the allocator gives it (16-byte aligned): the bounce path.
            Buffer::Vec => Ours { engine, aligned: None, plain: vec![0u8; size as usize + 16], write },
        };
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
        let transfer = self.engine.transfer(io, 0, Duration::from_secs(600)).expect("transfer");
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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let size = std::env::var("BLOCK_VS_FIO_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(if full { 256 } else { 8 }) * MIB;
    let qd: usize = std::env::var("BLOCK_VS_FIO_QD").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let repeats = if full { 9 } else { 1 };
    // fio spends most of a second starting up before its first I/O; a virtualised or cached disk
    // uses such a pause to write back. Each pcieperf run gets the same rest, or writes would be
    // compared on a busier disk than fio's.
    let idle = if full { Duration::from_millis(800) } else { Duration::ZERO };
    let block_sizes: &[u64] = if full { &[4 * KIB, 128 * KIB, MIB] } else { &[128 * KIB] };

    let dir = tempfile::Builder::new().prefix("block-vs-fio").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, vec![0x5a; size as usize]).unwrap();
    let have_fio = Command::new("fio").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have_fio {
        println!("fio not found: install it (Debian package fio) for the comparison; pcieperf alone follows");
    }

    println!("block engine vs fio: {} MiB file on {}, io_uring, O_DIRECT, queue depth {qd}, median of {repeats} (ratio: median of the ratios of neighbouring runs)", size / MIB, dir.path().display());
    println!("MB/s = 10^6 B/s");
    println!("{:<6} {:>8} {:>14} {:>14} {:>10} {:>16} {:>10}", "op", "bs", "fio MB/s", "pcieperf MB/s", "ratio", "pcieperf (Vec)", "ratio");
    for &write in &[false, true] {
        for &bs in block_sizes {
            let mut aligned = Ours::new(&path, write, bs, qd, Buffer::Aligned, size);
            let mut plain = Ours::new(&path, write, bs, qd, Buffer::Vec, size);
            let (mut theirs, mut ours, mut ours_vec) = (Vec::new(), Vec::new(), Vec::new());
            let (mut ratios, mut ratios_vec) = (Vec::new(), Vec::new());
            // Interleaved, the order rotating every repeat, so a drift of the disk (host caches,
            // write-back) hits every tool alike; ratios are taken between neighbouring runs.
            for repeat in 0..repeats {
                let mut run = [None; 3];
                for slot in 0..3 {
                    let tool = (slot + repeat) % 3;
                    run[tool] = match tool {
                        0 if have_fio => fio_mbps(&path, write, bs, qd, size),
                        0 => None,
                        1 => Some(aligned.run_after(idle)),
                        _ => Some(plain.run_after(idle)),
                    };
                }
                let [fio, a, v] = run;
                ours.extend(a);
                ours_vec.extend(v);
                if let Some(fio) = fio {
                    theirs.push(fio);
                    ratios.push(a.unwrap() / fio);
                    ratios_vec.push(v.unwrap() / fio);
                }
            }
            let (ours, ours_vec) = (median(ours), median(ours_vec));
            let fio = (!theirs.is_empty()).then(|| median(theirs));
            let (ratio, ratio_vec) = (fio.map(|_| median(ratios)), fio.map(|_| median(ratios_vec)));
            let show = |v: Option<f64>, digits: usize| v.map(|v| format!("{v:.digits$}")).unwrap_or_else(|| "-".into());
            println!(
                "{:<6} {:>8} {:>14} {:>14.1} {:>10} {:>16.1} {:>10}",
                if write { "write" } else { "read" },
                pcieperf::units::format_size(bs),
                show(fio, 1),
                ours,
                show(ratio, 3),
                ours_vec,
                show(ratio_vec, 3),
            );
        }
    }
    if !full {
        // Smoke test: the last write left the pattern in the file.
        let back = std::fs::read(&path).unwrap();
        assert_eq!(Pattern::lfsr(1).check(0, &back), None, "the engine's writes did not reach the file");
    }
}
