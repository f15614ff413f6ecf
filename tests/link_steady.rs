//! The steady-state fast-forward against full simulation: over Gen1–Gen5, widths, MaxPayload,
//! reads, writes and both at once, Ack policies and a credit-limited loop, the fast-forwarded
//! transfer ends within 0.1 % of the fully simulated one, sends exactly the same TLPs, and did
//! leave out at least a third of the run (so the comparison is not full simulation against itself).

use pcieperf::link::{self, AckPolicy, ClassCredits, Direction, FcPolicy, SimConfig, SteadyOptions, Workload};

struct Case {
    name: &'static str,
    config: SimConfig,
    workload: Workload,
}

fn config(link: &str, mps: u64, mrrs: u64) -> SimConfig {
    let mut config = SimConfig::for_link(link).unwrap();
    config.mps_bytes = mps;
    config.mrrs_bytes = mrrs;
    config.record = false;
    config
}

/// The AckNak-latency-like timer the `sim` engine uses by default.
fn with_timers(mut config: SimConfig, delay_ns: f64) -> SimConfig {
    for rx in [&mut config.host_rx, &mut config.device_rx] {
        rx.ack = AckPolicy::Timer { delay_ns };
        rx.fc = FcPolicy::Timer { delay_ns };
    }
    config
}

fn write(bytes: u64) -> Workload {
    Workload::DmaWrite { addr: 0, bytes }
}

fn read(bytes: u64) -> Workload {
    Workload::DmaRead { addr: 0, bytes }
}

fn both(write_bytes: u64, read_bytes: u64) -> Workload {
    Workload::DmaBoth { write_addr: 0, write_bytes, read_addr: 1 << 40, read_bytes }
}

const MIB: u64 = 1 << 20;

fn cases() -> Vec<Case> {
    let mut credit_limited = config("gen3x8", 256, 512);
    credit_limited.host_rx.credits.posted = ClassCredits::Finite { header: 32, data: 256 };
    credit_limited.wire_delay_ns = 300.0;
    let mut latency_bound = config("gen1x4", 128, 512);
    latency_bound.tags = 4;
    latency_bound.host_completion_latency_ns = 1825.0;
    vec![
        Case { name: "gen1x1 MPS 128 write", config: config("gen1x1", 128, 512), workload: write(24 * MIB) },
        Case { name: "gen1x4 MPS 128 write, timers", config: with_timers(config("gen1x4", 128, 512), 292.0), workload: write(24 * MIB) },
        Case { name: "gen2x8 MPS 256 write", config: config("gen2x8", 256, 512), workload: write(48 * MIB) },
        Case { name: "gen3x16 MPS 512 write", config: config("gen3x16", 512, 512), workload: write(96 * MIB) },
        Case { name: "gen4x4 MPS 4096 write", config: config("gen4x4", 4096, 512), workload: write(768 * MIB) },
        Case { name: "gen5x16 MPS 128 write", config: config("gen5x16", 128, 512), workload: write(24 * MIB) },
        Case { name: "gen3x8 MPS 256 write, credit-limited", config: credit_limited, workload: write(48 * MIB) },
        Case { name: "gen1x1 MPS 128 MRRS 128 read", config: config("gen1x1", 128, 128), workload: read(24 * MIB) },
        Case { name: "gen1x4 read, 4 tags, 1825 ns", config: latency_bound.clone(), workload: read(48 * MIB) },
        Case { name: "gen3x8 MPS 256 MRRS 512 read", config: config("gen3x8", 256, 512), workload: read(48 * MIB) },
        Case { name: "gen5x16 MPS 256 MRRS 512 read, timers", config: with_timers(config("gen5x16", 256, 512), 25.0), workload: read(48 * MIB) },
        Case { name: "gen1x4 both, 4 tags, 1825 ns", config: latency_bound, workload: both(12 * MIB, 12 * MIB) },
        Case { name: "gen3x8 both", config: config("gen3x8", 256, 512), workload: both(16 * MIB, 24 * MIB) },
        Case { name: "gen2x4 both, writes end long before reads", config: config("gen2x4", 128, 512), workload: both(2 * MIB, 48 * MIB) },
        Case { name: "gen4x16 both, timers", config: with_timers(config("gen4x16", 256, 512), 40.0), workload: both(48 * MIB, 32 * MIB) },
    ]
}

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / b
}

#[test]
fn fast_forward_is_within_a_tenth_of_a_percent_of_full_simulation() {
    let mut worst = 0.0f64;
    for case in cases() {
        let full = link::simulate(&case.config, &case.workload).unwrap();
        let fast = link::fast_forward(&case.config, &case.workload, &SteadyOptions::default()).unwrap();
        let up = Direction::Upstream.index();
        let sent = full.stats[up].tlps;
        assert!(fast.skipped_tlps * 3 >= sent, "{}: only {} of {sent} TLPs left out", case.name, fast.skipped_tlps);
        for direction in Direction::BOTH {
            let i = direction.index();
            assert_eq!(fast.outcome.stats[i].payload_bytes, full.stats[i].payload_bytes, "{} {direction:?}: payload", case.name);
            let (f, s) = (fast.outcome.arrived_ns[i], full.arrived_ns[i]);
            if s == 0.0 {
                assert_eq!(f, 0.0, "{} {direction:?}", case.name);
                continue;
            }
            let error = relative(f, s);
            println!("{:<44} {direction:?}: full {s:>14.1} ns, fast-forward {f:>14.1} ns, {:+.4} %, {} of {sent} TLPs left out", case.name, (f - s) / s * 100.0, fast.skipped_tlps);
            assert!(error <= 1e-3, "{} {direction:?}: {f} ns against {s} ns", case.name);
            worst = worst.max(error);
        }
        assert_eq!(fast.outcome.stats[up].tlps, sent, "{}: the same TLPs", case.name);
    }
    println!("worst difference {:.4} %", worst * 100.0);
}

#[test]
fn short_transfers_and_cpu_accesses_are_simulated_whole() {
    let config = config("gen3x8", 256, 512);
    for workload in [write(64 << 10), read(1 << 20), Workload::CpuReads { addr: 0, bytes: 4, count: 10, gap_ns: 0.0 }] {
        let fast = link::fast_forward(&config, &workload, &SteadyOptions::default()).unwrap();
        assert_eq!(fast.skipped_tlps, 0);
        assert_eq!(fast.outcome, link::simulate(&config, &workload).unwrap(), "{workload:?}");
    }
}

#[test]
fn bad_options_are_refused() {
    let config = config("gen3x8", 256, 512);
    let options = SteadyOptions { window_tlps: 0, ..SteadyOptions::default() };
    assert!(link::fast_forward(&config, &write(4096), &options).unwrap_err().0.contains("window"));
}
