//! The DMA procedure against an in-memory test engine with known behaviour.

mod support;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use pcieperf::bench::dma::{measure, DmaOptions, Quiet};
use pcieperf::bench::results::{Cause, Mode, Results, Stopped};
use pcieperf::bench::stalls::StallSource;
use pcieperf::bench::verify::{VerifyKind, READBACK_TIME_SHARE};
use pcieperf::engine::DataModel;
use support::TestEngine;

fn options(modes: &[Mode], sizes: &[u64]) -> DmaOptions {
    let mut o = DmaOptions::new(modes.to_vec(), sizes.to_vec());
    o.seed = 7;
    o.duration = Duration::from_millis(200);
    o.wall_limit = Duration::from_secs(60);
    o
}

fn run(engine: &mut TestEngine, o: &DmaOptions) -> Results {
    measure(engine, o, &AtomicBool::new(false), &mut Quiet).expect("valid input")
}

#[test]
fn a_steady_engine_is_stable_after_the_minimum_samples() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    let r = run(&mut engine, &options(&[Mode::D2h], &[1 << 20]));
    let p = &r.points[0];
    assert_eq!(p.convergence.stop_reason, "stable");
    assert!(p.convergence.converged);
    // 1 ms transfers are large samples: the fewest with an interval (6), not 10.
    assert_eq!(p.samples.len(), 6, "the minimum number of large samples");
    assert_eq!(p.warmup, 2);
    assert_eq!(engine.transfers, 8);
    // 1 MiB at 1000 MB/s + 10 µs: 1048.576 + 10 µs per transfer, on the virtual clock.
    let expected_ns = 1_048_576.0 + 10_000.0;
    let s = p.summary.as_ref().unwrap();
    assert!((s.time_ns.median - expected_ns).abs() < 1e-6);
    assert!((s.median_mbps - 1_048_576.0 / expected_ns * 1e3).abs() < 1e-9);
    // Back to back on the virtual clock (nothing between transfers): sustained = median.
    assert!((s.sustained_mbps - s.median_mbps).abs() < 1e-6, "{} vs {}", s.sustained_mbps, s.median_mbps);
    assert_eq!(s.time_ns.cov, 0.0);
    assert!((p.convergence.engine_ns - 8.0 * expected_ns).abs() < 1e-3);
    assert_eq!(s.median_ci_mbps, Some((s.median_mbps, s.median_mbps)), "identical times: a zero-width interval");
    assert!(r.complete && r.simulated);
    assert_eq!(r.exit_code(), 0);
}

#[test]
fn small_samples_need_the_minimum_count() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    let p = &run(&mut engine, &options(&[Mode::D2h], &[64 << 10])).points[0];
    assert_eq!(p.convergence.stop_reason, "stable");
    assert_eq!(p.samples.len(), 10, "75 µs transfers: the minimum of 10 samples");
}

#[test]
fn a_noisy_engine_runs_until_the_budget_and_reports_its_spread() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.jitter = 0.3;
    let mut o = options(&[Mode::D2h], &[64 << 10]);
    o.stop.ci_target = 0.001;
    o.duration = Duration::from_millis(20);
    o.wall_limit = Duration::from_secs(60);
    let r = run(&mut engine, &o);
    let p = &r.points[0];
    assert_eq!(p.convergence.stop_reason, "duration");
    assert!(!p.convergence.converged);
    assert!(p.convergence.engine_ns >= 20e6);
    let s = p.summary.as_ref().unwrap();
    assert!(s.time_ns.cov > 0.05 && s.time_ns.cov < 0.3, "cov {}", s.time_ns.cov);
    assert!(s.time_ns.min <= s.time_ns.median && s.time_ns.median <= s.time_ns.p99 && s.time_ns.p99 <= s.time_ns.max);
    assert!(s.max_mbps >= s.median_mbps && s.median_mbps >= s.p99_mbps && s.p99_mbps >= s.min_mbps);

    // A looser target with the same noise converges: more samples than the minimum, fewer than the budget.
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.jitter = 0.3;
    // ± 30 % uniform jitter: the median's interval shrinks as ~0.6/√n, so ± 5 % takes ~150.
    o.stop.ci_target = 0.05;
    o.duration = Duration::from_secs(10);
    let p = &run(&mut engine, &o).points[0];
    assert_eq!(p.convergence.stop_reason, "stable");
    assert!(p.samples.len() > 10 && p.samples.len() < 500, "{}", p.samples.len());
    let s = p.summary.as_ref().unwrap();
    let (low, high) = s.median_ci_mbps.unwrap();
    assert!(low <= s.median_mbps && s.median_mbps <= high && (high - low) / 2.0 <= 0.05 * s.median_mbps * 1.05, "{low} {high}");
}

