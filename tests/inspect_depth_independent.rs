//! Depth changes where a function sits, not what pcieperf says of it: the same 255 endpoints
//! behind a chain of 255 identical bridges and behind 255 root ports on bus 0 (each endpoint one
//! bridge down) get the same analysis — bandwidth, ceiling, warnings, path MaxPayload — and the
//! same `-vv` block, addresses aside. Every bridge of the chain has the root ports' link and
//! payload, so nothing on the longer path limits more; what differs is the path itself, checked
//! to be each function's own.

#[path = "data/pci/fixture.rs"]
#[allow(dead_code)]
mod fixture;

use assert_cmd::Command;
use pcieperf::pci::{dump, inspect, Bdf, DeviceReport, InspectOptions, Source};

const DEPTH: u8 = 255;

fn bdf(bus: u8, device: u8, function: u8) -> Bdf {
    Bdf::new(0, bus, device, function).unwrap()
}

fn bridge(kind: u16, at: Bdf, buses: (u8, u8, u8)) -> (Bdf, Vec<u8>) {
    let port = fixture::Pcie::new(kind, 4, 16).bridge(buses.0, buses.1, buses.2);
    (at, fixture::config(0x8086, 0x2000, &port, 0)[..256].to_vec())
}

/// Endpoint `n` (its device ID), at `bus:00.1`: links of several widths, so some are narrower
/// than the bridges above and some as wide.
fn endpoint(n: u8, bus: u8) -> (Bdf, Vec<u8>) {
    let width = [1u16, 4, 16][usize::from(n) % 3];
    let pcie = fixture::Pcie::new(fixture::ENDPOINT, 4, u32::from(width)).trained(u16::from(1 + n % 4), width);
    (bdf(bus, 0, 1), fixture::config(0x10de, u16::from(n), &pcie, 0)[..256].to_vec())
}

/// Bridges at `bus:00.0` opening `bus + 1`; endpoint `n` at `n + 1:00.1`, below `n + 1` of them.
fn deep() -> Vec<(Bdf, Vec<u8>)> {
    let mut configs: Vec<_> = (0..DEPTH).map(|bus| bridge(if bus == 0 { fixture::ROOT_PORT } else { fixture::DOWNSTREAM }, bdf(bus, 0, 0), (bus, bus + 1, DEPTH))).collect();
    configs.extend((0..DEPTH).map(|n| endpoint(n, n + 1)));
    configs
}

/// Root ports on bus 0, port `n` opening bus `n + 1`, endpoint `n` there.
fn flat() -> Vec<(Bdf, Vec<u8>)> {
    let mut configs: Vec<_> = (0..DEPTH).map(|n| bridge(fixture::ROOT_PORT, bdf(0, n / 8, n % 8), (0, n + 1, n + 1))).collect();
    configs.extend((0..DEPTH).map(|n| endpoint(n, n + 1)));
    configs
}

fn write(dir: &std::path::Path, name: &str, mut configs: Vec<(Bdf, Vec<u8>)>) -> std::path::PathBuf {
    configs.sort_by_key(|(at, _)| *at);
    let refs: Vec<(Bdf, &[u8])> = configs.iter().map(|(b, c)| (*b, c.as_slice())).collect();
    let path = dir.join(name);
    std::fs::write(&path, dump::write(&refs)).unwrap();
    path
}

/// `text` with every address `dddd:bb:dd.f` or `bb:dd.f` replaced by `ADDR`.
fn without_addresses(text: &str) -> String {
    let shaped = |s: &[u8]| s.len() >= 7 && s[2] == b':' && s[5] == b'.' && [0, 1, 3, 4, 6].iter().all(|&i| s[i].is_ascii_hexdigit());
    let (bytes, mut out, mut at) = (text.as_bytes(), String::new(), 0);
    while at < bytes.len() {
        let with_domain = bytes.len() - at >= 12 && bytes[at + 4] == b':' && bytes[at..at + 4].iter().all(u8::is_ascii_hexdigit) && shaped(&bytes[at + 5..]);
        if with_domain || shaped(&bytes[at..]) {
            out += "ADDR";
            at += if with_domain { 12 } else { 7 };
        } else {
            let c = text[at..].chars().next().unwrap();
            out.push(c);
            at += c.len_utf8();
        }
    }
    out
}

