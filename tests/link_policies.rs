//! Data link and flow-control behaviour of the link simulator: Ack and UpdateFC policies,
//! sequence numbers, and throughput that becomes credit-limited when the loop is long.

use pcieperf::link::{self, AckPolicy, ClassCredits, Credits, Direction, FcPolicy, Packet, SimConfig, TlpKind, Workload};

fn write_outcome(config: &SimConfig, bytes: u64) -> link::Outcome {
    link::simulate(config, &Workload::DmaWrite { addr: 0, bytes }).unwrap()
}

#[test]
fn ack_policies_coalesce() {
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    config.host_rx.ack = AckPolicy::EveryTlps(4);
    let outcome = write_outcome(&config, 10 * 128);
    let down = outcome.direction(Direction::Downstream);
    // 10 TLPs: Acks after the 4th and 8th, the last two flushed at the end.
    assert_eq!(down.acks, 3);
    let acked: Vec<u16> = outcome.ack_sequences();
    assert_eq!(acked, vec![3, 7, 9]);

    config.host_rx.ack = AckPolicy::Timer { delay_ns: 1000.0 };
    let outcome = write_outcome(&config, 10 * 128);
    // 10 TLPs of 592 ns: a 1 µs timer acknowledges about two at a time.
    let acks = outcome.direction(Direction::Downstream).acks;
    assert!((3..=6).contains(&acks), "{acks}");
}

#[test]
fn update_fc_every_n_tlps() {
    let mut config = SimConfig::for_link("gen2x4").unwrap();
    config.host_rx.fc = FcPolicy::EveryTlps(8);
    let outcome = write_outcome(&config, 64 * 128);
    assert_eq!(outcome.direction(Direction::Downstream).update_fcs, 8);
}

#[test]
fn sequence_numbers_count_and_wrap() {
    let mut config = SimConfig::for_link("gen3x16").unwrap();
    config.mps_bytes = 128;
    let outcome = write_outcome(&config, 5000 * 128);
    let seqs: Vec<u16> = outcome
        .record
        .iter()
        .filter_map(|c| match c.packet {
            Packet::Tlp(t) if t.kind == TlpKind::MemWrite => Some(t.seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs.len(), 5000);
    assert!(seqs.iter().enumerate().all(|(i, &s)| s as usize == i % 4096));
}

/// Two posted TLPs of credit and a 1 µs wire each way: the third TLP waits for the first one's
/// UpdateFC, which goes out after its Ack: TLP (592 ns) + wire + Ack and UpdateFC (32 ns each)
/// + wire = 2656 ns after the first started.
#[test]
fn long_credit_loop_limits_throughput() {
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    config.wire_delay_ns = 1000.0;
    let fast = write_outcome(&config, 32 * 128);
    config.host_rx.credits = Credits { posted: ClassCredits::Finite { header: 2, data: 16 }, ..Credits::large() };
    let slow = write_outcome(&config, 32 * 128);
    let starts: Vec<f64> = slow
        .record
        .iter()
        .filter(|c| c.direction == Direction::Upstream && matches!(c.packet, Packet::Tlp(_)))
        .map(|c| c.start_ns)
        .collect();
    println!("first TLP starts: {:?}", &starts[..4]);
    assert_eq!(&starts[..4], &[0.0, 592.0, 2656.0, 3248.0]);
    let rate = |o: &link::Outcome| 32.0 * 128.0 / o.direction(Direction::Upstream).last_tlp_end_ns * 1e3;
    println!("large credits {:.1} MB/s, 2 credits {:.1} MB/s", rate(&fast), rate(&slow));
    assert!(rate(&slow) < 0.5 * rate(&fast));
}

#[test]
fn ecrc_and_4dw_headers_lengthen_tlps() {
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    let plain = write_outcome(&config, 128).direction(Direction::Upstream).tlp_bytes;
    config.ecrc = true;
    config.header = pcieperf::model::HeaderFormat::Dw4;
    let longer = write_outcome(&config, 128).direction(Direction::Upstream).tlp_bytes;
    assert_eq!((plain, longer), (148, 156));
}

/// 128b/130b: SKP ordered sets come every 370 blocks (later when a TLP is on the lanes), each
/// an EDS token, PAD to the block boundary and one 16-symbol block; never inside a TLP.
#[test]
fn gen3_skps_follow_the_block_schedule() {
    let mut config = SimConfig::for_link("gen3x4").unwrap();
    config.mps_bytes = 256;
    let outcome = write_outcome(&config, 1 << 20);
    let symbol_ns = 8.0 * 130.0 / 128.0 / 8.0;
    let block_ns = 16.0 * symbol_ns;
    let skps: Vec<_> = outcome.record.iter().filter(|c| c.packet == Packet::Skp && c.direction == Direction::Upstream).collect();
    let busy_ns = outcome.direction(Direction::Upstream).last_tlp_end_ns;
    println!("{} SKPs in {busy_ns} ns", skps.len());
    assert_eq!(skps.len() as f64, (busy_ns / (370.0 * block_ns)).floor());
    let longest_tlp_ns = (256.0 + 20.0) / 4.0 * symbol_ns;
    for pair in skps.windows(2) {
        let spacing = pair[1].start_ns - pair[0].start_ns;
        assert!(spacing >= 370.0 * block_ns - 1e-6 && spacing <= 370.0 * block_ns + longest_tlp_ns + 1e-6, "{spacing}");
    }
    for skp in &skps {
        // Ends on a block boundary, lasts at least the block and its EDS token.
        let blocks = skp.end_ns / block_ns;
        assert!((blocks - blocks.round()).abs() < 1e-6, "{skp}");
        assert!(skp.end_ns - skp.start_ns >= block_ns + symbol_ns - 1e-6, "{skp}");
    }
    for tlp in outcome.record.iter().filter(|c| matches!(c.packet, Packet::Tlp(_))) {
        assert!(skps.iter().all(|s| tlp.end_ns <= s.start_ns + 1e-6 || tlp.start_ns >= s.end_ns - 1e-6), "{tlp}");
    }
}