#[test]
fn the_sweep_fit_recovers_document_002s_f_and_m() {
    // Gen2 x4 = 2000 MB/s after encoding: document 002's B = 250 MHz × 8 B.
    let (f, m_us) = (0.501398684, 20.08356);
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.rate_mbps = 2000.0 * f;
    engine.per_transfer_ns = m_us * 1e3;
    let sizes: Vec<u64> = (12..=22).map(|s| 1u64 << s).collect();
    let r = run(&mut engine, &options(&[Mode::D2h], &sizes));
    let fit = &r.fits[0];
    assert_eq!(fit.bus_mbps, Some(2000.0));
    assert!((fit.f.unwrap() - f).abs() < 1e-6, "f {:?}", fit.f);
    assert!((fit.m_us - m_us).abs() < 1e-3, "m {}", fit.m_us);
    assert!((fit.n_half_bytes - m_us * 2000.0 * f).abs() < 1.0);
    assert!(fit.residuals.iter().all(|(_, r)| r.abs() < 1e-6));
    assert!(r.findings.iter().any(|x| x.cause == Cause::PerTransferOverhead), "{:#?}", r.findings);
    // Every point has the model's ceiling for the same link beside it.
    for p in &r.points {
        let c = p.ceiling.as_ref().unwrap();
        let reached = c.percent_reached.unwrap();
        assert!(reached > 0.0 && reached < 100.0);
    }
}

#[test]
fn stalls_come_from_the_host_clock_or_from_the_device() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.stall_every = Some((4, 200_000.0));
    let mut o = options(&[Mode::D2h], &[64 << 10]);
    o.stop.min_samples = 40;
    o.stop.max_samples = 40;
    let r = run(&mut engine, &o);
    let stalls = r.points[0].stalls;
    assert_eq!(stalls.source, StallSource::Host);
    assert!((stalls.max_stall_ns - 200_000.0).abs() < 1e-6);
    assert_eq!(stalls.over_threshold, 10); // transfers 4, 8, …, 40 of the 40 timed (2 warm-up + 40)
    assert!(r.findings.iter().any(|f| f.cause == Cause::Stall));

    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.stall_every = Some((4, 60_000.0));
    engine.device_stall_counters = true;
    let r = run(&mut engine, &o);
    let stalls = r.points[0].stalls;
    assert_eq!(stalls.source, StallSource::Device);
    assert_eq!(stalls.max_stall_ns, 60_000.0);
    assert_eq!(stalls.over_threshold, 10);
}

#[test]
fn the_device_clock_is_reported_beside_the_host_clock() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.device_clock = true;
    let r = run(&mut engine, &options(&[Mode::D2h], &[1 << 20]));
    let s = r.points[0].summary.as_ref().unwrap();
    assert!((s.device_median_ns.unwrap() - 1_048_576.0).abs() < 1e-6);
    // The host sees the per-transfer cost the device does not count (document 000 §5.2).
    assert!((s.host_minus_device_ns.unwrap() - 10_000.0).abs() < 1e-6);
    assert!(s.wall_median_ns > 0.0);
}

