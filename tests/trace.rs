//! `pcieperf trace`: the text layout of document 000's Example 1 against the simulator's record,
//! the VCD parsed back, the pcapng read by a reader written here and by tshark with the shipped
//! dissector, and bad input.

use std::collections::HashMap;
use std::process::Command as Process;

use assert_cmd::Command;
use pcieperf::link::phy::Phy;
use pcieperf::link::symbols::Timeline;
use pcieperf::link::{scenarios, Crossing, Direction, Dllp, Packet, SimConfig, TlpKind, Workload};
use pcieperf::report::trace::{self, pcapng, text, vcd, Trace};

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

/// The first `packets` packets of a scenario, and the symbol times they span.
fn record_of(config: &SimConfig, workload: Workload, packets: u64) -> (Vec<Crossing>, u64) {
    let record = trace::simulate_first(config, workload, packets).unwrap();
    let first = &record[..record.len().min(packets as usize)];
    let rows = trace::rows(first, &[], &Phy::new(config.link), None).unwrap();
    let shown = trace::within_rows(&record, &Phy::new(config.link), rows).to_vec();
    (shown, rows)
}

#[test]
fn text_layout_of_example_1_matches_the_record() {
    let (config, workload) = scenarios::example_1();
    let (record, rows) = record_of(&config, workload, 1000);
    let text = text::render(&Trace { config: &config, record: &record, rows, left_out: &[] });
    assert!(text.starts_with("# simulated link Gen1 x1;"), "labelled simulated: {}", text.lines().next().unwrap());
    let lines: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(lines.len() as u64, rows);
    // The record's 100 writes end at 9648 ns, symbol time 2411 (its END); the last DLLPs after.
    let last_write = record.iter().rfind(|c| matches!(c.packet, Packet::Tlp(_))).unwrap();
    assert_eq!(last_write.end_ns, 9648.0);
    assert!(lines[2411].split_once('|').unwrap().0.contains("K END"), "{}", lines[2411]);
    let (mut writes, mut acks, mut skps) = (0, 0, 0);
    for crossing in &record {
        let row = (crossing.start_ns / 4.0) as usize;
        let line = lines[row];
        // cycle and time of the row, then the side of the packet's direction.
        assert!(line.starts_with(&format!("{row:06} {:>12.3}", crossing.start_ns)), "{line}");
        let (tx, rx) = line.split_once('|').unwrap();
        let side = |l: &str| if crossing.direction == Direction::Downstream { l.split_once('|').unwrap().0.to_string() } else { l.split_once('|').unwrap().1.to_string() };
        let here = if crossing.direction == Direction::Downstream { tx } else { rx };
        let end_row = (crossing.end_ns / 4.0) as usize - 1;
        if end_row >= lines.len() {
            continue; // runs past the trace's last row
        }
        match crossing.packet {
            Packet::Tlp(tlp) => {
                writes += 1;
                assert_eq!(tlp.kind, TlpKind::MemWrite);
                assert!(here.contains("MWr") && here.contains("K STP"), "{line}");
                assert!(side(lines[row + 1]).contains(&format!("seq {} ", tlp.seq)) || side(lines[row + 1]).ends_with(&format!("seq {}", tlp.seq)));
                assert!(side(lines[row + 3]).contains(&format!("addr {:#x}", tlp.addr)), "{}", lines[row + 3]);
                assert!(side(lines[row + 4]).contains("len 4 B"));
                assert!(side(lines[end_row]).contains("K END"), "{}", lines[end_row]);
                assert_eq!(end_row - row + 1, 24, "a 4-byte write is 24 symbols");
            }
            Packet::Dllp(Dllp::Ack { seq }) => {
                acks += 1;
                assert!(here.contains("K SDP") && here.contains("Ack"), "{line}");
                assert!(side(lines[row + 1]).trim_end().ends_with(&format!("seq {seq}")), "{}", lines[row + 1]);
                assert!(side(lines[end_row]).contains("K END"));
            }
            Packet::Dllp(Dllp::UpdateFc { header, data, .. }) => {
                let (header, data) = trace::wire_credits(header, data);
                assert!(here.contains("UpdateFC-P") && here.contains("K SDP"), "{line}");
                assert!(side(lines[row + 1]).contains(&format!("HdrFC {header}")));
                assert!(side(lines[row + 2]).contains(&format!("DataFC {data}")));
            }
            Packet::Skp => {
                skps += 1;
                assert!(here.contains("K COM") && here.contains("SKP"), "{line}");
                for line in &lines[row + 1..row + 4] {
                    assert!(side(line).contains("K SKP"));
                }
            }
            other => panic!("Example 1 has only MWr, Ack, UpdateFC-P and SKP: {other:?}"),
        }
    }
    assert_eq!((writes, acks), (100, 100));
    assert!(skps >= 3, "Example 1's three SKPs downstream (and the upstream ones)");
    println!("Example 1: {} packets in {rows} rows of 4 ns, first lines:\n{}", record.len(), text.lines().take(12).collect::<Vec<_>>().join("\n"));
}

