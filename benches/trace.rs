//! How fast `pcieperf trace` writes: packets per second of wall time for each format, on a
//! record simulated once (the simulation's own speed is `benches/link_sim.rs`'s business).

use std::hint::black_box;
use std::time::Instant;

use pcieperf::link::phy::Phy;
use pcieperf::link::{SimConfig, Workload};
use pcieperf::report::trace::{self, pcapng, text, vcd, Trace};

fn measure(name: &str, packets: usize, render: impl Fn() -> usize) {
    // One warm-up run, then the best of three (the machine is shared).
    let mut best_s = f64::INFINITY;
    let mut bytes = 0;
    for _ in 0..4 {
        let started = Instant::now();
        bytes = black_box(render());
        best_s = best_s.min(started.elapsed().as_secs_f64());
    }
    println!("{name:<40} {packets:>7} packets, {:>6.1} MB in {:>8.2} ms: {:>6.2} million packets/s", bytes as f64 / 1e6, best_s * 1e3, packets as f64 / best_s / 1e6);
}

fn main() {
    for (link, packets) in [("gen1x1", 20_000u64), ("gen3x16", 100_000)] {
        let config = SimConfig::for_link(link).expect("valid link");
        let record = trace::simulate_first(&config, Workload::DmaRead { addr: 0x1000_0000, bytes: 1 << 30 }, packets).expect("valid scenario");
        let first = &record[..packets as usize];
        let phy = Phy::new(config.link);
        let rows = trace::rows(first, &[], &phy, None).expect("within the limits");
        let shown = Trace { config: &config, record: trace::within_rows(&record, &phy, rows), rows, left_out: &[] };
        let all = Trace { config: &config, record: first, rows: 0, left_out: &[] };
        measure(&format!("{link} DMA read, pcapng"), first.len(), || pcapng::render(&all).len());
        measure(&format!("{link} DMA read, text ({rows} rows)"), shown.record.len(), || text::render(&shown).len());
        measure(&format!("{link} DMA read, VCD ({rows} rows)"), shown.record.len(), || vcd::render(&shown).len());
    }
}
