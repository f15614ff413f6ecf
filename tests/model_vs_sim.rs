//! The analytic model against the link simulator over the whole grid of `pcieperf crosscheck`
//! (Gen1–6, x1–x16, every MaxPayload, 3DW/4DW, 64 B to 16 MiB, writes, reads with MRRS, tags and
//! latency, and both at once): with the same Ack policy and credits large enough, every write and
//! read agrees within 0.5 % at Gen1–5 and every write at Gen6; every other gap is explained by
//! its cause (flit phase, requests behind writes, requests before the measuring window), shown
//! by a bound or by simulating the point again; where finite credits and a long wire make the
//! simulation slower, by simulating it again without them.

use assert_cmd::Command;
use predicates::prelude::*;

use pcieperf::bench::crosscheck::{self, Grid, Kind, Point};
use pcieperf::model::Generation;

fn is_gen6(point: &Point) -> bool {
    point.link.to_ascii_lowercase().starts_with("gen6")
}

fn explained_by(points: &[Point], cause: &str) -> usize {
    points.iter().filter(|p| !p.agrees() && p.explanation.as_deref().is_some_and(|e| e.contains(cause))).count()
}

#[test]
fn the_whole_grid_agrees_within_half_a_percent_or_names_the_cause() {
    let grid = Grid::default();
    let started = std::time::Instant::now();
    let document = crosscheck::run(&grid).unwrap();
    let text = pcieperf::report::crosscheck::text(&document, true);
    println!("{text}({:.1} s)", started.elapsed().as_secs_f64());
    let points = &document.points;
    assert!(points.len() >= 2000, "{} points", points.len());
    for kind in [Kind::Write, Kind::Read, Kind::Both] {
        assert!(points.iter().filter(|p| p.kind == kind).count() >= 500, "{kind:?}");
    }
    assert!(points.iter().filter(|p| is_gen6(p)).count() >= 300, "Gen6 (flit mode) is in the grid");
    // Every size, MRRS, tag count and latency of the grid is met somewhere.
    for size in [64, 1000, 4096, 65_536, 1 << 20, 16 << 20] {
        assert!(points.iter().any(|p| p.size_bytes == size), "size {size} never simulated");
    }
    let reads: Vec<_> = points.iter().filter(|p| p.kind == Kind::Read).collect();
    for tags in [1, 8, 32, 256] {
        assert!(reads.iter().any(|p| p.tags == tags && p.size_bytes > 4096), "{tags} tags never bound a read");
    }
    for mrrs in [128, 512, 4096] {
        assert!(reads.iter().any(|p| p.mrrs_bytes == mrrs));
    }
    // Only both-at-once combinations without a steady window are left out (`STEADY_WINDOW_TLPS`).
    assert!(document.skipped.iter().all(|s| s.starts_with("both at once")), "{:?}", document.skipped);
    // Writes and reads at Gen1–5, and Gen6 writes (whose last flit the model charges whole):
    // within 0.5 %, no explanation needed.
    let must_agree = |p: &&Point| p.kind != Kind::Both && (!is_gen6(p) || p.kind == Kind::Write);
    let outside: Vec<String> = points.iter().filter(must_agree).filter(|p| !p.agrees()).map(|p| format!("{p:?}")).collect();
    assert!(outside.is_empty(), "{} points outside 0.5 %:\n{}", outside.len(), outside.join("\n"));
    // The rest: within 0.5 % or the cause named; every cause met.
    assert_eq!(document.unexplained(), 0);
    assert_eq!(text.matches("UNEXPLAINED").count(), 0);
    for cause in ["flit phase", "wait behind write TLPs", "went out before the first completion"] {
        assert!(explained_by(points, cause) > 0, "no gap was put on '{cause}'");
    }
    let within = points.iter().filter(|p| p.agrees()).count();
    println!("{within} of {} within 0.5 %; the rest explained", points.len());
}

