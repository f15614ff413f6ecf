//! Document 000's numbers, reproduced by stepping packets through the link simulator (not from
//! the model's formulas). Each test prints the parameters it had to choose.
//! The scenarios' parameters come from `link::scenarios`, which `pcieperf trace` shares.

use pcieperf::link::{self, scenarios, Direction, Packet, TlpKind};

fn mbps(bytes: f64, ns: f64) -> f64 {
    bytes / ns * 1e3
}

/// §3.5 Example 1: 100 memory writes of 4 bytes: 9648 ns, 41.46 MB/s, 3 SKPs, 165.8 MB/s of
/// DLLPs on the other direction.
#[test]
fn example_1_hundred_4_byte_writes() {
    // Where the record starts in the SKP schedule: a SKP due as the first write goes out.
    let (config, workload) = scenarios::example_1();
    let outcome = link::simulate(&config, &workload).unwrap();
    println!("parameters: Gen1 x1, MPS 128, 3DW, Ack and UpdateFC per TLP, SKP every 1180 symbol times, one due at t=0");
    let down = outcome.direction(Direction::Downstream);
    let up = outcome.direction(Direction::Upstream);
    let span_ns = down.last_tlp_end_ns;
    println!("span {span_ns} ns, {} SKPs, {} TLPs, {} Acks, {} UpdateFCs", down.skps, down.tlps, up.acks, up.update_fcs);
    assert_eq!(down.tlps, 100);
    assert_eq!(span_ns, 9648.0);
    assert_eq!(down.skps, 3);
    let write_mbps = mbps(down.payload_bytes as f64, span_ns);
    assert!((write_mbps - 41.46).abs() < 0.005, "{write_mbps}");
    // Allocated write bandwidth: every byte of the span is TLP or SKP: 2412 bytes, 250 MB/s.
    assert_eq!(down.tlp_bytes + down.skp_ticks, 2412);
    assert_eq!((up.acks, up.update_fcs), (100, 100));
    let dllp_mbps = mbps(up.dllp_bytes as f64, span_ns);
    println!("write {write_mbps:.3} MB/s, DLLPs on the other direction {dllp_mbps:.2} MB/s");
    assert!((dllp_mbps - 165.8).abs() < 0.05, "{dllp_mbps}");
    // A SKP never starts inside a TLP.
    assert_skps_between_packets(&outcome.record);
}

/// §4.6: 1-DW writes issued every 120 ns: 33.33 MB/s, Acks on the other direction.
#[test]
fn section_4_6_writes_every_120_ns() {
    let (config, workload) = scenarios::test_3_writes();
    let outcome = link::simulate(&config, &workload).unwrap();
    println!("parameters: CPU issue spacing 120 ns, immediate Acks, UpdateFC per TLP");
    let starts: Vec<f64> = tlp_starts(&outcome.record, Direction::Downstream, TlpKind::MemWrite);
    assert_eq!(starts.len(), 100);
    let spacing_ns = (starts[99] - starts[0]) / 99.0;
    let rate = mbps(4.0, spacing_ns);
    println!("mean spacing {spacing_ns} ns → {rate:.3} MB/s");
    assert!(starts.windows(2).all(|w| w[1] - w[0] == 120.0), "every write 120 ns after the previous");
    // Each write is 96 ns on the lanes: the record's 24 ns break between TLPs.
    let writes = outcome.record.iter().filter(|c| matches!(c.packet, Packet::Tlp(_)));
    assert!(writes.clone().all(|c| c.end_ns - c.start_ns == 96.0));
    assert!((rate - 33.33).abs() < 0.005, "{rate}");
    let up = outcome.direction(Direction::Upstream);
    assert_eq!((up.acks, up.update_fcs, up.tlps), (100, 100, 0));
    assert_eq!(outcome.direction(Direction::Downstream).dllps(), 0);
}

fn tlp_starts(record: &[link::Crossing], direction: Direction, kind: TlpKind) -> Vec<f64> {
    record
        .iter()
        .filter(|c| c.direction == direction && matches!(c.packet, Packet::Tlp(t) if t.kind == kind))
        .map(|c| c.start_ns)
        .collect()
}

