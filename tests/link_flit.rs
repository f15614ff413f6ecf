//! Gen6 flit mode in the link simulator: TLPs packed into 256-byte flits across flit
//! boundaries, Acks and UpdateFCs in the DLP bytes (no DLLP bytes on the lanes), flits on a
//! fixed grid (IDLE flits between), SKPs only between flits, and flit-level Nak and replay.

use pcieperf::link::{self, Corrupt, Direction, Dllp, Outcome, Packet, SimConfig, Workload};

const UP: Direction = Direction::Upstream;
const DOWN: Direction = Direction::Downstream;

fn write(config: &SimConfig, bytes: u64) -> Outcome {
    link::simulate(config, &Workload::DmaWrite { addr: 0, bytes }).unwrap()
}

/// (direction, start ns, end ns, flit sequence number, TLP bytes, replay) of every flit.
fn flits(outcome: &Outcome) -> Vec<(Direction, f64, f64, Option<u16>, u16, bool)> {
    outcome
        .record
        .iter()
        .filter_map(|c| match c.packet {
            Packet::Flit(f) => Some((c.direction, c.start_ns, c.end_ns, f.seq, f.tlp_bytes, f.replay)),
            _ => None,
        })
        .collect()
}

/// Three 140-byte MWr TLPs (128 bytes of data, 3DW header, no framing in flit mode): the first
/// fits flit 0, the second starts in flit 0 (96 bytes) and ends in flit 1 (44 bytes), the third
/// follows in flit 1: 236 and 184 TLP bytes. A
/// TLP arrives with the flit that holds its last byte. The Acks ride in flits going down.
#[test]
fn tlps_are_packed_across_flit_boundaries() {
    let config = SimConfig::for_link("gen6x16").unwrap();
    let outcome = write(&config, 3 * 128);
    println!("{}", link::dump(&outcome.record));
    let flit_ns = 256.0 * 0.125 / 16.0;
    let up: Vec<_> = flits(&outcome).into_iter().filter(|f| f.0 == UP).collect();
    assert_eq!(up, vec![(UP, 0.0, flit_ns, Some(0), 236, false), (UP, flit_ns, 2.0 * flit_ns, Some(1), 184, false)]);
    let tlps: Vec<(f64, f64)> = outcome
        .record
        .iter()
        .filter(|c| c.direction == UP && matches!(c.packet, Packet::Tlp(_)))
        .map(|c| (c.start_ns / (0.125 / 16.0), c.end_ns / flit_ns))
        .collect();
    // Flit 1's TLP bytes start at tick 256: the third TLP's first byte, the 45th of flit 1, at 300.
    assert_eq!(tlps, vec![(0.0, 1.0), (140.0, 2.0), (300.0, 2.0)], "(first byte in lane bytes, end in flits)");
    let down = outcome.direction(DOWN);
    assert_eq!((down.acks, down.dllp_bytes), (2, 0), "Acks in the DLP bytes cost no lane bytes");
    let acks: Vec<u16> = outcome.record.iter().filter_map(|c| if let Packet::Dllp(Dllp::Ack { seq }) = c.packet { Some(seq) } else { None }).collect();
    assert_eq!(acks, vec![0, 1], "Acks carry flit sequence numbers");
    assert!(flits(&outcome).iter().filter(|f| f.0 == DOWN).all(|f| f.3.is_none()), "flits with only DLP content have no sequence number");
    assert_eq!(outcome.delivered.len(), 3);
}

/// CPU writes every 100 ns on an otherwise idle link wait for the next flit boundary: every
/// TLP starts on the 2 ns grid of Gen6 x16 flits.
#[test]
fn traffic_waits_for_the_next_flit_boundary() {
    let config = SimConfig::for_link("gen6x16").unwrap();
    let outcome = link::simulate(&config, &Workload::CpuWrites { addr: 0, bytes: 4, count: 20, spacing_ns: 100.3 }).unwrap();
    let starts: Vec<f64> = outcome.record.iter().filter(|c| matches!(c.packet, Packet::Tlp(_))).map(|c| c.start_ns).collect();
    assert_eq!(starts.len(), 20);
    for (i, start) in starts.iter().enumerate() {
        let issued = i as f64 * 100.3;
        assert!(*start >= issued - 1e-9 && *start < issued + 2.0 + 1e-9, "{i}: {start}");
        assert!((start / 2.0 - (start / 2.0).round()).abs() < 1e-9, "{i}: {start} is not on the flit grid");
    }
}

