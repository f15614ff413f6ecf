//! The per-bridge path summary against a direct fold over every hop, on random trees: for every
//! function, the bandwidth (the kernel's narrowest hop, with links down and unknown speeds that
//! restart its loop), the smallest MaxPayload configured and supported on the path, the link
//! partner and the root port must be those the hop-by-hop fold gives — in the summary itself and
//! in the reports `inspect` builds from it.

#[path = "data/pci/fixture.rs"]
#[allow(dead_code)]
mod fixture;

use pcieperf::pci::path_summary::PathSummary;
use pcieperf::pci::topology::{self, Hop};
use pcieperf::pci::{conditions, dump, inspect, Bdf, Device, InspectOptions, Machine, Source};
use proptest::prelude::*;

/// One function's link and payload codes: trained speed (0: unknown) and width (0: link down),
/// MaxPayload configured and supported.
#[derive(Debug, Clone, Copy)]
struct Regs {
    speed: u16,
    width: u16,
    mps: u16,
    mps_supported: u32,
}

fn regs() -> impl Strategy<Value = Regs> {
    (0u16..=4, prop::sample::select(vec![0u16, 1, 2, 4, 8, 16]), 0u16..=3, 0u32..=3).prop_map(|(speed, width, mps, mps_supported)| Regs { speed, width, mps, mps_supported })
}

/// A tree: bridge `k` opens bus `k + 1` and sits below bridge `parents[k]` (`None`: a root port
/// on bus 0); endpoints sit on random buses.
#[derive(Debug, Clone)]
struct Shape {
    bridges: Vec<(Option<usize>, Regs)>,
    endpoints: Vec<(usize, Regs)>,
}

fn shape() -> impl Strategy<Value = Shape> {
    (1usize..48).prop_flat_map(|count| {
        let parents: Vec<_> = (0..count).map(|k| (prop::option::weighted(0.9, 0..k.max(1)).prop_map(move |p| p.filter(|_| k > 0)), regs())).collect();
        (parents, prop::collection::vec((0..=count, regs()), 1..64)).prop_map(|(bridges, endpoints)| Shape { bridges, endpoints })
    })
}

fn pcie(kind: u16, r: Regs) -> fixture::Pcie {
    let mut p = fixture::Pcie::new(kind, 4, 16).trained(r.speed, r.width);
    p.mps = r.mps;
    p.mps_supported = r.mps_supported;
    p
}

/// The shape as a dump's configuration spaces, in address order.
fn configs(shape: &Shape) -> Vec<(Bdf, Vec<u8>)> {
    let bus_of = |parent: Option<usize>| parent.map_or(0, |p| p + 1);
    // Subordinate bus: the highest bus below a bridge (children have higher indices).
    let mut subordinate: Vec<usize> = (0..shape.bridges.len()).map(|k| k + 1).collect();
    for k in (0..shape.bridges.len()).rev() {
        if let Some(p) = shape.bridges[k].0 {
            subordinate[p] = subordinate[p].max(subordinate[k]);
        }
    }
    let mut next_slot = vec![0u8; shape.bridges.len() + 1];
    let mut slot = |bus: usize| {
        let at = next_slot[bus];
        next_slot[bus] += 1;
        Bdf::new(0, bus as u8, at / 8, at % 8).unwrap()
    };
    let mut configs = Vec::new();
    for (k, (parent, r)) in shape.bridges.iter().enumerate() {
        let kind = if parent.is_none() { fixture::ROOT_PORT } else { fixture::DOWNSTREAM };
        let port = pcie(kind, *r).bridge(bus_of(*parent) as u8, (k + 1) as u8, subordinate[k] as u8);
        configs.push((slot(bus_of(*parent)), fixture::config(0x8086, k as u16, &port, 0)[..256].to_vec()));
    }
    for (bus, r) in &shape.endpoints {
        configs.push((slot(*bus), fixture::config(0x10de, *bus as u16, &pcie(fixture::ENDPOINT, *r), 0)[..256].to_vec()));
    }
    configs.sort_by_key(|(bdf, _)| *bdf);
    configs
}

