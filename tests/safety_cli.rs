//! Nothing destroyed, nothing lost (issue 9, docs/safety.md): output paths, files under test,
//! signals, bounded input, hostile numbers, reproducible simulations. Each test runs the real
//! binary as a user would.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

/// Held by the tests that time a signal and by the one that loads the CPU, so the load never
/// lands on a timing (the tests of one file run in parallel threads).
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn timing() -> std::sync::MutexGuard<'static, ()> {
    TIMING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

fn binary() -> PathBuf {
    assert_cmd::cargo::cargo_bin("pcieperf")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn stderr_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

/// A directory on the disk (O_DIRECT needs one; tmpfs refuses it).
fn disk_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("safety").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// A file of `len` bytes that are not all the same, and its CRC32.
fn data_file(path: &Path, len: usize) -> u32 {
    let data: Vec<u8> = (0..len).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(path, &data).unwrap();
    crc32fast::hash(&data)
}

fn crc_of(path: &Path) -> u32 {
    crc32fast::hash(&std::fs::read(path).unwrap())
}

// ---- 1. output paths ------------------------------------------------------------------------

/// Every refused output: exit 2 with one line naming why, nothing measured (the block file under
/// test keeps its checksum and its times), the refused node untouched.
#[test]
fn outputs_that_are_not_regular_files_or_are_inputs_are_refused_before_measuring() {
    let dir = disk_dir();
    let data = dir.path().join("data.bin");
    let crc = data_file(&data, 1 << 20);
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let readonly = dir.path().join("readonly.json");
    std::fs::write(&readonly, "keep me").unwrap();
    std::fs::set_permissions(&readonly, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&readonly, &link).unwrap();
    let mut cases: Vec<(PathBuf, &str)> = vec![
        (fifo.clone(), "a FIFO"),
        (dir.path().to_path_buf(), "a directory"),
        (data.clone(), "inputs"),
        (readonly.clone(), "read-only"),
        (link.clone(), "symbolic link"),
        (dir.path().join("no-such-dir/run.json"), "cannot write"),
    ];
    let node = dir.path().join("full");
    let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
    // SAFETY: a valid path; a private node (1,7 = /dev/full's numbers) in our own directory.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 7)) } == 0 {
        cases.push((node.clone(), "a device node"));
    } else {
        eprintln!("skipped the device-node case: mknod needs root (CAP_MKNOD) here");
    }
    let target = format!("block:{}", data.display());
    for (out, why) in &cases {
        for flag in ["--out", "--html", "--metrics"] {
            let started = Instant::now();
            let assert = pcieperf()
                .args(["dma", "--target", &target, "--sizes", "64KiB", "--duration", "2s", flag])
                .arg(out)
                .assert()
                .code(2);
            let stderr = stderr_of(&assert);
            assert!(stderr.contains(why), "{flag} {}: {stderr}", out.display());
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(started.elapsed() < Duration::from_secs(2), "refused before measuring");
        }
    }
    assert_eq!(crc_of(&data), crc, "the file under test is unchanged");
    assert_eq!(std::fs::read_to_string(&readonly).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    if node.exists() {
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::symlink_metadata(&node).unwrap().file_type().is_char_device(), "the node is still a node");
    }
    // `run` checks its outputs too, default name included, and the same file twice is refused.
    let a = dir.path().join("a.json");
    pcieperf().args(["run", "--quick", "--target", "sim", "--out"]).arg(&fifo).assert().code(2);
    let assert = pcieperf().args(["run", "--quick", "--target", "sim", "--out"]).arg(&a).arg("--html").arg(&a).assert().code(2);
    assert!(stderr_of(&assert).contains("two outputs"));
    assert!(!a.exists());
}

#[test]
fn report_never_writes_over_its_own_input() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("x.json");
    pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--duration", "20ms", "--out"]).arg(&run).assert().success();
    let before = std::fs::read(&run).unwrap();
    for flag in ["--html", "--metrics"] {
        let assert = pcieperf().arg("report").arg(&run).arg(flag).arg(&run).assert().code(2);
        assert!(stderr_of(&assert).contains("inputs"), "{}", stderr_of(&assert));
    }
    assert_eq!(std::fs::read(&run).unwrap(), before);
}