/// A VCD file parsed back: per signal (scope.name) the value changes in order.
struct Vcd {
    changes: HashMap<String, Vec<(u64, u64)>>,
}

impl Vcd {
    fn parse(text: &str) -> Vcd {
        let (head, body) = text.split_once("$enddefinitions $end").expect("definitions end");
        let mut names = HashMap::new();
        let mut scopes: Vec<String> = Vec::new();
        for line in head.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["$scope", "module", name, "$end"] => scopes.push(name.to_string()),
                ["$upscope", "$end"] => drop(scopes.pop()),
                ["$var", "wire", _bits, id, name, "$end"] => drop(names.insert(id.to_string(), format!("{}.{name}", scopes.last().unwrap()))),
                ["$timescale", "1", "fs", "$end"] => {}
                _ => {}
            }
        }
        let mut changes: HashMap<String, Vec<(u64, u64)>> = HashMap::new();
        let mut time = 0;
        let mut last_time = 0;
        for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(t) = line.strip_prefix('#') {
                time = t.parse().unwrap();
                assert!(time >= last_time, "times never go back");
                last_time = time;
                continue;
            }
            let (value, id) = match line.strip_prefix('b') {
                Some(rest) => {
                    let (bits, id) = rest.split_once(' ').unwrap();
                    (u64::from_str_radix(bits, 2).unwrap(), id)
                }
                None => ((line.as_bytes()[0] - b'0') as u64, &line[1..]),
            };
            changes.entry(names[id].clone()).or_default().push((time, value));
        }
        Vcd { changes }
    }

    /// The value at `time`: the last change at or before it.
    fn at(&self, signal: &str, time: u64) -> u64 {
        let changes = &self.changes[signal];
        let after = changes.partition_point(|&(t, _)| t <= time);
        changes[after - 1].1
    }
}

fn fs(ns: f64) -> u64 {
    (ns * 1e6).round() as u64
}

fn vcd_round_trip(config: &SimConfig, workload: Workload, packets: u64) {
    let (record, rows) = record_of(config, workload, packets);
    let trace = Trace { config, record: &record, rows, left_out: &[] };
    let parsed = Vcd::parse(&vcd::render(&trace));
    // Decoded signals against the record.
    for crossing in &record {
        let scope = crossing.direction.name();
        let at = fs(crossing.start_ns);
        let expected = vcd::packet_values(Some(&crossing.packet));
        for ((name, _), value) in vcd::PACKET_SIGNALS.iter().zip(expected) {
            assert_eq!(parsed.at(&format!("{scope}.{name}"), at), value, "{name} of {crossing}");
        }
        let kind = parsed.at(&format!("{scope}.kind"), at).to_be_bytes();
        assert_eq!(&kind[4..], vcd::kind_code(&crossing.packet));
        if let Packet::Tlp(tlp) = crossing.packet {
            assert_eq!(parsed.at(&format!("{scope}.seq"), at), tlp.seq as u64);
        }
    }
    // Lanes against the shared symbol expansion, and framing bytes where packets start.
    let phy = Phy::new(config.link);
    let mut timeline = Timeline::new(&record, phy, trace.encoder());
    for row in 0..rows {
        let at = fs(timeline.row_ns(row));
        for direction in Direction::BOTH {
            let side = timeline.row(row, direction);
            for (lane, symbol) in side.lanes.iter().enumerate() {
                let scope = direction.name();
                assert_eq!(parsed.at(&format!("{scope}.lane{lane}"), at), symbol.byte as u64, "row {row} lane {lane}");
                assert_eq!(parsed.at(&format!("{scope}.lane{lane}_k"), at), symbol.control as u64);
            }
            for &index in &side.starts {
                let crossing = &record[index];
                let lane = (phy.ticks(crossing.start_ns) % phy.width) as usize;
                let first = parsed.at(&format!("{}.lane{lane}", direction.name()), at);
                let stp = if phy.encoding == pcieperf::model::Encoding::B8b10b { 0xFB } else { 0x0F };
                if let Packet::Tlp(_) = crossing.packet {
                    assert_eq!(first & if stp == 0x0F { 0x0F } else { 0xFF }, stp, "{crossing}: STP");
                }
            }
        }
    }
    println!("{}: VCD of {} packets, {rows} symbol times, read back", config.link, record.len());
}

