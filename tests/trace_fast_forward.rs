//! Traces of a fast-forwarded transfer (`pcieperf trace --fast-forward`, docs/trace.md): the
//! record carries one entry per skip of the steady-state fast-forward, and the text, VCD and
//! pcapng traces show it where it was left out, with what each direction sent in it. The counts
//! are checked against what `link::fast_forward` reports and against full simulation: what the
//! full run sent, less what the fast-forwarded record holds, is what the gaps say was left out.

use std::collections::HashMap;
use std::process::Command as Process;

use assert_cmd::Command;
use pcieperf::link::{self, Crossing, Direction, LeftOut, Packet, SimConfig, SteadyOptions, TlpKind, Workload};
use pcieperf::report::trace::{self, Format};

/// Small windows, so the gap comes early and the record stays short.
const OPTIONS: SteadyOptions = SteadyOptions { warmup_tlps: 256, window_tlps: 1024, tolerance: 3e-4 };

struct Case {
    config: SimConfig,
    workload: Workload,
}

fn cases() -> Vec<Case> {
    let mut read = SimConfig::for_link("gen3x4").unwrap();
    (read.mps_bytes, read.mrrs_bytes, read.tags) = (256, 512, 32);
    vec![
        Case { config: SimConfig::for_link("gen2x4").unwrap(), workload: Workload::DmaWrite { addr: 0x1000_0000, bytes: 4 << 20 } },
        Case { config: read, workload: Workload::DmaRead { addr: 0x1000_0000, bytes: 4 << 20 } },
    ]
}

/// TLPs and payload bytes of one direction in a record.
fn recorded(record: &[Crossing], direction: Direction) -> (u64, u64) {
    record.iter().filter(|c| c.direction == direction).fold((0, 0), |(tlps, bytes), c| match c.packet {
        Packet::Tlp(t) => (tlps + 1, bytes + if t.kind == TlpKind::MemRead { 0 } else { t.len_bytes }),
        _ => (tlps, bytes),
    })
}

#[test]
fn the_gaps_hold_what_full_simulation_sent_beyond_the_record() {
    for case in cases() {
        let full = link::simulate(&case.config, &case.workload).unwrap();
        let config = SimConfig { record: true, ..case.config.clone() };
        let steady = link::fast_forward(&config, &case.workload, &OPTIONS).unwrap();
        let gaps = &steady.outcome.left_out;
        assert!(!gaps.is_empty(), "{}: the fast-forward left nothing out", case.config.link);
        // What fast_forward reports.
        let duration_ns: f64 = gaps.iter().map(|g| g.duration_ns).sum();
        assert!((duration_ns - steady.skipped_ns).abs() < 1e-6 * steady.skipped_ns, "{duration_ns} against {}", steady.skipped_ns);
        let up = Direction::Upstream.index();
        assert_eq!(gaps.iter().map(|g| g.counts[up].tlps).sum::<u64>(), steady.skipped_tlps);
        for gap in gaps {
            assert!(gap.periods > 0 && (gap.period_ns * gap.periods as f64 - gap.duration_ns).abs() < 1e-6 * gap.duration_ns);
            // Nothing recorded starts inside a gap.
            assert!(!steady.outcome.record.iter().any(|c| c.start_ns >= gap.start_ns && c.start_ns < gap.end_ns() - 1e-6), "a packet inside {gap}");
        }
        // Full simulation's totals, less the simulated ones, are what the gaps left out.
        for direction in Direction::BOTH {
            let (tlps, bytes) = recorded(&steady.outcome.record, direction);
            let stats = full.direction(direction);
            let left_out = gaps.iter().map(|g| g.counts[direction.index()]);
            assert_eq!(stats.tlps - tlps, left_out.clone().map(|c| c.tlps).sum::<u64>(), "{} {direction:?} TLPs", case.config.link);
            assert_eq!(stats.payload_bytes - bytes, left_out.clone().map(|c| c.payload_bytes).sum::<u64>(), "{direction:?} bytes");
            // DLLPs and SKPs: the fast-forwarded run's own totals are the record plus the gaps.
            let own = steady.outcome.direction(direction);
            let count = |what: fn(&Packet) -> bool| steady.outcome.record.iter().filter(|c| c.direction == direction && what(&c.packet)).count() as u64;
            assert_eq!(own.acks, count(|p| matches!(p, Packet::Dllp(link::Dllp::Ack { .. }))) + left_out.clone().map(|c| c.acks).sum::<u64>());
            assert_eq!(own.skps, count(|p| *p == Packet::Skp) + left_out.clone().map(|c| c.skps).sum::<u64>());
        }
        println!("{}: {} gap(s), {:.0} ns, {} TLPs left out", case.config.link, gaps.len(), duration_ns, steady.skipped_tlps);
    }
}

