//! Injected disturbances on the simulated link (`link::Injection`): the host's receiver
//! withholding UpdateFCs and bit errors corrupting TLPs. What they cost — the device's
//! transmitter starving for credits, the Naks and replays — comes out of the simulation; these
//! tests check it against what the injection implies, and the fast-forward between injected
//! events against full simulation.

use pcieperf::engine::sim::{link_time, SimConfig as Endpoint};
use pcieperf::link::{self, ClassCredits, Hold, Injection, Outcome, SimConfig, SteadyOptions, Workload};

const MIB: u64 = 1 << 20;
const UP: usize = 1;
const DOWN: usize = 0;

/// The link as the `sim` engine configures it for a preset: Ack/UpdateFC timers, the host's
/// finite credits.
fn endpoint_link(preset: &str) -> SimConfig {
    link_time::link_config(&Endpoint::preset(preset).unwrap().params).unwrap()
}

fn with(mut config: SimConfig, injection: Injection) -> SimConfig {
    config.inject = injection;
    config
}

fn write(bytes: u64) -> Workload {
    Workload::DmaWrite { addr: 0, bytes }
}

fn read(bytes: u64) -> Workload {
    Workload::DmaRead { addr: 0, bytes }
}

fn both(bytes: u64) -> Workload {
    Workload::DmaBoth { write_addr: 0, write_bytes: bytes, read_addr: 1 << 40, read_bytes: bytes }
}

/// Lane time of one largest TLP, and what the host's posted credits let the device send: the
/// longest stretch a hold can be absorbed by the credits in hand.
fn tlp_and_credit_ns(config: &SimConfig) -> (f64, f64) {
    let phy = link::phy::Phy::new(config.link);
    let tlp_ns = phy.ns(config.largest_replay_entry_bytes());
    let ClassCredits::Finite { header, .. } = config.host_rx.credits.posted else { panic!("the engine's host credits are finite") };
    (tlp_ns, header as f64 * tlp_ns)
}

/// Lane time of the data every tag's read request brings: what the reads in flight when a hold
/// begins still deliver, so how much of a hold a read's pause may hide, by the hold's phase.
fn tags_in_flight_ns(config: &SimConfig) -> f64 {
    let phy = link::phy::Phy::new(config.link);
    config.tags as f64 * phy.ns(config.largest_replay_entry_bytes()) * (config.mrrs_bytes / config.mps_bytes).max(1) as f64
}

fn end_ns(outcome: &Outcome) -> f64 {
    outcome.arrived_ns.iter().cloned().fold(0.0, f64::max)
}

#[test]
fn a_credit_hold_starves_the_device_for_about_its_length() {
    for preset in ["doc001", "gen3x8", "gen5x16"] {
        let config = endpoint_link(preset);
        let (tlp_ns, credit_ns) = tlp_and_credit_ns(&config);
        let quiet = link::simulate(&config, &write(2 * MIB)).unwrap();
        assert_eq!(quiet.starvation[UP], Default::default(), "{preset}: nothing starves without a hold");
        for hold_ns in [5_000.0, 60_000.0] {
            let start_ns = end_ns(&quiet) / 3.0;
            let injection = Injection { holds: vec![Hold { start_ns, duration_ns: hold_ns }], threshold_ns: 50_000.0, ..Default::default() };
            let held = link::simulate(&with(config.clone(), injection), &write(2 * MIB)).unwrap();
            let starved = held.starvation[UP];
            println!("{preset}: hold {hold_ns} ns from {start_ns:.0} ns: starved {starved:?}; credits cover {credit_ns:.0} ns; transfer {:.1} ns later", end_ns(&held) - end_ns(&quiet));
            assert_eq!(starved.count, 1, "{preset}: one hold, one starvation");
            // The device starves from when the credits in hand run out until the UpdateFC sent at
            // the hold's end arrives: the hold less what the credits absorbed, plus a packet or two.
            assert!(starved.longest_ns <= hold_ns + 2.0 * tlp_ns, "{preset}: {starved:?}");
            assert!(starved.longest_ns >= hold_ns - credit_ns, "{preset}: {starved:?}");
            assert_eq!(starved.over_threshold, (hold_ns > 50_000.0) as u64, "{preset}");
            // The transfer ends later by the starvation (the lanes idle that long), within a few
            // TLPs (the burst after the release meets the UpdateFC loop and the SKPs anew).
            let later_ns = end_ns(&held) - end_ns(&quiet);
            assert!((later_ns - starved.total_ns).abs() <= 4.0 * tlp_ns, "{preset}: {later_ns} ns later, starved {} ns", starved.total_ns);
        }
    }
}