/// Finite credits and a 500 ns wire make writes credit-limited. The model is told the credits
/// and the wire (`model::credit`): it agrees with the simulation, and both are far below the
/// link-limited time the model gives without them.
#[test]
fn a_credit_limited_loop_told_to_the_model_agrees() {
    let grid = Grid {
        generations: vec![Generation::Gen3],
        widths: vec![8],
        mps_bytes: vec![256],
        kinds: vec![Kind::Write, Kind::Read],
        sizes_bytes: vec![65_536],
        sizes_per_point: 1,
        credits: Some(32),
        wire_delay_ns: 500.0,
        ..Grid::default()
    };
    let document = crosscheck::run(&grid).unwrap();
    println!("{}", pcieperf::report::crosscheck::text(&document, false));
    let writes: Vec<_> = document.points.iter().filter(|p| p.kind == Kind::Write).collect();
    assert!(!writes.is_empty());
    let params = pcieperf::model::LinkParams { mps_bytes: 256, ..pcieperf::model::LinkParams::typical("gen3x8".parse().unwrap()) };
    let link_limited_ns = pcieperf::model::write::write_flow(&params, 65_536, pcieperf::model::Span::Steady).duration_ns;
    for p in &writes {
        assert!(p.model_ns > 10.0 * link_limited_ns, "32 credits of 16 B cannot cover a 1 µs loop at Gen3 x8: {p:?}");
        assert!(p.agrees(), "{p:?}");
    }
    assert_eq!(document.unexplained(), 0);
}

/// A wider credit grid, with the UpdateFC interval too: every point within 0.5 % or its gap
/// put on the credit loop by simulating it again without credits and wire.
#[test]
fn finite_credits_and_a_long_wire_agree_or_are_explained() {
    let grid = Grid {
        generations: vec![Generation::Gen1, Generation::Gen3, Generation::Gen5],
        widths: vec![1, 16],
        mps_bytes: vec![128, 256],
        credits: Some(32),
        wire_delay_ns: 300.0,
        ack_every_tlps: 2,
        kinds: vec![Kind::Write, Kind::Read],
        ..Grid::default()
    };
    let document = crosscheck::run(&grid).unwrap();
    println!("{}", pcieperf::report::crosscheck::summary(&document));
    let writes = document.points.iter().filter(|p| p.kind == Kind::Write);
    assert!(writes.clone().count() >= 20);
    assert!(writes.clone().all(|p| p.agrees()), "{}", pcieperf::report::crosscheck::text(&document, true));
    assert_eq!(document.unexplained(), 0, "{}", pcieperf::report::crosscheck::text(&document, true));
}

/// The same Ack policy on both sides (one Ack and UpdateFC per 4 TLPs) keeps them in agreement.
#[test]
fn a_coalescing_ack_policy_told_to_the_model_agrees() {
    let grid = Grid { generations: vec![Generation::Gen2, Generation::Gen4], widths: vec![1, 8], ack_every_tlps: 4, kinds: vec![Kind::Write, Kind::Read], ..Grid::default() };
    let document = crosscheck::run(&grid).unwrap();
    println!("{}", pcieperf::report::crosscheck::summary(&document));
    assert!(document.points.len() >= 100);
    assert_eq!(document.unexplained(), 0, "{}", pcieperf::report::crosscheck::text(&document, true));
}

#[test]
fn bad_grids_are_refused_before_anything_runs() {
    for grid in [
        Grid { widths: vec![], ..Grid::default() },
        Grid { widths: vec![3], ..Grid::default() },
        Grid { mps_bytes: vec![100], ..Grid::default() },
        Grid { tags: vec![0], ..Grid::default() },
        Grid { sizes_bytes: vec![0], ..Grid::default() },
        Grid { ack_every_tlps: 0, ..Grid::default() },
        Grid { credits: Some(0), ..Grid::default() },
        Grid { latencies_ns: vec![f64::NAN], ..Grid::default() },
    ] {
        let error = crosscheck::run(&grid).unwrap_err();
        assert!(!error.to_string().is_empty());
    }
}

#[test]
fn the_command_prints_text_json_and_csv_and_refuses_bad_input() {
    let run = |args: &[&str]| Command::cargo_bin("pcieperf").unwrap().arg("crosscheck").args(args).assert();
    let sub = ["--gen", "1,3", "--width", "4", "--mps", "256", "--sizes", "64,64KiB"];
    run(&sub).success().stdout(contains("diff_%").and(contains("points:")).and(contains("worst read")));
    let json = run(&[&sub[..], &["--json"]].concat()).success().get_output().stdout.clone();
    let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(value["schema"], "pcieperf.crosscheck/1");
    assert!(value["points"].as_array().unwrap().len() >= 8);
    run(&[&sub[..], &["--csv"]].concat()).success().stdout(contains("kind,link,mps_bytes").and(contains("write,Gen1")));
    for (args, message) in [
        (&["--gen", "7"][..], "invalid generation 7"),
        (&["--width", "3"][..], "width"),
        (&["--sizes", "0"][..], "size"),
        (&["--credits", "0"][..], "credits"),
    ] {
        run(args).code(2).stderr(contains(message));
    }
}

