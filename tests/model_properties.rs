//! Properties of the throughput model over random links and conditions.

use pcieperf::model::{
    bidirectional_throughput, read, read_throughput, write_throughput, Accounting, Generation, HeaderFormat, Link,
    LinkParams, Limit, PAYLOAD_SIZES,
};
use proptest::prelude::*;

fn params() -> impl Strategy<Value = LinkParams> {
    (
        0usize..6,
        prop::sample::select(vec![1u32, 2, 4, 8, 12, 16, 32]),
        prop::sample::select(PAYLOAD_SIZES.to_vec()),
        prop::sample::select(PAYLOAD_SIZES.to_vec()),
        prop::sample::select(vec![64u64, 128]),
        any::<bool>(),
        any::<bool>(),
        (0.0f64..5000.0, 1u32..=256, any::<bool>(), any::<bool>(), 0u64..8192, prop::option::of(1u32..8)),
    )
        .prop_map(|(g, width, mps, mrrs, rcb, dw4, ecrc, (latency, tags, skp, dllp, addr, every))| {
            let mut p = LinkParams::typical(Link::new(Generation::ALL[g], width).unwrap());
            p.mps_bytes = mps;
            p.mrrs_bytes = mrrs;
            p.rcb_bytes = rcb;
            p.header = if dw4 { HeaderFormat::Dw4 } else { HeaderFormat::Dw3 };
            p.ecrc = ecrc;
            p.read_latency_ns = latency;
            p.tags = tags;
            p.include_skp = skp;
            p.include_dllp = dllp;
            p.start_addr = addr;
            p.dllp_every_tlps = every;
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn efficiency_rises_with_payload_up_to_mps(mut p in params(), a in 1u64..4096, b in 1u64..4096) {
        p.start_addr = 0;
        let (small, large) = (a.min(b).min(p.mps_bytes), a.max(b).min(p.mps_bytes));
        // Whole DWs: compare payloads that fill their last DW.
        let (small, large) = (small.div_ceil(4) * 4, large.div_ceil(4) * 4);
        prop_assume!(large <= p.mps_bytes);
        let e_small = write_throughput(&p, small).efficiency;
        let e_large = write_throughput(&p, large).efficiency;
        prop_assert!(e_small <= e_large * (1.0 + 1e-12), "{small}: {e_small}, {large}: {e_large}");
        p.accounting = Accounting::ByteExact;
        prop_assert!(write_throughput(&p, a.min(b).min(p.mps_bytes)).efficiency
            <= write_throughput(&p, a.max(b).min(p.mps_bytes)).efficiency * (1.0 + 1e-12));
    }

    #[test]
    fn nothing_exceeds_the_rate_after_encoding(p in params(), size in 1u64..(64 << 20)) {
        let ceiling = p.link.encoded_mbps();
        let w = write_throughput(&p, size);
        let r = read_throughput(&p, size);
        let (bw, br) = bidirectional_throughput(&p, size);
        for t in [w, r, bw, br] {
            prop_assert!(t.mbps > 0.0 && t.mbps < ceiling, "{t:?} vs {ceiling}");
            prop_assert!(t.efficiency < 1.0);
        }
        prop_assert!(bw.mbps <= w.mbps * (1.0 + 1e-9) && br.mbps <= r.mbps * (1.0 + 1e-9));
        prop_assert!(ceiling <= p.link.raw_gbps() * 1e3 / 8.0);
    }

    #[test]
    fn wire_accurate_never_beats_byte_exact(p in params(), size in 1u64..(1 << 20)) {
        let mut exact = p.clone();
        exact.accounting = Accounting::ByteExact;
        let mut wire = p;
        wire.accounting = Accounting::WireAccurate;
        prop_assert!(write_throughput(&wire, size).mbps <= write_throughput(&exact, size).mbps * (1.0 + 1e-9));
        prop_assert!(read_throughput(&wire, size).mbps <= read_throughput(&exact, size).mbps * (1.0 + 1e-9));
    }

    #[test]
    fn reads_never_exceed_the_latency_bound(p in params(), size in 1u64..(64 << 20)) {
        let r = read_throughput(&p, size);
        prop_assert!(r.mbps <= read::latency_bound_mbps(&p) * (1.0 + 1e-9), "{r:?}");
        if r.limit == Limit::Latency {
            // Latency bound: at most one round (request + latency + completions) per `tags` requests.
            let requests = size.div_ceil(p.mrrs_bytes) as f64;
            let rounds = (requests / p.tags as f64).ceil().max(1.0);
            prop_assert!(r.mbps <= pcieperf::units::mbps(size as f64, rounds.max(1.0) * p.read_latency_ns) * (1.0 + 1e-9) || p.read_latency_ns == 0.0);
        }
    }

    #[test]
    fn leaving_overhead_out_never_lowers_a_rate(p in params(), size in 1u64..(1 << 20)) {
        let mut bare = p.clone();
        bare.include_skp = false;
        bare.include_dllp = false;
        prop_assert!(write_throughput(&p, size).mbps <= write_throughput(&bare, size).mbps * (1.0 + 1e-9));
        prop_assert!(read_throughput(&p, size).mbps <= read_throughput(&bare, size).mbps * (1.0 + 1e-9));
    }
}

#[test]
fn dllps_cost_bytes_per_lane_not_bytes_per_symbol_time() {
    // Gen3 x16, MPS 256: one ACK + one UpdateFC per 168 symbol times costs 16 bytes out of
    // 168 × 16 link bytes (0.6 %), not 16 / 168 (9.5 %) as dividing bytes by symbol times would.
    let link: Link = "gen3x16".parse().unwrap();
    let mut p = LinkParams::typical(link);
    p.include_skp = false;
    let flow = pcieperf::model::write::write_flow(&p, 1 << 20, pcieperf::model::Span::Steady);
    let opposite_share = flow.opposite.dllp_bytes / (flow.duration_ns / link.byte_time_ns() * 16.0);
    assert!(opposite_share < 0.01, "{opposite_share}");
    assert!(opposite_share > 0.001, "{opposite_share}");
}

#[test]
fn unaligned_start_costs_throughput() {
    let mut p = LinkParams::typical("gen3x8".parse().unwrap());
    let aligned = write_throughput(&p, 4096).mbps;
    p.start_addr = 0x1002;
    let unaligned = write_throughput(&p, 4096).mbps;
    assert!(unaligned < aligned, "{unaligned} vs {aligned}");
}

#[test]
fn gen6_flit_mode_charges_236_of_256_bytes_and_no_framing() {
    let mut p = LinkParams::typical("gen6x16".parse().unwrap());
    p.include_skp = false;
    let t = write_throughput(&p, 1 << 20);
    let expected = 128_000.0 * 236.0 / 256.0 * 256.0 / (256.0 + 12.0);
    assert!((t.mbps - expected).abs() < 1e-6 * expected, "{} vs {expected}", t.mbps);
}

#[test]
fn small_reads_are_latency_bound_and_large_reads_link_bound() {
    let p = LinkParams::typical("gen3x8".parse().unwrap());
    assert_eq!(read_throughput(&p, 64).limit, Limit::Latency);
    assert_eq!(read_throughput(&p, 4 << 20).limit, Limit::Link);
    let mut one_tag = p.clone();
    one_tag.tags = 1;
    assert_eq!(read_throughput(&one_tag, 4 << 20).limit, Limit::Latency);
}