/// Issue 18's reproductions: an output that is the input read from standard input, the dump
/// being decoded, or another output spelled differently; a trailing slash. Each is refused before
/// anything is measured or written, and the input keeps its bytes.
#[test]
fn outputs_are_compared_by_identity_not_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--duration", "20ms", "--out"]).arg(&run).assert().success();
    let before = std::fs::read(&run).unwrap();
    let stdin = std::fs::File::open(&run).unwrap();
    let out = Process::new(binary()).args(["report", "-", "--html"]).arg(&run).stdin(stdin).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("standard input"), "{stderr}");
    assert_eq!(std::fs::read(&run).unwrap(), before, "the document read from standard input is intact");

    let dumped = dir.path().join("d.lspci");
    let mut config = vec![0u8; 64];
    config[..4].copy_from_slice(&[0x86, 0x80, 0x37, 0x12]);
    std::fs::write(&dumped, pcieperf::pci::dump::write(&[("00:00.0".parse().unwrap(), &config[..])])).unwrap();
    let dump_bytes = std::fs::read(&dumped).unwrap();
    let assert = pcieperf().args(["inspect", "-F"]).arg(&dumped).arg("--metrics").arg(&dumped).assert().code(2);
    assert!(stderr_of(&assert).contains("inputs"), "{}", stderr_of(&assert));
    assert_eq!(std::fs::read(&dumped).unwrap(), dump_bytes);

    let x = dir.path().join("x.json");
    let spelled = dir.path().join(".").join("x.json");
    let started = Instant::now();
    let assert = pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--out"]).arg(&x).arg("--html").arg(&spelled).assert().code(2);
    assert!(stderr_of(&assert).contains("two outputs"), "{}", stderr_of(&assert));
    let slashed = format!("{}/", dir.path().join("new.json").display());
    let assert = pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--out", &slashed]).assert().code(2);
    assert!(stderr_of(&assert).contains("trailing /"), "{}", stderr_of(&assert));
    let assert = pcieperf().args(["pio", "--out", &slashed]).assert().code(2);
    assert!(stderr_of(&assert).contains("trailing /"), "{}", stderr_of(&assert));
    assert!(started.elapsed() < Duration::from_secs(2), "refused before measuring");
    assert!(!x.exists() && !dir.path().join("new.json").exists());
}

#[test]
fn dash_is_standard_output() {
    let output = pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--duration", "20ms", "--out", "-"]).assert().success();
    let stdout = String::from_utf8(output.get_output().stdout.clone()).unwrap();
    let doc: Value = serde_json::from_str(&stdout).expect("stdout holds the document alone");
    assert_eq!(doc["complete"], true);
    assert!(stderr_of(&output).contains("SIMULATED"), "the summary goes to stderr");
    assert!(!Path::new("-").exists());
}

/// Writing fails at the end (the path became a directory while measuring): the summary is
/// printed anyway and the document is kept where the message says.
#[test]
fn a_results_file_that_cannot_be_written_at_the_end_is_kept_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let stuck = dir.path().join("stuck");
    mkfifo(&stuck);
    let out = dir.path().join("late.json");
    let child = Process::new(binary())
        .args(["dma", "--dir", "d2h", "--sizes", "4KiB", "--deadline", "1s", "--target"])
        .arg(format!("chardev:{}", stuck.display()))
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::create_dir(&out).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("d2h"), "the summary is printed anyway");
    let kept = stderr.split("kept in ").nth(1).expect("the message names the fallback").lines().next().unwrap().trim();
    let doc = read_json(Path::new(kept));
    assert_eq!(doc["complete"], false);
    std::fs::remove_file(kept).unwrap();
}

// ---- 2. files under test --------------------------------------------------------------------