/// A hold is the host's receiver consuming nothing: read requests that reach it during the hold
/// are served at its end, so the device's reads see no completion for about the hold's length
/// (less what the requests already being served deliver) and the transfer ends that much later.
/// The device does not starve for credits: it waits with its tags out.
#[test]
fn a_hold_pauses_the_reads_it_catches_for_about_its_length() {
    for preset in ["doc001", "gen3x8", "gen5x16"] {
        let config = endpoint_link(preset);
        let in_flight_ns = tags_in_flight_ns(&config);
        let quiet = link::simulate(&config, &read(2 * MIB)).unwrap();
        let normal_gap_ns = quiet.payload_gaps[DOWN].longest_ns;
        for hold_ns in [5_000.0, 60_000.0] {
            let start_ns = end_ns(&quiet) / 3.0;
            let injection = Injection { holds: vec![Hold { start_ns, duration_ns: hold_ns }], threshold_ns: 50_000.0, ..Default::default() };
            let held = link::simulate(&with(config.clone(), injection), &read(2 * MIB)).unwrap();
            let gap = held.payload_gaps[DOWN];
            let later_ns = end_ns(&held) - end_ns(&quiet);
            println!("{preset}: hold {hold_ns} ns: longest gap {:.1} ns (undisturbed {normal_gap_ns:.1} ns), {:.1} ns of tags in flight, transfer {later_ns:.1} ns later", gap.longest_ns, in_flight_ns);
            assert!(normal_gap_ns < 0.2 * hold_ns, "{preset}: undisturbed reads pause {normal_gap_ns} ns");
            assert!(gap.longest_ns >= hold_ns - in_flight_ns && gap.longest_ns <= hold_ns + config.host_completion_latency_ns, "{preset}: {gap:?}");
            assert_eq!(gap.over_threshold, (hold_ns > 50_000.0) as u64, "{preset}");
            assert!(later_ns >= hold_ns - in_flight_ns - normal_gap_ns && later_ns <= hold_ns + normal_gap_ns, "{preset}: {later_ns} ns later");
            assert_eq!(held.starvation, [Default::default(); 2], "{preset}: the device waits on its tags, it does not starve");
        }
    }
}

#[test]
fn without_injection_nothing_starves_and_the_times_are_those_of_large_credits() {
    for preset in ["doc000", "doc001", "doc003", "gen3x8", "gen4x16", "gen5x16"] {
        let config = endpoint_link(preset);
        let mut large = config.clone();
        large.host_rx.credits = link::Credits::large();
        for workload in [write(MIB), read(MIB), both(MIB)] {
            let finite = link::simulate_steady(&config, &workload).unwrap();
            let unlimited = link::simulate_steady(&large, &workload).unwrap();
            assert_eq!(finite.starvation, [Default::default(); 2], "{preset} {workload:?}");
            assert_eq!(finite.arrived_ns, unlimited.arrived_ns, "{preset} {workload:?}: the host's credits never limit an undisturbed stream");
        }
    }
}