/// The fast-forwarded record and its gaps, as the trace simulates them.
fn fast_forwarded(case: &Case) -> (Vec<Crossing>, Vec<LeftOut>) {
    trace::simulate_fast_forward(&case.config, case.workload, &OPTIONS).unwrap()
}

fn render(case: &Case, format: Format, packets: u64) -> Vec<u8> {
    trace::render(&case.config, case.workload, format, Some(packets), None, Some(&OPTIONS)).unwrap()
}

#[test]
fn the_text_trace_prints_a_marked_row_where_time_was_left_out() {
    for case in cases() {
        let (record, gaps) = fast_forwarded(&case);
        let text = String::from_utf8(render(&case, Format::Text, record.len() as u64)).unwrap();
        let markers: Vec<&str> = text.lines().filter(|l| l.contains("left out (fast-forward)")).collect();
        assert_eq!(markers.len(), gaps.len(), "one marked row per gap");
        for (gap, line) in gaps.iter().zip(&markers) {
            let [down, up] = [Direction::Downstream, Direction::Upstream].map(|d| gap.counts[d.index()]);
            for expected in [
                format!("{} periods of {:.3} ns", gap.periods, gap.period_ns),
                format!("{} TLPs, {} B, {} Acks, {} UpdateFCs, {} SKPs downstream", down.tlps, down.payload_bytes, down.acks, down.update_fcs, down.skps),
                format!("{} TLPs, {} B, {} Acks, {} UpdateFCs, {} SKPs upstream", up.tlps, up.payload_bytes, up.acks, up.update_fcs, up.skps),
            ] {
                assert!(line.contains(&expected), "{expected:?} not in {line:?}");
            }
            assert!(line.starts_with("~~~~~~") && line.contains(&format!("{:.3}", gap.start_ns)), "{line}");
        }
        // The rows around the marker: the one before is at or before the gap's start, the one
        // after is where the simulation went on, one symbol time at most after the gap's end.
        let lines: Vec<&str> = text.lines().collect();
        let row_ns = |line: &str| line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap();
        let phy = pcieperf::link::phy::Phy::new(case.config.link);
        let symbol_ns = phy.ns(phy.width);
        for (gap, line) in gaps.iter().zip(&markers) {
            let at = lines.iter().position(|l| l == line).unwrap();
            // Rows print their time to the ps.
            assert!(row_ns(lines[at - 1]) <= gap.start_ns + 1e-3, "{}", lines[at - 1]);
            let after = row_ns(lines[at + 1]);
            assert!(after <= gap.end_ns() + 1e-3 && after > gap.end_ns() - symbol_ns - 1e-3, "{}\n{}\n{} after a gap ending at {}", lines[at - 1], line, lines[at + 1], gap.end_ns());
        }
        // Every packet of the record still starts in the row of its start.
        let starts = text.lines().filter(|l| l.contains("MWr") || l.contains("CplD")).count();
        let tlps = record.iter().filter(|c| matches!(c.packet, Packet::Tlp(t) if t.kind != TlpKind::MemRead)).count();
        assert_eq!(starts, tlps, "{}: a row per data TLP", case.config.link);
    }
}

/// Value changes of the VCD signals named `scope.name` (`x` read as u64::MAX).
fn parse_vcd(text: &str) -> (HashMap<String, Vec<(u64, u64)>>, Vec<(u64, String)>) {
    let (head, body) = text.split_once("$enddefinitions $end").unwrap();
    let (mut scopes, mut names) = (Vec::new(), HashMap::new());
    for line in head.lines() {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["$scope", "module", name, "$end"] => scopes.push(name.to_string()),
            ["$upscope", "$end"] => drop(scopes.pop()),
            ["$var", "wire", _, id, name, "$end"] => drop(names.insert(id.to_string(), format!("{}.{name}", scopes.last().unwrap()))),
            _ => {}
        }
    }
    let (mut changes, mut comments): (HashMap<String, Vec<(u64, u64)>>, _) = (HashMap::new(), Vec::new());
    let mut time = 0;
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(t) = line.strip_prefix('#') {
            let t: u64 = t.parse().unwrap();
            assert!(t >= time, "times never go back");
            time = t;
        } else if let Some(comment) = line.strip_prefix("$comment ") {
            comments.push((time, comment.trim_end_matches("$end").trim().to_string()));
        } else {
            let (value, id) = match line.strip_prefix('b') {
                Some(rest) => {
                    let (bits, id) = rest.split_once(' ').unwrap();
                    (if bits.contains('x') { u64::MAX } else { u64::from_str_radix(bits, 2).unwrap() }, id)
                }
                None => (if line.starts_with('x') { u64::MAX } else { (line.as_bytes()[0] - b'0') as u64 }, &line[1..]),
            };
            changes.entry(names[id].clone()).or_default().push((time, value));
        }
    }
    (changes, comments)
}