#[test]
fn a_file_under_test_is_only_read_unless_the_user_consents() {
    let dir = disk_dir();
    let data = dir.path().join("data.bin");
    let crc = data_file(&data, 1 << 20);
    let target = format!("block:{}", data.display());
    let out = dir.path().join("read.json");
    pcieperf().args(["dma", "--dir", "d2h", "--target", &target, "--sizes", "64KiB", "--duration", "100ms", "--out"]).arg(&out).assert().success();
    assert_eq!(crc_of(&data), crc, "a read test leaves the file as it was");
    let doc = read_json(&out);
    assert!(doc["verification"]["method"].as_str().unwrap().contains("consistency"), "{}", doc["verification"]);
    assert!(doc["verification"]["passed"].as_u64().unwrap() > 0, "repeat reads are compared");
    for dir_flag in ["h2d", "both"] {
        let assert = pcieperf().args(["dma", "--dir", dir_flag, "--target", &target, "--sizes", "64KiB"]).assert().code(2);
        assert!(stderr_of(&assert).contains("--destructive"), "{}", stderr_of(&assert));
    }
    // `run` on the file: reads only, and says what it skipped.
    let assert = pcieperf().args(["run", "--quick", "--target", &target, "--out"]).arg(dir.path().join("run.json")).assert().success();
    assert!(String::from_utf8_lossy(&assert.get_output().stdout).contains("h2d skipped"));
    assert_eq!(crc_of(&data), crc);
    // With consent, writes happen.
    pcieperf().args(["dma", "--dir", "h2d", "--destructive", "--target", &target, "--sizes", "64KiB", "--duration", "50ms"]).assert().success();
    assert_ne!(crc_of(&data), crc);
}

#[test]
fn a_scratch_file_is_measured_both_ways_said_so_and_removed() {
    let dir = disk_dir();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let assert = pcieperf().args(["run", "--quick", "--scratch"]).arg(dir.path()).arg("--out").arg(out.join("run.json")).assert().success();
    assert!(stderr_of(&assert).contains("scratch file"), "{}", stderr_of(&assert));
    let doc = read_json(&out.join("run.json"));
    let modes: Vec<&str> = doc["points"].as_array().unwrap().iter().map(|p| p["mode"].as_str().unwrap()).collect();
    assert!(modes.contains(&"h2d") && modes.contains(&"both"), "{modes:?}");
    assert_eq!(doc["verification"]["failed"], 0);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("out")], "the scratch file is gone");
    pcieperf().args(["dma", "--scratch"]).arg(dir.path()).args(["--target", "sim"]).assert().code(2);
}

