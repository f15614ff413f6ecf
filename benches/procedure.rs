//! The measuring procedure's own costs, each against a peer in the same run:
//!
//! - one timestamp pair of the host clock (TSC) against a pair of `std::time::Instant` reads
//!   (CLOCK_MONOTONIC through the vDSO), and the cost the clock measures of itself at start
//!   (`conditions.host_clock.timestamp_overhead_ns`);
//! - the clock's calibration at start against the wall time of a whole 1 MiB simulated `dma`
//!   point (the calibration used to be a 20 ms spin, half of such a run);
//! - the copy to user space the procedure times with `--copy-to-user` (into a page-aligned user
//!   buffer, with its CRC32) against memcpy + CRC32 between two page-aligned buffers here, the
//!   source freshly written and the target poisoned before each copy, as in the procedure;
//! - the wall time of simulated `dma` points against the link time they simulate;
//! - the wall time of a 512 MiB point (simulator, block file) against its `--duration` budget,
//!   with the number of samples its figure rests on.
//!
//! `cargo bench --bench procedure` prints Markdown rows (median and min–max over interleaved
//! repeats); under `cargo test` it runs once, quickly.

mod common;

use std::hint::black_box;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use common::{compare_rate, full, header, ns_per_call, repeats, spread, Ratio, Row};
use pcieperf::bench::clock::HostClock;
use pcieperf::bench::dma::{measure, DmaOptions, Quiet};
use pcieperf::bench::results::{Mode, Point};
use pcieperf::bench::verify::POISON;
use pcieperf::engine::pattern::{crc32, Pattern};
use pcieperf::engine::sim::SimEngine;
use pcieperf::engine::{AlignedBuf, OpenOptions};
use pcieperf::units::format_size;

/// One point of `pcieperf dma` on the simulated endpoint.
fn sim_point(mode: Mode, size: u64) -> Point {
    let mut engine = SimEngine::open("sim", &OpenOptions::default()).expect("sim");
    let mut options = DmaOptions::new(vec![mode], vec![size]);
    options.duration = Duration::from_millis(if full() { 200 } else { 20 });
    let results = measure(&mut engine, &options, &AtomicBool::new(false), &mut Quiet).expect("valid");
    results.points.into_iter().next().expect("one point")
}

fn timestamps(repeats: usize) {
    let clock = HostClock::new();
    let pairs = 1000;
    let mut ours_pair = || {
        for _ in 0..pairs {
            let t0 = clock.now_ns();
            black_box(clock.now_ns() - t0);
        }
    };
    let mut instant_pair = || {
        for _ in 0..pairs {
            let t0 = Instant::now();
            black_box(t0.elapsed());
        }
    };
    let min_ns = if full() { 20e6 } else { 1e6 };
    let (mut ours, mut peer, mut ratios, mut self_measured) = (vec![], vec![], vec![], vec![]);
    for _ in 0..repeats {
        let a = ns_per_call(&mut ours_pair, min_ns) / pairs as f64;
        let b = ns_per_call(&mut instant_pair, min_ns) / pairs as f64;
        ours.push(a);
        peer.push(b);
        ratios.push(a / b);
        self_measured.push(HostClock::new().info().timestamp_overhead_ns);
    }
    let (self_median, self_min, self_max) = spread(self_measured);
    Row {
        what: format!("timestamp pair (host clock, {:?}); measured by the clock itself at start: {self_median:.1} ns ({self_min:.1}–{self_max:.1})", clock.info().source),
        ours: format!("{:.1} ns", spread(ours).0),
        peer: format!("`Instant` pair {:.1} ns", spread(peer).0),
        ratio: Ratio::Time,
        ratios,
        goal: "≤ 25 ns".into(),
    }
    .print();
}

