//! Properties of the simulated endpoint over random links and conditions.

use std::time::Duration;

use pcieperf::engine::sim::SimEngine;
use pcieperf::engine::{Engine, Io, OpenOptions};
use proptest::prelude::*;


fn target() -> impl Strategy<Value = String> {
    (1u32..=5, prop::sample::select(vec![1u32, 2, 4, 8, 16]), 0u32..4, 0u32..4, 0u32..3000, 1u32..=256).prop_map(
        |(generation, width, mps, mrrs, latency, tags)| {
            format!("sim:gen{generation}x{width},mps={},mrrs={},latency_ns={latency},tags={tags}", 128 << mps, 128 << mrrs)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn below_the_raw_link_rate_and_always_deterministic(target in target(), words in 1usize..65536, seed in any::<u64>()) {
        let size = words * 4;
        let open = || SimEngine::open(&target, &OpenOptions { seed, ..OpenOptions::default() }).unwrap();
        let mut engine = open();
        let params = engine.config().params.clone();
        let mut buf = vec![0u8; size];
        let d2h = engine.transfer(Io::D2h(&mut buf), 0, Duration::from_secs(60)).unwrap();
        let h2d = engine.transfer(Io::H2d(&buf), 0, Duration::from_secs(60)).unwrap();
        let (both_h2d, both_d2h) = engine.transfer_both(&buf.clone(), &mut buf, 0, Duration::from_secs(60)).unwrap();
        // Data times come from the link simulator, which beats the model where the model is
        // pessimistic (tag-limited partial rounds of reads: up to ~10 % seen), so the bound every
        // transfer must respect is the lanes' raw payload rate, which nothing can beat.
        let raw_mbps = params.link.width as f64 * params.link.generation.lane_mbps();
        for t in [&d2h, &h2d, &both_h2d, &both_d2h] {
            let device_mbps = pcieperf::units::mbps(size as f64, t.device.device_ns.unwrap());
            prop_assert!(device_mbps < raw_mbps, "{device_mbps} ≥ the raw {raw_mbps}");
            prop_assert!(t.end_ns > t.start_ns && t.host_ns() >= t.device.device_ns.unwrap());
        }
        prop_assert!(both_h2d.start_ns >= h2d.end_ns, "the clock only moves forward");
        let mut again = open();
        let mut buf2 = vec![0u8; size];
        prop_assert_eq!(again.transfer(Io::D2h(&mut buf2), 0, Duration::from_secs(60)).unwrap(), d2h);
    }
}
