//! A chain of 255 bridges (every bus number a dump can hold) with an endpoint on every bus:
//! each function's path, limiting hop and path MaxPayload must be those of its own depth, however
//! deep, whichever way the reports are built (all at once, one selected with `-s`, streamed by
//! `inspect -vv`). Paths are walked once per parent, so a path reused for the wrong function
//! shows here.

#[path = "data/pci/fixture.rs"]
#[allow(dead_code)]
mod fixture;

use assert_cmd::Command;
use pcieperf::pci::{dump, inspect, inspect_device, Bdf, InspectOptions, Source};

const DEPTH: u8 = 255;
/// The bridge whose upstream link trained at x1: functions below it are limited by it.
const NARROW_BUS: u8 = 100;
/// The bridge configured with MaxPayload 128 (the others 256).
const SMALL_PAYLOAD_BUS: u8 = 200;

fn bdf(bus: u8, function: u8) -> Bdf {
    Bdf::new(0, bus, 0, function).unwrap()
}

/// Bridges at `bus:00.0` opening `bus + 1`; an endpoint at `bus:00.1`, and at `ff:00.0`.
fn chain() -> Vec<(Bdf, Vec<u8>)> {
    let mut configs = Vec::new();
    for bus in 0..DEPTH {
        let kind = if bus == 0 { fixture::ROOT_PORT } else if bus % 2 == 1 { fixture::UPSTREAM } else { fixture::DOWNSTREAM };
        let mut port = fixture::Pcie::new(kind, 4, 16).bridge(bus, bus + 1, DEPTH);
        if bus == NARROW_BUS {
            port = port.trained(4, 1);
        }
        if bus == SMALL_PAYLOAD_BUS {
            port.mps = 0;
        }
        configs.push((bdf(bus, 0), fixture::config(0x8086, 0x2000 + u16::from(bus), &port, 0)[..256].to_vec()));
    }
    let endpoint = fixture::Pcie::new(fixture::ENDPOINT, 4, 4);
    for bus in 0..=DEPTH {
        let at = if bus == DEPTH { bdf(bus, 0) } else { bdf(bus, 1) };
        configs.push((at, fixture::config(0x10de, u16::from(bus), &endpoint, 0)[..256].to_vec()));
    }
    configs.sort_by_key(|(bdf, _)| *bdf);
    configs
}

/// The bridges above a function on `bus`, nearest first.
fn expected_path(bus: u8) -> Vec<Bdf> {
    (0..bus).rev().map(|b| bdf(b, 0)).collect()
}

#[test]
fn every_function_of_a_255_deep_chain_has_its_own_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.dump");
    let configs = chain();
    let refs: Vec<(Bdf, &[u8])> = configs.iter().map(|(b, c)| (*b, c.as_slice())).collect();
    std::fs::write(&path, dump::write(&refs)).unwrap();
    let options = InspectOptions { source: Source::Dump(path.clone()), pci_ids: Some(dir.path().join("none.ids")), selector: None, ids: None };

    let reports = inspect(&options).unwrap().devices;
    assert_eq!(reports.len(), configs.len());
    for report in &reports {
        let bus = report.bdf.bus;
        let hops: Vec<Bdf> = report.path.iter().map(|h| h.bdf).collect();
        assert_eq!(hops, expected_path(bus), "path of {}", report.bdf);
        let is_endpoint = report.bdf.function == 1 || bus == DEPTH;
        if is_endpoint {
            // x4 endpoints under x16 ports: each limits itself, unless the x1 hop is above it.
            let limiting = if bus > NARROW_BUS { bdf(NARROW_BUS, 0) } else { report.bdf };
            assert_eq!(report.bandwidth.as_ref().unwrap().limiting_bdf, Some(limiting), "limiting hop of {}", report.bdf);
            let payload = if bus > SMALL_PAYLOAD_BUS { 128 } else { 256 };
            assert_eq!(report.ceiling.as_ref().unwrap().max_payload_bytes, payload, "path MaxPayload of {}", report.bdf);
        }
    }

    // One function selected: the same report as among all (its path loaded, nothing else).
    for at in [bdf(DEPTH, 0), bdf(NARROW_BUS + 1, 1), bdf(1, 0)] {
        let alone = serde_json::to_value(inspect_device(&at, &options).unwrap()).unwrap();
        let among = serde_json::to_value(reports.iter().find(|r| r.bdf == at).unwrap()).unwrap();
        assert_eq!(alone, among, "{at} selected alone");
    }

    // Streamed -vv: one block per function, in order, the deepest path shortened to a line of
    // the same length at any depth.
    let output = Command::cargo_bin("pcieperf").unwrap().args(["inspect", "-vv", "-F"]).arg(&path).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let blocks: Vec<&str> = text.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    assert_eq!(blocks.len(), configs.len());
    for (block, (at, _)) in blocks.iter().zip(&configs) {
        assert!(block.starts_with(&format!("{:02x}:00.{} ", at.bus, at.function)), "block for {at}: {}", &block[..40.min(block.len())]);
    }
    let deepest = blocks.last().unwrap();
    let line = deepest.lines().find(|l| l.contains("path to root:")).expect("a path line");
    assert!(line.starts_with("\tpcieperf: path to root: 0000:fe:00.0 (Downstream Port 16GT/s x16) → 0000:fd:00.0"), "{line}");
    assert!(line.contains("… 249 more bridge(s) …") && line.ends_with("0000:00:00.0 (Root Port 16GT/s x16)"), "{line}");
    assert!(deepest.contains("limited by 16.0 GT/s PCIe x1 link at 0000:64:00.0"), "{deepest}");
}