/// A run killed with SIGKILL cannot remove its scratch file; the next run in the same directory
/// finds it, sees its process is gone, removes it and says so.
#[test]
fn a_scratch_file_left_by_a_killed_run_is_removed_by_the_next() {
    let dir = disk_dir();
    let mut child = Process::new(binary())
        .args(["dma", "--dir", "d2h", "--sizes", "64MiB", "--duration", "30s", "--scratch"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // On a loaded machine the run may take a while to get to its scratch file: wait for it
    // (the loop ends as soon as it is there).
    while pcieperf::engine::scratch::scratch_files(dir.path()).is_empty() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let left = pcieperf::engine::scratch::scratch_files(dir.path());
    assert_eq!(left.len(), 1, "the killed run left its scratch file (waited {:?})", started.elapsed());
    let assert = pcieperf().args(["dma", "--dir", "d2h", "--sizes", "64KiB", "--duration", "300ms", "--scratch"]).arg(dir.path()).assert().success();
    let stderr = stderr_of(&assert);
    assert!(stderr.contains("removed") && stderr.contains(&left[0].display().to_string()), "{stderr}");
    assert!(pcieperf::engine::scratch::scratch_files(dir.path()).is_empty());
}

// ---- 3. signals -----------------------------------------------------------------------------

/// Wait until the child has a handler for `signal` (its SigCgt mask in /proc), i.e. `main` ran.
fn wait_for_handler(child: &Child, signal: i32) {
    let status = format!("/proc/{}/status", child.id());
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let caught = text.lines().find_map(|l| l.strip_prefix("SigCgt:")).map(|m| u64::from_str_radix(m.trim(), 16).unwrap_or(0));
        if caught.is_some_and(|mask| mask & (1 << (signal - 1)) != 0) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no handler for signal {signal}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn send(child: &Child, signal: i32) {
    // SAFETY: kill on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

/// A transfer that never completes: d2h from a FIFO nobody writes, with a 20 s deadline.
fn stuck_dma(dir: &Path, out: &Path) -> Child {
    let fifo = dir.join("stuck");
    if !fifo.exists() {
        mkfifo(&fifo);
    }
    Process::new(binary())
        .args(["dma", "--dir", "d2h", "--sizes", "4KiB", "--deadline", "20s", "--target"])
        .arg(format!("chardev:{}", fifo.display()))
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(mut child: Child) -> (Option<i32>, String) {
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status.code(), stderr)
}

#[test]
fn a_signal_during_a_stuck_transfer_ends_the_run_at_once_with_partial_results() {
    let _serial = timing();
    let dir = tempfile::tempdir().unwrap();
    for (signal, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let out = dir.path().join(format!("{name}.json"));
        let child = stuck_dma(dir.path(), &out);
        wait_for_handler(&child, signal);
        std::thread::sleep(Duration::from_millis(300)); // inside the stuck read by now
        send(&child, signal);
        let sent = Instant::now();
        let (code, stderr) = finish(child);
        let took = sent.elapsed();
        assert_eq!(code, Some(130), "{name}: {stderr}");
        assert!(took < Duration::from_millis(500), "{name}: returned {took:?} after the signal");
        let doc = read_json(&out);
        assert_eq!(doc["complete"], false, "{name}");
        assert_eq!(doc["stopped"]["reason"], "interrupted", "{name}");
        assert!(stderr.contains("interrupted"), "{name}: {stderr}");
    }
}

/// A simulated demo of a terabyte is one long computation on the link simulator (about half a
/// minute here): a signal ends the wait for it at once, the finished measurements printed.
#[test]
fn a_signal_ends_a_long_simulated_demo_at_once() {
    let _serial = timing();
    let child = Process::new(binary())
        .args(["demo", "--target", "sim:doc001", "--block-amount", "134217728"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_handler(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300)); // inside the first measurement's link run
    send(&child, libc::SIGINT);
    let sent = Instant::now();
    let mut child = child;
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let (code, stderr) = finish(child);
    let took = sent.elapsed();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(took < Duration::from_secs(2), "returned {took:?} after the signal");
    // Nothing had finished: the error itself, no table.
    assert!(stderr.contains("pcieperf: interrupted") && stdout.is_empty(), "{stdout}{stderr}");
}

/// SIGINT at random moments from the first milliseconds after the handler exists: the run ends
/// with 130 and a readable incomplete document, or (signal after the end) 0 and a complete one.
#[test]
fn sigint_at_random_moments_always_leaves_a_readable_document() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let mut delays_us = vec![0u64, 500, 2_000];
    for _ in 0..5 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        delays_us.push(state % 150_000);
    }
    eprintln!("SIGINT delays after the handler was installed (µs): {delays_us:?}");
    for delay in delays_us {
        let out = dir.path().join(format!("r{delay}.json"));
        let child = Process::new(binary())
            .args(["run", "--quick", "--target", "sim", "--out"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_handler(&child, libc::SIGINT);
        std::thread::sleep(Duration::from_micros(delay));
        send(&child, libc::SIGINT);
        let (code, stderr) = finish(child);
        let doc = read_json(&out);
        match code {
            Some(130) => assert_eq!(doc["complete"], false, "{delay} µs: {stderr}"),
            Some(0) => assert_eq!(doc["complete"], true, "{delay} µs: finished before the signal"),
            other => panic!("{delay} µs: exit {other:?}: {stderr}"),
        }
    }
}

#[test]
fn an_interrupted_run_keeps_an_earlier_complete_file_of_the_same_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--duration", "20ms", "--out"]).arg(&out).assert().success();
    let complete = std::fs::read(&out).unwrap();
    let child = stuck_dma(dir.path(), &out);
    wait_for_handler(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(200));
    send(&child, libc::SIGINT);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(130));
    assert_eq!(std::fs::read(&out).unwrap(), complete, "the complete run is kept");
    let partial = dir.path().join("run.partial.json");
    assert_eq!(read_json(&partial)["complete"], false);
    assert!(stderr.contains(&partial.display().to_string()), "says where: {stderr}");
}

// ---- 4. bounded input -----------------------------------------------------------------------

#[test]
fn endless_and_special_inputs_end_at_once_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let cases: Vec<Vec<String>> = vec![
        vec!["report".into(), "/dev/zero".into()],
        vec!["report".into(), "/dev/urandom".into()],
        vec!["report".into(), fifo.display().to_string()],
        vec!["inspect".into(), "--dump".into(), "/dev/zero".into()],
        vec!["inspect".into(), "--pci-ids".into(), "/dev/zero".into()],
        vec!["inspect".into(), "--dump".into(), fifo.display().to_string()],
    ];
    for args in cases {
        let started = Instant::now();
        let assert = pcieperf().args(&args).timeout(Duration::from_secs(10)).assert().code(2);
        assert!(stderr_of(&assert).contains("not a regular file"), "{args:?}: {}", stderr_of(&assert));
        assert!(started.elapsed() < Duration::from_secs(3), "{args:?}");
    }
}

/// Standard input that never ends: the size limit is named, and memory stays bounded (the
/// process runs under a 1 GiB address-space limit where prlimit exists).
/// A pipe has no size to check: an endless one (a valid document's opening, then padding the
/// reader skips without keeping it) ends at the pipe limit with its name, in bounded memory.
#[test]
fn endless_standard_input_hits_the_named_limit_in_bounded_memory() {
    let prlimit = Path::new("/usr/bin/prlimit").exists();
    let mut command = if prlimit {
        let mut c = Process::new("/usr/bin/prlimit");
        c.arg("--as=1073741824").arg(binary());
        c
    } else {
        eprintln!("prlimit missing: memory is not capped, only the limit message is checked");
        Process::new(binary())
    };
    let mut child = command.args(["report", "-"]).stdin(Stdio::piped()).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        let padding = "0, ".repeat(64 * 1024);
        let _ = stdin.write_all(b"{\"schema\": \"pcieperf.results/3\", \"padding\": [");
        // Until the reader gives up and closes the pipe.
        while stdin.write_all(padding.as_bytes()).is_ok() {}
    });
    let output = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("limit of a results document read from a pipe"), "{stderr}");
}