#[test]
fn injected_errors_are_the_retries_and_their_replays_are_the_time_lost() {
    let config = endpoint_link("gen3x8");
    let workload = write(4 * MIB);
    let clean = link::simulate(&config, &workload).unwrap();
    let none = link::simulate(&with(config.clone(), Injection { seed: 5, ..Default::default() }), &workload).unwrap();
    assert_eq!((none.injected_errors, none.replay[UP].replays), ([0, 0], 0));
    assert_eq!(none.arrived_ns, clean.arrived_ns);
    // About 12 errors in 4 MiB of payload.
    let injection = Injection { tlp_errors_per_tb: 3e6, seed: 5, ..Default::default() };
    let hit = link::simulate(&with(config.clone(), injection), &workload).unwrap();
    let replay = hit.replay[UP];
    println!("errors {:?}, replay {replay:?}, transfer {:.1} ns later", hit.injected_errors, end_ns(&hit) - end_ns(&clean));
    assert!(hit.injected_errors[UP] >= 5, "{:?}", hit.injected_errors);
    assert_eq!(hit.injected_errors[0], 0, "writes carry no payload downstream");
    assert_eq!(replay.corrupted, hit.injected_errors[UP], "every injected error arrives as a bad TLP");
    assert_eq!(replay.naks, replay.corrupted, "each is Nak'd");
    assert_eq!(replay.replays, hit.injected_errors[UP], "one replay per injected error");
    assert_eq!((replay.timer_expiries, replay.retrains), (0, 0));
    // Every replay's lanes time shows in the transfer's end (within a few DLLPs per replay).
    let later_ns = end_ns(&hit) - end_ns(&clean);
    let phy = link::phy::Phy::new(config.link);
    let slack_ns = replay.replays as f64 * 4.0 * phy.ns(phy.dllp_bytes()) + phy.ns(config.largest_replay_entry_bytes());
    assert!((later_ns - replay.lost_ns).abs() <= slack_ns, "{later_ns} ns later, {} ns replayed (slack {slack_ns})", replay.lost_ns);
    assert_eq!(hit.stats[UP].payload_bytes, 4 * MIB, "every byte delivered once");
}

/// The fast-forward between injected events against full simulation.
/// How far the fast-forward's end may stray from full simulation's: one channel, 0.1 %. Both at
/// once, reads and writes can interleave in more than one steady way and each hold may move
/// the stream from one to another; the fast-forward leaves its stretches out at the rates of
/// the way the run was in after its first disturbance. Over seeds 1–6 this case measured
/// −0.003 … +0.153 % (docs/link-simulator.md, "Both at once: more than one steady way").
const SINGLE: f64 = 1e-3;
const BOTH_WAYS: f64 = 2e-3;

/// The steady-state fast-forward leaves whole periods out of an undisturbed stream: the payload
/// of those periods arrived too, so no pause is longer than the fully simulated stream's (its
/// packets' spacing, a read's round of tags). A pause counted across a skip would read as a
/// stall of the skip's length.
#[test]
fn fast_forwarded_streams_pause_no_longer_than_simulated_ones() {
    for preset in ["doc001", "gen5x16"] {
        let config = endpoint_link(preset);
        for workload in [write(64 * MIB), read(64 * MIB), both(64 * MIB)] {
            let fast = link::fast_forward(&config, &workload, &SteadyOptions::default()).unwrap();
            let full = link::simulate(&config, &workload).unwrap();
            println!("{preset} {workload:?}: {} TLPs left out; longest pauses {:?} / {:?}", fast.skipped_tlps, fast.outcome.payload_gaps.map(|g| g.longest_ns), full.payload_gaps.map(|g| g.longest_ns));
            assert!(fast.skipped_tlps > 0, "{preset} {workload:?}: fast-forwarded");
            for d in [UP, DOWN] {
                // Within a tenth (where in its period a skip falls moves a SKP by a few symbols).
                assert!(fast.outcome.payload_gaps[d].longest_ns <= 1.1 * full.payload_gaps[d].longest_ns + 1.0, "{preset} {workload:?}: {:?} / {:?}", fast.outcome.payload_gaps, full.payload_gaps);
            }
        }
    }
}

