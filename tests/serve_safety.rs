//! `pcieperf serve` against careless and hostile clients (the real binary on loopback, a fake
//! sysfs tree): signals stop it within 1 s; slow bodies, `Expect: 100-continue`, idle and
//! slow-loris connections neither delay a scrape nor hold a thread each; a 1 MB header is
//! refused without the memory; only GET and HEAD are answered; unreadable results files are
//! named once; listening beyond loopback warns. Limits: docs/metrics.md; guarantees:
//! docs/safety.md ("The exporter").

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

#[path = "data/pci/fixture.rs"]
mod fixture;

/// The idle timeout `serve` applies (docs/metrics.md).
const IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// The time `serve` allows for a whole request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// A fake tree of one root port and a NIC trained at x4 of x8.
fn nic_tree() -> fixture::Tree {
    let tree = fixture::Tree::new();
    tree.add(&["0000:00:01.0"], &fixture::config(0x8086, 0x1901, &fixture::Pcie::new(fixture::ROOT_PORT, 3, 8).bridge(0, 1, 1), 0), &[]);
    let nic = fixture::Pcie::new(fixture::ENDPOINT, 3, 8).trained(3, 4);
    tree.add(&["0000:00:01.0", "0000:01:00.0"], &fixture::config(0x8086, 0x1572, &nic, 0), &[]);
    tree
}

/// A running `pcieperf serve`; its standard error goes to a file (a closed pipe would end it
/// with SIGPIPE). Stopped with SIGTERM, then SIGKILL, when dropped.
struct Serve {
    child: Child,
    address: String,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Serve {
    fn start(tree: &fixture::Tree, listen: &str, extra: &[&str]) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
            .args(["serve", "--listen", listen, "--pci-ids", "/nonexistent", "--sysfs-root"])
            .arg(tree.root())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let mut serve = Serve { child, address: String::new(), stderr_path, _dir: dir };
        let started = Instant::now();
        while serve.address.is_empty() {
            let stderr = serve.stderr();
            if let Some(line) = stderr.lines().find(|l| l.starts_with("pcieperf: serving http://")) {
                serve.address = line.trim_start_matches("pcieperf: serving http://").trim_end_matches("/metrics").to_string();
            }
            assert!(serve.child.try_wait().unwrap().is_none(), "serve ended at start: {stderr}");
            assert!(started.elapsed() < Duration::from_secs(20), "serve did not say where it listens: {stderr}");
            std::thread::sleep(Duration::from_millis(20));
        }
        serve
    }