#[test]
fn verification_passes_for_every_data_model_and_both_directions() {
    for model in [DataModel::Generator, DataModel::Memory, DataModel::Loopback] {
        for kind in [VerifyKind::Lfsr, VerifyKind::Counter] {
            let mut engine = TestEngine::new(model, 7);
            let mut o = options(&[Mode::D2h, Mode::H2d, Mode::Both], &[4096, 65536]);
            o.verify = kind;
            let r = run(&mut engine, &o);
            assert_eq!(r.verification.failed, 0, "{model:?} {kind:?}: {:?}", r.verification.first_failure);
            // Memory reads back h2d writes 1 and 4 of each point's 7 (the others are unchecked).
            let h2d_checked = if model == DataModel::Memory { 2 } else { 7 };
            assert!(r.verification.passed >= 2 * (7 + h2d_checked + 7), "{model:?}: {:?}", r.verification);
        }
    }
}

#[test]
fn corrupt_d2h_data_is_caught_at_its_offset() {
    for model in [DataModel::Generator, DataModel::Memory, DataModel::Loopback] {
        let mut engine = TestEngine::new(model, 7);
        engine.corrupt_d2h_at = Some(5000);
        let r = run(&mut engine, &options(&[Mode::D2h], &[65536]));
        let failure = r.verification.first_failure.as_ref().unwrap_or_else(|| panic!("{model:?} missed it"));
        assert_eq!(failure.offset, Some(5000), "{model:?}");
        assert_eq!(failure.check, "pattern");
        let (e, a) = (u8::from_str_radix(&failure.expected[2..], 16).unwrap(), u8::from_str_radix(&failure.actual[2..], 16).unwrap());
        assert_eq!(e ^ a, 0x40);
        assert!(r.verification_failed());
        assert_eq!(r.exit_code(), 1);
        assert!(r.findings.iter().any(|f| f.cause == Cause::VerificationFailed));
    }
}

#[test]
fn stale_data_from_an_earlier_transfer_does_not_pass_as_fresh() {
    // The check poisons what it compared; with a copy to user space the check reads the copy,
    // so the DMA buffer is poisoned before the next transfer instead. Either way the half the
    // device no longer writes still holds poison, not the pattern of the transfer before.
    for copy_to_user in [false, true] {
        for model in [DataModel::Generator, DataModel::Memory] {
            let mut engine = TestEngine::new(model, 7);
            engine.short_d2h_from = Some(8);
            let mut o = options(&[Mode::D2h], &[65536]);
            o.copy_to_user = copy_to_user;
            let r = run(&mut engine, &o);
            let failure = r.verification.first_failure.as_ref().unwrap_or_else(|| panic!("{model:?}, copy {copy_to_user}: stale data passed"));
            assert_eq!((failure.offset, failure.actual.as_str()), (Some(32768), "0xa5"), "{model:?}, copy {copy_to_user}");
            assert!(r.verification.passed >= 5, "{model:?}: the transfers before the fault pass: {:?}", r.verification);
        }
    }
}

#[test]
fn a_memory_write_that_never_lands_is_caught_by_a_later_read_back() {
    let mut engine = TestEngine::new(DataModel::Memory, 7);
    engine.jitter = 0.5; // never stable: runs until a read-back after the drop
    engine.drop_writes_from = Some(20);
    let mut o = options(&[Mode::H2d], &[8192]);
    o.stop.max_samples = 200;
    let r = run(&mut engine, &o);
    let failure = r.verification.first_failure.as_ref().expect("a dropped write must be caught");
    assert_eq!((failure.check.as_str(), failure.offset), ("pattern", Some(0)));
    // 202 writes (2 warm-up): write 1 read back, then about one in 100 (1 % of the time, a
    // read-back costing as much as a write); the rest unchecked.
    let read_backs = r.verification.passed + r.verification.failed;
    assert!((2..=4).contains(&read_backs), "{:?}", r.verification);
    assert_eq!(r.verification.unchecked, 202 - read_backs);
    assert!(r.verification.failed >= 1);
}