#[test]
fn vcd_reads_back_as_the_record() {
    let (config, workload) = scenarios::example_1();
    vcd_round_trip(&config, workload, 400);
    let (config, workload) = scenarios::three_reads();
    vcd_round_trip(&config, workload, 100);
    // 128b/130b, wide: several packets may start in one symbol time.
    let mut config = SimConfig::for_link("gen3x8").unwrap();
    config.mps_bytes = 256;
    vcd_round_trip(&config, Workload::DmaRead { addr: 0x1000_0040, bytes: 64 * 1024 }, 600);
}

/// An Enhanced Packet Block: timestamp in ns, the packet.
struct PcapPacket {
    timestamp_ns: u64,
    data: Vec<u8>,
}

/// A reader of the pcapng this crate writes (little-endian, one interface).
fn read_pcapng(bytes: &[u8]) -> (u16, u8, Vec<PcapPacket>) {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let mut at = 0;
    let (mut linktype, mut tsresol, mut packets) = (0, 0, Vec::new());
    while at < bytes.len() {
        let (kind, length) = (u32_at(at), u32_at(at + 4) as usize);
        assert_eq!(length % 4, 0);
        assert_eq!(u32_at(at + length - 4) as usize, length, "trailing length");
        match kind {
            0x0A0D0D0A => assert_eq!(u32_at(at + 8), 0x1A2B3C4D, "byte-order magic"),
            1 => {
                linktype = u16::from_le_bytes([bytes[at + 8], bytes[at + 9]]);
                let mut option = at + 16;
                while option < at + length - 4 {
                    let code = u16::from_le_bytes([bytes[option], bytes[option + 1]]);
                    let len = u16::from_le_bytes([bytes[option + 2], bytes[option + 3]]) as usize;
                    if code == 9 {
                        tsresol = bytes[option + 4];
                    }
                    if code == 0 {
                        break;
                    }
                    option += 4 + len.next_multiple_of(4);
                }
            }
            6 => {
                let timestamp_ns = (u32_at(at + 12) as u64) << 32 | u32_at(at + 16) as u64;
                let captured = u32_at(at + 20) as usize;
                assert_eq!(captured, u32_at(at + 24) as usize);
                packets.push(PcapPacket { timestamp_ns, data: bytes[at + 28..at + 28 + captured].to_vec() });
            }
            other => panic!("unexpected block type {other:#x}"),
        }
        at += length;
    }
    (linktype, tsresol, packets)
}