#[test]
fn leaving_out_the_time_between_events_agrees_with_full_simulation() {
    let holds = |per_s: f64, min_ns: f64, max_ns: f64, seed: u64| Injection {
        holds_per_s: per_s,
        hold_min_ns: min_ns,
        hold_max_ns: max_ns,
        threshold_ns: 3_000.0,
        seed,
        ..Default::default()
    };
    let errors = Injection { tlp_errors_per_tb: 2e5, seed: 9, ..Default::default() };
    // The last figure: holds whose outcome a simulated one of the same steady state gave, at
    // least (the single-channel streams reuse; both at once never does). Streams of more than
    // about 2 × 64 holds are split in two segments simulated at once (`segments`); those with
    // injected errors never are.
    let cases = [
        ("gen3x8 write, holds", with(endpoint_link("gen3x8"), holds(20_000.0, 1_500.0, 5_000.0, 1)), write(64 * MIB), 50, SINGLE),
        ("doc001 write, holds", with(endpoint_link("doc001"), holds(8_600.0, 2_500.0, 7_000.0, 2)), write(16 * MIB), 30, SINGLE),
        // Reads do not starve (the host serves no request during a hold, so the device waits
        // with its tags out): their holds are all simulated, none reused.
        ("doc001 read, holds", with(endpoint_link("doc001"), holds(4_000.0, 15_000.0, 25_000.0, 3)), read(32 * MIB), 0, SINGLE),
        ("gen5x16 read, holds", with(endpoint_link("gen5x16"), holds(20_000.0, 1_300.0, 2_000.0, 5)), read(128 * MIB), 0, SINGLE),
        ("gen5x16 both, holds", with(endpoint_link("gen5x16"), holds(10_000.0, 1_000.0, 2_000.0, 4)), both(128 * MIB), 0, BOTH_WAYS),
        ("gen3x8 write, errors", with(endpoint_link("gen3x8"), errors), write(64 * MIB), 0, SINGLE),
    ];
    for (name, config, workload, reused, tolerance) in cases {
        let full = link::simulate(&config, &workload).unwrap();
        let fast = link::fast_forward(&config, &workload, &SteadyOptions::default()).unwrap();
        let (a, b) = (end_ns(&full), end_ns(&fast.outcome));
        let tlps = full.stats[UP].tlps;
        println!(
            "{name}: full {a:.1} ns, fast-forward {b:.1} ns ({:+.4} %), {} of {tlps} TLPs left out, {} holds reused, {} segments apart; starvations {:?} / {:?}; replays {} / {}",
            (b - a) / a * 100.0,
            fast.skipped_tlps,
            fast.reused_holds,
            fast.segments,
            full.starvation[UP],
            fast.outcome.starvation[UP],
            full.replay[UP].replays,
            fast.outcome.replay[UP].replays
        );
        assert!((b - a).abs() <= tolerance * a, "{name}: {a} against {b}");
        let (s, t) = (full.starvation[UP], fast.outcome.starvation[UP]);
        if tolerance == SINGLE {
            assert_eq!(s.count, t.count, "{name}: the same stalls");
        } else {
            // A read request let through mid-hold splits a starvation in two, by phase.
            assert!(s.count.abs_diff(t.count) <= 1 + s.count / 20, "{name}: {s:?} against {t:?}");
        }
        // A stall is the hold less the credits in hand when it began, which depend on where in
        // the UpdateFC loop the hold falls: the few stalls within a TLP or two of the threshold
        // may land on either side of it.
        assert!(s.over_threshold.abs_diff(t.over_threshold) <= 2 + s.over_threshold / 20, "{name}: {s:?} against {t:?}");
        assert!((s.total_ns - t.total_ns).abs() <= 1e-3 * a, "{name}: starved {} against {}", s.total_ns, t.total_ns);
        assert_eq!(full.injected_errors, fast.outcome.injected_errors, "{name}");
        assert_eq!(full.replay.map(|r| r.replays), fast.outcome.replay.map(|r| r.replays), "{name}: the same retries");
        let (g, h) = (full.payload_gaps, fast.outcome.payload_gaps);
        println!("{name}: payload gaps {g:?} / {h:?}");
        for d in [DOWN, UP] {
            // The longest pause is a simulated hold's in both runs, but met at another phase of
            // the UpdateFC loop and of the round of tags (the random lead).
            let phase_ns = 0.05 * g[d].longest_ns + tags_in_flight_ns(&config);
            assert!((g[d].longest_ns - h[d].longest_ns).abs() <= phase_ns, "{name}: longest pause {g:?} against {h:?}");
            assert!(g[d].over_threshold.abs_diff(h[d].over_threshold) <= 2 + g[d].over_threshold / 20, "{name}: {g:?} against {h:?}");
        }
        assert!(s.count > 0 || full.replay[UP].replays > 0 || g[DOWN].longest_ns >= config.inject.hold_min_ns, "{name}: something was injected");
        assert_eq!(full.stats.map(|s| s.payload_bytes), fast.outcome.stats.map(|s| s.payload_bytes), "{name}");
        assert!(fast.skipped_tlps * 3 >= tlps, "{name}: at least a third left out ({} of {tlps})", fast.skipped_tlps);
        assert!(fast.reused_holds >= reused, "{name}: {} holds reused", fast.reused_holds);
        if reused == 0 {
            assert_eq!(fast.reused_holds, 0, "{name}");
        }
        let expected_holds = config.inject.holds_per_s * a / 1e9;
        if expected_holds >= 200.0 {
            assert!(fast.segments >= 1, "{name}: {expected_holds:.0} holds, split in two segments");
        }
        if config.inject.tlp_errors_per_tb > 0.0 {
            assert_eq!(fast.segments, 0, "{name}: runs with errors are not split");
        }
    }
}

