//! `pcieperf serve` scraped by a real Prometheus (Debian package `prometheus`, installed by
//! `.ci/run`): the exporter serves a fake sysfs tree (a Gen3 x8 NIC trained at x4) on loopback,
//! Prometheus scrapes it every second, and its HTTP API must return the NIC's link-width series.
//! Without a prometheus binary the test says so and checks the exporter's answer only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "data/pci/fixture.rs"]
mod fixture;

/// Children killed when the test ends, however it ends.
struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The exporter, stopped as a service manager stops it (SIGTERM) when the test ends; SIGKILL
/// only if that failed, so a failing stop is seen by the assertion in [`Exporter::stop`].
struct Exporter {
    child: Child,
    /// Kept open: a closed pipe would end the exporter's next log line with SIGPIPE.
    _stderr: BufReader<std::process::ChildStderr>,
}

impl Exporter {
    /// SIGTERM, and the exit status within 1 s (None when it was still running).
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(1) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() && self.stop().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn http_get(address: &str, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response.split_once("\r\n\r\n").map_or(String::new(), |(_, body)| body.to_string()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn prometheus_scrapes_the_link_width_of_a_degraded_nic() {
    let tree = fixture::Tree::new();
    tree.add(&["0000:00:01.0"], &fixture::config(0x8086, 0x1901, &fixture::Pcie::new(fixture::ROOT_PORT, 3, 8).bridge(0, 1, 1), 0), &[]);
    let nic = fixture::Pcie::new(fixture::ENDPOINT, 3, 8).trained(3, 4);
    tree.add(&["0000:00:01.0", "0000:01:00.0"], &fixture::config(0x8086, 0x1572, &nic, 0), &[]);
    let mut children = Killed(Vec::new());
    let mut serve = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["serve", "--listen", "127.0.0.1:0", "--pci-ids", "/nonexistent", "--sysfs-root"])
        .arg(tree.root())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    let mut stderr = BufReader::new(serve.stderr.take().unwrap());
    stderr.read_line(&mut first_line).unwrap();
    let mut serve = Exporter { child: serve, _stderr: stderr };
    let exporter = first_line.trim().trim_start_matches("pcieperf: serving http://").trim_end_matches("/metrics").to_string();
    let body = http_get(&exporter, "/metrics").unwrap();
    assert!(body.contains("pcieperf_pcie_link_width_lanes{device=\"0000:01:00.0\""), "{body}");
    assert!(body.ends_with("# EOF\n"), "OpenMetrics text ends with # EOF: {body}");

    if Command::new("prometheus").arg("--version").output().is_err() {
        eprintln!("SKIPPED the Prometheus part: no prometheus binary (Debian package prometheus, installed by .ci/run)");
        assert_eq!(serve.stop().map(|s| s.code()), Some(Some(0)), "serve did not stop on SIGTERM within 1 s with exit 0");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pcieperf\n    static_configs:\n      - targets: ['{exporter}']\n")).unwrap();
    let api = format!("127.0.0.1:{}", free_port());
    let prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address={api}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    children.0.push(prometheus);
    let started = Instant::now();
    let query = "/api/v1/query?query=pcieperf_pcie_link_width_lanes%7Bdevice%3D%220000%3A01%3A00.0%22%7D";
    loop {
        let answer = http_get(&api, query).unwrap_or_default();
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(&answer) {
            if let Some(series) = json["data"]["result"].as_array().and_then(|r| r.first()) {
                assert_eq!(series["value"][1], "4", "{answer}");
                assert_eq!(series["metric"]["job"], "pcieperf", "{answer}");
                drop(children);
                assert_eq!(serve.stop().map(|s| s.code()), Some(Some(0)), "serve did not stop on SIGTERM within 1 s with exit 0");
                return;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(60), "Prometheus had no link-width series after 60 s: {answer}");
        std::thread::sleep(Duration::from_millis(250));
    }
}