fn value_at(changes: &HashMap<String, Vec<(u64, u64)>>, signal: &str, time: u64) -> u64 {
    let changes = &changes[signal];
    changes[changes.partition_point(|&(t, _)| t <= time) - 1].1
}

fn fs(ns: f64) -> u64 {
    (ns * 1e6).round() as u64
}

#[test]
fn the_vcd_raises_fast_forward_over_each_gap_with_its_counts() {
    for case in cases() {
        let (record, gaps) = fast_forwarded(&case);
        let text = String::from_utf8(render(&case, Format::Vcd, record.len() as u64)).unwrap();
        let (changes, comments) = parse_vcd(&text);
        let rises: Vec<u64> = changes["pcie.fast_forward"].iter().filter(|c| c.1 == 1).map(|c| c.0).collect();
        assert_eq!(rises, gaps.iter().map(|g| fs(g.start_ns)).collect::<Vec<_>>());
        for gap in &gaps {
            let (start, end) = (fs(gap.start_ns), fs(gap.end_ns()));
            assert_eq!(value_at(&changes, "pcie.fast_forward", end - 1), 1);
            assert_eq!(value_at(&changes, "pcie.fast_forward", end), 0);
            for direction in Direction::BOTH {
                let counts = gap.counts[direction.index()];
                let scope = direction.name();
                assert_eq!(value_at(&changes, &format!("{scope}.left_out_tlps"), start), counts.tlps);
                assert_eq!(value_at(&changes, &format!("{scope}.left_out_bytes"), start), counts.payload_bytes);
                assert_eq!(value_at(&changes, &format!("{scope}.left_out_tlps"), end), 0);
                assert_eq!(value_at(&changes, &format!("{scope}.lane0"), start), u64::MAX, "lanes unknown over the gap");
            }
            assert!(comments.iter().any(|(t, c)| *t == start && c.contains(&format!("{} periods", gap.periods))), "a comment at the gap");
        }
        // After the gap, the lanes are known again and every packet's signals match the record.
        let last = record.last().unwrap();
        let scope = last.direction.name();
        assert_ne!(value_at(&changes, &format!("{scope}.lane0"), fs(last.start_ns)), u64::MAX);
        for crossing in record.iter().filter(|c| gaps.iter().any(|g| c.start_ns >= g.end_ns())).take(200) {
            let kind = value_at(&changes, &format!("{}.kind", crossing.direction.name()), fs(crossing.start_ns));
            assert_eq!(&kind.to_be_bytes()[4..], pcieperf::report::trace::vcd::kind_code(&crossing.packet), "{crossing}");
        }
    }
}

/// The gap records of a pcapng: (timestamp ns, body after the 20-byte header, comment).
fn pcapng_gaps(bytes: &[u8]) -> (usize, Vec<(u64, Vec<u8>, String)>) {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let (mut at, mut packets, mut gaps) = (0, 0, Vec::new());
    while at < bytes.len() {
        let (kind, length) = (u32_at(at), u32_at(at + 4) as usize);
        assert_eq!(u32_at(at + length - 4) as usize, length);
        if kind == 6 {
            packets += 1;
            let timestamp_ns = (u32_at(at + 12) as u64) << 32 | u32_at(at + 16) as u64;
            let captured = u32_at(at + 20) as usize;
            let data = &bytes[at + 28..at + 28 + captured];
            if data[6] == pcieperf::report::trace::pcapng::KIND_GAP {
                let option = at + 28 + captured.next_multiple_of(4);
                assert_eq!(u16::from_le_bytes([bytes[option], bytes[option + 1]]), 1, "opt_comment");
                let len = u16::from_le_bytes([bytes[option + 2], bytes[option + 3]]) as usize;
                let comment = String::from_utf8(bytes[option + 4..option + 4 + len].to_vec()).unwrap();
                gaps.push((timestamp_ns, data[20..].to_vec(), comment));
            }
        }
        at += length;
    }
    (packets, gaps)
}

