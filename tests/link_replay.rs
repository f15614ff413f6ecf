//! Data link layer retry in the link simulator: Nak and replay on corrupted TLPs, lost Acks
//! recovered by a later Ack or the REPLAY_TIMER, REPLAY_NUM rollover and link retrain, bit
//! errors that cost what the replay record says, and a replay buffer small enough to limit
//! throughput.

use pcieperf::link::{self, replay, Corrupt, Direction, Dllp, Outcome, Packet, SimConfig, Workload};

const UP: Direction = Direction::Upstream;
const DOWN: Direction = Direction::Downstream;

fn write(config: &SimConfig, bytes: u64) -> Outcome {
    link::simulate(config, &Workload::DmaWrite { addr: 0, bytes }).unwrap()
}

fn gen1_with(corrupt: Vec<Corrupt>) -> SimConfig {
    let mut config = SimConfig::for_link("gen1x1").unwrap();
    config.errors.corrupt = corrupt;
    config
}

/// Upstream TLP crossings as (sequence number, start ns, end ns).
fn upstream_tlps(outcome: &Outcome) -> Vec<(u16, f64, f64)> {
    outcome
        .record
        .iter()
        .filter_map(|c| match c.packet {
            Packet::Tlp(t) if c.direction == UP => Some((t.seq, c.start_ns, c.end_ns)),
            _ => None,
        })
        .collect()
}

/// Every TLP delivered once, in order, with the addresses of the transfer.
fn assert_delivered_once_in_order(outcome: &Outcome, tlps: u64) {
    let delivered: Vec<_> = outcome.delivered.iter().filter(|(d, _)| *d == UP).map(|(_, t)| (t.seq as u64, t.addr)).collect();
    let expected: Vec<_> = (0..tlps).map(|i| (i, i * 128)).collect();
    assert_eq!(delivered, expected);
}

