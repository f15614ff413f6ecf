//! How fast the link simulator steps packets: TLPs simulated per second of wall time, record off,
//! for a long DMA write (one TLP, one Ack and one UpdateFC each) and a long DMA read (requests,
//! completions, their DLLPs). The goal is 10 million TLPs per second; this prints what
//! the simulator reaches without a steady-state fast-forward.
//!
//! `cargo bench --bench link_sim -- WORD` runs only the cases whose name contains WORD (to count
//! one case's instructions under cachegrind, e.g. `-- read`).

use std::hint::black_box;
use std::time::Instant;

use pcieperf::link::{self, Direction, SimConfig, Workload};

fn measure(name: &str, config: &SimConfig, workload: Workload) {
    // cargo passes `--bench`; any other argument picks cases by a word of their name.
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with("--"));
    if filter.is_some_and(|word| !name.contains(&word)) {
        return;
    }
    // One warm-up run, then the best of three (the machine is shared).
    let mut best_s = f64::INFINITY;
    let mut tlps = 0;
    for _ in 0..4 {
        let started = Instant::now();
        let outcome = link::simulate(black_box(config), black_box(&workload)).expect("valid configuration");
        let elapsed_s = started.elapsed().as_secs_f64();
        tlps = outcome.direction(Direction::Upstream).tlps + outcome.direction(Direction::Downstream).tlps;
        best_s = best_s.min(elapsed_s);
    }
    println!("{name:<44} {tlps:>9} TLPs in {:>8.2} ms: {:>6.2} million TLPs/s", best_s * 1e3, tlps as f64 / best_s / 1e6);
}

fn main() {
    let mut config = SimConfig::for_link("gen3x16").expect("valid link");
    config.mps_bytes = 256;
    config.record = false;
    measure("gen3x16 MPS 256 DMA write 64 MiB", &config, Workload::DmaWrite { addr: 0, bytes: 64 << 20 });
    measure("gen3x16 MPS 256 MRRS 512 DMA read 64 MiB", &config, Workload::DmaRead { addr: 0, bytes: 64 << 20 });
    let mut gen1 = SimConfig::for_link("gen1x1").expect("valid link");
    gen1.record = false;
    measure("gen1x1 CPU writes of 4 bytes, 100 000", &gen1, Workload::CpuWrites { addr: 0, bytes: 4, count: 100_000, spacing_ns: 0.0 });
    config.record = true;
    measure("gen3x16 DMA write 64 MiB, record kept", &config, Workload::DmaWrite { addr: 0, bytes: 64 << 20 });
}