fn calibration(repeats: usize) {
    let (mut ours, mut peer, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..repeats {
        let start = Instant::now();
        black_box(HostClock::new());
        let a = start.elapsed().as_secs_f64();
        let b = sim_point(Mode::D2h, 1 << 20).convergence.wall_ns / 1e9;
        ours.push(a);
        peer.push(b);
        ratios.push(a / b);
    }
    Row {
        what: "host clock calibration at start (no fixed spin)".into(),
        ours: format!("{:.3} ms", spread(ours).0 * 1e3),
        peer: format!("1 MiB simulated d2h point {:.2} ms", spread(peer).0 * 1e3),
        ratio: Ratio::Time,
        ratios,
        goal: "small".into(),
    }
    .print();
}

/// The peer of the procedure's copy: memcpy + CRC32 between two page-aligned buffers left as
/// the procedure leaves them (the source just written, as by the device; the target poisoned,
/// as by the last check), timed alone by the same clock (its own cost subtracted, as in the
/// procedure), median over as many copies as a point makes.
fn system_copy_ns(clock: &HostClock, source: &mut AlignedBuf, target: &mut AlignedBuf, copies: usize) -> f64 {
    let times = (0..copies)
        .map(|i| {
            Pattern::lfsr(i as u64).fill(0, source);
            target.fill(POISON);
            let start = clock.now_ns();
            target.copy_from_slice(black_box(source));
            black_box(crc32(target));
            clock.since_ns(start)
        })
        .collect();
    spread(times).0
}

/// The copy to user space as `dma --copy-to-user` times it on a real engine (a block file here:
/// a simulated engine's copy is the simulator's own, on its clock).
fn copy_to_user(repeats: usize) {
    let dir = tempfile::Builder::new().prefix("copy-to-user").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tmpdir");
    let file = dir.path().join("disk.img");
    std::fs::File::create(&file).and_then(|f| f.set_len(256 << 10)).expect("scratch file");
    let block_point = |size: u64| {
        let mut engine = pcieperf::engine::block::open(&file.display().to_string(), &OpenOptions::default()).expect("block engine");
        let mut options = DmaOptions::new(vec![Mode::D2h], vec![size]);
        options.copy_to_user = true;
        options.duration = Duration::from_millis(if full() { 200 } else { 20 });
        let results = measure(&mut engine, &options, &AtomicBool::new(false), &mut Quiet).expect("valid");
        results.points.into_iter().next().expect("one point")
    };
    for size in [16u64 << 10, 64 << 10, 256 << 10] {
        let (mut ours, mut peer, mut ratios) = (vec![], vec![], vec![]);
        let (mut source, mut target) = (AlignedBuf::new(size as usize), AlignedBuf::new(size as usize));
        let clock = HostClock::new();
        for _ in 0..repeats {
            let point = block_point(size);
            let a = point.summary.and_then(|s| s.copy_median_ns).expect("copy timed");
            let b = system_copy_ns(&clock, &mut source, &mut target, point.samples.len());
            ours.push(a);
            peer.push(b);
            ratios.push(b / a);
        }
        let gbps = |ns: Vec<f64>| size as f64 / spread(ns).0;
        Row {
            what: format!("`--copy-to-user` copy + CRC32, {} (as the procedure reports it, block file d2h)", format_size(size)),
            ours: format!("{:.2} GB/s", gbps(ours)),
            peer: format!("memcpy + CRC32, aligned, source just written {:.2} GB/s", gbps(peer)),
            ratio: Ratio::Rate,
            ratios,
            goal: "≈ 1".into(),
        }
        .print();
    }
}

/// One whole `dma` point of a transfer far larger than usual, buffer allocation included:
/// (host wall time, samples).
fn big_point(engine: &mut dyn pcieperf::engine::Engine, mode: Mode, size: u64, budget: Duration) -> (Duration, usize) {
    let mut options = DmaOptions::new(vec![mode], vec![size]);
    options.duration = budget;
    options.wall_limit = budget;
    let start = Instant::now();
    let results = measure(engine, &options, &AtomicBool::new(false), &mut Quiet).expect("valid");
    (start.elapsed(), results.points[0].samples.len())
}

/// A 512 MiB point against its time budget (`--duration 3s`), on the simulator and on a block
/// file on this machine's disk: whether it gives a figure in about its budget, from how many
/// samples.
fn big_transfers(repeats: usize) {
    let (size, budget) = if full() { (512u64 << 20, Duration::from_secs(3)) } else { (16 << 20, Duration::from_millis(300)) };
    let dir = tempfile::Builder::new().prefix("big-transfer").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tmpdir");
    let file = dir.path().join("disk.img");
    std::fs::File::create(&file).and_then(|f| f.set_len(size)).expect("scratch file");
    let block = |destructive: bool| {
        let options = OpenOptions { destructive, ..OpenOptions::default() };
        pcieperf::engine::block::open(&file.display().to_string(), &options).expect("block engine")
    };
    type Open<'a> = &'a dyn Fn() -> Box<dyn pcieperf::engine::Engine>;
    let targets: [(&str, Mode, Open); 3] = [
        ("sim, d2h", Mode::D2h, &|| Box::new(SimEngine::open("sim", &OpenOptions::default()).expect("sim"))),
        ("block file, h2d", Mode::H2d, &|| Box::new(block(true))),
        ("block file, d2h", Mode::D2h, &|| Box::new(block(false))),
    ];
    for (what, mode, open) in targets {
        let (mut ours, mut ratios, mut samples) = (vec![], vec![], vec![]);
        for _ in 0..repeats {
            let (wall, n) = big_point(open().as_mut(), mode, size, budget);
            ours.push(wall.as_secs_f64());
            ratios.push(wall.as_secs_f64() / budget.as_secs_f64());
            samples.push(n as f64);
        }
        let (fewest, most) = (spread(samples.clone()).1, spread(samples).2);
        Row {
            what: format!("`dma` {} point, {what}, verified: wall time to a figure ({fewest:.0}–{most:.0} samples)", format_size(size)),
            ours: format!("{:.2} s", spread(ours).0),
            peer: format!("its budget, --duration {:.1} s", budget.as_secs_f64()),
            ratio: Ratio::Time,
            ratios,
            goal: "≈ 1, with samples".into(),
        }
        .print();
    }
}

fn simulated_dma(repeats: usize) {
    let sizes: &[u64] = if full() { &[1 << 20, 16 << 20, 64 << 20, 256 << 20, 512 << 20] } else { &[1 << 20, 16 << 20] };
    for (size, mode) in sizes.iter().flat_map(|&size| [(size, Mode::D2h), (size, Mode::H2d)]) {
        let (mut ours, mut peer, mut ratios) = (vec![], vec![], vec![]);
        for _ in 0..repeats {
            let point = sim_point(mode, size);
            ours.push(point.convergence.wall_ns);
            peer.push(point.convergence.engine_ns);
            ratios.push(point.convergence.wall_ns / point.convergence.engine_ns);
        }
        Row {
            what: format!("simulated `dma` {} {} point, verified: wall time", mode.name(), format_size(size)),
            ours: format!("{:.1} ms", spread(ours).0 / 1e6),
            peer: format!("simulated link time {:.1} ms", spread(peer).0 / 1e6),
            ratio: Ratio::Time,
            ratios,
            goal: "≤ 1".into(),
        }
        .print();
    }
}

fn main() {
    let repeats = repeats(9);
    println!("the procedure's own costs against their peers");
    header();
    timestamps(repeats);
    calibration(repeats);
    copy_to_user(repeats);
    simulated_dma(repeats);
    big_transfers(repeats.min(3));
    let _ = compare_rate; // shared helper, used by other benches
}