/// A stream split in segments simulated at once gives exactly what the same segments give one
/// after the other on one thread: the split depends on the stream, never on the threads.
#[test]
fn split_segments_do_not_depend_on_threads() {
    let injection = Injection { holds_per_s: 20_000.0, hold_min_ns: 1_500.0, hold_max_ns: 5_000.0, threshold_ns: 3_000.0, seed: 11, ..Default::default() };
    let config = with(endpoint_link("gen3x8"), injection);
    for workload in [write(64 * MIB), both(64 * MIB)] {
        let threads = link::fast_forward(&config, &workload, &SteadyOptions::default()).unwrap();
        let one = link::fast_forward_on_one_thread(&config, &workload, &SteadyOptions::default()).unwrap();
        println!("{workload:?}: {} segments, {} stalls", threads.segments, threads.outcome.starvation[UP].count);
        assert!(threads.segments >= 1, "{workload:?}: split");
        assert_eq!(threads, one, "{workload:?}");
    }
}

/// Holds the device's credits in hand certainly cover are left out with the stretch around
/// them (the fast-forward proves it from the simulated steady state): the full run must not
/// starve on them either, and the times must agree. Holds that do starve are compared in
/// `leaving_out_the_time_between_events_agrees_with_full_simulation`, where an overestimated
/// cover would lose their stalls.
#[test]
fn covered_holds_are_left_out_and_starve_nothing_in_full_simulation() {
    let holds = |per_s: f64, min_ns: f64, max_ns: f64, seed: u64| Injection { holds_per_s: per_s, hold_min_ns: min_ns, hold_max_ns: max_ns, threshold_ns: 3_000.0, seed, ..Default::default() };
    let cases = [
        // Writes only: a hold delays every read request it catches, whatever the credits.
        ("doc001 write", with(endpoint_link("doc001"), holds(20_000.0, 100.0, 1_500.0, 6)), write(32 * MIB), 0.9),
        ("gen3x8 write", with(endpoint_link("gen3x8"), holds(100_000.0, 10.0, 60.0, 8)), write(64 * MIB), 0.9),
    ];
    for (name, config, workload, share) in cases {
        let full = link::simulate(&config, &workload).unwrap();
        let fast = link::fast_forward(&config, &workload, &SteadyOptions::default()).unwrap();
        let (a, b) = (end_ns(&full), end_ns(&fast.outcome));
        let tlps = full.stats[UP].tlps;
        println!("{name}: full {a:.1} ns, fast-forward {b:.1} ns ({:+.4} %), {} of {tlps} TLPs left out; stalls {} / {}", (b - a) / a * 100.0, fast.skipped_tlps, full.starvation[UP].count, fast.outcome.starvation[UP].count);
        assert!((b - a).abs() <= 1e-3 * a, "{name}: {a} against {b}");
        assert_eq!(full.starvation[UP], fast.outcome.starvation[UP], "{name}: covered holds starve nothing");
        assert_eq!(full.starvation[UP].count, 0, "{name}");
        assert!(fast.skipped_tlps as f64 >= share * tlps as f64, "{name}: the holds were left out ({} of {tlps})", fast.skipped_tlps);
    }
}