fn assert_skps_between_packets(record: &[link::Crossing]) {
    for skp in record.iter().filter(|c| c.packet == Packet::Skp) {
        for other in record.iter().filter(|c| c.direction == skp.direction && c.packet != Packet::Skp) {
            assert!(other.end_ns <= skp.start_ns || other.start_ns >= skp.end_ns, "SKP {skp} overlaps {other}");
        }
    }
}

/// The §3.5 record of three 4-byte reads: 2128 ns with a SKP inside, 5.639 MB/s.
#[test]
fn section_3_5_three_reads_record() {
    // A SKP comes due 10 symbol times into the record, in both directions.
    let (config, workload) = scenarios::three_reads();
    let gap_ns = scenarios::THREE_READS_GAP_NS;
    println!("parameters: device completion latency 500 ns, immediate Acks, CPU issue gap {gap_ns} ns after each completion, SKP due at 40 ns");
    let outcome = link::simulate(&config, &workload).unwrap();
    print!("{}", link::dump(&outcome.record));
    let first = outcome.record.first().map(|c| c.start_ns).unwrap();
    let last_end = outcome.record.iter().map(|c| c.end_ns).fold(0.0, f64::max);
    // An analyser stamps each symbol with its start: the record spans first to last stamp.
    let span_ns = last_end - 4.0 - first;
    let rate = mbps(12.0, span_ns);
    println!("record {first}..{last_end} ns: analyser span {span_ns} ns, {rate:.3} MB/s");
    assert_eq!(span_ns, 2128.0);
    assert!((rate - 5.639).abs() < 0.0005, "{rate}");
    for direction in Direction::BOTH {
        assert_eq!(outcome.direction(direction).skps, 1, "one SKP in each direction ({direction:?})");
    }
    assert_skps_between_packets(&outcome.record);
    // The downstream SKP came due inside the first MRd and waited for its end.
    let mrd_end = outcome.record.iter().find(|c| matches!(c.packet, Packet::Tlp(t) if t.kind == TlpKind::MemRead)).unwrap().end_ns;
    let skp = outcome.record.iter().find(|c| c.direction == Direction::Downstream && c.packet == Packet::Skp).unwrap();
    assert_eq!(skp.start_ns, mrd_end);
}

/// §4.7: read-to-completion 512–524 ns, request spacing 1532–1560 ns, within one symbol time.
#[test]
fn section_4_7_read_to_completion_and_spacing() {
    // The record's three reads: latencies 512, 520, 524 ns; completion-to-request delays 872 and
    // 836 ns giving spacings 1560 and 1532 ns. The third read has no request after it.
    for (read, spacing_ns) in [(0, Some(1560.0)), (1, Some(1532.0)), (2, None)] {
        let (config, workload) = scenarios::test_4_reads(read);
        let (latency_ns, gap_ns) = scenarios::TEST_4_READS[read];
        println!("parameters: device completion latency {latency_ns} ns, device Ack/UpdateFC delay {} ns, CPU issue gap {gap_ns} ns", scenarios::TEST_4_DEVICE_TIMER_NS);
        let outcome = link::simulate(&config, &workload).unwrap();
        let requests: Vec<_> = outcome.record.iter().filter(|c| matches!(c.packet, Packet::Tlp(t) if t.kind == TlpKind::MemRead)).collect();
        let completions: Vec<_> =
            outcome.record.iter().filter(|c| matches!(c.packet, Packet::Tlp(t) if t.kind == TlpKind::CompletionData)).collect();
        assert_eq!((requests.len(), completions.len()), (3, 3));
        for (request, completion) in requests.iter().zip(&completions) {
            let read_to_completion = completion.start_ns - request.end_ns;
            println!("read to completion {read_to_completion} ns");
            assert!((read_to_completion - latency_ns).abs() <= 4.0, "{read_to_completion}");
        }
        let Some(spacing_ns) = spacing_ns else { continue };
        for pair in requests.windows(2) {
            let spacing = pair[1].start_ns - pair[0].start_ns;
            println!("request spacing {spacing} ns (document: {spacing_ns})");
            assert!((spacing - spacing_ns).abs() <= 4.0, "{spacing}");
        }
    }
}
