//! Virtual time must be cheap: the document 001 demo flow (three measurements of about 30 s of
//! link time each) on the Gen5 x16 preset must take well under a second of wall time.
//!
//! Peer in the same run: materialising the same bytes with the test pattern at this machine's
//! fill speed (what a simulator that produced every byte would at least pay). Prints the ratio.
//! `cargo bench --bench sim_demo`; under `cargo test` it runs once, quickly.

use std::time::{Duration, Instant};

use pcieperf::bench::demo::{run_demo, DemoOptions, MODES};
use pcieperf::model::Mode;
use pcieperf::engine::pattern::Pattern;
use pcieperf::engine::sim::SimEngine;
use pcieperf::engine::OpenOptions;

const BUDGET: Duration = Duration::from_secs(1);

/// Wall time of the whole flow and the virtual time it covered, best of `runs`.
fn demo(target: &str, runs: u32) -> (Duration, f64, u64) {
    let mut best = (Duration::MAX, 0.0, 0);
    for seed in 0..runs {
        let wall = Instant::now();
        let mut engine = SimEngine::open(target, &OpenOptions { seed: seed as u64, ..OpenOptions::default() }).unwrap();
        let link = pcieperf::engine::Engine::conditions(&engine).unwrap();
        let report = run_demo(&mut engine, &link, &DemoOptions { modes: MODES.to_vec(), ..DemoOptions::default() }, &std::sync::atomic::AtomicBool::new(false)).unwrap();
        let elapsed = wall.elapsed();
        let virtual_s = pcieperf::engine::Engine::now_ns(&engine) / 1e9;
        let bytes = report.results.iter().map(|r| r.bytes * if r.mode == Mode::Both { 2 } else { 1 }).sum();
        if elapsed < best.0 {
            best = (elapsed, virtual_s, bytes);
        }
    }
    best
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let runs = if full { 20 } else { 1 };
    let fill_bytes = if full { 256 << 20 } else { 8 << 20 };

    let mut buf = vec![0u8; fill_bytes];
    let wall = Instant::now();
    Pattern::lfsr(1).fill(0, &mut buf);
    let fill_bytes_per_s = fill_bytes as f64 / wall.elapsed().as_secs_f64();
    std::hint::black_box(&buf);

    let mut over_budget = false;
    for target in ["sim:gen5x16", "sim:doc001"] {
        let (wall, virtual_s, bytes) = demo(target, runs);
        let materialise_s = bytes as f64 / fill_bytes_per_s;
        println!(
            "{target}: demo flow (write, read, read/write) {:.3} ms wall for {virtual_s:.1} s virtual ({:.0}× faster than real time); \
             filling its {bytes} bytes with the pattern would take {materialise_s:.1} s: ratio {:.0}",
            wall.as_secs_f64() * 1e3,
            virtual_s / wall.as_secs_f64(),
            materialise_s / wall.as_secs_f64(),
        );
        over_budget |= wall > BUDGET;
    }
    // transfer() materialises its buffer: beside a bare pattern fill of the same buffer, the
    // simulator's own cost should vanish (ratio ≈ 1).
    let mut engine = SimEngine::open("sim:gen5x16", &OpenOptions::default()).unwrap();
    let (mut transfer_s, mut fill_s) = (f64::MAX, f64::MAX);
    for _ in 0..runs {
        // Interleaved, best of each: neither side profits from running second.
        let wall = Instant::now();
        pcieperf::engine::Engine::transfer(&mut engine, pcieperf::engine::Io::D2h(&mut buf), 0, Duration::from_secs(60)).unwrap();
        transfer_s = transfer_s.min(wall.elapsed().as_secs_f64());
        let wall = Instant::now();
        Pattern::lfsr(0).fill(0, &mut buf);
        std::hint::black_box(&buf);
        fill_s = fill_s.min(wall.elapsed().as_secs_f64());
    }
    println!(
        "transfer() of {} MiB d2h on sim:gen5x16: {:.2} ms wall vs pattern fill {:.2} ms: ratio {:.3}",
        fill_bytes >> 20,
        transfer_s * 1e3,
        fill_s * 1e3,
        transfer_s / fill_s
    );

    println!("budget {BUDGET:?} per demo flow: {}", if over_budget { "EXCEEDED" } else { "met" });
    if full && over_budget {
        std::process::exit(1);
    }
}
