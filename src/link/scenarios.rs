//! Document 000's recorded situations as simulator inputs, shared by the tests that reproduce
//! its numbers (`tests/link_document_000.rs`) and by `pcieperf trace`. Each sets only what the
//! document's record implies; docs/link-simulator.md says why each parameter has its value.

use super::agents::Workload;
use super::config::{AckPolicy, FcPolicy, SimConfig};

/// Register address of the document's IP core (its records' 0xc2000000).
pub const REGISTER_ADDR: u64 = 0xc200_0000;

/// Document 000's link: Gen1 x1, MPS 128, 3DW headers, immediate Acks and UpdateFCs.
pub fn gen1x1() -> SimConfig {
    let mut config = SimConfig::for_link("gen1x1").expect("gen1x1 is a valid link");
    config.mps_bytes = 128;
    config
}

/// §3.5 Example 1: 100 memory writes of 4 bytes, back to back, with a SKP due as the first
/// write goes out (with the schedule starting at 0 only 2 fall in the 2400 symbol times).
pub fn example_1() -> (SimConfig, Workload) {
    let mut config = gen1x1();
    config.skp_phase = config.skp_interval;
    (config, Workload::CpuWrites { addr: REGISTER_ADDR, bytes: 4, count: 100, spacing_ns: 0.0 })
}

/// The CPU's issue gap after each completion in the §3.5 three-read record.
pub const THREE_READS_GAP_NS: f64 = 36.0;

/// §3.5's record of three 4-byte reads: 500 ns completion latency, a SKP due 10 symbol times
/// in (both directions).
pub fn three_reads() -> (SimConfig, Workload) {
    let mut config = gen1x1();
    config.device_completion_latency_ns = 500.0;
    config.skp_phase = config.skp_interval - 10;
    (config, Workload::CpuReads { addr: REGISTER_ADDR, bytes: 4, count: 3, gap_ns: THREE_READS_GAP_NS })
}

/// §4.6 (Test 3): 1-DW writes issued every 120 ns.
pub fn test_3_writes() -> (SimConfig, Workload) {
    (gen1x1(), Workload::CpuWrites { addr: 0x0200_0000, bytes: 4, count: 100, spacing_ns: 120.0 })
}

/// §4.7 (Test 4)'s three reads: (completion latency, CPU gap after the completion) in ns,
/// giving read-to-completion 512/520/524 ns and request spacings 1560 and 1532 ns.
pub const TEST_4_READS: [(f64, f64); 3] = [(512.0, 872.0), (520.0, 836.0), (524.0, 836.0)];

/// The device's Ack and UpdateFC timer in §4.7's record.
pub const TEST_4_DEVICE_TIMER_NS: f64 = 40.0;

/// §4.7 (Test 4): three 4-byte reads with the latency and gap of `TEST_4_READS[read]`.
pub fn test_4_reads(read: usize) -> (SimConfig, Workload) {
    let (latency_ns, gap_ns) = TEST_4_READS[read];
    let mut config = gen1x1();
    config.device_completion_latency_ns = latency_ns;
    config.device_rx.ack = AckPolicy::Timer { delay_ns: TEST_4_DEVICE_TIMER_NS };
    config.device_rx.fc = FcPolicy::Timer { delay_ns: TEST_4_DEVICE_TIMER_NS };
    (config, Workload::CpuReads { addr: REGISTER_ADDR, bytes: 4, count: 3, gap_ns })
}