#[test]
fn pcapng_structure_and_wire_bytes() {
    for (link, header, ecrc) in [("gen1x1", pcieperf::model::HeaderFormat::Dw3, false), ("gen4x4", pcieperf::model::HeaderFormat::Dw4, true)] {
        let mut config = SimConfig::for_link(link).unwrap();
        (config.header, config.ecrc) = (header, ecrc);
        let addr = if header == pcieperf::model::HeaderFormat::Dw4 { 0x1_0000_0010 } else { 0x1000_0010 };
        let record = trace::simulate_first(&config, Workload::DmaRead { addr, bytes: 256 * 1024 }, 1500).unwrap();
        let record = &record[..1500];
        let bytes = pcapng::render(&Trace { config: &config, record, rows: 0, left_out: &[] });
        let (linktype, tsresol, packets) = read_pcapng(&bytes);
        assert_eq!((linktype, tsresol, packets.len()), (147, 9, record.len()));
        let eight_ten = link == "gen1x1";
        for (crossing, packet) in record.iter().zip(&packets) {
            assert_eq!(packet.timestamp_ns, crossing.start_ns.floor() as u64);
            let h = &packet.data[..pcapng::HEADER_BYTES];
            assert_eq!(h[..2], [1, 20]);
            assert_eq!(h[2], (crossing.direction == Direction::Upstream) as u8);
            assert_eq!((h[3], h[4], h[5]), (if eight_ten { 1 } else { 4 }, if eight_ten { 1 } else { 4 }, !eight_ten as u8));
            assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), (crossing.start_ns * 1e3).round() as u64);
            let wire = &packet.data[pcapng::HEADER_BYTES..];
            let Packet::Tlp(tlp) = crossing.packet else { continue };
            assert_eq!(h[6], 1);
            // Framing, sequence number and LCRC over sequence + TLP (computed here with crc32fast).
            let (seq_at, body) = if eight_ten {
                assert_eq!((wire[0], wire[wire.len() - 1]), (0xFB, 0xFD));
                (1, &wire[3..wire.len() - 5])
            } else {
                assert_eq!(wire[0] & 0x0F, 0x0F);
                assert_eq!(((wire[0] >> 4) as usize | ((wire[1] & 0x7F) as usize) << 4) * 4, wire.len(), "STP token length");
                (2, &wire[4..wire.len() - 4])
            };
            let seq = u16::from_be_bytes([wire[seq_at], wire[seq_at + 1]]) & 0x0FFF;
            assert_eq!(seq, tlp.seq);
            let lcrc_at = if eight_ten { wire.len() - 5 } else { wire.len() - 4 };
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(&[wire[seq_at] & 0x0F, wire[seq_at + 1]]);
            hasher.update(body);
            assert_eq!(wire[lcrc_at..lcrc_at + 4], hasher.finalize().to_le_bytes());
            // Header: Fmt/Type, TD with ECRC, 4DW address of requests.
            let expected_type = match tlp.kind {
                TlpKind::MemRead => if ecrc { 0x20 } else { 0x00 },
                TlpKind::MemWrite => if ecrc { 0x60 } else { 0x40 },
                TlpKind::CompletionData => 0x4A,
            };
            assert_eq!(body[0], expected_type, "{crossing}");
            assert_eq!(body[2] >> 7, ecrc as u8);
            if tlp.kind == TlpKind::MemRead {
                let addr = match header {
                    pcieperf::model::HeaderFormat::Dw4 => u64::from_be_bytes(body[8..16].try_into().unwrap()),
                    _ => u32::from_be_bytes(body[8..12].try_into().unwrap()) as u64,
                };
                assert_eq!(addr, tlp.addr & !3);
                assert_eq!(body[6] as u16, tlp.tag & 0xFF);
            } else {
                assert_eq!(body[10] as u16, tlp.tag & 0xFF);
                assert_eq!(body[11], tlp.addr as u8 & 0x7F);
            }
        }
        println!("{link}: pcapng of {} packets read back", packets.len());
    }
}