/// A results document over the 256 MiB that once was the reader's limit (`dma` wrote 364 MB
/// files that `report` then refused): a sim run's first sample repeated 1.8 million times
/// (300 MB). Returns the path.
fn document_over_the_old_limit(dir: &Path) -> PathBuf {
    let small = dir.join("small.json");
    pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--duration", "20ms", "--out"]).arg(&small).assert().success();
    let text = std::fs::read_to_string(&small).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let sample = serde_json::to_string_pretty(&doc["points"][0]["samples"][0]).unwrap() + ",\n";
    let (head, tail) = text.split_once("\"samples\": [").unwrap();
    let mut big = Vec::with_capacity(300 << 20);
    big.extend_from_slice(head.as_bytes());
    big.extend_from_slice(b"\"samples\": [");
    let copies = (300_000_000 - text.len()) / sample.len();
    for _ in 0..copies {
        big.extend_from_slice(sample.as_bytes());
    }
    big.extend_from_slice(tail.as_bytes());
    assert!(big.len() > 256 << 20, "{} bytes", big.len());
    let path = dir.join("big.json");
    std::fs::write(&path, big).unwrap();
    path
}

/// `report` streams a document larger than the old 256 MiB limit into its typed values, within
/// an address space of 1.5× the file (program, stacks and allocator arenas included), and when
/// even that is more than the process may have, says so and exits 1 instead of aborting.
#[test]
fn a_document_over_the_old_limit_is_read_in_less_than_its_size_and_exhaustion_is_a_message() {
    if !Path::new("/usr/bin/prlimit").exists() {
        eprintln!("skipped: prlimit (util-linux) is missing, memory cannot be capped");
        return;
    }
    let _timing = timing();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let big = document_over_the_old_limit(dir.path());
    let file_bytes = std::fs::metadata(&big).unwrap().len();
    let capped = |bytes: u64| Process::new("/usr/bin/prlimit").arg(format!("--as={bytes}")).arg(binary()).arg("report").arg(&big).output().unwrap();
    let fits = capped(file_bytes * 3 / 2);
    assert_eq!(fits.status.code(), Some(0), "{}", String::from_utf8_lossy(&fits.stderr));
    assert!(String::from_utf8_lossy(&fits.stdout).contains("64KiB"));
    let starved = capped(file_bytes / 4);
    let stderr = String::from_utf8_lossy(&starved.stderr);
    assert_eq!(starved.status.code(), Some(1), "exit 1, not SIGABRT: {stderr}");
    assert!(stderr.starts_with("pcieperf: out of memory: an allocation of") && stderr.lines().count() == 1, "{stderr}");
}

