//! The findings audit: every rule that names a cause, a scenario where it must fire and one where
//! it must stay silent, across simulated, co-simulated, emulated and real-path runs. The table
//! [`AUDIT`] is the list docs/findings.md prints; `audit_covers_every_cause_and_the_doc_is_current`
//! fails when a cause has no entry, an entry names a test that does not exist, or the doc is stale
//! (`PCIEPERF_REGENERATE=1 cargo test --lib audit` rewrites it).

use std::sync::atomic::AtomicBool;
use std::sync::OnceLock;
use std::time::Duration;

use super::*;
use crate::bench::dma::{measure, DmaOptions, Quiet};
use crate::bench::verify::VerifyFailure;
use crate::engine::sim::SimEngine;
use crate::engine::{Direction, OpenOptions};

/// One rule of the audit: what it is, the cause it names (none for the demo's and pio's
/// findings, which are sentences), where it must fire, where it must not, and the tests that
/// check both (file, function).
struct Entry {
    rule: &'static str,
    cause: Option<Cause>,
    fires_in: &'static str,
    silent_in: &'static str,
    tests: &'static [(&'static str, &'static str)],
}

const DIAGNOSE: &str = "src/bench/diagnose.rs";
const AUDIT_FILE: &str = "src/bench/diagnose_audit.rs";
const DEMO: &str = "src/bench/demo.rs";
const PIO_RUN: &str = "src/bench/pio_run.rs";