    /// The loopback address to connect to (a server on 0.0.0.0 is reached on 127.0.0.1).
    fn connect_address(&self) -> String {
        self.address.replace("0.0.0.0", "127.0.0.1")
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0, "kill failed");
    }

    /// The exit status, once the process ended within `limit`.
    fn exit_within(&mut self, limit: Duration) -> Option<(ExitStatus, Duration)> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some((status, start.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// A field of /proc/PID/status (VmRSS in kB, Threads), as a number.
    fn status_field(&self, name: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap_or_else(|| panic!("no {name} in {status}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.signal(libc::SIGTERM);
            if self.exit_within(Duration::from_secs(2)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

fn connect(address: &str) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Send `request` and read the answer until the server closes.
fn exchange(address: &str, request: &str) -> String {
    let mut stream = connect(address);
    stream.write_all(request.as_bytes()).unwrap();
    read_answer(&mut stream)
}

fn read_answer(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap_or_else(|e| panic!("reading the answer: {e} (had {:?})", String::from_utf8_lossy(&answer)));
    String::from_utf8_lossy(&answer).into_owned()
}

fn scrape(address: &str) -> String {
    exchange(address, &format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"))
}

fn assert_metrics(answer: &str) {
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    // No Accept header: Prometheus text 0.0.4, devices labelled as node_exporter labels them.
    assert!(answer.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{answer}");
    assert!(answer.contains("pcieperf_pcie_link_width_lanes{segment=\"0000\",bus=\"01\",device=\"00\",function=\"0\"} 4\n"), "{answer}");
    assert!(answer.ends_with('\n') && !answer.contains("# EOF"), "{answer}");
}

#[test]
fn sigint_sigterm_and_sighup_each_stop_serve_within_a_second() {
    let tree = nic_tree();
    for (signal, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let mut serve = Serve::start(&tree, "127.0.0.1:0", &[]);
        assert_metrics(&scrape(&serve.address));
        // Open connections, one silent and one half-way through its head, must not hold it.
        let _silent = connect(&serve.address);
        let mut half = connect(&serve.address);
        half.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        serve.signal(signal);
        let (status, took) = serve.exit_within(Duration::from_secs(1)).unwrap_or_else(|| panic!("{name}: serve still running 1 s later: {}", serve.stderr()));
        assert_eq!(status.code(), Some(0), "{name}: {status}: {}", serve.stderr());
        assert!(serve.stderr().contains("pcieperf: serve stopped by a signal"), "{name}: {}", serve.stderr());
        eprintln!("{name}: stopped after {} ms", took.as_millis());
    }
}

#[test]
fn a_slow_body_and_an_expect_continue_client_do_not_delay_a_scrape() {
    let tree = nic_tree();
    let serve = Serve::start(&tree, "127.0.0.1:0", &[]);
    let mut slow_body = connect(&serve.address);
    slow_body.write_all(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nab").unwrap();
    let mut trickle = slow_body.try_clone().unwrap();
    let trickler = std::thread::spawn(move || {
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(100));
            if trickle.write_all(b"c").is_err() {
                return;
            }
        }
    });
    let mut expecting = connect(&serve.address);
    expecting.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));

    let start = Instant::now();
    let answer = scrape(&serve.address);
    let took = start.elapsed();
    assert_metrics(&answer);
    // A liveness bound, not a performance figure: before, this scrape waited for the others.
    assert!(took < Duration::from_secs(2), "the scrape took {took:?} beside a slow body and an Expect client");

    let expect_answer = read_answer(&mut expecting);
    assert!(!expect_answer.contains("100 Continue"), "100-continue must not be honoured: {expect_answer}");
    assert_metrics(&expect_answer);
    let mut slow_answer = [0u8; 64];
    let n = slow_body.read(&mut slow_answer).unwrap();
    let slow_answer = String::from_utf8_lossy(&slow_answer[..n]);
    assert!(slow_answer.starts_with("HTTP/1.1 405 "), "{slow_answer}");
    trickler.join().unwrap();
}

#[test]
fn a_1mb_header_gets_431_and_closes_without_the_rss_growing_by_it() {
    let tree = nic_tree();
    let serve = Serve::start(&tree, "127.0.0.1:0", &[]);
    // Settle the allocations of a scrape first.
    for _ in 0..3 {
        assert_metrics(&scrape(&serve.address));
    }
    let rss_before_kb = serve.status_field("VmRSS");
    let mut stream = connect(&serve.address);
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let mut request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
        request.resize(request.len() + 1_000_000, b'a');
        request.extend_from_slice(b"\r\n\r\n");
        // The server may close before taking it all: a failed write is expected then.
        let _ = writer.write_all(&request);
        let _ = writer.shutdown(Shutdown::Write);
    });
    let answer = read_answer(&mut stream);
    sender.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    let rss_after_kb = serve.status_field("VmRSS");
    let growth_kb = rss_after_kb.saturating_sub(rss_before_kb);
    eprintln!("RSS before {rss_before_kb} kB, after {rss_after_kb} kB");
    assert!(growth_kb < 500, "RSS grew by {growth_kb} kB for a 1 MB header ({rss_before_kb} → {rss_after_kb} kB)");
    assert_metrics(&scrape(&serve.address));
}

/// Seconds until the server closes `stream`.
fn seconds_until_closed(mut stream: TcpStream) -> f64 {
    let start = Instant::now();
    let mut byte = [0u8; 1];
    // EOF or a reset: closed either way; a read timeout (10 s) would fail the assertion after.
    while let Ok(n) = stream.read(&mut byte) {
        if n == 0 {
            break;
        }
    }
    start.elapsed().as_secs_f64()
}

#[test]
fn idle_and_slow_loris_connections_are_closed_after_their_timeouts() {
    let tree = nic_tree();
    let serve = Serve::start(&tree, "127.0.0.1:0", &[]);
    let silent = connect(&serve.address);
    let mut half = connect(&serve.address);
    half.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    // A slow loris: one byte every 0.5 s is never idle for long, but its head never ends.
    let loris = connect(&serve.address);
    let mut feeder = loris.try_clone().unwrap();
    std::thread::spawn(move || {
        let _ = feeder.write_all(b"GET /metrics HTTP/1.1\r\n");
        while feeder.write_all(b"X").is_ok() {
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    let closers: Vec<_> = [silent, half, loris].into_iter().map(|s| std::thread::spawn(move || seconds_until_closed(s))).collect();
    let seconds: Vec<f64> = closers.into_iter().map(|c| c.join().unwrap()).collect();
    let idle = IDLE_TIMEOUT.as_secs_f64();
    for (what, closed_after) in [("silent", seconds[0]), ("half a head", seconds[1])] {
        assert!(closed_after >= idle - 0.3 && closed_after < idle + 1.5, "{what} connection closed after {closed_after:.2} s (idle timeout {idle} s)");
    }
    let head = HEAD_TIMEOUT.as_secs_f64();
    assert!(seconds[2] >= head - 0.5 && seconds[2] < head + 1.5, "slow loris closed after {:.2} s (head timeout {head} s)", seconds[2]);
}

#[test]
fn many_slow_loris_connections_hold_no_thread_each_and_do_not_starve_a_scrape() {
    let tree = nic_tree();
    let serve = Serve::start(&tree, "127.0.0.1:0", &[]);
    // After a first answer every worker is running.
    assert_metrics(&scrape(&serve.address));
    let threads_before = serve.status_field("Threads");
    // More than the 512 connections the server keeps: the oldest unfinished make room.
    let mut loris = Vec::new();
    for _ in 0..600 {
        let mut stream = connect(&serve.address);
        stream.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ").unwrap();
        loris.push(stream);
    }
    std::thread::sleep(Duration::from_millis(300));
    let threads_during = serve.status_field("Threads");
    let start = Instant::now();
    assert_metrics(&scrape(&serve.address));
    let took = start.elapsed();
    assert_eq!(threads_during, threads_before, "threads went from {threads_before} to {threads_during} with 600 slow connections open");
    assert!(took < Duration::from_secs(2), "a scrape beside 600 slow connections took {took:?}");
}

#[test]
fn methods_other_than_get_and_head_are_405_with_allow() {
    let tree = nic_tree();
    let serve = Serve::start(&tree, "127.0.0.1:0", &[]);
    for method in ["POST", "PUT", "DELETE", "TRACE", "PATCH", "OPTIONS"] {
        let answer = exchange(&serve.address, &format!("{method} /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbody"));
        assert!(answer.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{method}: {answer}");
        assert!(answer.contains("\r\nAllow: GET, HEAD\r\n"), "{method}: {answer}");
        assert!(!answer.contains("pcieperf_pcie"), "{method} must not be answered with metrics: {answer}");
    }
    let head = exchange(&serve.address, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let length: usize = head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().parse().unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n") && length > 0, "{head}");
    let elsewhere = exchange(&serve.address, "GET / HTTP/1.0\r\n\r\n");
    assert!(elsewhere.starts_with("HTTP/1.1 404 "), "{elsewhere}");
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn unreadable_results_files_are_named_once_each() {
    let tree = nic_tree();
    let results = tempfile::tempdir().unwrap();
    let broken = results.path().join("broken.json");
    let empty = results.path().join("empty.json");
    std::fs::write(&broken, "{ not a results document").unwrap();
    std::fs::write(&empty, "").unwrap();
    let serve = Serve::start(&tree, "127.0.0.1:0", &["--results", results.path().to_str().unwrap()]);
    for _ in 0..3 {
        let answer = scrape(&serve.address);
        assert!(answer.contains("pcieperf_exporter_unreadable_results_files{dir="), "{answer}");
        assert!(answer.contains("} 2"), "two unreadable files counted: {answer}");
        // Past the reuse window: each scrape reads the directory again.
        std::thread::sleep(Duration::from_millis(150));
    }
    let stderr = serve.stderr();
    for path in [&broken, &empty] {
        assert_eq!(count(&stderr, &format!("pcieperf: warning: {}:", path.display())), 1, "{} not named exactly once: {stderr}", path.display());
    }
    assert_named_after_it_breaks_again(&serve, &broken);
}

/// A file that became readable (here: removed) and breaks again is named again.
fn assert_named_after_it_breaks_again(serve: &Serve, broken: &Path) {
    std::fs::remove_file(broken).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    scrape(&serve.address);
    std::fs::write(broken, "[]").unwrap();
    std::thread::sleep(Duration::from_millis(150));
    scrape(&serve.address);
    let stderr = serve.stderr();
    assert_eq!(count(&stderr, &format!("pcieperf: warning: {}:", broken.display())), 2, "{stderr}");
}

#[test]
fn listening_beyond_loopback_warns_and_loopback_does_not() {
    let tree = nic_tree();
    let wide = Serve::start(&tree, "0.0.0.0:0", &[]);
    assert_metrics(&scrape(&wide.connect_address()));
    let stderr = wide.stderr();
    assert!(stderr.contains("pcieperf: warning: listening on 0.0.0.0:") && stderr.contains("beyond loopback"), "{stderr}");
    let local = Serve::start(&tree, "127.0.0.1:0", &[]);
    assert_metrics(&scrape(&local.address));
    assert!(!local.stderr().contains("warning"), "{}", local.stderr());
}

#[test]
fn a_request_followed_by_a_half_close_is_answered() {
    let tree = nic_tree();
    let serve = Serve::start(&tree, "127.0.0.1:0", &[]);
    let mut stream = connect(&serve.address);
    stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    assert_metrics(&read_answer(&mut stream));
}

/// Standard error whose reader went away (a log collector restarted) does not end the exporter:
/// the next warning is dropped, scrapes are still answered, and a signal still stops it with 0.
#[test]
fn a_closed_stderr_pipe_does_not_end_serve() {
    use std::io::BufRead;
    let tree = nic_tree();
    let results = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["serve", "--listen", "127.0.0.1:0", "--pci-ids", "/nonexistent", "--sysfs-root"])
        .arg(tree.root())
        .args(["--results", results.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let address = lines
        .find_map(|line| line.ok()?.strip_prefix("pcieperf: serving http://").map(|a| a.trim_end_matches("/metrics").to_string()))
        .expect("serve says where it listens");
    drop(lines); // the reader goes away
    std::fs::write(results.path().join("broken.json"), "{").unwrap();
    for _ in 0..3 {
        assert_metrics(&scrape(&address));
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(child.try_wait().unwrap().is_none(), "serve ended when it could not write its warning");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = child.try_wait().unwrap();
    if status.is_none() {
        let _ = child.kill();
    }
    assert_eq!(status.and_then(|s| s.code()), Some(0), "stopped by SIGTERM with 0");
}