/// tshark with the shipped dissector decodes every packet as the simulator recorded it.
#[test]
fn tshark_decodes_every_packet_as_recorded() {
    if Process::new("tshark").arg("--version").output().is_err() {
        println!("skipped: tshark not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dissector = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/wireshark/pcieperf.lua");
    let mut total = 0;
    let mut read_config = SimConfig::for_link("gen1x1").unwrap();
    read_config.tags = 8;
    let mut wide = SimConfig::for_link("gen3x8").unwrap();
    (wide.header, wide.ecrc, wide.tags, wide.mrrs_bytes, wide.mps_bytes) = (pcieperf::model::HeaderFormat::Dw4, true, 512, 128, 256);
    let cases = [
        (read_config, Workload::DmaRead { addr: 0x2000_0004, bytes: 8 << 20 }, 9000),
        (SimConfig::for_link("gen2x2").unwrap(), Workload::DmaWrite { addr: 0x3000_0002, bytes: 8 << 20 }, 1500),
        (wide, Workload::DmaRead { addr: 0x1_2345_6788, bytes: 8 << 20 }, 1500),
        (scenarios::three_reads().0, scenarios::three_reads().1, 100),
    ];
    for (config, workload, packets) in cases {
        let record = trace::simulate_first(&config, workload, packets).unwrap();
        let record = &record[..(packets as usize).min(record.len())];
        let path = dir.path().join("trace.pcapng");
        std::fs::write(&path, pcapng::render(&Trace { config: &config, record, rows: 0, left_out: &[] })).unwrap();
        let fields = [
            "pcieperf.dir", "pcieperf.kind", "pcieperf.start_ps", "pcieperf.name", "pcieperf.seq", "pcieperf.tlp.tag",
            "pcieperf.tlp.addr", "pcieperf.tlp.bytes", "pcieperf.cpl.lower_addr", "pcieperf.dllp.seq", "pcieperf.dllp.hdr_fc",
            "pcieperf.dllp.data_fc",
        ];
        let mut command = Process::new("tshark");
        command.args(["-X", &format!("lua_script:{dissector}"), "-r"]).arg(&path).args(["-T", "fields", "-E", "separator=;", "-E", "occurrence=f"]);
        for field in fields {
            command.args(["-e", field]);
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "tshark failed: {stderr}");
        assert!(!stderr.contains("Lua:"), "the dissector loaded: {stderr}");
        let stdout = String::from_utf8(output.stdout).unwrap();
        let rows: Vec<&str> = stdout.lines().collect();
        assert_eq!(rows.len(), record.len());
        for (crossing, row) in record.iter().zip(rows) {
            let got: Vec<&str> = row.split(';').collect();
            assert_eq!(got, expected_fields(crossing), "{crossing}");
        }
        total += record.len();
        println!("{}: tshark decoded {} packets as recorded", config.link, record.len());
    }
    assert!(total >= 10_000, "{total}");
}

/// What the dissector must print for a packet, field by field (empty where it has none).
fn expected_fields(crossing: &Crossing) -> Vec<String> {
    let mut fields = vec![String::new(); 12];
    fields[0] = ((crossing.direction == Direction::Upstream) as u8).to_string();
    fields[2] = ((crossing.start_ns * 1e3).round() as u64).to_string();
    fields[3] = trace::kind_name(&crossing.packet).to_string();
    match crossing.packet {
        Packet::Tlp(tlp) => {
            fields[1] = "1".into();
            fields[4] = tlp.seq.to_string();
            fields[5] = tlp.tag.to_string();
            fields[7] = tlp.len_bytes.to_string();
            if tlp.kind == TlpKind::CompletionData {
                fields[8] = format!("0x{:02x}", tlp.addr & 0x7F);
            } else {
                fields[6] = format!("0x{:016x}", tlp.addr);
            }
        }
        Packet::Dllp(Dllp::Ack { seq } | Dllp::Nak { seq }) => {
            fields[1] = "2".into();
            fields[9] = seq.to_string();
        }
        Packet::Dllp(Dllp::UpdateFc { header, data, .. }) => {
            fields[1] = "2".into();
            let (header, data) = trace::wire_credits(header, data);
            fields[10] = header.to_string();
            fields[11] = data.to_string();
        }
        Packet::Skp => fields[1] = "3".into(),
        Packet::Flit(_) => panic!("traces refuse Gen6: no flit in a trace"),
    }
    fields
}

#[test]
fn the_command_writes_each_format() {
    let dir = tempfile::tempdir().unwrap();
    let out = pcieperf().args(["trace", "--scenario", "doc000-reads", "--count", "20"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("MRd") && text.contains("CplD") && text.contains("K COM"), "{text}");
    let vcd_path = dir.path().join("t.vcd");
    pcieperf().args(["trace", "--scenario", "doc000-test4", "--format", "vcd", "--out"]).arg(&vcd_path).assert().success();
    assert!(std::fs::read_to_string(&vcd_path).unwrap().contains("$enddefinitions $end"));
    let pcap_path = dir.path().join("t.pcapng");
    pcieperf().args(["trace", "--scenario", "read", "--target", "sim:gen5x16", "--format", "pcapng", "--count", "50", "--out"]).arg(&pcap_path).assert().success();
    let (linktype, _, packets) = read_pcapng(&std::fs::read(&pcap_path).unwrap());
    assert_eq!((linktype, packets.len()), (147, 50));
    // --symbols alone: that many rows.
    let out = pcieperf().args(["trace", "--link", "gen2x4", "--symbols", "300"]).output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 302);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Process::new("mkfifo").arg(&fifo).status().unwrap().success());
    let fifo = fifo.to_str().unwrap().to_string();
    let cases: [(&[&str], &str); 9] = [
        (&["--count", "1000000000000"], "allowed 1 to 2000000"),
        (&["--count", "0"], "allowed 1 to"),
        (&["--symbols", "1000000000000"], "symbol times"),
        (&["--link", "gen9x1"], "allowed 1, 2, 3"),
        (&["--link", "gen6x4"], "Gen1–Gen5"),
        (&["--scenario", "doc000-example1", "--link", "gen2x1"], "set their own link"),
        (&["--addr", "0xfffffff0", "--bytes", "64"], "--header 4dw"),
        (&["--out", "/dev/null"], "a device node"),
        (&["--out", &fifo], "FIFO"),
    ];
    for (args, expected) in cases {
        let out = pcieperf().arg("trace").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"));
    }
}

#[test]
fn symbols_bound_every_format_and_exclude_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pcapng");
    pcieperf().args(["trace", "--link", "gen1x1", "--symbols", "100", "--format", "pcapng", "--out"]).arg(&path).assert().success();
    let (_, _, packets) = read_pcapng(&std::fs::read(&path).unwrap());
    // Gen1 x1: 4 ns a symbol time, so every packet starts before 400 ns.
    assert!(!packets.is_empty() && packets.iter().all(|p| p.timestamp_ns < 400), "{}", packets.len());
    let out = pcieperf().args(["trace", "--count", "5", "--symbols", "5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