/// The direct fold: every hop of the path, visited for this device alone.
struct Direct {
    bandwidth: Option<topology::Bandwidth>,
    max_payload_bytes: Option<u32>,
    max_payload_supported_bytes: Option<u32>,
}

fn direct(device: &Device, upstream: &[&Device]) -> Direct {
    let all = || std::iter::once(device).chain(upstream.iter().copied());
    let hops: Vec<Hop> = all().map(conditions::hop).collect();
    let (speed, width, _) = device.link_capable();
    let regs = |d: &Device| d.pcie.as_ref().and_then(|p| p.device.clone());
    let own = regs(device);
    Direct {
        bandwidth: device.has_link().then(|| topology::bandwidth(&hops, speed, width)),
        max_payload_bytes: own.as_ref().map(|_| all().filter_map(regs).map(|r| r.max_payload_bytes).min().unwrap()),
        max_payload_supported_bytes: own.as_ref().map(|_| all().filter_map(regs).map(|r| r.max_payload_supported_bytes).min().unwrap()),
    }
}

fn check(shape: &Shape) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tree.dump");
    let configs = configs(shape);
    let refs: Vec<(Bdf, &[u8])> = configs.iter().map(|(b, c)| (*b, c.as_slice())).collect();
    std::fs::write(&path, dump::write(&refs)).unwrap();
    let source = Source::Dump(path);
    let machine = Machine::load(&source).unwrap();
    let mut checked = 0;
    for device in machine.devices.values() {
        let upstream = machine.upstream(&device.bdf);
        let summary = PathSummary::of(&upstream);
        let want = direct(device, &upstream);
        let own = device.pcie.as_ref().and_then(|p| p.device.as_ref());
        prop_assert_eq!(conditions::bandwidth(device, &summary), want.bandwidth.clone(), "bandwidth of {}", device.bdf);
        prop_assert_eq!(own.map(|r| summary.max_payload_bytes(r.max_payload_bytes)), want.max_payload_bytes, "MaxPayload of {}", device.bdf);
        prop_assert_eq!(own.map(|r| summary.max_payload_supported_bytes(r.max_payload_supported_bytes)), want.max_payload_supported_bytes);
        prop_assert_eq!(summary.nearest.map(|d| d.bdf), upstream.first().map(|d| d.bdf));
        prop_assert_eq!(summary.root.map(|d| d.bdf), upstream.last().map(|d| d.bdf));
        let hops: Vec<Bdf> = summary.hops.iter().map(|h| h.bdf).collect();
        prop_assert_eq!(hops, upstream.iter().map(|d| d.bdf).collect::<Vec<_>>());
        checked += 1;
    }
    prop_assert_eq!(checked, configs.len());
    // The reports inspect streams read summaries kept across a bus's functions.
    let options = InspectOptions { source, pci_ids: Some(dir.path().join("none.ids")), selector: None, ids: None };
    for report in inspect(&options).unwrap().devices {
        let device = &machine.devices[&report.bdf];
        let want = direct(device, &machine.upstream(&report.bdf));
        prop_assert_eq!(&report.bandwidth, &want.bandwidth, "report of {}", report.bdf);
        prop_assert_eq!(report.path_max_payload_supported_bytes, want.max_payload_supported_bytes);
        if let Some(ceiling) = &report.ceiling {
            prop_assert_eq!(Some(ceiling.max_payload_bytes as u32), want.max_payload_bytes);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_summary_of_a_path_is_the_fold_over_its_hops(shape in shape()) {
        check(&shape)?;
    }
}

/// Links down and unknown speeds on the way up: the kernel's loop restarts at each.
#[test]
fn a_chain_with_links_down_matches_the_fold() {
    let r = |speed, width| Regs { speed, width, mps: 1, mps_supported: 2 };
    let bridges = vec![(None, r(4, 16)), (Some(0), r(0, 4)), (Some(1), r(3, 8)), (Some(2), r(4, 0)), (Some(3), r(2, 16))];
    let endpoints = (0..=5).map(|bus| (bus, r(4, 4))).chain([(5, r(1, 0)), (5, r(0, 0))]).collect();
    check(&Shape { bridges, endpoints }).unwrap();
}