#[test]
fn a_wrong_device_crc_fails_h2d_and_opaque_reads_are_only_checked_for_consistency() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.corrupt_crc = true;
    let r = run(&mut engine, &options(&[Mode::H2d], &[8192]));
    let failure = r.verification.first_failure.unwrap();
    assert_eq!((failure.check.as_str(), failure.offset), ("crc", None));

    let mut engine = TestEngine::new(DataModel::Opaque, 7);
    let r = run(&mut engine, &options(&[Mode::D2h], &[8192]));
    assert!(r.verification.method.contains("consistency"));
    assert_eq!(r.verification.failed, 0);
    assert_eq!(r.verification.unchecked, 1); // the first read is the reference
    assert_eq!(r.verification.passed, 11);
}

#[test]
fn a_memory_device_that_refuses_writes_is_checked_for_consistency_only() {
    let mut engine = TestEngine::new(DataModel::Memory, 7);
    engine.refuse_writes = true;
    let r = run(&mut engine, &options(&[Mode::D2h], &[8192]));
    assert!(r.complete);
    assert!(r.verification.method.contains("consistency"), "{}", r.verification.method);
    assert_eq!((r.verification.passed, r.verification.unchecked, r.verification.failed), (11, 1, 0));
}

#[test]
fn verification_off_checks_nothing() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.corrupt_d2h_at = Some(10);
    let mut o = options(&[Mode::D2h], &[4096]);
    o.verify = VerifyKind::None;
    let r = run(&mut engine, &o);
    assert_eq!((r.verification.passed, r.verification.failed), (0, 0));
    assert!(r.verification.method.contains("off"));
}

#[test]
fn a_device_that_stops_answering_ends_the_run_with_partial_results() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.hang_after = Some(17);
    let r = run(&mut engine, &options(&[Mode::D2h], &[4096, 8192, 16384]));
    assert!(!r.complete);
    let Some(Stopped::Error { message }) = &r.stopped else { panic!("{:?}", r.stopped) };
    assert!(message.contains("did not answer") && message.contains("d2h 8KiB"), "{message}");
    assert_eq!(r.points.len(), 2);
    assert_eq!(r.points[0].samples.len(), 10);
    assert_eq!(r.points[1].convergence.stop_reason, "error");
    assert_eq!(r.points[1].samples.len(), 3); // transfers 13–17: 2 warm-up, 3 timed
    assert!(r.findings.iter().any(|f| f.cause == Cause::Incomplete));
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn ctrl_c_stops_between_transfers_and_keeps_what_was_measured() {
    let flag = Arc::new(AtomicBool::new(false));
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.cancel_after = Some((14, flag.clone()));
    let r = measure(&mut engine, &options(&[Mode::D2h, Mode::H2d], &[4096]), &flag, &mut Quiet).unwrap();
    assert_eq!(r.stopped, Some(Stopped::Interrupted));
    assert!(!r.complete);
    assert_eq!(r.points.len(), 2);
    assert_eq!(r.points[1].samples.len(), 0);
    assert_eq!(r.points[1].convergence.stop_reason, "interrupted");
    assert_eq!(engine.transfers, 14);
    assert_eq!(r.exit_code(), 130);
}

#[test]
fn copy_to_user_is_timed_on_the_host_and_slows_the_figure() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    // The host's copy is timed for real engines only: a simulated one keeps its own clock.
    engine.info.simulated = false;
    engine.rate_mbps = 1e9; // a link so fast that the copy dominates
    engine.per_transfer_ns = 0.0;
    let mut o = options(&[Mode::D2h, Mode::H2d], &[256 << 10]);
    o.copy_to_user = true;
    o.stop.max_samples = 30; // the host's copy times are noisy: do not wait for them to settle
    let r = run(&mut engine, &o);
    assert_eq!(r.verification.failed, 0);
    for p in &r.points {
        let s = p.summary.as_ref().unwrap();
        assert!(s.copy_median_ns.unwrap() > 0.0);
        assert!(s.transfer_only_median_mbps > s.median_mbps);
    }
    assert!(r.findings.iter().any(|f| f.cause == Cause::CopyToUser), "{:#?}", r.findings);
    assert!(pcieperf::report::text::render(&r).contains("Copy to user space"));
}

