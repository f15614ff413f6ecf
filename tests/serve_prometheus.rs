//! `pcieperf serve` scraped by a real Prometheus (Debian package `prometheus`, installed by
//! `.ci/run`): the exporter serves a fake sysfs tree (a Gen3 x8 NIC trained at x4) on loopback,
//! Prometheus scrapes it every second, and its HTTP API must return the NIC's link-width series,
//! data for every panel of the shipped Grafana dashboard, and the shipped alert rules' width alert.
//! Without a prometheus binary the test says so and checks the exporter's answers only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "data/pci/fixture.rs"]
mod fixture;

#[path = "data/dashboard.rs"]
mod dashboard;

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

/// GET `path` with an optional `Accept` header: the answer's head and body.
fn http_get_as(address: &str, path: &str, accept: Option<&str>) -> std::io::Result<(String, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n{accept}\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok((head.to_string(), body.to_string()))
}

fn http_get(address: &str, path: &str) -> std::io::Result<String> {
    Ok(http_get_as(address, path, None)?.1)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Every byte but letters and digits percent-encoded: a PromQL expression as a query parameter.
fn url_encoded(text: &str) -> String {
    text.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// Prometheus's HTTP API answer to an instant query: its result array (empty when no data).
fn query(api: &str, expr: &str) -> Vec<serde_json::Value> {
    let answer = http_get(api, &format!("/api/v1/query?query={}", url_encoded(expr))).unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
    assert_ne!(json["status"], "error", "{expr}: {answer}");
    json["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// `promtool check metrics` on `text`; `None` without promtool.
fn promtool_check(text: &str) -> Option<std::process::Output> {
    let mut child = Command::new("promtool").args(["check", "metrics"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().ok()?;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    Some(child.wait_with_output().unwrap())
}

const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

#[test]
fn prometheus_scrapes_the_link_width_of_a_degraded_nic() {
    let tree = fixture::Tree::new();
    tree.add(&["0000:00:01.0"], &fixture::config(0x8086, 0x1901, &fixture::Pcie::new(fixture::ROOT_PORT, 3, 8).bridge(0, 1, 1), 0), &[]);
    let nic = fixture::Pcie::new(fixture::ENDPOINT, 3, 8).trained(3, 4);
    tree.add(&["0000:00:01.0", "0000:01:00.0"], &fixture::config(0x8086, 0x1572, &nic, 0), &[("aer_dev_correctable", "RxErr 3\nBadTLP 1\nTOTAL_ERR_COR 4\n")]);
    // A results document, so the run series (throughput, ceiling ratio) are served too.
    let results = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["dma", "--target", "sim:doc001", "--sizes", "64KiB", "--duration", "50ms", "--out"])
        .arg(results.path().join("run.json"))
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let mut children = Killed(Vec::new());
    let mut serve = Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["serve", "--listen", "127.0.0.1:0", "--pci-ids", "/nonexistent", "--sysfs-root"])
        .arg(tree.root())
        .arg("--results")
        .arg(results.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    let mut stderr = BufReader::new(serve.stderr.take().unwrap());
    stderr.read_line(&mut first_line).unwrap();
    let mut serve = Exporter { child: serve, _stderr: stderr };
    let exporter = first_line.trim().trim_start_matches("pcieperf: serving http://").trim_end_matches("/metrics").to_string();

    // The text format by default, passing promtool; OpenMetrics for Prometheus's Accept header.
    let (head, text) = http_get_as(&exporter, "/metrics", None).unwrap();
    assert!(head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"), "{head}");
    assert!(text.contains("pcieperf_pcie_link_width_lanes{segment=\"0000\",bus=\"01\",device=\"00\",function=\"0\"} 4"), "{text}");
    assert!(text.contains("pcieperf_ceiling_ratio{"), "the run series are served: {text}");
    match promtool_check(&text) {
        Some(out) => assert!(out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(), "promtool check metrics: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        None => eprintln!("skipped: promtool check of the served text (no promtool; Debian package prometheus, installed by .ci/run)"),
    }
    let (head, openmetrics) = http_get_as(&exporter, "/metrics", Some(PROMETHEUS_ACCEPT)).unwrap();
    assert!(head.contains("Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"), "{head}");
    assert!(openmetrics.ends_with("# EOF\n"), "OpenMetrics text ends with # EOF: {openmetrics}");

    if Command::new("prometheus").arg("--version").output().is_err() {
        eprintln!("skipped: the Prometheus part (no prometheus binary; Debian package prometheus, installed by .ci/run)");
        assert_eq!(serve.stop().map(|s| s.code()), Some(Some(0)), "serve did not stop on SIGTERM within 1 s with exit 0");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    let rules = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/pcieperf-alerts.yml");
    std::fs::write(
        &config,
        format!("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: ['{}']\nscrape_configs:\n  - job_name: pcieperf\n    static_configs:\n      - targets: ['{exporter}']\n", rules.display()),
    )
    .unwrap();
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
    let width = "pcieperf_pcie_link_width_lanes{bus=\"01\"}";
    let series = loop {
        let found = if http_get(&api, "/-/ready").is_ok_and(|r| r.contains("Ready")) { query(&api, width) } else { Vec::new() };
        if let Some(series) = found.first() {
            break series.clone();
        }
        assert!(started.elapsed() < Duration::from_secs(60), "Prometheus had no link-width series after 60 s");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(series["value"][1], "4", "{series}");
    assert_eq!(series["metric"]["job"], "pcieperf", "{series}");
    // Range queries (increase over 1h) need two scrapes at least.
    std::thread::sleep(Duration::from_secs(3));
    for (panel, expr) in dashboard::dashboard_queries(&dashboard::dashboard()) {
        assert!(!query(&api, &expr).is_empty(), "dashboard panel {panel:?}: {expr} returned no data");
    }
    // The shipped alert rules, loaded by Prometheus: the degraded NIC's width alert is pending
    // (its `for` is 15 minutes), nothing else is.
    let alerts = http_get(&api, "/api/v1/alerts").unwrap();
    let alerts: serde_json::Value = serde_json::from_str(&alerts).unwrap();
    let names: Vec<(&str, &str)> = alerts["data"]["alerts"].as_array().unwrap().iter().map(|a| (a["labels"]["alertname"].as_str().unwrap(), a["state"].as_str().unwrap())).collect();
    assert!(names.contains(&("PcieLinkWidthDegraded", "pending")), "{names:?}");
    drop(children);
    assert_eq!(serve.stop().map(|s| s.code()), Some(Some(0)), "serve did not stop on SIGTERM within 1 s with exit 0");
}
