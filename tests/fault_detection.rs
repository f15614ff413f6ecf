//! Fault injection never cancels itself: every armed fault changes what the host finally sees,
//! so the DMA procedure's verification fails on every point — across sizes from one word up
//! (exactly two chunks included), in every mode, on every kind of engine the wrapper accepts:
//! the simulator (device generates and checks data), a file on disk (memory: written, read
//! back) and a FIFO pair with a loopback peer (stream). Stacked identical wrappers and
//! `drop,reorder` on buffers shorter than a chunk are covered too.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use pcieperf::bench::dma::{measure, DmaOptions, Quiet};
use pcieperf::bench::results::Mode;
use pcieperf::engine::{open, OpenOptions};

const SEED: u64 = 5;
const FAULTS: [&str; 7] = ["bitflip", "drop", "dup", "reorder", "drop,reorder", "reorder,dup", "reorder:fault:reorder"];

/// Measure `target` over `sizes` in every mode it offers; every point must fail verification.
fn assert_every_point_fails(target: &str, sizes: &[u64]) {
    let options_open = OpenOptions { seed: SEED, destructive: true, ..OpenOptions::default() };
    let mut engine = open(target, &options_open).unwrap_or_else(|e| panic!("{target}: {e}"));
    let info = engine.info().clone();
    let mut modes = vec![Mode::D2h, Mode::H2d];
    if info.concurrent {
        modes.push(Mode::Both);
    }
    let mut options = DmaOptions::new(modes, sizes.to_vec());
    options.seed = SEED;
    options.warmup = 0;
    options.duration = Duration::from_millis(5);
    options.wall_limit = Duration::from_secs(30);
    options.deadline = Duration::from_secs(10);
    let results = measure(engine.as_mut(), &options, &AtomicBool::new(false), &mut Quiet).unwrap_or_else(|e| panic!("{target}: {e}"));
    assert!(results.stopped.is_none(), "{target}: {:?}", results.stopped);
    assert_eq!(results.points.len(), options.modes.len() * sizes.len());
    for point in &results.points {
        assert!(
            point.verification.failed > 0 && point.verification.passed == 0,
            "{target}: {} {} bytes: {:?}",
            point.mode.name(),
            point.size_bytes,
            point.verification
        );
    }
}

#[test]
fn every_fault_is_seen_on_the_simulator_from_one_word_up() {
    let sizes = [4, 8, 12, 16, 20, 64, 4096, 8192, 12288, 65536];
    for fault in FAULTS {
        assert_every_point_fails(&format!("fault:{fault}:sim:doc001"), &sizes);
    }
}

#[test]
fn every_fault_is_seen_on_a_file_written_and_read_back() {
    let dir = tempfile::Builder::new().prefix("fault-file").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("scratch");
    std::fs::File::create(&file).unwrap().set_len(1 << 20).unwrap();
    // O_DIRECT sizes are whole pages; 8 KiB is exactly two 4 KiB chunks (reorder's worst case).
    let sizes = [4096, 8192, 12288, 65536];
    for fault in FAULTS {
        assert_every_point_fails(&format!("fault:{fault}:block:{}", file.display()), &sizes);
        assert_every_point_fails(&format!("fault:{fault}:block:{},sync", file.display()), &[8192]);
    }
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Two FIFOs and a thread that sends back whatever it is sent, until the writer closes.
fn loopback(dir: &Path) -> (PathBuf, PathBuf, std::thread::JoinHandle<()>) {
    let (tx, rx) = (dir.join("to_device"), dir.join("from_device"));
    mkfifo(&tx);
    mkfifo(&rx);
    let (tx2, rx2) = (tx.clone(), rx.clone());
    let peer = std::thread::spawn(move || {
        let mut input = std::fs::File::open(&tx2).unwrap();
        let mut output = std::fs::OpenOptions::new().write(true).open(&rx2).unwrap();
        let mut buf = vec![0u8; 65536];
        loop {
            match input.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if output.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
    });
    (tx, rx, peer)
}

#[test]
fn every_fault_is_seen_through_a_loopback_stream() {
    let sizes = [4, 8, 12, 16, 4096, 8192, 65536];
    for fault in FAULTS {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx, peer) = loopback(dir.path());
        assert_every_point_fails(&format!("fault:{fault}:chardev:{},{}", tx.display(), rx.display()), &sizes);
        peer.join().unwrap();
    }
}

#[test]
fn a_target_whose_reads_cannot_be_checked_is_refused_for_fault_injection() {
    let dir = tempfile::Builder::new().prefix("fault-ro").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("data");
    std::fs::File::create(&file).unwrap().set_len(1 << 20).unwrap();
    let error = open(&format!("fault:reorder:block:{}", file.display()), &OpenOptions::default()).err().unwrap().to_string();
    assert!(error.contains("--destructive") && error.contains("--scratch"), "{error}");
}