#[test]
fn a_silent_pipe_times_out() {
    let mut child = Process::new(binary()).args(["report", "-"]).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let _keep_open = child.stdin.take();
    let started = Instant::now();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("sent nothing"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

// ---- 5. faults: nesting -----------------------------------------------------------------------

#[test]
fn deeply_nested_fault_wrappers_are_one_clear_error() {
    let target = format!("{}sim", "fault:drop:".repeat(2500));
    let assert = pcieperf().args(["dma", "--target", &target]).assert().code(2);
    assert!(stderr_of(&assert).contains("at most 4"), "{}", stderr_of(&assert));
}

// ---- 6. hostile numbers -----------------------------------------------------------------------

#[test]
fn huge_numbers_are_refused_not_wrapped() {
    for args in [
        vec!["model", "message", "--overhead-bytes", "18446744073709551615"],
        vec!["model", "message", "--message-bytes", "18446744073709551615"],
        vec!["model", "mmio", "--record", "18446744073709551615"],
    ] {
        let assert = pcieperf().args(&args).assert().code(2);
        let stderr = stderr_of(&assert);
        assert!(stderr.contains("at most"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}");
    }
    // The simulator's stall counters: an absurd rate is refused, never wrapped.
    let assert = pcieperf()
        .args(["dma", "--target", "sim:stalls_per_s=1e300,long_stalls_per_s=1e300", "--sizes", "4KiB", "--duration", "10ms"])
        .assert()
        .code(2);
    assert!(stderr_of(&assert).contains("at most"), "{}", stderr_of(&assert));
    let assert = pcieperf().args(["model", "message", "--overhead-bytes", "1099511627776"]).assert().success();
    assert!(!String::from_utf8_lossy(&assert.get_output().stdout).contains("inf"));
}

// ---- 7. reproducibility -----------------------------------------------------------------------

/// What a point measured, without wall-clock times (those differ from run to run by nature).
fn measured(doc: &Value) -> Vec<Value> {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let engine_ns: Vec<&Value> = p["samples"].as_array().unwrap().iter().map(|s| &s["engine_ns"]).collect();
            serde_json::json!([p["mode"], p["size_bytes"], p["convergence"]["samples"], p["convergence"]["stop_reason"], engine_ns, p["summary"]["median_MBps"]])
        })
        .collect()
}

#[test]
fn a_simulated_run_is_the_same_for_a_seed_even_under_cpu_load() {
    let _serial = timing();
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        let out = dir.path().join("run.json");
        let output = pcieperf().args(["run", "--target", "sim", "--seed", "1", "--quick", "--json", "--out"]).arg(&out).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        measured(&serde_json::from_slice(&output.stdout).unwrap())
    };
    let first = run();
    assert_eq!(run(), first);
    let busy: Vec<Child> = (0..3).map(|_| Process::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap()).collect();
    let loaded = run();
    for mut child in busy {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_eq!(loaded, first, "CPU load changes nothing in a simulated run");
}

// ---- 8. smaller -------------------------------------------------------------------------------

#[test]
fn report_strips_terminal_control_characters_from_a_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--duration", "20ms", "--out"]).arg(&run).assert().success();
    let mut doc = read_json(&run);
    doc["conditions"]["engine"]["description"] = Value::String("evil \u{1b}]0;owned\u{7} \u{1b}[2J text".into());
    doc["conditions"]["host"] = Value::String("\u{1b}[31mred\u{1b}[0m".into());
    std::fs::write(&run, serde_json::to_string(&doc).unwrap()).unwrap();
    let assert = pcieperf().arg("report").arg(&run).assert().success();
    let stdout = &assert.get_output().stdout;
    assert!(!stdout.iter().any(|b| *b == 0x1b || *b == 0x07), "no escape reaches the terminal");
    let csv = pcieperf().arg("report").arg(&run).arg("--csv").assert().success().get_output().stdout.clone();
    assert!(!csv.contains(&0x1b));
}