fn contains(text: &str) -> predicates::str::ContainsPredicate {
    predicate::str::contains(text)
}

/// Sub-grids of both at once that had unexplained points while the read rate was a
/// least-squares slope over a window of a few latency-bound rounds (the writes end 4 rounds in):
/// cutting the staircase of bursts put the slope +3.7 %, −0.7 %, −1.1 %, +1.0 % and −0.8 % off
/// the model. Measured over whole rounds of the tags each agrees within 0.05 % (Gen6: exactly,
/// to 0.001 %; Gen4 x4: +0.025 %, its SKPs move the rounds a little).
#[test]
fn latency_bound_reads_beside_writes_are_measured_over_whole_rounds() {
    use pcieperf::model::HeaderFormat::{Dw3, Dw4};
    let cases = [
        // (generation, width, MPS, header, MRRS, tags, size): all at 2 µs completion latency.
        (Generation::Gen6, 16, 128, Dw4, 128, 32, 1 << 20),
        (Generation::Gen6, 16, 512, Dw3, 4096, 32, 1 << 20),
        (Generation::Gen6, 16, 512, Dw4, 4096, 32, 1 << 20),
        (Generation::Gen4, 4, 128, Dw4, 128, 32, 65_536),
        (Generation::Gen6, 16, 512, Dw4, 4096, 8, 1 << 20),
    ];
    for (generation, width, mps, header, mrrs, tags, size) in cases {
        let document = crosscheck::run(&both_at_once((generation, width), mps, header, mrrs, tags, size)).unwrap();
        let text = pcieperf::report::crosscheck::text(&document, true);
        let read = document.points.iter().find(|p| p.stream == Some(Kind::Read)).unwrap_or_else(|| panic!("no read stream compared:\n{text}"));
        assert!(read.difference_percent.abs() < 0.05, "{read:?}");
        assert_eq!(document.unexplained(), 0, "{text}");
    }
}

/// Many tags whose order drifts from round to round (requests wait behind write flits by
/// different amounts) give no whole rounds; a least-squares slope over the few bursts of
/// completions in the window then read the reads 0.9–1.4 % faster than the model — faster than
/// one completion latency per tag cycle allows. They are measured by their tag cycles (Little's
/// law: tags × MRRS per mean cycle). The four points of the `--latency-ns 2000` and
/// `--latency-ns 5000` sub-grids that were unexplained.
#[test]
fn drifting_tags_beside_writes_are_measured_by_their_cycles() {
    use pcieperf::model::HeaderFormat::{Dw3, Dw4};
    let cases = [
        // (generation, width, MPS, header, MRRS, tags, latency ns), 1 MiB each way.
        (Generation::Gen6, 16, 512, Dw4, 512, 256, 2000.0),
        (Generation::Gen6, 8, 1024, Dw3, 128, 256, 5000.0),
        (Generation::Gen6, 8, 1024, Dw4, 128, 256, 5000.0),
        (Generation::Gen6, 8, 2048, Dw3, 128, 256, 5000.0),
    ];
    for (generation, width, mps, header, mrrs, tags, latency_ns) in cases {
        let grid = Grid { latencies_ns: vec![latency_ns], ..both_at_once((generation, width), mps, header, mrrs, tags, 1 << 20) };
        let document = crosscheck::run(&grid).unwrap();
        let text = pcieperf::report::crosscheck::text(&document, true);
        let read = document.points.iter().find(|p| p.stream == Some(Kind::Read)).unwrap_or_else(|| panic!("no read stream compared:\n{text}"));
        // A tag's cycle holds its completion latency: the read can be no faster than that.
        let cycles = (1u64 << 20).div_ceil(mrrs * tags as u64) as f64;
        assert!(read.sim_ns >= cycles * latency_ns, "{read:?}");
        assert!(read.agrees(), "{read:?}");
        assert_eq!(document.unexplained(), 0, "{text}");
    }
}

/// A window that closes before the first tag's second round has begun holds one burst of
/// completions, not a read rate: Gen6 x16, 64 tags of 128 B, 5 µs latency, where the writes end
/// after 9 µs. Such a point was compared at −98 % (the burst's rate against the rounds'); it is
/// now left out as having no steady window.
#[test]
fn a_window_shorter_than_one_round_of_tags_is_not_compared() {
    let grid = Grid { latencies_ns: vec![5000.0], ..both_at_once((Generation::Gen6, 16), 128, pcieperf::model::HeaderFormat::Dw3, 128, 64, 1 << 20) };
    let document = crosscheck::run(&grid).unwrap();
    assert!(document.points.is_empty(), "{:?}", document.points);
    assert!(document.skipped.iter().any(|s| s.starts_with("both at once: 1 combinations")), "{:?}", document.skipped);
}