#[test]
fn bad_injections_are_refused() {
    let bad = [
        Injection { holds_per_s: -1.0, ..Default::default() },
        Injection { holds_per_s: 1.0, hold_min_ns: 5.0, hold_max_ns: 1.0, ..Default::default() },
        Injection { tlp_errors_per_tb: f64::NAN, ..Default::default() },
        Injection { holds: vec![Hold { start_ns: 0.0, duration_ns: f64::INFINITY }], ..Default::default() },
    ];
    for injection in bad {
        let config = with(endpoint_link("gen3x8"), injection.clone());
        assert!(link::simulate(&config, &write(4096)).is_err(), "{injection:?}");
    }
}

/// How much of a demo-sized stream the fast-forward simulates (run by hand: `--ignored`; in the
/// release build for timings).
#[test]
#[ignore]
fn demo_stream_cost() {
    for (preset, bytes) in [("doc001", 0x2000u64 * 0xA343C * 4), ("gen5x16", 0x2000u64 * 0xA343C * 64)] {
        let endpoint = Endpoint::preset(preset).unwrap();
        let injection = Injection {
            holds_per_s: endpoint.stalls_per_s,
            hold_min_ns: endpoint.stall_min_ns,
            hold_max_ns: endpoint.stall_max_ns,
            threshold_ns: 50_000.0,
            seed: 1,
            ..Default::default()
        };
        let config = with(endpoint_link(preset), injection);
        for (name, workload) in [("write", write(bytes)), ("read", read(bytes)), ("both", both(bytes))] {
            let started = std::time::Instant::now();
            let cpu = process_cpu_s();
            let fast = link::fast_forward(&config, &workload, &SteadyOptions::default()).unwrap();
            let total = fast.outcome.stats[UP].tlps;
            let starved = fast.outcome.starvation[UP];
            println!(
                "{preset} {name}: {bytes} B, {:.3} s simulated, {} stalls (longest {:.1} ns, total {:.0} ns, {} over 50 µs), {} of {total} device TLPs simulated, {} holds reused, {} segments apart, {:.2} s CPU (all threads), {:.2} s wall",
                end_ns(&fast.outcome) / 1e9,
                starved.count,
                starved.longest_ns,
                starved.total_ns,
                starved.over_threshold,
                total - fast.skipped_tlps,
                fast.reused_holds,
                fast.segments,
                process_cpu_s() - cpu,
                started.elapsed().as_secs_f64()
            );
        }
    }
}