#[test]
fn bad_sizes_and_modes_are_refused_before_anything_moves() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.info.alignment_bytes = 4096;
    engine.info.concurrent = false;
    let cancel = AtomicBool::new(false);
    let err = |e: &mut TestEngine, o: DmaOptions| measure(e, &o, &cancel, &mut Quiet).unwrap_err().0;
    assert!(err(&mut engine, options(&[Mode::D2h], &[1000])).contains("not a multiple of the 4KiB alignment"));
    assert!(err(&mut engine, options(&[Mode::D2h], &[128 << 20])).contains("largest transfer"));
    assert!(err(&mut engine, options(&[Mode::D2h], &[0])).contains("0 bytes"));
    assert!(err(&mut engine, options(&[Mode::Both], &[4096])).contains("both directions"));
    engine.info.capacity_bytes = Some(8192);
    assert!(err(&mut engine, options(&[Mode::D2h], &[16384])).contains("device space"));
    assert_eq!(engine.transfers, 0);
}

#[test]
fn both_directions_count_bytes_of_both_legs() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    let r = run(&mut engine, &options(&[Mode::Both], &[1 << 20]));
    let p = &r.points[0];
    assert_eq!(p.bytes_per_step, 2 << 20);
    let s = p.summary.as_ref().unwrap();
    assert!((s.median_mbps - 2.0 * 1_048_576.0 / (1_048_576.0 + 10_000.0) * 1e3).abs() < 1e-6);
    assert!(p.ceiling.as_ref().unwrap().note.is_some());
}

#[test]
fn both_directions_are_reported_each_on_its_own_and_summed() {
    // d2h at 1000 MB/s, h2d taking twice as long: 500 MB/s. nvbandwidth's bidirectional figure
    // is the sum, 1500; both directions' bytes over the time until both ended is 1000.
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.per_transfer_ns = 0.0;
    engine.h2d_leg_factor = 2.0;
    let r = run(&mut engine, &options(&[Mode::Both, Mode::D2h], &[1 << 20]));
    let both = r.points.iter().find(|p| p.mode == Mode::Both).unwrap();
    let d = both.directions.expect("a both point has its directions");
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
    assert!(close(d.d2h_median_mbps, 1000.0) && close(d.h2d_median_mbps, 500.0), "{d:?}");
    assert!(close(d.sum_mbps, 1500.0), "{d:?}");
    assert!(close(both.summary.as_ref().unwrap().median_mbps, 1000.0));
    assert!(both.samples.iter().all(|s| s.legs_ns.is_some()));
    let d2h = r.points.iter().find(|p| p.mode == Mode::D2h).unwrap();
    assert!(d2h.directions.is_none() && d2h.samples.iter().all(|s| s.legs_ns.is_none()), "one direction has no split");

    let text = pcieperf::report::text::render(&r);
    assert!(text.contains("h2d 500 + d2h 1000 = 1500 MB/s"), "{text}");
    assert!(text.contains("Both directions at once, each on its own"), "{text}");
    let csv = pcieperf::report::csv::render(&r);
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    let column = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!((column("h2d_median_MBps"), column("d2h_median_MBps"), column("sum_MBps")), ("500.00", "1000.00", "1500.00"));
    let metrics = pcieperf::report::metrics::render(&r, std::time::SystemTime::now());
    assert!(metrics.lines().any(|l| l.starts_with("pcieperf_direction_throughput_bytes_per_second{") && l.contains("direction=\"h2d\"") && l.ends_with(" 500000000")), "{metrics}");
    let back: Results = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back.points[0].directions, both.directions.into());
}