const AUDIT: &[Entry] = &[
    Entry {
        rule: "stopped_early",
        cause: Some(Cause::Incomplete),
        fires_in: "real-path fake interrupted; simulated run stopped by an engine error",
        silent_in: "simulated run that finished",
        tests: &[(DIAGNOSE, "stopped_early_fires_only_for_a_run_that_stopped"), (AUDIT_FILE, "incomplete_fires_for_an_interrupted_real_path_run")],
    },
    Entry {
        rule: "points_without_result",
        cause: Some(Cause::NoSample),
        fires_in: "co-simulated point that timed out with no sample",
        silent_in: "simulated run with samples at every point",
        tests: &[(AUDIT_FILE, "no_sample_fires_for_a_co_simulated_point_without_samples")],
    },
    Entry {
        rule: "verification_failed",
        cause: Some(Cause::VerificationFailed),
        fires_in: "simulated run with a failed h2d check (first failure and its offset)",
        silent_in: "simulated run that verified",
        tests: &[(AUDIT_FILE, "verification_failed_names_the_first_failure")],
    },
    Entry {
        rule: "aer_counters_moved",
        cause: Some(Cause::LinkErrors),
        fires_in: "real-path fake whose correctable AER counter moved",
        silent_in: "real-path fake with counters unchanged; simulated run (no counters)",
        tests: &[(AUDIT_FILE, "link_errors_fire_only_when_a_counter_moved")],
    },
    Entry {
        rule: "emulated_device",
        cause: Some(Cause::Emulated),
        fires_in: "emulated device (hypervisor IDs); real-path run inside a VM",
        silent_in: "simulated run inside a VM; real-path run on bare metal",
        tests: &[(AUDIT_FILE, "emulated_fires_for_emulated_devices_and_not_for_a_simulation_in_a_vm")],
    },
    Entry {
        rule: "link_below_capability",
        cause: Some(Cause::LinkBelowCapability),
        fires_in: "real-path fake trained at Gen1 x4 on a Gen3 x8 capable path",
        silent_in: "the same trained at its capability; the same on an emulated device (nominal link); simulated run (no capability stated)",
        tests: &[(AUDIT_FILE, "link_below_capability_fires_only_below_what_both_ends_can_do")],
    },
    Entry {
        rule: "idle_downshift",
        cause: Some(Cause::IdleDownshift),
        fires_in: "real-path fake (sampled sysfs path) at 2.5 GT/s before and after the run, 16 GT/s during it",
        silent_in: "the same steady at 16 GT/s; no sample during the run; simulated run (no path)",
        tests: &[
            (DIAGNOSE, "idle_downshift_fires_for_a_link_slower_around_the_run_and_names_the_reverse"),
            (DIAGNOSE, "idle_downshift_is_silent_for_a_steady_link_and_without_a_sample_during_the_run"),
        ],
    },
    Entry {
        rule: "idle_downshift (reverse)",
        cause: Some(Cause::DownshiftDuringRun),
        fires_in: "real-path fake slower during the run than before and after it",
        silent_in: "the same steady; simulated run (no path)",
        tests: &[
            (DIAGNOSE, "idle_downshift_fires_for_a_link_slower_around_the_run_and_names_the_reverse"),
            (DIAGNOSE, "idle_downshift_is_silent_for_a_steady_link_and_without_a_sample_during_the_run"),
        ],
    },
    Entry {
        rule: "narrow_uplink",
        cause: Some(Cause::NarrowUplink),
        fires_in: "real-path fake whose root port runs x8 above a x16 device",
        silent_in: "an uplink as wide as the device's link; the device's own link the narrowest",
        tests: &[(DIAGNOSE, "a_narrow_uplink_is_named_and_explains_no_gap")],
    },
    Entry {
        rule: "remote_numa",
        cause: Some(Cause::RemoteNuma),
        fires_in: "real-path fake with the thread or the buffers on node 0, the device on node 1",
        silent_in: "all on the device's node; placement unknown; simulated run",
        tests: &[(DIAGNOSE, "remote_numa_fires_when_the_thread_or_buffers_are_elsewhere")],
    },
    Entry {
        rule: "replays",
        cause: Some(Cause::Replays),
        fires_in: "GPU target whose NVML replay counter rose; AER correctable errors counted during the run",
        silent_in: "counters unchanged; an uncorrectable error only",
        tests: &[(DIAGNOSE, "replays_fire_on_a_rising_nvml_counter_or_correctable_errors_only")],
    },
    Entry {
        rule: "pageable_staging",
        cause: Some(Cause::PageableStaging),
        fires_in: "engine copying from pageable host memory (cuda --cuda-memory pageable)",
        silent_in: "pinned memory; an engine that states no host memory kind",
        tests: &[(DIAGNOSE, "pageable_staging_fires_only_for_pageable_host_memory")],
    },
    Entry {
        rule: "stalls_over_threshold",
        cause: Some(Cause::Stall),
        fires_in: "simulated run with stalls over the threshold",
        silent_in: "simulated run without",
        tests: &[(DIAGNOSE, "stalls_rule_counts_stalls_over_every_point_and_is_silent_without_them")],
    },
    Entry {
        rule: "copy_to_user_dominates",
        cause: Some(Cause::CopyToUser),
        fires_in: "simulated run with the simulator's copy (copy_mbps=333), on its clock; real-path fake with a host copy",
        silent_in: "simulated run without a copy; simulated --copy-to-user (no host time mixed in)",
        tests: &[
            (AUDIT_FILE, "copy_to_user_fires_for_the_simulators_own_copy_as_for_a_real_one"),
            (AUDIT_FILE, "a_simulated_run_never_mixes_the_hosts_copy_time_into_its_clock"),
        ],
    },
    Entry {
        rule: "read_bound_by_latency",
        cause: Some(Cause::ReadLatency),
        fires_in: "simulated h2d sweep whose 4 KiB point is latency-bound (and larger ones are not)",
        silent_in: "simulated d2h-only run; the sweep on an emulated device",
        tests: &[(AUDIT_FILE, "read_latency_names_a_latency_bound_small_h2d_point")],
    },
    Entry {
        rule: "reads_behind_writes",
        cause: Some(Cause::ReadsBehindWrites),
        fires_in: "both at once near a ceiling one tag holds down",
        silent_in: "256 tags; far below the ceiling; one direction; no link",
        tests: &[
            (DIAGNOSE, "reads_behind_writes_fires_near_a_ceiling_the_writes_hold_down"),
            (DIAGNOSE, "reads_behind_writes_is_silent_far_below_the_ceiling_with_many_tags_and_for_one_direction"),
        ],
    },
    Entry {
        rule: "credit_limited",
        cause: Some(Cause::CreditLimited),
        fires_in: "d2h near a ceiling 2 header credits set",
        silent_in: "enough credits; no credits stated; far below",
        tests: &[
            (DIAGNOSE, "credit_limited_fires_when_the_credits_cover_less_than_the_loop"),
            (DIAGNOSE, "credit_limited_is_silent_with_enough_credits_without_them_and_far_below"),
        ],
    },
    Entry {
        rule: "fit_findings",
        cause: Some(Cause::FitRejected),
        fires_in: "simulated sweep whose fit was rejected",
        silent_in: "simulated sweep whose fit holds",
        tests: &[(AUDIT_FILE, "fit_findings_name_a_rejected_fit_and_transfers_below_n_half")],
    },
    Entry {
        rule: "fit_findings",
        cause: Some(Cause::PerTransferOverhead),
        fires_in: "simulated sweep from a size below N½",
        silent_in: "the same sweep when every size is above N½",
        tests: &[(AUDIT_FILE, "fit_findings_name_a_rejected_fit_and_transfers_below_n_half")],
    },
    Entry {
        rule: "spread_and_above_ceiling",
        cause: Some(Cause::Spread),
        fires_in: "simulated point with one transfer 3× the median",
        silent_in: "simulated point with even transfers",
        tests: &[(AUDIT_FILE, "spread_fires_for_slow_transfers_only")],
    },
    Entry {
        rule: "spread_and_above_ceiling",
        cause: Some(Cause::AboveCeiling),
        fires_in: "real-path fake 5 % above its ceiling",
        silent_in: "emulated device above its nominal ceiling; real-path fake below",
        tests: &[(AUDIT_FILE, "above_ceiling_fires_for_a_real_path_and_never_for_an_emulated_device")],
    },
    Entry {
        rule: "gap_to_ceiling",
        cause: Some(Cause::Link),
        fires_in: "simulated point at 95 % of a link-limited ceiling",
        silent_in: "emulated device (no comparison)",
        tests: &[(DIAGNOSE, "near_the_ceiling_the_finding_names_its_limit_and_an_emulated_device_gets_none")],
    },
    Entry {
        rule: "gap_to_ceiling",
        cause: Some(Cause::BelowCeiling),
        fires_in: "simulated point at 50 % with an earlier finding that applies to its mode",
        silent_in: "the same with only findings that explain nothing (incomplete; read latency for d2h)",
        tests: &[
            (DIAGNOSE, "a_gap_to_the_ceiling_is_explained_only_by_an_earlier_finding_that_applies_to_its_mode"),
            (AUDIT_FILE, "read_latency_explains_a_gap_only_where_the_largest_read_is_latency_bound"),
        ],
    },
    Entry {
        rule: "gap_to_ceiling",
        cause: Some(Cause::Unexplained),
        fires_in: "simulated point at 50 % with no earlier finding",
        silent_in: "the same explained by a stall; near the ceiling",
        tests: &[(DIAGNOSE, "a_gap_to_the_ceiling_is_explained_only_by_an_earlier_finding_that_applies_to_its_mode")],
    },
    Entry {
        rule: "no_link_info",
        cause: Some(Cause::NoLinkInfo),
        fires_in: "run whose target stated no link",
        silent_in: "simulated run (its link stated)",
        tests: &[(DIAGNOSE, "no_link_info_fires_only_without_link_conditions")],
    },
    Entry {
        rule: "demo: above the ceiling",
        cause: None,
        fires_in: "simulated demo above its ceiling, judged on the timer its time came from (0.1 s registers or cycle counter)",
        silent_in: "simulated demo below its ceiling",
        tests: &[(DEMO, "a_demo_result_above_the_ceiling_is_judged_on_the_timer_it_came_from")],
    },
    Entry {
        rule: "demo: above the ceiling on a link without SKP or DLLPs",
        cause: None,
        fires_in: "co-simulated demo above the ceiling by less than the share of SKP ordered sets and DLLPs (cocotbext-pcie sends none); beyond it, that share named and the rest called unexplained",
        silent_in: "the same excess on a link that sends them (the general finding instead)",
        tests: &[(DEMO, "a_co_simulated_result_above_the_ceiling_names_the_skp_and_dllps_its_link_omits")],
    },
    Entry {
        rule: "demo: status word against the conditions",
        cause: None,
        fires_in: "simulated demo whose status word reports another MaxPayload",
        silent_in: "simulated demo whose status word agrees",
        tests: &[(DEMO, "a_status_word_that_disagrees_with_the_conditions_is_named")],
    },
    Entry {
        rule: "pio: gap to the model",
        cause: None,
        fires_in: "simulated pio run (the model's gap explained per case)",
        silent_in: "emulated BAR (no ratio to the model, no link explanation)",
        tests: &[(PIO_RUN, "an_emulated_bar_gets_no_ratio_to_the_model_and_no_link_explanation")],
    },
];

