//! One `pcieperf serve` scrape of 100 PCIe devices (a fake sysfs tree: 50 root ports, each with
//! a Gen4 x16 endpoint trained at x8, AER counters on every endpoint): read fresh, decoded,
//! analysed and encoded as OpenMetrics text. Budget: 50 ms. Peer in the same run: reading the
//! same files raw (every file under each device, no decoding), the floor any exporter pays; the
//! ratio is what decoding, the path analysis, the model ceilings and encoding cost on top.
//!
//! Run with `cargo bench --bench serve_scrape` (under `cargo test` it runs once, as a smoke test).

#[path = "../tests/data/pci/fixture.rs"]
mod fixture;

use std::path::Path;
use std::time::{Duration, Instant};

use pcieperf::report::exporter::{scrape, Sources};

fn rounds() -> usize {
    if std::env::args().any(|a| a == "--bench") { 50 } else { 1 }
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
    println!(
        "serve scrape of 100 devices: median {:.2} ms (budget 50 ms); raw read of the same files {:.2} ms; ratio {:.1}",
        ours.as_secs_f64() * 1e3,
        raw.as_secs_f64() * 1e3,
        ours.as_secs_f64() / raw.as_secs_f64()
    );
}