#[test]
fn the_slow_tail_is_a_transfer_time_above_the_median_and_its_rate_below() {
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.jitter = 0.3;
    let mut o = options(&[Mode::D2h], &[64 << 10]);
    o.stop.ci_target = 0.001;
    o.duration = Duration::from_millis(20);
    let r = run(&mut engine, &o);
    let s = r.points[0].summary.as_ref().unwrap();
    assert!(s.time_ns.p99 > s.time_ns.median && s.p99_mbps < s.median_mbps, "{s:?}");
    let text = pcieperf::report::text::points_table(&r, None);
    assert!(text.contains("time p99/max (MB/s at p99)"), "{text}");
    let csv = pcieperf::report::csv::render(&r);
    assert!(csv.lines().next().unwrap().contains("median_ns,p99_ns,max_ns"), "{csv}");
}

#[test]
fn a_fit_that_describes_nothing_is_rejected_with_its_reason() {
    // Times that shrink by a constant: no positive per-transfer cost m describes them (as a copy
    // to user space that grows faster than the transfer once made m = −111 µs).
    let mut engine = TestEngine::new(DataModel::Generator, 7);
    engine.per_transfer_ns = -5_000.0;
    let r = run(&mut engine, &options(&[Mode::D2h], &[1 << 20, 16 << 20]));
    let fit = &r.fits[0];
    assert!((fit.m_us + 5.0).abs() < 1e-6, "m = {}", fit.m_us);
    assert!(fit.rejected.as_deref().is_some_and(|why| why.contains("negative")), "{:?}", fit.rejected);
    assert!(r.findings.iter().any(|f| f.cause == Cause::FitRejected));
    assert!(!r.findings.iter().any(|f| f.cause == Cause::PerTransferOverhead), "a rejected fit explains nothing");
    let text = pcieperf::report::text::render(&r);
    assert!(text.contains("fit of T(N) = N/(B·f) + m not shown"), "{text}");
    assert!(!text.contains("N½ -"), "{text}");
}


#[test]
fn sustained_rate_counts_the_untimed_read_backs_between_writes() {
    // A memory device reads back h2d write 1 and then as many writes as fit in 1 % of the
    // point's time, between timed writes: each read-back takes as long as a write on this engine,
    // and the sustained rate includes them.
    let mut engine = TestEngine::new(DataModel::Memory, 7);
    let mut o = options(&[Mode::H2d], &[1 << 20]);
    o.duration = Duration::from_secs(10);
    // The stop rule off: 400 samples, the cap.
    (o.stop.ci_target, o.stop.max_samples) = (0.0, 400);
    let r = run(&mut engine, &o);
    let p = &r.points[0];
    let s = p.summary.as_ref().unwrap();
    let n = p.samples.len() as f64;
    let passed = r.verification.passed as f64;
    // Write 1 (warm-up) is read back; so may be the last write, after the last timed end.
    let timed_read_backs = [passed - 1.0, passed - 2.0];
    assert!(timed_read_backs[1] >= 1.0, "read-backs between timed writes: {:?}", r.verification);
    assert!(
        timed_read_backs.iter().any(|&k| (s.sustained_mbps - s.median_mbps * n / (n + k)).abs() < 1e-6 * s.sustained_mbps),
        "sustained {} median {} n {n} passed {passed}",
        s.sustained_mbps,
        s.median_mbps
    );
    // The read-backs' time is within the share, plus the one that starts just under it.
    assert!(passed - 1.0 <= READBACK_TIME_SHARE * (n + 2.0) + 1.0, "{passed} read-backs over {n} writes");
    assert!(s.sustained_mbps >= s.median_mbps / (1.0 + READBACK_TIME_SHARE) * (1.0 - 1.0 / n), "{} vs {}", s.sustained_mbps, s.median_mbps);
}
