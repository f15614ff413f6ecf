//! One `pcieperf serve` scrape of 100 PCIe devices (a fake sysfs tree: 50 root ports, each with
//! a Gen4 x16 endpoint trained at x8, AER counters on every endpoint): read fresh, decoded,
//! analysed and encoded as OpenMetrics text. Budget: 50 ms. Peer in the same run: reading the
//! same files raw (every file under each device, no decoding), the floor any exporter pays; the
//! ratio is what decoding, the path analysis, the model ceilings and encoding cost on top.
//!
//!
//! Then the real `pcieperf serve` on loopback under load: 6,000 scrapes by 50 concurrent clients
//! (a new connection each) while 200 slow-loris connections stay open (each sends part of a
//! head, then a byte a second; the server closes them at its head timeout and they reconnect).
//! Goal: p99 ≤ 100 ms, and RSS and the thread count flat (/proc/PID/status before and after).
//!
//! And a scrape's cost against the history in `--results DIR`: 1, 300 and 3,000 stored runs,
//! the first scrape (every file parsed) and the next ones (an index kept by an inotify watch:
//! only a changed file is stat'ed and parsed), 200 scrapes each, wall and CPU time. Goal: p99 ≤ 10 ms with 1 run,
//! ≤ 50 ms with 3,000.
//!
//! Run with `cargo bench --bench serve_scrape` (under `cargo test` it runs once, as a smoke
//! test: one round, 50 scrapes by 5 clients beside 10 slow connections).