/// Each endpoint's report (by device ID) as JSON without its addresses and path.
fn endpoints(reports: &[DeviceReport]) -> Vec<(u16, String)> {
    let mut out: Vec<(u16, String)> = reports
        .iter()
        .filter(|r| r.vendor_id == Some(0x10de))
        .map(|r| {
            let mut json = serde_json::to_value(r).unwrap();
            json.as_object_mut().unwrap().remove("path");
            (r.device_id.unwrap(), without_addresses(&json.to_string()))
        })
        .collect();
    out.sort();
    out
}

/// Each `-vv` block of an endpoint, by its device line's ID, without addresses and the path line.
fn vv_blocks(path: &std::path::Path) -> Vec<(String, String)> {
    let output = Command::cargo_bin("pcieperf").unwrap().args(["inspect", "-vv", "-n", "-F"]).arg(path).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let mut blocks: Vec<(String, String)> = text
        .split("\n\n")
        .filter(|b| b.contains("10de:"))
        .map(|b| {
            let id = b.split_whitespace().find(|w| w.starts_with("10de:")).unwrap().to_string();
            let kept: Vec<&str> = b.lines().filter(|l| !l.contains("pcieperf: path to root:")).collect();
            (id, without_addresses(&kept.join("\n")))
        })
        .collect();
    blocks.sort();
    blocks
}

#[test]
fn endpoints_255_bridges_deep_are_analysed_as_one_bridge_deep() {
    let dir = tempfile::tempdir().unwrap();
    let (deep_path, flat_path) = (write(dir.path(), "deep.dump", deep()), write(dir.path(), "flat.dump", flat()));
    let options = |path: &std::path::Path| InspectOptions { source: Source::Dump(path.to_path_buf()), pci_ids: Some(dir.path().join("none.ids")), selector: None, ids: None };
    let deep_reports = inspect(&options(&deep_path)).unwrap().devices;
    let flat_reports = inspect(&options(&flat_path)).unwrap().devices;

    // The paths differ as the trees do: endpoint n is n + 1 bridges down the chain, one in the flat tree.
    for report in deep_reports.iter().filter(|r| r.vendor_id == Some(0x10de)) {
        assert_eq!(report.path.len(), usize::from(report.bdf.bus), "path of {}", report.bdf);
    }
    assert!(flat_reports.iter().filter(|r| r.vendor_id == Some(0x10de)).all(|r| r.path.len() == 1));

    let (deep_endpoints, flat_endpoints) = (endpoints(&deep_reports), endpoints(&flat_reports));
    assert_eq!(deep_endpoints.len(), usize::from(DEPTH));
    // Some endpoints are limited by their own link, others by an x16 hop above (ties go up).
    assert!(deep_endpoints.iter().any(|(_, j)| j.contains("\"limiting_width\":1")) && deep_endpoints.iter().any(|(_, j)| j.contains("\"limiting_width\":16")));
    for ((id, deep), (_, flat)) in deep_endpoints.iter().zip(&flat_endpoints) {
        assert_eq!(deep, flat, "endpoint {id:04x}: deep vs flat");
    }

    let (deep_text, flat_text) = (vv_blocks(&deep_path), vv_blocks(&flat_path));
    assert_eq!(deep_text.len(), usize::from(DEPTH));
    assert_eq!(deep_text, flat_text);
}

#[test]
fn addresses_are_masked_and_nothing_else() {
    assert_eq!(without_addresses("at 0000:0a:1f.7 → 01:00.0 (x16) 10de:0001"), "at ADDR → ADDR (x16) 10de:0001");
}