#[test]
fn one_corrupted_tlp_is_naked_and_the_unacked_tlps_are_replayed() {
    let outcome = write(&gen1_with(vec![Corrupt::Tlp { direction: UP, seq: 3 }]), 10 * 128);
    let retry = outcome.replay[UP.index()];
    println!("{retry:?}\n{}", link::dump(&outcome.record));
    assert_eq!((retry.corrupted, retry.naks, retry.replays, retry.timer_expiries, retry.retrains), (1, 1, 1, 0, 0));
    let naks: Vec<_> = outcome
        .record
        .iter()
        .filter_map(|c| match c.packet {
            Packet::Dllp(Dllp::Nak { seq }) => Some((c.direction, seq, c.end_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(naks.len(), 1);
    let (nak_direction, nak_seq, nak_arrival_ns) = naks[0];
    assert_eq!((nak_direction, nak_seq), (DOWN, 2), "the Nak acknowledges the TLPs before the bad one");
    // Unacknowledged at the Nak: seq 3 and whatever started after it before the Nak arrived.
    let tlps = upstream_tlps(&outcome);
    let unacked: Vec<u16> = tlps.iter().filter(|(seq, start, _)| *seq >= 3 && *start < nak_arrival_ns).map(|t| t.0).collect();
    let replayed: Vec<u16> = tlps.iter().filter(|(_, start, _)| *start >= nak_arrival_ns).map(|t| t.0).take(unacked.len()).collect();
    println!("unacked at the Nak {unacked:?}, replayed {replayed:?}");
    assert_eq!(replayed, unacked);
    assert_eq!(retry.replayed, unacked.len() as u64);
    assert_eq!(tlps.len() as u64, 10 + retry.replayed);
    assert_delivered_once_in_order(&outcome, 10);
    // The data arrived later than without the error by the replayed TLPs' lane time.
    let clean = write(&gen1_with(Vec::new()), 10 * 128);
    assert_eq!(outcome.done_ns - clean.done_ns, retry.lost_ns);
    assert_eq!(outcome.direction(UP).payload_bytes, 10 * 128);
}

#[test]
fn a_lost_ack_is_covered_by_the_next_one() {
    let outcome = write(&gen1_with(vec![Corrupt::Ack { direction: DOWN, seq: 1 }]), 4 * 128);
    let retry = outcome.replay[UP.index()];
    assert_eq!((retry.timer_expiries, retry.replays), (0, 0));
    assert_eq!(outcome.replay[DOWN.index()].corrupted_dllps, 1);
    assert_delivered_once_in_order(&outcome, 4);
}

/// The last Ack lost: nothing else acknowledges TLP 3, so the REPLAY_TIMER, restarted when
/// the Ack of TLP 2 arrived, runs out one specification timeout later; TLP 3 goes again, and
/// the receiver drops the duplicate and Acks it.
#[test]
fn a_lost_last_ack_expires_the_replay_timer() {
    let config = gen1_with(vec![Corrupt::Ack { direction: DOWN, seq: 3 }]);
    let outcome = write(&config, 4 * 128);
    let retry = outcome.replay[UP.index()];
    assert_eq!((retry.timer_expiries, retry.replays, retry.replayed, retry.naks), (1, 1, 1, 0));
    let tlps = upstream_tlps(&outcome);
    assert_eq!(tlps.len(), 5);
    let (replay_seq, replay_start, _) = tlps[4];
    let ack2_arrival = outcome.record.iter().find(|c| c.packet == Packet::Dllp(Dllp::Ack { seq: 2 })).unwrap().end_ns;
    let timeout_ns = replay::spec_timeout_ns(config.link, 128, 4.0);
    println!("replay timeout {timeout_ns} ns; Ack 2 arrived {ack2_arrival} ns, TLP {replay_seq} replayed at {replay_start} ns");
    assert_eq!((tlps[3].0, replay_seq), (3, 3));
    assert!((replay_start - ack2_arrival - timeout_ns).abs() <= 4.0, "{}", replay_start - ack2_arrival);
    assert_delivered_once_in_order(&outcome, 4);
    let acks: Vec<u16> = outcome.ack_sequences();
    assert_eq!(acks, vec![0, 1, 2, 3, 3], "the duplicate is acknowledged again");
}

/// REPLAY_NUM is 2 bits: TLP 0 failing three times costs three replays; failing four times,
/// the fourth replay rolls REPLAY_NUM over and the link retrains (for the configured time)
/// first. Only the first failure is Nak'd: the receiver's NAK_SCHEDULED stays set until a good
/// TLP arrives, so the later failures are recovered by the REPLAY_TIMER.
#[test]
fn four_consecutive_failures_retrain_the_link() {
    let run = |failures: usize| {
        let mut config = gen1_with(vec![Corrupt::Tlp { direction: UP, seq: 0 }; failures]);
        config.replay.retrain_ns = 5000.0;
        write(&config, 4 * 128)
    };
    let three = run(3);
    let four = run(4);
    let (r3, r4) = (three.replay[UP.index()], four.replay[UP.index()]);
    println!("3 failures: {r3:?}\n4 failures: {r4:?}\n{}", link::dump(&four.record));
    assert_eq!((r3.naks, r3.timer_expiries, r3.replays, r3.retrains), (1, 2, 3, 0));
    assert_eq!((r4.naks, r4.timer_expiries, r4.replays, r4.retrains), (1, 3, 4, 1));
    assert!(r4.lost_ns >= 5000.0);
    assert!(four.done_ns - three.done_ns >= 5000.0, "{} {}", four.done_ns, three.done_ns);
    assert_delivered_once_in_order(&four, 4);
}

/// At a bit error rate of 1e-6, a Gen3 x8 4 MiB write takes longer than without errors by the
/// lane time of the replayed TLPs (plus the SKPs that longer busy time brings).
#[test]
fn throughput_at_a_ber_falls_by_what_the_replay_record_shows() {
    let mut config = SimConfig::for_link("gen3x8").unwrap();
    config.mps_bytes = 256;
    config.record = false;
    let clean = write(&config, 4 << 20);
    config.errors.ber = 1e-6;
    config.errors.seed = 1;
    let noisy = write(&config, 4 << 20);
    let retry = noisy.replay[UP.index()];
    let (up_clean, up_noisy) = (clean.direction(UP), noisy.direction(UP));
    let slower_ns = up_noisy.last_tlp_end_ns - up_clean.last_tlp_end_ns;
    let extra_skp_ns = (up_noisy.skp_ticks - up_clean.skp_ticks) as f64 * (8.0 / 8.0 * 130.0 / 128.0 / 8.0);
    let rate = |o: &Outcome| (4u64 << 20) as f64 / o.direction(UP).last_tlp_end_ns * 1e3;
    println!(
        "clean {:.1} MB/s, BER 1e-6 {:.1} MB/s; {retry:?}; slower by {slower_ns:.1} ns, replay lost {:.1} ns, extra SKPs {extra_skp_ns:.1} ns",
        rate(&clean),
        rate(&noisy),
        retry.lost_ns
    );
    assert!(retry.corrupted >= 5 && retry.naks >= 1 && retry.replayed >= retry.corrupted, "{retry:?}");
    assert!(rate(&noisy) < rate(&clean));
    let symbol_ns = 130.0 / 128.0 / 8.0;
    assert!((slower_ns - retry.lost_ns - extra_skp_ns).abs() <= 8.0 * symbol_ns * retry.replays as f64, "{slower_ns} {}", retry.lost_ns);
    assert_eq!(noisy.direction(UP).payload_bytes, 4 << 20);
    // Same seed, same run.
    assert_eq!(write(&config, 4 << 20).replay, noisy.replay);
}

/// A replay buffer of N TLPs and a long wire: a TLP may go only when the buffer has room, so
/// with one TLP of room the next starts after the Ack's round trip (592 + 1000 + 32 + 1000 ns),
/// and throughput grows with N until the buffer covers the round trip (the knee: 5 TLPs).
#[test]
fn a_tiny_replay_buffer_limits_throughput() {
    let run = |tlps: u32, bytes: u64| {
        let mut config = SimConfig::for_link("gen1x1").unwrap();
        config.wire_delay_ns = 1000.0;
        config.replay.buffer_tlps = tlps;
        config.replay.buffer_bytes = bytes;
        write(&config, 64 * 128)
    };
    let one = run(1, 1 << 20);
    let starts: Vec<f64> = upstream_tlps(&one).iter().map(|t| t.1).take(3).collect();
    assert_eq!(starts, vec![0.0, 2624.0, 5248.0]);
    assert_eq!(upstream_tlps(&run(64, 148)), upstream_tlps(&one), "148 bytes hold one TLP, as one TLP does");
    let rate = |o: &Outcome| 64.0 * 128.0 / o.direction(UP).last_tlp_end_ns * 1e3;
    let rates: Vec<f64> = [1, 2, 3, 4, 5, 6, 8].iter().map(|&n| rate(&run(n, 1 << 20))).collect();
    let full = rate(&run(2048, 1 << 20));
    println!("MB/s by replay buffer TLPs 1,2,3,4,5,6,8: {rates:.1?}; unbounded {full:.1}");
    assert!(rates.windows(2).take(4).all(|w| w[1] > w[0] * 1.05), "below the knee, each TLP of room helps");
    for (n, r) in [1.0, 2.0, 3.0, 4.0].iter().zip(&rates) {
        let expected = full * n * 592.0 / 2624.0;
        assert!((r / expected - 1.0).abs() < 0.05, "{n} TLPs: {r} against {expected}");
    }
    assert!(rates[4..].iter().all(|r| (r / full - 1.0).abs() < 0.005), "above the knee, the link limits");
    assert!(one.replay[UP.index()].buffer_full_waits > 0);
}