/// Both at once on one `(generation, width)` link at 2 µs completion latency.
fn both_at_once((generation, width): (Generation, u32), mps: u64, header: pcieperf::model::HeaderFormat, mrrs: u64, tags: u32, size: u64) -> Grid {
    Grid {
        generations: vec![generation],
        widths: vec![width],
        mps_bytes: vec![mps],
        headers: vec![header],
        kinds: vec![Kind::Both],
        sizes_bytes: vec![size],
        mrrs_bytes: vec![mrrs],
        tags: vec![tags],
        latencies_ns: vec![2000.0],
        ..Grid::default()
    }
}

/// Gen3 x16, MPS 512, 8 tags, 2 µs, 64 KiB: the writes end 1.2 rounds into the reads, and the
/// reads' requests and Acks come in a burst at each round's start. A slope over that window put
/// the reads −2.0 % (MRRS 4096: completions that stream but for a 3 % gap) and the writes
/// −0.53 % (MRRS 512: the slope does not see the burst at the window's start) off the model;
/// over whole rounds both agree (−0.04 %, −0.26 %; that point's reads stay −0.79 %, explained
/// as requests behind writes).
#[test]
fn both_streams_are_measured_over_whole_rounds_of_the_reads() {
    use pcieperf::model::HeaderFormat::{Dw3, Dw4};
    for (header, mrrs, stream) in [(Dw4, 4096, Kind::Read), (Dw3, 512, Kind::Write)] {
        let document = crosscheck::run(&both_at_once((Generation::Gen3, 16), 512, header, mrrs, 8, 65_536)).unwrap();
        let text = pcieperf::report::crosscheck::text(&document, true);
        let point = document.points.iter().find(|p| p.stream == Some(stream)).unwrap_or_else(|| panic!("not compared:\n{text}"));
        assert!(point.agrees(), "{text}");
        assert_eq!(document.unexplained(), 0, "{text}");
    }
}

/// Gen3 x4, MPS 4096, MRRS 512, 8 tags, 2 µs, 1 MiB: the 8 completions of a round take 945 ns,
/// a write TLP 1046 ns, so the tags that free first wait for the rest and all go out as one group
/// behind a write TLP; every round is the group and 3 whole write TLPs, +20.7 % against the
/// model's half a write TLP of wait (drifting rounds). The locked round
/// (`RequestWait::Group`) gives the simulated rate within 0.5 %, and the point is explained by it.
#[test]
fn reads_locked_into_one_group_per_round_are_explained_by_the_locked_round() {
    use pcieperf::model::bidir::{bidirectional_waiting, RequestWait};
    let grid = both_at_once((Generation::Gen3, 4), 4096, pcieperf::model::HeaderFormat::Dw4, 512, 8, 1 << 20);
    let document = crosscheck::run(&grid).unwrap();
    let text = pcieperf::report::crosscheck::text(&document, true);
    let read = document.points.iter().find(|p| p.stream == Some(Kind::Read)).unwrap_or_else(|| panic!("no read stream compared:\n{text}"));
    assert!(read.difference_percent > 15.0, "{text}");
    let explanation = read.explanation.as_deref().unwrap_or_else(|| panic!("unexplained:\n{text}"));
    assert!(explanation.starts_with("read requests go out in one group per round"), "{explanation}");
    let mut config = pcieperf::link::SimConfig::new("gen3x4".parse().unwrap());
    (config.mps_bytes, config.mrrs_bytes, config.tags, config.host_completion_latency_ns) = (4096, 512, 8, 2000.0);
    config.header = pcieperf::model::HeaderFormat::Dw4;
    let params = pcieperf::model::LinkParams { in_flight: 8, ..crosscheck::model_params(&config) };
    let locked_ns = (1u64 << 20) as f64 * 1e3 / bidirectional_waiting(&params, 1 << 20, RequestWait::Group).read.mbps;
    assert!((read.sim_ns / locked_ns - 1.0).abs() < 0.005, "locked round {locked_ns:.1} ns against {read:?}");
    assert_eq!(document.unexplained(), 0, "{text}");
}