/// The audit table as docs/findings.md prints it.
fn table() -> String {
    let mut out = String::from("| rule | cause | fires in | silent in | tests |\n|---|---|---|---|---|\n");
    for e in AUDIT {
        let cause = e.cause.as_ref().map_or("—".to_string(), |c| format!("`{}`", c.name()));
        let tests: Vec<String> = e.tests.iter().map(|(file, name)| format!("`{file}`: `{name}`")).collect();
        out += &format!("| `{}` | {cause} | {} | {} | {} |\n", e.rule, e.fires_in, e.silent_in, tests.join("<br>"));
    }
    out
}

const TABLE_START: &str = "<!-- audit table: generated by `PCIEPERF_REGENERATE=1 cargo test --lib audit`; do not edit -->\n";
const TABLE_END: &str = "<!-- end of audit table -->";

#[test]
fn audit_covers_every_cause_and_the_doc_is_current() {
    for cause in Cause::ALL {
        assert!(AUDIT.iter().any(|e| e.cause.as_ref() == Some(&cause)), "cause `{}` has no audit entry (fires in / silent in / test)", cause.name());
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for e in AUDIT {
        assert!(!e.fires_in.is_empty() && !e.silent_in.is_empty() && !e.tests.is_empty(), "{}: a scenario pair and a test", e.rule);
        for (file, name) in e.tests {
            let source = std::fs::read_to_string(root.join(file)).unwrap_or_default();
            assert!(source.contains(&format!("fn {name}()")), "{}: test {file}: {name} does not exist", e.rule);
        }
    }
    let path = root.join("docs/findings.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let (Some(start), Some(end)) = (doc.find(TABLE_START), doc.find(TABLE_END)) else { panic!("docs/findings.md lacks the audit table markers") };
    let current = &doc[start + TABLE_START.len()..end];
    let wanted = table();
    if current != wanted && std::env::var_os("PCIEPERF_REGENERATE").is_some() {
        std::fs::write(&path, format!("{}{TABLE_START}{wanted}{}", &doc[..start], &doc[end..])).unwrap();
        return;
    }
    assert_eq!(current, wanted, "docs/findings.md's audit table is stale: run PCIEPERF_REGENERATE=1 cargo test --lib audit");
}

#[test]
fn cause_all_lists_every_variant_once_in_declaration_order() {
    // A new variant breaks this match until it is listed in `Cause::ALL` (and so in the audit).
    let index = |c: &Cause| match c {
        Cause::LinkBelowCapability => 0,
        Cause::PerTransferOverhead => 1,
        Cause::ReadLatency => 2,
        Cause::CopyToUser => 3,
        Cause::Stall => 4,
        Cause::VerificationFailed => 5,
        Cause::Link => 6,
        Cause::BelowCeiling => 7,
        Cause::Unexplained => 8,
        Cause::NoLinkInfo => 9,
        Cause::Incomplete => 10,
        Cause::NoSample => 11,
        Cause::Spread => 12,
        Cause::AboveCeiling => 13,
        Cause::FitRejected => 14,
        Cause::LinkErrors => 15,
        Cause::Emulated => 16,
        Cause::ReadsBehindWrites => 17,
        Cause::CreditLimited => 18,
        Cause::IdleDownshift => 19,
        Cause::DownshiftDuringRun => 20,
        Cause::NarrowUplink => 21,
        Cause::RemoteNuma => 22,
        Cause::Replays => 23,
        Cause::PageableStaging => 24,
    };
    for (i, cause) in Cause::ALL.iter().enumerate() {
        assert_eq!(index(cause), i, "{}", cause.name());
    }
    assert_eq!(Cause::ReadLatency.name(), "read_latency");
}

// ---- Fixtures: real simulated runs, then the conditions of other kinds of target ----

/// A simulated run of `target` over `modes` × `sizes`.
fn run(target: &str, modes: Vec<Mode>, sizes: Vec<u64>, copy_to_user: bool) -> Results {
    let mut options = DmaOptions::new(modes, sizes);
    let mut engine = SimEngine::open(target, &OpenOptions { seed: options.seed, ..OpenOptions::default() }).unwrap();
    options.duration = Duration::from_millis(20);
    options.wall_limit = Duration::from_secs(2);
    options.copy_to_user = copy_to_user;
    measure(&mut engine, &options, &AtomicBool::new(false), &mut Quiet).unwrap()
}

/// One simulated d2h point at 64 KiB, shared.
fn simulated() -> Results {
    static RUN: OnceLock<Results> = OnceLock::new();
    RUN.get_or_init(|| run("sim", vec![Mode::D2h], vec![65536], false)).clone()
}

/// A simulated h2d sweep from 4 KiB to 1 MiB, shared.
fn h2d_sweep() -> Results {
    static RUN: OnceLock<Results> = OnceLock::new();
    RUN.get_or_init(|| run("sim", vec![Mode::H2d], vec![4096, 65536, 1 << 20], false)).clone()
}

/// The simulated run as a real engine's: measured, on a PCI address, no VM.
fn real_path() -> Results {
    let mut results = simulated();
    results.simulated = false;
    results.conditions.simulated = false;
    results.conditions.engine.simulated = false;
    results.conditions.engine.kind = "xdma".into();
    results.conditions.engine.pci_address = Some("0000:01:00.0".into());
    results.conditions.virtual_machine = None;
    results
}

fn causes(found: &[Finding]) -> Vec<&Cause> {
    found.iter().map(|f| &f.cause).collect()
}

fn set_percent(results: &mut Results, percent: f64) {
    for c in results.points.iter_mut().filter_map(|p| p.ceiling.as_mut()) {
        c.percent_reached = Some(percent);
    }
}

// ---- Scenario pairs ----

#[test]
fn incomplete_fires_for_an_interrupted_real_path_run() {
    let mut results = real_path();
    assert!(!causes(&findings(&results)).contains(&&Cause::Incomplete));
    results.stopped = Some(Stopped::Interrupted);
    assert_eq!(causes(&stopped_early(&results, &[])), [&Cause::Incomplete]);
    assert_eq!(findings(&results)[0].cause, Cause::Incomplete, "most important first");
}

#[test]
fn no_sample_fires_for_a_co_simulated_point_without_samples() {
    let mut results = simulated();
    assert!(points_without_result(&results, &[]).is_empty());
    results.conditions.engine.co_simulated = true;
    results.points[0].error = Some("d2h 64KiB: no timed transfer completed within the 100 s wall-clock guard".into());
    let found = points_without_result(&results, &[]);
    assert_eq!(causes(&found), [&Cause::NoSample]);
    assert!(found[0].message.contains("no timed transfer completed"), "{}", found[0].message);
}

#[test]
fn verification_failed_names_the_first_failure() {
    let mut results = simulated();
    assert_eq!(results.verification.failed, 0, "{:?}", results.verification.first_failure);
    assert!(verification_failed(&results, &[]).is_empty());
    results.verification.failed = 1;
    results.verification.first_failure =
        Some(VerifyFailure { direction: Direction::H2d, check: "pattern".into(), offset: Some(4100), expected: "0x5a".into(), actual: "0x00".into() });
    let found = verification_failed(&results, &[]);
    assert_eq!(causes(&found), [&Cause::VerificationFailed]);
    assert!(found[0].message.contains("at offset 4100"), "{}", found[0].message);
}

#[test]
fn link_errors_fire_only_when_a_counter_moved() {
    let mut results = real_path();
    assert!(aer_counters_moved(&results, &[]).is_empty(), "no counters read");
    let snapshot = crate::pci::health::AerSnapshot { functions: Vec::new() };
    results.link_health = Some(crate::bench::results::LinkHealth { before: snapshot.clone(), after: Some(snapshot), changes: Vec::new() });
    assert!(aer_counters_moved(&results, &[]).is_empty(), "counters unchanged");
    let moved = AerChange { bdf: "0000:01:00.0".into(), counter: "aer_dev_correctable/BadTLP".into(), before: 0, after: 3 };
    results.link_health.as_mut().unwrap().changes.push(moved);
    let found = aer_counters_moved(&results, &[]);
    assert_eq!(causes(&found), [&Cause::LinkErrors]);
    assert!(found[0].message.contains("BadTLP 0 → 3") && found[0].message.contains("replayed"), "{}", found[0].message);
}

#[test]
fn emulated_fires_for_emulated_devices_and_not_for_a_simulation_in_a_vm() {
    let mut simulated_in_vm = simulated();
    simulated_in_vm.conditions.virtual_machine = Some("QEMU".into());
    assert!(emulated_device(&simulated_in_vm, &[]).is_empty(), "a simulated device is not the hypervisor's");
    let bare_metal = real_path();
    assert!(emulated_device(&bare_metal, &[]).is_empty());
    let mut in_vm = real_path();
    in_vm.conditions.virtual_machine = Some("QEMU".into());
    assert_eq!(causes(&emulated_device(&in_vm, &[])), [&Cause::Emulated]);
    let mut emulated = real_path();
    emulated.conditions.emulated_by = Some("QEMU NVMe (Red Hat): vendor ID 0x1b36".into());
    let found = emulated_device(&emulated, &[]);
    assert_eq!(causes(&found), [&Cause::Emulated]);
    assert!(found[0].message.contains("not compared with the model's ceiling"), "{}", found[0].message);
}

#[test]
fn link_below_capability_fires_only_below_what_both_ends_can_do() {
    let simulated = simulated();
    assert!(link_below_capability(&simulated, &[]).is_empty());
    let mut results = real_path();
    let link = results.conditions.link.as_mut().unwrap();
    link.params.link = "gen1x4".parse().unwrap();
    link.capable = Some("gen1x4".parse().unwrap());
    assert!(link_below_capability(&results, &[]).is_empty(), "at its capability");
    results.conditions.link.as_mut().unwrap().capable = Some("gen3x8".parse().unwrap());
    let found = link_below_capability(&results, &[]);
    assert_eq!(causes(&found), [&Cause::LinkBelowCapability]);
    results.conditions.emulated_by = Some("QEMU NVMe".into());
    assert!(link_below_capability(&results, &[]).is_empty(), "an emulated device's link is nominal");
}

#[test]
fn copy_to_user_fires_for_the_simulators_own_copy_as_for_a_real_one() {
    let plain = simulated();
    assert!(copy_to_user_dominates(&plain, &[]).is_empty(), "no copy, no copy finding");
    // The simulator's own copy cost: on its clock, found by the same rule as a real copy.
    let copied = run("sim:copy_mbps=333", vec![Mode::D2h], vec![1 << 20], false);
    let sample = &copied.points[0].samples[0];
    let expected_ns = (1u64 << 20) as f64 * 1e3 / 333.0;
    assert!((sample.copy_ns.expect("the simulated copy is reported") - expected_ns).abs() < 1.0, "{sample:?}");
    let found = copy_to_user_dominates(&copied, &[]);
    assert_eq!(causes(&found), [&Cause::CopyToUser], "{:?}", copied.findings);
    assert!(copied.findings.iter().any(|f| f.cause == Cause::CopyToUser), "{:?}", copied.findings);
    let summary = copied.points[0].summary.as_ref().unwrap();
    assert!(summary.transfer_only_median_mbps > 2.0 * summary.median_mbps, "the transfer alone is faster than with the copy");
    // A real path's host copy: the same rule.
    let mut real = real_path();
    let s = real.points[0].summary.as_mut().unwrap();
    s.copy_median_ns = Some(s.time_ns.median);
    assert_eq!(causes(&copy_to_user_dominates(&real, &[])), [&Cause::CopyToUser]);
}

#[test]
fn a_simulated_run_never_mixes_the_hosts_copy_time_into_its_clock() {
    let results = run("sim", vec![Mode::D2h, Mode::H2d], vec![65536], true);
    for point in &results.points {
        assert!(point.samples.iter().all(|s| s.copy_ns.is_none()), "{} has host copy time in a simulated sample", point.mode.name());
    }
    assert!(copy_to_user_dominates(&results, &[]).is_empty());
}

#[test]
fn read_latency_names_a_latency_bound_small_h2d_point() {
    let sweep = h2d_sweep();
    let limits: Vec<Limit> = sweep.points.iter().map(|p| p.ceiling.as_ref().unwrap().limit).collect();
    assert_eq!(limits[0], Limit::Latency, "a 4 KiB read waits for its completions: {limits:?}");
    assert_ne!(limits[2], Limit::Latency, "a 1 MiB read fills the link: {limits:?}");
    let found = read_bound_by_latency(&sweep, &[]);
    assert_eq!(causes(&found), [&Cause::ReadLatency]);
    assert!(found[0].message.starts_with("h2d is a device read: up to 4KiB"), "{}", found[0].message);
    assert!(sweep.findings.iter().any(|f| f.cause == Cause::ReadLatency), "{:?}", sweep.findings);
    let writes = simulated();
    assert!(read_bound_by_latency(&writes, &[]).is_empty(), "d2h is a device write");
    let mut emulated = sweep;
    emulated.conditions.emulated_by = Some("QEMU NVMe".into());
    assert!(read_bound_by_latency(&emulated, &[]).is_empty(), "the emulator answers the reads, not a link");
}

#[test]
fn read_latency_explains_a_gap_only_where_the_largest_read_is_latency_bound() {
    let mut sweep = h2d_sweep();
    set_percent(&mut sweep, 50.0);
    let latency = [finding(Cause::ReadLatency, String::new())];
    assert_eq!(causes(&gap_to_ceiling(&sweep, &latency)), [&Cause::Unexplained], "1 MiB is link-bound: latency does not explain it");
    for c in sweep.points.iter_mut().filter_map(|p| p.ceiling.as_mut()) {
        c.limit = Limit::Latency;
    }
    set_percent(&mut sweep, 50.0);
    assert_eq!(causes(&gap_to_ceiling(&sweep, &latency)), [&Cause::BelowCeiling]);
}

#[test]
fn fit_findings_name_a_rejected_fit_and_transfers_below_n_half() {
    let mut sweep = h2d_sweep();
    assert_eq!(sweep.fits.len(), 1);
    let fit = &mut sweep.fits[0];
    fit.rejected = None;
    (fit.m_us, fit.n_half_bytes) = (2.0, 16384.0);
    assert_eq!(causes(&fit_findings(&sweep, &[])), [&Cause::PerTransferOverhead], "4 KiB is below N½ = 16 kB");
    sweep.fits[0].n_half_bytes = 1024.0;
    assert!(fit_findings(&sweep, &[]).is_empty(), "every size above N½ and the fit holds");
    sweep.fits[0].rejected = Some("m < 0".into());
    let found = fit_findings(&sweep, &[]);
    assert_eq!(causes(&found), [&Cause::FitRejected]);
    assert!(found[0].message.ends_with("not shown: m < 0"), "{}", found[0].message);
}

#[test]
fn spread_fires_for_slow_transfers_only() {
    let mut results = simulated();
    let median = results.points[0].summary.as_ref().unwrap().time_ns.median;
    for s in &mut results.points[0].samples {
        s.engine_ns = median;
    }
    results.points[0].summary.as_mut().unwrap().time_ns.max = median;
    assert!(!causes(&spread_and_above_ceiling(&results, &[])).contains(&&Cause::Spread));
    results.points[0].samples[0].engine_ns = 3.0 * median;
    results.points[0].summary.as_mut().unwrap().time_ns.max = 3.0 * median;
    let found = spread_and_above_ceiling(&results, &[]);
    assert!(causes(&found).contains(&&Cause::Spread), "{found:?}");
}

#[test]
fn above_ceiling_fires_for_a_real_path_and_never_for_an_emulated_device() {
    let mut results = real_path();
    let ceiling = results.points[0].ceiling.as_ref().unwrap().mbps;
    results.points[0].summary.as_mut().unwrap().median_mbps = 0.5 * ceiling;
    assert!(!causes(&spread_and_above_ceiling(&results, &[])).contains(&&Cause::AboveCeiling));
    results.points[0].summary.as_mut().unwrap().median_mbps = 1.05 * ceiling;
    let found = spread_and_above_ceiling(&results, &[]);
    assert!(causes(&found).contains(&&Cause::AboveCeiling), "{found:?}");
    results.conditions.emulated_by = Some("QEMU NVMe".into());
    assert!(!causes(&spread_and_above_ceiling(&results, &[])).contains(&&Cause::AboveCeiling));
}