#[path = "../tests/data/pci/fixture.rs"]
mod fixture;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pcieperf::report::exporter::{read, scrape, ResultsIndex, Sources};

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn rounds() -> usize {
    if full_run() { 50 } else { 1 }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn read_raw(root: &Path) -> usize {
    let mut bytes = 0;
    for device in std::fs::read_dir(root.join("bus/pci/devices")).unwrap().flatten() {
        for file in std::fs::read_dir(device.path()).unwrap().flatten() {
            if file.path().is_file() {
                bytes += std::fs::read(file.path()).unwrap().len();
            }
        }
    }
    bytes
}

fn main() {
    let tree = fixture::Tree::new();
    let aer = [("aer_dev_correctable", "RxErr 3\nBadTLP 1\nTOTAL_ERR_COR 4"), ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 0"), ("aer_dev_fatal", "TOTAL_ERR_FATAL 0")];
    for port in 0..50u8 {
        let port_bdf = format!("0000:00:{:02x}.{}", port / 8, port % 8);
        let bus = port + 1;
        let root = fixture::config(0x8086, 0x1901, &fixture::Pcie::new(fixture::ROOT_PORT, 4, 16).bridge(0, bus, bus), 0);
        tree.add(&[&port_bdf], &root, &[]);
        let gpu = fixture::config(0x10de, 0x2204, &fixture::Pcie::new(fixture::ENDPOINT, 4, 16).trained(4, 8), 0);
        tree.add(&[&port_bdf, &format!("0000:{bus:02x}:00.0")], &gpu, &aer);
    }
    let sources = Sources { sysfs_root: tree.root().to_path_buf(), pci_ids: Some("/nonexistent".into()), results_dir: None };
    let body = scrape(&sources).unwrap();
    assert_eq!(body.lines().filter(|l| l.starts_with("pcieperf_pcie_link_width_lanes{")).count(), 100);
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..rounds() {
        let start = Instant::now();
        std::hint::black_box(scrape(&sources).unwrap());
        ours.push(start.elapsed());
        let start = Instant::now();
        std::hint::black_box(read_raw(tree.root()));
        raw.push(start.elapsed());
    }
    let (ours, raw) = (median(ours), median(raw));
    let load = if full_run() { Load { scrapes: 6000, clients: 50, slow_connections: 200 } } else { Load { scrapes: 50, clients: 5, slow_connections: 10 } };
    println!(
        "serve scrape of 100 devices: median {:.2} ms (budget 50 ms); raw read of the same files {:.2} ms; ratio {:.1}",
        ours.as_secs_f64() * 1e3,
        raw.as_secs_f64() * 1e3,
        ours.as_secs_f64() / raw.as_secs_f64()
    );
    load.run(tree.root());
    history();
}

/// Scrapes against 1, 300 and 3,000 stored runs (copies of one short simulated run), beside a
/// sysfs of one device, so the figures are the history's cost.
fn history() {
    let tree = fixture::Tree::new();
    tree.add(&["0000:00:01.0"], &fixture::config(0x8086, 0x1901, &fixture::Pcie::new(fixture::ROOT_PORT, 3, 8).bridge(0, 1, 1), 0), &[]);
    let sysfs = tree.root();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    let made = Command::new(env!("CARGO_BIN_EXE_pcieperf")).args(["-q", "dma", "--target", "sim:doc001", "--sizes", "4KiB,64KiB", "--duration", "5ms", "--out"]).arg(&run).stdout(Stdio::null()).status().unwrap();
    assert!(made.success());
    let counts: &[usize] = if full_run() { &[1, 300, 3000] } else { &[1, 30] };
    for &count in counts {
        let results = tempfile::tempdir().unwrap();
        for i in 0..count {
            std::fs::copy(&run, results.path().join(format!("run{i:05}.json"))).unwrap();
        }
        let sources = Sources { sysfs_root: sysfs.to_path_buf(), pci_ids: Some("/nonexistent".into()), results_dir: Some(results.path().to_path_buf()) };
        let mut index = ResultsIndex::default();
        let start = Instant::now();
        read(&sources, &mut index).unwrap();
        let first = start.elapsed();
        // Wall time, and this thread's CPU time: on a shared machine the gap is time spent
        // waiting for a CPU, not the scrape's own work.
        let scrapes = if full_run() { 200 } else { 20 };
        let (mut next, mut cpu): (Vec<Duration>, Vec<Duration>) = (0..scrapes)
            .map(|_| {
                let (start, cpu_start) = (Instant::now(), thread_cpu());
                std::hint::black_box(read(&sources, &mut index).unwrap());
                (start.elapsed(), thread_cpu() - cpu_start)
            })
            .unzip();
        next.sort();
        cpu.sort();
        let p99 = |sorted: &[Duration]| sorted[(sorted.len() * 99).div_ceil(100) - 1].as_secs_f64() * 1e3;
        println!(
            "serve scrape with {count} stored runs: first {:.1} ms ({} files parsed), then median {:.2} ms, p99 {:.2} ms over {} scrapes; CPU time median {:.2} ms, p99 {:.2} ms ({} parsed in all)",
            first.as_secs_f64() * 1e3,
            count,
            median(next.clone()).as_secs_f64() * 1e3,
            p99(&next),
            next.len(),
            median(cpu.clone()).as_secs_f64() * 1e3,
            p99(&cpu),
            index.parses
        );
    }
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The load part's sizes.
struct Load {
    scrapes: usize,
    clients: usize,
    slow_connections: usize,
}

/// The exporter under test, stopped with SIGTERM at the end.
struct Exporter {
    child: Child,
    address: String,
}

impl Exporter {
    fn start(root: &Path, stderr: &Path) -> Exporter {
        let child = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
            .args(["serve", "--listen", "127.0.0.1:0", "--pci-ids", "/nonexistent", "--sysfs-root"])
            .arg(root)
            .stderr(std::fs::File::create(stderr).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Owned at once, so a failed start below still ends the process (Drop).
        let mut exporter = Exporter { child, address: String::new() };
        let started = Instant::now();
        while exporter.address.is_empty() {
            let log = std::fs::read_to_string(stderr).unwrap_or_default();
            if let Some(line) = log.lines().find(|l| l.starts_with("pcieperf: serving http://")) {
                exporter.address = line.trim_start_matches("pcieperf: serving http://").trim_end_matches("/metrics").to_string();
            }
            assert!(started.elapsed() < Duration::from_secs(20), "serve did not start: {log}");
            std::thread::sleep(Duration::from_millis(20));
        }
        exporter
    }

    /// VmRSS (kB) and Threads from /proc/PID/status.
    fn rss_kb_and_threads(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| -> u64 { status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).unwrap().parse().unwrap() };
        (field("VmRSS:"), field("Threads:"))
    }

    fn stop(&mut self) -> Duration {
        let start = Instant::now();
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "serve ended with {status}");
        start.elapsed()
    }
}

impl Drop for Exporter {
    /// A bench that failed half-way leaves no server behind.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One scrape on a new connection: its latency (connect to the server's close).
fn timed_scrape(address: &str) -> Duration {
    let start = Instant::now();
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Prometheus's own Accept header: the OpenMetrics answer, ending in "# EOF".
    let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    stream.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let took = start.elapsed();
    let whole = answer.windows(6).any(|w| w == b"# EOF\n");
    assert!(answer.starts_with(b"HTTP/1.1 200 OK") && whole, "not a whole answer: {}", String::from_utf8_lossy(&answer[..answer.len().min(300)]));
    took
}

/// Keep `count` slow-loris connections open until `stop`: each sends part of a head, then one
/// byte a second; one the server closed is opened again. Returns how many were (re)opened.
fn hold_slow_connections(address: String, count: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut slots: Vec<Option<TcpStream>> = (0..count).map(|_| None).collect();
        let mut opened = 0;
        while !stop.load(Ordering::SeqCst) {
            for slot in &mut slots {
                let alive = slot.as_mut().is_some_and(|s| s.write_all(b"X").is_ok());
                if !alive {
                    *slot = TcpStream::connect(&address).ok().filter(|mut s| s.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ").is_ok());
                    opened += 1;
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        opened
    })
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    sorted[((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// `clients` threads scraping `per_client` times each, at once: every latency, sorted, and the wall time.
fn scrape_concurrently(address: &str, clients: usize, per_client: usize) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let address = address.to_string();
            std::thread::spawn(move || (0..per_client).map(|_| timed_scrape(&address)).collect::<Vec<_>>())
        })
        .collect();
    let mut latencies: Vec<Duration> = threads.into_iter().flat_map(|c| c.join().unwrap()).collect();
    let wall = started.elapsed();
    latencies.sort();
    (latencies, wall)
}

impl Load {
    /// Rounds of the load, one after the other, so RSS is seen over more than one: flat means
    /// it stops growing once the first round has set the allocator's working set.
    const ROUNDS: usize = 3;

    fn run(&self, root: &Path) {
        let dir = tempfile::tempdir().unwrap();
        let mut exporter = Exporter::start(root, &dir.path().join("stderr"));
        for _ in 0..10 {
            timed_scrape(&exporter.address);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let slow = hold_slow_connections(exporter.address.clone(), self.slow_connections, Arc::clone(&stop));
        std::thread::sleep(Duration::from_millis(500));
        let (rss_kb, threads) = exporter.rss_kb_and_threads();
        println!("serve before the load: RSS {rss_kb} kB, {threads} threads, {} slow-loris connections open", self.slow_connections);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        for round in 1..=Self::ROUNDS {
            let (latencies, wall) = scrape_concurrently(&exporter.address, self.clients, self.scrapes / self.clients);
            let (rss_kb, threads) = exporter.rss_kb_and_threads();
            println!(
                "serve under load, round {round}: {} scrapes by {} clients in {:.2} s beside {} slow-loris connections: p50 {:.1} ms, p99 {:.1} ms (goal <= 100 ms), max {:.1} ms; then RSS {rss_kb} kB, {threads} threads",
                latencies.len(),
                self.clients,
                wall.as_secs_f64(),
                self.slow_connections,
                ms(percentile(&latencies, 0.5)),
                ms(percentile(&latencies, 0.99)),
                ms(*latencies.last().unwrap()),
            );
        }
        stop.store(true, Ordering::SeqCst);
        let slow_opened = slow.join().unwrap();
        println!("serve stopped {:.0} ms after SIGTERM; slow-loris connections opened in all: {slow_opened}", ms(exporter.stop()));
    }
}