#[test]
fn sizes_follow_one_rule() {
    for ambiguous in ["4k", "4KB", "4kb", "1mb"] {
        let assert = pcieperf().args(["dma", "--target", "sim", "--sizes", ambiguous]).assert().code(2);
        assert!(stderr_of(&assert).contains("ambiguous"), "{ambiguous}: {}", stderr_of(&assert));
    }
}

/// Issue 18's smaller items: a block amount the register cannot mean is bad input (exit 2 at
/// once), not a device that did not answer; a named pci.ids that cannot be read is said; control
/// characters from a target string or pci.ids are shown escaped; a schema error names the member.
#[test]
fn bad_block_amounts_are_refused_up_front() {
    for amount in ["0", "4294967295"] {
        let started = Instant::now();
        let assert = pcieperf().args(["demo", "--block-amount", amount]).assert().code(2);
        assert!(stderr_of(&assert).contains("--block-amount"), "{}", stderr_of(&assert));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn a_missing_pci_ids_file_is_named() {
    let assert = pcieperf().args(["inspect", "--pci-ids", "/nonexistent/pci.ids"]).assert().success();
    assert!(stderr_of(&assert).contains("--pci-ids /nonexistent/pci.ids: cannot be read"), "{}", stderr_of(&assert));
}

#[test]
fn control_characters_from_targets_and_pci_ids_are_shown_escaped() {
    let assert = pcieperf().args(["dma", "--target", "nosuch\u{1b}[2J\u{7}"]).assert().code(2);
    let stderr = &assert.get_output().stderr;
    assert!(!stderr.iter().any(|b| *b == 0x1b || *b == 0x07), "{}", String::from_utf8_lossy(stderr));
    assert!(stderr_of(&assert).contains("nosuch\\x1b[2J\\x07"), "{}", stderr_of(&assert));

    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("pci.ids");
    std::fs::write(&ids, "8086  Evil \u{1b}]0;owned\u{7}Corp\n\t1237  Bridge\u{1b}[31m\n").unwrap();
    let dump = dir.path().join("d.lspci");
    let mut config = vec![0u8; 64];
    config[..4].copy_from_slice(&[0x86, 0x80, 0x37, 0x12]);
    std::fs::write(&dump, pcieperf::pci::dump::write(&[("00:00.0".parse().unwrap(), &config[..])])).unwrap();
    for view in [&["-vv"][..], &["-tv"], &[], &["--json"]] {
        let out = pcieperf().args(["inspect", "-F"]).arg(&dump).arg("--pci-ids").arg(&ids).args(view).assert().success().get_output().stdout.clone();
        assert!(!out.iter().any(|b| *b == 0x1b || *b == 0x07), "{view:?}: {}", String::from_utf8_lossy(&out));
        assert!(String::from_utf8_lossy(&out).contains("Evil"), "{view:?}: names still shown");
    }
}

#[test]
fn schema_errors_name_the_member() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    pcieperf().args(["dma", "--target", "sim", "--sizes", "64KiB", "--duration", "20ms", "--out"]).arg(&run).assert().success();
    let mut doc = read_json(&run);
    doc["points"][0]["samples"][1]["engine_ns"] = serde_json::json!({"not": "a number"});
    std::fs::write(&run, serde_json::to_string(&doc).unwrap()).unwrap();
    let assert = pcieperf().arg("report").arg(&run).assert().code(2);
    assert!(stderr_of(&assert).contains("points[0].samples[1].engine_ns"), "{}", stderr_of(&assert));
}