/// SKP ordered sets (16 symbols) go between flits, on the 128b/130b-style schedule of 370
/// blocks of 16 symbols, never inside one.
#[test]
fn skps_go_between_flits() {
    let config = SimConfig::for_link("gen6x4").unwrap();
    let outcome = write(&config, 1 << 20);
    let symbol_ns = 0.125;
    let skps: Vec<_> = outcome.record.iter().filter(|c| c.direction == UP && c.packet == Packet::Skp).collect();
    let busy_ns = outcome.direction(UP).last_tlp_end_ns;
    println!("{} SKPs in {busy_ns} ns", skps.len());
    assert_eq!(skps.len() as f64, (busy_ns / (370.0 * 16.0 * symbol_ns)).floor());
    for skp in &skps {
        assert!((skp.end_ns - skp.start_ns - 16.0 * symbol_ns).abs() < 1e-9);
    }
    for flit in flits(&outcome).iter().filter(|f| f.0 == UP) {
        assert!(skps.iter().all(|s| flit.2 <= s.start_ns + 1e-9 || flit.1 >= s.end_ns - 1e-9), "{flit:?}");
    }
}

/// A flit that fails its CRC (after FEC) is Nak'd; the transmitter replays every flit from it
/// on; each TLP is delivered once, in order.
#[test]
fn a_bad_flit_is_naked_and_the_flits_from_it_replayed() {
    let mut config = SimConfig::for_link("gen6x4").unwrap();
    config.errors.corrupt = vec![Corrupt::Tlp { direction: UP, seq: 1 }];
    let outcome = write(&config, 4096);
    println!("{}", link::dump(&outcome.record));
    let retry = outcome.replay[UP.index()];
    println!("{retry:?}");
    assert_eq!((retry.corrupted, retry.naks, retry.replays, retry.timer_expiries), (1, 1, 1, 0));
    // The Nak is recorded at the DLP bytes of a flit going down; it arrives with that flit's end.
    let nak = outcome.record.iter().find(|c| matches!(c.packet, Packet::Dllp(Dllp::Nak { seq: 0 }))).expect("Nak of flit 1");
    let nak_arrival = flits(&outcome).iter().find(|f| f.0 == DOWN && f.1 <= nak.start_ns && nak.end_ns <= f.2).expect("the Nak's flit").2;
    let up = flits(&outcome).into_iter().filter(|f| f.0 == UP).collect::<Vec<_>>();
    // A flit that starts as the Nak arrives is sent (the lanes were free first) and replayed.
    let unacked: Vec<u16> = up.iter().filter(|f| !f.5 && f.3 >= Some(1) && f.1 <= nak_arrival + 1e-9).filter_map(|f| f.3).collect();
    let replayed: Vec<u16> = up.iter().filter(|f| f.5).filter_map(|f| f.3).collect();
    println!("unacked at the Nak {unacked:?}, replayed {replayed:?}");
    assert_eq!(replayed, unacked);
    let delivered: Vec<u64> = outcome.delivered.iter().filter(|d| d.0 == UP).map(|d| d.1.addr).collect();
    assert_eq!(delivered, (0..32).map(|i| i * 128).collect::<Vec<_>>());
}

/// At a raw bit error rate high enough to beat the FEC now and then, the transfer completes
/// with every byte delivered once, later by the replayed flits' time.
#[test]
fn bit_errors_cost_flit_replays() {
    let mut config = SimConfig::for_link("gen6x8").unwrap();
    config.mps_bytes = 256;
    config.record = false;
    let clean = write(&config, 1 << 20);
    config.errors.ber = 2e-4;
    config.errors.seed = 3;
    let noisy = write(&config, 1 << 20);
    let retry = noisy.replay[UP.index()];
    let slower_ns = noisy.direction(UP).last_tlp_end_ns - clean.direction(UP).last_tlp_end_ns;
    println!("{retry:?}; slower by {slower_ns:.1} ns");
    assert!(retry.corrupted > 0 && retry.replayed > 0, "{retry:?}");
    assert_eq!(noisy.direction(UP).payload_bytes, 1 << 20);
    assert!(slower_ns > 0.0);
}