#[test]
fn the_pcapng_carries_a_record_per_gap_that_tshark_shows() {
    let dir = tempfile::tempdir().unwrap();
    let tshark = Process::new("tshark").arg("--version").output().is_ok();
    if !tshark {
        println!("skipped: tshark not installed (the tshark part; the pcapng is still read back)");
    }
    for case in cases() {
        let (record, gaps) = fast_forwarded(&case);
        let bytes = render(&case, Format::Pcapng, record.len() as u64);
        let (packets, found) = pcapng_gaps(&bytes);
        assert_eq!(packets, record.len() + gaps.len());
        assert_eq!(found.len(), gaps.len());
        let be = |body: &[u8], at: usize| u64::from_be_bytes(body[at..at + 8].try_into().unwrap());
        for (gap, (timestamp_ns, body, comment)) in gaps.iter().zip(&found) {
            assert_eq!(*timestamp_ns, gap.start_ns.floor() as u64);
            assert_eq!(body.len(), pcieperf::report::trace::pcapng::GAP_BYTES);
            assert_eq!(be(body, 0), (gap.duration_ns * 1e3).round() as u64);
            assert_eq!(be(body, 8), gap.periods);
            for (d, direction) in Direction::BOTH.iter().enumerate() {
                let counts = gap.counts[direction.index()];
                let fields: Vec<u64> = (0..5).map(|i| be(body, 24 + d * 40 + i * 8)).collect();
                assert_eq!(fields, [counts.tlps, counts.payload_bytes, counts.acks, counts.update_fcs, counts.skps]);
            }
            assert!(comment.contains("left out (fast-forward)") && comment.contains(&format!("{} periods", gap.periods)), "{comment}");
        }
        if !tshark {
            continue;
        }
        let path = dir.path().join("ff.pcapng");
        std::fs::write(&path, &bytes).unwrap();
        let dissector = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/wireshark/pcieperf.lua");
        let fields = ["pcieperf.gap.periods", "pcieperf.gap.duration_ps", "pcieperf.gap.down.tlps", "pcieperf.gap.down.bytes", "pcieperf.gap.up.tlps", "pcieperf.gap.up.bytes", "pcieperf.gap.up.acks", "_ws.col.Info"];
        let mut command = Process::new("tshark");
        command.args(["-X", &format!("lua_script:{dissector}"), "-r"]).arg(&path).args(["-Y", "pcieperf.kind == 5", "-T", "fields", "-E", "separator=|"]);
        for field in fields {
            command.args(["-e", field]);
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success() && !stderr.contains("Lua:"), "tshark: {stderr}");
        let stdout = String::from_utf8(output.stdout).unwrap();
        let rows: Vec<Vec<&str>> = stdout.lines().map(|l| l.split('|').collect()).collect();
        assert_eq!(rows.len(), gaps.len(), "{stdout}");
        for (gap, row) in gaps.iter().zip(&rows) {
            let [down, up] = [Direction::Downstream, Direction::Upstream].map(|d| gap.counts[d.index()]);
            let expected = [gap.periods, (gap.duration_ns * 1e3).round() as u64, down.tlps, down.payload_bytes, up.tlps, up.payload_bytes, up.acks].map(|v| v.to_string());
            assert_eq!(&row[..7], &expected, "{stdout}");
            assert!(row[7].contains("fast-forward") && row[7].contains(&format!("{} TLPs, {} B upstream", up.tlps, up.payload_bytes)), "{}", row[7]);
        }
        println!("{}: tshark shows {} gap(s)", case.config.link, rows.len());
    }
}

#[test]
fn the_command_marks_the_gap_and_refuses_it_for_document_000() {
    let out = Command::cargo_bin("pcieperf")
        .unwrap()
        .args(["trace", "--scenario", "write", "--link", "gen3x8", "--bytes", "16MiB", "--fast-forward", "--count", "60000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().filter(|l| l.contains("left out (fast-forward)")).count(), 1, "one gap within 60000 packets");
    let out = Command::cargo_bin("pcieperf").unwrap().args(["trace", "--scenario", "doc000-example1", "--fast-forward"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--fast-forward"), "{stderr}");
}