/// CPU time of this process so far (every thread: the fast-forward simulates split segments
/// on a second one), user and system, in s (Linux, 10 ms steps; 0 elsewhere).
fn process_cpu_s() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = text.rsplit_once(')').map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks: f64 = [11, 12].iter().filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok())).sum();
    ticks / 100.0
}

/// When one channel of a both-ways stream has issued everything, the fast-forward leaves nothing
/// out until its last payload has arrived: a stretch left out would delay that arrival by its
/// length, so the channel's end and its longest pause with it.
#[test]
fn a_finished_channel_arrives_before_anything_is_left_out() {
    let endpoint = Endpoint::preset("doc001").unwrap();
    let injection = Injection { holds_per_s: endpoint.stalls_per_s, hold_min_ns: endpoint.stall_min_ns, hold_max_ns: endpoint.stall_max_ns, threshold_ns: 50_000.0, seed: 2, ..Default::default() };
    let config = with(endpoint_link("doc001"), injection);
    let workload = both(256 * MIB);
    let fast = link::fast_forward(&config, &workload, &SteadyOptions::default()).unwrap();
    let full = link::simulate(&config, &workload).unwrap();
    println!("writes end {:.0} ns (full {:.0} ns), reads {:.0} ns (full {:.0} ns); pauses {:?}", fast.outcome.arrived_ns[UP], full.arrived_ns[UP], fast.outcome.arrived_ns[DOWN], full.arrived_ns[DOWN], fast.outcome.payload_gaps);
    assert!(fast.skipped_tlps > 0, "the stream was fast-forwarded");
    for d in [UP, DOWN] {
        assert!(fast.outcome.payload_gaps[d].longest_ns <= 1.2 * config.inject.hold_max_ns, "{:?}", fast.outcome.payload_gaps);
        assert_eq!(fast.outcome.payload_gaps[d].over_threshold, 0);
    }
    // The writes end before the reads: their end is where the full run's is, within the
    // both-ways interleaving's spread (see BOTH_WAYS), not a stretch later.
    let writes_end = (fast.outcome.arrived_ns[UP], full.arrived_ns[UP]);
    assert!(writes_end.0 < fast.outcome.arrived_ns[DOWN]);
    assert!((writes_end.0 - writes_end.1).abs() <= 3.0 * BOTH_WAYS * writes_end.1, "{writes_end:?}");
}

/// Both at once against full simulation where the stretches between holds are long (run by
/// hand: `--release -- --ignored`): how far the fast-forward's end strays, per seed.
#[test]
#[ignore]
fn both_ways_with_rare_holds_against_full_simulation() {
    let cases = [("doc001", 200.0, 32 * MIB, 1..=3u64), ("doc001", 8_600.0, 32 * MIB, 1..=3), ("gen5x16", 10_000.0, 128 * MIB, 1..=6)];
    for (preset, per_s, bytes, seeds) in cases {
        let endpoint = Endpoint::preset(preset).unwrap();
        for seed in seeds {
            let injection = Injection { holds_per_s: per_s, hold_min_ns: endpoint.stall_min_ns, hold_max_ns: endpoint.stall_max_ns, threshold_ns: 50_000.0, seed, ..Default::default() };
            let config = with(endpoint_link(preset), injection);
            let started = std::time::Instant::now();
            let fast = link::fast_forward(&config, &both(bytes), &SteadyOptions::default()).unwrap();
            let fast_s = started.elapsed().as_secs_f64();
            let full = link::simulate(&config, &both(bytes)).unwrap();
            let (a, b) = (end_ns(&full), end_ns(&fast.outcome));
            println!("{preset} both {per_s}/s seed {seed}: {:+.3} % ({} of {} TLPs simulated, {fast_s:.2} s)", (b - a) / a * 100.0, fast.outcome.stats[UP].tlps - fast.skipped_tlps, fast.outcome.stats[UP].tlps);
        }
    }
}
