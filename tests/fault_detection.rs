//! Fault injection never cancels itself: every armed fault changes what the host finally sees,
//! so the DMA procedure's verification fails on every point — across sizes from one word up
//! (exactly two chunks included), in every mode, on every kind of engine the wrapper accepts:
//! the simulator (device generates and checks data), a file on disk (memory: written, read
//! back) and a FIFO pair with a loopback peer (stream). Stacked identical wrappers and
//! `drop,reorder` on buffers shorter than a chunk are covered too.
//!
//! Verification cannot pass silently (the real binary): damage to a write after the first on a
//! file fails even a point too short for a second sampled read-back, `--verify all` reads every
//! write back, and a loopback that loses bytes says where its data went wrong, not only that
//! the rest never came.

use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Output;
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
        // A failure names the direction whose data it judged (an h2d read-back judges h2d).
        let failure = point.verification.first_failure.as_ref().expect("failed");
        assert!(point.mode.directions().contains(&failure.direction), "{target}: {} point: {failure}", point.mode.name());
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

/// Two FIFOs and a thread that sends back whatever it is sent, until the writer closes, except
/// the stream bytes in `lost` (a loop that loses them).
fn loopback(dir: &Path, lost: Range<u64>) -> (PathBuf, PathBuf, std::thread::JoinHandle<()>) {
    let (tx, rx) = (dir.join("to_device"), dir.join("from_device"));
    mkfifo(&tx);
    mkfifo(&rx);
    let (tx2, rx2) = (tx.clone(), rx.clone());
    let peer = std::thread::spawn(move || {
        let mut input = std::fs::File::open(&tx2).unwrap();
        let mut output = std::fs::OpenOptions::new().write(true).open(&rx2).unwrap();
        let mut buf = vec![0u8; 65536];
        let mut offset = 0u64;
        loop {
            match input.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let kept: Vec<u8> = (offset..).zip(&buf[..n]).filter(|(at, _)| !lost.contains(at)).map(|(_, &b)| b).collect();
                    offset += n as u64;
                    if output.write_all(&kept).is_err() {
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
        let (tx, rx, peer) = loopback(dir.path(), 0..0);
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

/// Run the real binary's `dma` with `args`, the results document on stdout.
fn dma(args: &[&str]) -> (Output, Option<serde_json::Value>) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pcieperf")).arg("dma").args(args).arg("--json").output().unwrap();
    let results = serde_json::from_slice(&output.stdout).ok();
    (output, results)
}

/// A file on a disk filesystem (O_DIRECT), removed with the returned directory.
fn scratch_file() -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new().prefix("verify-file").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("F");
    std::fs::File::create(&file).unwrap().set_len(64 << 20).unwrap();
    let path = file.display().to_string();
    (dir, path)
}

/// The only point's verification tally.
fn point_verification(results: &serde_json::Value) -> &serde_json::Value {
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{results}");
    &points[0]["verification"]
}

// A point that stops after about ten 8 KiB writes (the interval target is met at once) takes
// too little time for a second sampled read-back: before the last write was read back too, a
// bitflip from the fourth transfer on passed with exit 0 ("1 passed, 0 failed, 10 unchecked").
const SHORT_H2D_POINT: [&str; 9] = ["--destructive", "--dir", "h2d", "--sizes", "8KiB", "--duration", "10ms", "--ci-target", "100"];

/// Writes in a point (warm-up and samples).
fn writes_of(results: &serde_json::Value) -> u64 {
    let point = &results["points"][0];
    point["warmup"].as_u64().unwrap_or(0) + point["samples"].as_array().map_or(0, |s| s.len() as u64)
}

/// A short h2d point on `target` with at least `writes` writes: on a loaded machine the 10 ms
/// budget can run out after the warm-up write, so the run is repeated (at most 5 times) until
/// the point is the short point the test is about.
fn short_point(target: &str, writes: u64) -> (Output, serde_json::Value) {
    for _ in 0..5 {
        let (output, results) = dma(&[&["--target", target][..], &SHORT_H2D_POINT].concat());
        let results = results.unwrap_or_else(|| panic!("no results: {}", String::from_utf8_lossy(&output.stderr)));
        if writes_of(&results) >= writes {
            return (output, results);
        }
    }
    panic!("5 runs of a 10 ms point on {target} each made fewer than {writes} writes: the machine is too loaded for this test");
}

#[test]
fn damage_after_the_first_write_fails_even_a_short_h2d_point_on_a_file() {
    let (_dir, file) = scratch_file();
    let target = format!("fault:bitflip,skip=3:block:{file}");
    // The bitflip arms from the fourth transfer on.
    let (output, results) = short_point(&target, 5);
    let verification = point_verification(&results);
    assert_eq!(output.status.code(), Some(1), "{verification}");
    assert!(verification["failed"].as_u64().unwrap() >= 1, "{verification}");
    assert_eq!(verification["last_write_checked"], true, "{verification}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("data verification failed: h2d pattern check failed"));
}

#[test]
fn an_undamaged_short_h2d_point_passes_with_its_last_write_read_back() {
    let (_dir, file) = scratch_file();
    // A point needs a timed sample besides the warm-up write to succeed.
    let (output, results) = short_point(&format!("block:{file}"), 2);
    let verification = point_verification(&results);
    assert_eq!(output.status.code(), Some(0), "{verification}");
    assert_eq!(verification["failed"], 0, "{verification}");
    assert_eq!(verification["last_write_checked"], true, "{verification}");
    // Write 1 and the last write at least (a point of one write reads it back once).
    let writes = writes_of(&results);
    let passed = verification["passed"].as_u64().unwrap();
    assert!(passed >= 2.min(writes), "{verification}");
    assert_eq!(passed + verification["unchecked"].as_u64().unwrap(), writes, "one check per write: {verification}");
}

#[test]
fn verify_all_reads_every_h2d_write_back() {
    let (_dir, file) = scratch_file();
    let args = ["--target", &format!("block:{file}"), "--destructive", "--dir", "h2d", "--sizes", "8KiB", "--duration", "30ms", "--verify", "all"];
    let (output, results) = dma(&args);
    let results = results.unwrap_or_else(|| panic!("no results: {}", String::from_utf8_lossy(&output.stderr)));
    let verification = point_verification(&results);
    assert_eq!(output.status.code(), Some(0), "{verification}");
    let point = &results["points"][0];
    let writes = point["warmup"].as_u64().unwrap() + point["samples"].as_array().unwrap().len() as u64;
    assert_eq!((verification["passed"].as_u64().unwrap(), verification["unchecked"].as_u64().unwrap()), (writes, 0), "{verification}");
    assert_eq!(results["conditions"]["verify"], "all");
    assert!(results["verification"]["method"].as_str().unwrap().contains("every write read back"), "{}", results["verification"]);

    // Every write is read back, so every damaged one fails.
    let target = format!("fault:bitflip:block:{file}");
    let (output, results) = dma(&[&["--target", &target][..], &args[2..]].concat());
    let results = results.unwrap_or_else(|| panic!("no results: {}", String::from_utf8_lossy(&output.stderr)));
    let verification = point_verification(&results);
    assert_eq!(output.status.code(), Some(1), "{verification}");
    let point = &results["points"][0];
    let writes = point["warmup"].as_u64().unwrap() + point["samples"].as_array().unwrap().len() as u64;
    assert_eq!((verification["failed"].as_u64().unwrap(), verification["unchecked"].as_u64().unwrap()), (writes, 0), "{verification}");
}

#[test]
fn a_loopback_that_loses_bytes_says_where_the_data_went_wrong() {
    // The loop loses stream bytes [4096, 8192): of a 16 KiB transfer 12 KiB come back, the last
    // 8 KiB of them from further on, and the rest never comes (a timeout).
    for (dir, expected) in [("h2d", "h2d loopback: data differs from byte 4096 on (bytes lost or altered in the loop)"), ("d2h", "d2h loopback: data differs from byte 4096 on")] {
        let fifos = tempfile::tempdir().unwrap();
        let (tx, rx, _peer) = loopback(fifos.path(), 4096..8192);
        let target = format!("chardev:{},{}", tx.display(), rx.display());
        let args = ["--target", &target, "--destructive", "--dir", dir, "--sizes", "16KiB", "--duration", "30ms", "--deadline", "300ms"];
        let (output, results) = dma(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{dir}: {stderr}");
        assert!(stderr.contains(expected) && stderr.contains("did not answer"), "{dir}: {stderr}");
        let results = results.unwrap_or_else(|| panic!("{dir}: no results: {stderr}"));
        let verification = &results["verification"];
        assert_eq!(verification["failed"], 1, "{dir}: {verification}");
        assert_eq!(verification["first_failure"]["offset"], 4096, "{dir}: {verification}");
        // The peer ends when the binary closes its end of the stream.
    }
}

#[test]
fn a_loopback_that_only_stops_sending_is_a_timeout_not_a_data_failure() {
    // Everything from stream byte 12 KiB on is lost: what arrived all matches.
    let fifos = tempfile::tempdir().unwrap();
    let (tx, rx, _peer) = loopback(fifos.path(), 12288..u64::MAX);
    let target = format!("chardev:{},{}", tx.display(), rx.display());
    let (output, results) = dma(&["--target", &target, "--destructive", "--dir", "h2d", "--sizes", "16KiB", "--duration", "30ms", "--deadline", "300ms"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("did not answer") && stderr.contains("12288 of 16384 bytes") && !stderr.contains("data differs"), "{stderr}");
    assert_eq!(results.unwrap()["verification"]["failed"], 0);
}
