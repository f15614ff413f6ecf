//! Bad input to the link simulator is an error value naming what is allowed, never a panic.

use pcieperf::link::{self, AckPolicy, ClassCredits, Credits, FcPolicy, SimConfig, Workload};

fn message(config: &SimConfig, workload: &Workload) -> String {
    link::simulate(config, workload).unwrap_err().0
}

#[test]
fn unknown_generations_and_widths_are_refused() {
    assert!(SimConfig::for_link("gen7x1").unwrap_err().0.contains("allowed 1, 2, 3"));
    assert!(SimConfig::for_link("gen1x3").unwrap_err().0.contains("x1, x2, x4"));
    assert!(SimConfig::for_link("gen6x4").is_ok(), "Gen6 flit mode is simulated");
}

#[test]
fn zero_credits_and_zero_policies_are_refused() {
    let write = Workload::DmaWrite { addr: 0, bytes: 4096 };
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    config.device_rx.credits.posted = ClassCredits::Finite { header: 0, data: 64 };
    assert!(message(&config, &write).contains("must be 1 or more"));
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    config.host_rx.credits = Credits { posted: ClassCredits::Finite { header: 4, data: 4 }, ..Credits::large() };
    assert!(message(&config, &write).contains("a largest TLP needs 8"));
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    config.host_rx.ack = AckPolicy::EveryTlps(0);
    assert!(message(&config, &write).contains("every 0 TLPs"));
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    config.host_rx.fc = FcPolicy::Timer { delay_ns: f64::NAN };
    assert!(message(&config, &write).contains("must be 0 or more"));
}

#[test]
fn bad_sizes_and_latencies_are_refused() {
    let mut config = SimConfig::for_link("gen3x8").unwrap();
    assert!(message(&config, &Workload::DmaRead { addr: 0, bytes: 0 }).contains("allowed 1 to"));
    assert!(message(&config, &Workload::CpuReads { addr: 4094, bytes: 4, count: 1, gap_ns: 0.0 }).contains("4 KiB"));
    assert!(message(&config, &Workload::CpuWrites { addr: 0, bytes: 4, count: 1, spacing_ns: -1.0 }).contains("0 or more"));
    config.mps_bytes = 100;
    assert!(message(&config, &Workload::DmaWrite { addr: 0, bytes: 64 }).contains("allowed 128"));
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    config.skp_interval = 1000;
    assert!(message(&config, &Workload::DmaWrite { addr: 0, bytes: 64 }).contains("allowed 1180 to 1538"));
    config.skp_interval = 1180;
    config.host_completion_latency_ns = f64::INFINITY;
    assert!(message(&config, &Workload::DmaWrite { addr: 0, bytes: 64 }).contains("0 or more"));
}

#[test]
fn bad_error_rates_replay_buffers_and_retrain_times_are_refused() {
    let write = Workload::DmaWrite { addr: 0, bytes: 4096 };
    for ber in [1.0, -1e-9, f64::NAN] {
        let mut config = SimConfig::for_link("gen3x4").unwrap();
        config.errors.ber = ber;
        assert!(message(&config, &write).contains("allowed 0 to less than 1"), "{ber}");
    }
    let mut config = SimConfig::for_link("gen3x4").unwrap();
    config.replay.buffer_bytes = 0;
    assert!(message(&config, &write).contains("must hold the largest TLP (148 bytes)"));
    let mut config = SimConfig::for_link("gen3x4").unwrap();
    config.replay.buffer_tlps = 0;
    assert!(message(&config, &write).contains("allowed 1 to 2048"));
    for retrain_ns in [f64::INFINITY, f64::NAN, -1.0] {
        let mut config = SimConfig::for_link("gen3x4").unwrap();
        config.replay.retrain_ns = retrain_ns;
        assert!(message(&config, &write).contains("invalid retrain time"), "{retrain_ns}");
    }
    let mut config = SimConfig::for_link("gen3x4").unwrap();
    config.replay.timeout_ns = Some(0.0);
    assert!(message(&config, &write).contains("must be more than 0"));
}
