//! The findings audit: every rule that names a cause, a scenario where it must fire and one where
//! it must stay silent, across simulated, co-simulated, emulated and real-path runs. The tables
//! ([`FAMILIES`]: `dma`/`run`, `inspect`, `stream`, `crosscheck`) are what docs/findings.md prints;
//! `audit_covers_every_rule_and_the_doc_is_current` fails when a cause, warning kind, bubble
//! cause, verdict or crosscheck explanation has no entry, an entry names a test that does not
//! exist, or the doc is stale (`PCIEPERF_REGENERATE=1 cargo test --lib audit` rewrites it).

use std::sync::atomic::AtomicBool;
use std::sync::OnceLock;
use std::time::Duration;

use super::*;
use crate::bench::dma::{measure, DmaOptions, Quiet};
use crate::bench::verify::VerifyFailure;
use crate::engine::ring::WaitCause;
use crate::engine::sim::SimEngine;
use crate::engine::{Direction, OpenOptions};
use crate::pci::analysis::WarningKind;

/// What a rule names when it fires.
enum Names {
    /// A `dma`/`run` finding's cause.
    Cause(Cause),
    /// An `inspect` warning's code.
    Warning(WarningKind),
    /// A stream bubble's cause.
    Bubble(WaitCause),
    /// A stream verdict's limit or the start of a crosscheck explanation.
    Words(&'static str),
    /// A sentence with no code (the demo's and pio's findings, the bandwidth line).
    Sentence,
}

impl Names {
    fn cell(&self) -> String {
        match self {
            Names::Cause(c) => format!("`{}`", c.name()),
            Names::Warning(w) => format!("`{}`", w.code()),
            Names::Bubble(b) => format!("`{}`", serde_json::to_value(b).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()),
            Names::Words(words) => format!("`{words}`"),
            Names::Sentence => "—".into(),
        }
    }
}

/// One rule of the audit: what it is, what it names, where it must fire, where it must not,
/// and the tests that check both (file, function).
struct Entry {
    rule: &'static str,
    names: Names,
    fires_in: &'static str,
    silent_in: &'static str,
    tests: &'static [(&'static str, &'static str)],
}

/// One table of docs/findings.md: its marker, the heading of its "names" column, its rules.
struct Family {
    marker: &'static str,
    names_heading: &'static str,
    entries: &'static [Entry],
}

const DIAGNOSE: &str = "src/bench/diagnose.rs";
const AUDIT_FILE: &str = "src/bench/diagnose_audit.rs";
const DEMO: &str = "src/bench/demo.rs";
const PIO_RUN: &str = "src/bench/pio_run.rs";

const RUN: &[Entry] = &[
    Entry {
        rule: "stopped_early",
        names: Names::Cause(Cause::Incomplete),
        fires_in: "real-path fake interrupted; simulated run stopped by an engine error",
        silent_in: "simulated run that finished",
        tests: &[(DIAGNOSE, "stopped_early_fires_only_for_a_run_that_stopped"), (AUDIT_FILE, "incomplete_fires_for_an_interrupted_real_path_run")],
    },
    Entry {
        rule: "points_without_result",
        names: Names::Cause(Cause::NoSample),
        fires_in: "co-simulated point that timed out with no sample",
        silent_in: "simulated run with samples at every point",
        tests: &[(AUDIT_FILE, "no_sample_fires_for_a_co_simulated_point_without_samples")],
    },
    Entry {
        rule: "verification_failed",
        names: Names::Cause(Cause::VerificationFailed),
        fires_in: "simulated run with a failed h2d check (first failure and its offset)",
        silent_in: "simulated run that verified",
        tests: &[(AUDIT_FILE, "verification_failed_names_the_first_failure")],
    },
    Entry {
        rule: "aer_counters_moved",
        names: Names::Cause(Cause::LinkErrors),
        fires_in: "real-path fake whose correctable AER counter moved",
        silent_in: "real-path fake with counters unchanged; simulated run (no counters)",
        tests: &[(AUDIT_FILE, "link_errors_fire_only_when_a_counter_moved")],
    },
    Entry {
        rule: "emulated_device",
        names: Names::Cause(Cause::Emulated),
        fires_in: "emulated device (hypervisor IDs); real-path run inside a VM",
        silent_in: "simulated run inside a VM; real-path run on bare metal",
        tests: &[(AUDIT_FILE, "emulated_fires_for_emulated_devices_and_not_for_a_simulation_in_a_vm")],
    },
    Entry {
        rule: "link_below_capability",
        names: Names::Cause(Cause::LinkBelowCapability),
        fires_in: "real-path fake trained at Gen1 x4 on a Gen3 x8 capable path",
        silent_in: "the same trained at its capability; the same on an emulated device (nominal link); simulated run (no capability stated)",
        tests: &[(AUDIT_FILE, "link_below_capability_fires_only_below_what_both_ends_can_do")],
    },
    Entry {
        rule: "idle_downshift",
        names: Names::Cause(Cause::IdleDownshift),
        fires_in: "real-path fake (sampled sysfs path) at 2.5 GT/s before and after the run, 16 GT/s during it",
        silent_in: "the same steady at 16 GT/s; no sample during the run; simulated run (no path)",
        tests: &[
            (DIAGNOSE, "idle_downshift_fires_for_a_link_slower_around_the_run_and_names_the_reverse"),
            (DIAGNOSE, "idle_downshift_is_silent_for_a_steady_link_and_without_a_sample_during_the_run"),
        ],
    },
    Entry {
        rule: "idle_downshift (reverse)",
        names: Names::Cause(Cause::DownshiftDuringRun),
        fires_in: "real-path fake slower during the run than before and after it",
        silent_in: "the same steady; simulated run (no path)",
        tests: &[
            (DIAGNOSE, "idle_downshift_fires_for_a_link_slower_around_the_run_and_names_the_reverse"),
            (DIAGNOSE, "idle_downshift_is_silent_for_a_steady_link_and_without_a_sample_during_the_run"),
        ],
    },
    Entry {
        rule: "narrow_uplink",
        names: Names::Cause(Cause::NarrowUplink),
        fires_in: "real-path fake whose root port runs x8 above a x16 device",
        silent_in: "an uplink as wide as the device's link; the device's own link the narrowest",
        tests: &[(DIAGNOSE, "a_narrow_uplink_is_named_and_explains_no_gap")],
    },
    Entry {
        rule: "remote_numa",
        names: Names::Cause(Cause::RemoteNuma),
        fires_in: "real-path fake with the thread or the buffers on node 0, the device on node 1",
        silent_in: "all on the device's node; placement unknown; simulated run",
        tests: &[(DIAGNOSE, "remote_numa_fires_when_the_thread_or_buffers_are_elsewhere")],
    },
    Entry {
        rule: "replays",
        names: Names::Cause(Cause::Replays),
        fires_in: "GPU target whose NVML replay counter rose; AER correctable errors counted during the run",
        silent_in: "counters unchanged; an uncorrectable error only",
        tests: &[(DIAGNOSE, "replays_fire_on_a_rising_nvml_counter_or_correctable_errors_only")],
    },
    Entry {
        rule: "gpu_power_state",
        names: Names::Cause(Cause::GpuPowerState),
        fires_in: "GPU target whose NVML samples during the copy say P8 (the fake libnvidia-ml in tests/gpu_path.rs as well)",
        silent_in: "P0 in every sample during the copy, P8 only before and after it; no NVML state",
        tests: &[(DIAGNOSE, "gpu_power_state_fires_only_below_p0_during_the_copy")],
    },
    Entry {
        rule: "pageable_staging",
        names: Names::Cause(Cause::PageableStaging),
        fires_in: "engine copying from pageable host memory (cuda --cuda-memory pageable)",
        silent_in: "pinned memory; an engine that states no host memory kind",
        tests: &[(DIAGNOSE, "pageable_staging_fires_only_for_pageable_host_memory")],
    },
    Entry {
        rule: "stalls_over_threshold",
        names: Names::Cause(Cause::Stall),
        fires_in: "simulated run with stalls over the threshold",
        silent_in: "simulated run without",
        tests: &[(DIAGNOSE, "stalls_rule_counts_stalls_over_every_point_and_is_silent_without_them")],
    },
    Entry {
        rule: "copy_to_user_dominates",
        names: Names::Cause(Cause::CopyToUser),
        fires_in: "simulated run with the simulator's copy (copy_mbps=333), on its clock; real-path fake with a host copy",
        silent_in: "simulated run without a copy; simulated --copy-to-user (no host time mixed in)",
        tests: &[
            (AUDIT_FILE, "copy_to_user_fires_for_the_simulators_own_copy_as_for_a_real_one"),
            (AUDIT_FILE, "a_simulated_run_never_mixes_the_hosts_copy_time_into_its_clock"),
        ],
    },
    Entry {
        rule: "read_bound_by_latency",
        names: Names::Cause(Cause::ReadLatency),
        fires_in: "simulated h2d sweep whose 4 KiB point is latency-bound (and larger ones are not)",
        silent_in: "simulated d2h-only run; the sweep on an emulated device",
        tests: &[(AUDIT_FILE, "read_latency_names_a_latency_bound_small_h2d_point")],
    },
    Entry {
        rule: "reads_behind_writes",
        names: Names::Cause(Cause::ReadsBehindWrites),
        fires_in: "both at once near a ceiling one tag holds down",
        silent_in: "256 tags; far below the ceiling; one direction; no link",
        tests: &[
            (DIAGNOSE, "reads_behind_writes_fires_near_a_ceiling_the_writes_hold_down"),
            (DIAGNOSE, "reads_behind_writes_is_silent_far_below_the_ceiling_with_many_tags_and_for_one_direction"),
        ],
    },
    Entry {
        rule: "credit_limited",
        names: Names::Cause(Cause::CreditLimited),
        fires_in: "d2h near a ceiling 2 header credits set",
        silent_in: "enough credits; no credits stated; far below",
        tests: &[
            (DIAGNOSE, "credit_limited_fires_when_the_credits_cover_less_than_the_loop"),
            (DIAGNOSE, "credit_limited_is_silent_with_enough_credits_without_them_and_far_below"),
        ],
    },
    Entry {
        rule: "fit_findings",
        names: Names::Cause(Cause::FitRejected),
        fires_in: "simulated sweep whose fit was rejected",
        silent_in: "simulated sweep whose fit holds",
        tests: &[(AUDIT_FILE, "fit_findings_name_a_rejected_fit_and_transfers_below_n_half")],
    },
    Entry {
        rule: "fit_findings",
        names: Names::Cause(Cause::PerTransferOverhead),
        fires_in: "simulated sweep from a size below N½",
        silent_in: "the same sweep when every size is above N½",
        tests: &[(AUDIT_FILE, "fit_findings_name_a_rejected_fit_and_transfers_below_n_half")],
    },
    Entry {
        rule: "spread_and_above_ceiling",
        names: Names::Cause(Cause::Spread),
        fires_in: "simulated point with one transfer 3× the median",
        silent_in: "simulated point with even transfers",
        tests: &[(AUDIT_FILE, "spread_fires_for_slow_transfers_only")],
    },
    Entry {
        rule: "spread_and_above_ceiling",
        names: Names::Cause(Cause::AboveCeiling),
        fires_in: "real-path fake 5 % above its ceiling",
        silent_in: "emulated device above its nominal ceiling; real-path fake below",
        tests: &[(AUDIT_FILE, "above_ceiling_fires_for_a_real_path_and_never_for_an_emulated_device")],
    },
    Entry {
        rule: "gap_to_ceiling",
        names: Names::Cause(Cause::Link),
        fires_in: "simulated point at 95 % of a link-limited ceiling",
        silent_in: "emulated device (no comparison)",
        tests: &[(DIAGNOSE, "near_the_ceiling_the_finding_names_its_limit_and_an_emulated_device_gets_none")],
    },
    Entry {
        rule: "gap_to_ceiling",
        names: Names::Cause(Cause::BelowCeiling),
        fires_in: "simulated point at 50 % with an earlier finding that applies to its mode",
        silent_in: "the same with only findings that explain nothing (incomplete; read latency for d2h)",
        tests: &[
            (DIAGNOSE, "a_gap_to_the_ceiling_is_explained_only_by_an_earlier_finding_that_applies_to_its_mode"),
            (AUDIT_FILE, "read_latency_explains_a_gap_only_where_the_largest_read_is_latency_bound"),
        ],
    },
    Entry {
        rule: "gap_to_ceiling",
        names: Names::Cause(Cause::Unexplained),
        fires_in: "simulated point at 50 % with no earlier finding",
        silent_in: "the same explained by a stall; near the ceiling",
        tests: &[(DIAGNOSE, "a_gap_to_the_ceiling_is_explained_only_by_an_earlier_finding_that_applies_to_its_mode")],
    },
    Entry {
        rule: "no_link_info",
        names: Names::Cause(Cause::NoLinkInfo),
        fires_in: "run whose target stated no link",
        silent_in: "simulated run (its link stated)",
        tests: &[(DIAGNOSE, "no_link_info_fires_only_without_link_conditions")],
    },
    Entry {
        rule: "demo: above the ceiling",
        names: Names::Sentence,
        fires_in: "simulated demo above its ceiling, judged on the timer its time came from (0.1 s registers or cycle counter)",
        silent_in: "simulated demo below its ceiling",
        tests: &[(DEMO, "a_demo_result_above_the_ceiling_is_judged_on_the_timer_it_came_from")],
    },
    Entry {
        rule: "demo: above the ceiling on a link without SKP or DLLPs",
        names: Names::Sentence,
        fires_in: "co-simulated demo above the ceiling by less than the share of SKP ordered sets and DLLPs (cocotbext-pcie sends none); beyond it, that share named and the rest called unexplained",
        silent_in: "the same excess on a link that sends them (the general finding instead)",
        tests: &[(DEMO, "a_co_simulated_result_above_the_ceiling_names_the_skp_and_dllps_its_link_omits")],
    },
    Entry {
        rule: "demo: status word against the conditions",
        names: Names::Sentence,
        fires_in: "simulated demo whose status word reports another MaxPayload",
        silent_in: "simulated demo whose status word agrees",
        tests: &[(DEMO, "a_status_word_that_disagrees_with_the_conditions_is_named")],
    },
    Entry {
        rule: "pio: gap to the model",
        names: Names::Sentence,
        fires_in: "simulated pio run (the model's gap explained per case)",
        silent_in: "emulated BAR (no ratio to the model, no link explanation)",
        tests: &[(PIO_RUN, "an_emulated_bar_gets_no_ratio_to_the_model_and_no_link_explanation")],
    },
];

const INSPECT_SYSFS: &str = "tests/inspect_sysfs.rs";
const INSPECT_AUDIT: &str = "tests/inspect_warnings_audit.rs";
const TOPOLOGY: &str = "src/pci/topology.rs";

const INSPECT: &[Entry] = &[
    Entry {
        rule: "link_checks",
        names: Names::Warning(WarningKind::LinkDown),
        fires_in: "fake sysfs tree: an endpoint whose LnkSta reports no width",
        silent_in: "fake sysfs tree: a healthy Gen3 x4 endpoint",
        tests: &[(INSPECT_SYSFS, "link_down_slow_partner_and_target_speed_are_told_apart"), (INSPECT_AUDIT, "the_healthy_endpoint_has_no_warning")],
    },
    Entry {
        rule: "link_checks",
        names: Names::Warning(WarningKind::LinkSpeedBelowCapability),
        fires_in: "fake sysfs trees: Gen1 behind a Gen3 switch (both ends capable: trained down); a slower other end; LnkCtl2 Target Link Speed (each cause named)",
        silent_in: "a Gen4 GPU trained at Gen4 in a narrow slot; the ports above the degraded link (only the upstream end judges it); a healthy endpoint",
        tests: &[
            (INSPECT_SYSFS, "every_cause_is_named_behind_a_switch"),
            (INSPECT_SYSFS, "link_down_slow_partner_and_target_speed_are_told_apart"),
            (INSPECT_SYSFS, "narrow_slot_is_named_with_the_kernel_wording"),
        ],
    },
    Entry {
        rule: "link_checks",
        names: Names::Warning(WarningKind::LinkWidthBelowCapability),
        fires_in: "fake sysfs tree: a x16 GPU in a slot wired x8 (the other end named)",
        silent_in: "a healthy endpoint at its width; the ports of a switch at theirs",
        tests: &[(INSPECT_SYSFS, "narrow_slot_is_named_with_the_kernel_wording"), (INSPECT_SYSFS, "every_cause_is_named_behind_a_switch")],
    },
    Entry {
        rule: "payload_checks",
        names: Names::Warning(WarningKind::MaxPayloadReserved),
        fires_in: "fake sysfs tree: DevCtl MaxPayload field 6 (reserved)",
        silent_in: "a healthy endpoint (256 bytes)",
        tests: &[(INSPECT_AUDIT, "a_reserved_max_payload_is_named_only_when_devctl_holds_one")],
    },
    Entry {
        rule: "payload_checks",
        names: Names::Warning(WarningKind::MaxPayloadBelowSupported),
        fires_in: "fake sysfs tree: 128 bytes configured where the device and every port on its path support 256",
        silent_in: "a healthy endpoint configured at its path's 256; a reserved value (named as such instead)",
        tests: &[
            (INSPECT_SYSFS, "every_cause_is_named_behind_a_switch"),
            (INSPECT_AUDIT, "the_healthy_endpoint_has_no_warning"),
            (INSPECT_AUDIT, "a_reserved_max_payload_is_named_only_when_devctl_holds_one"),
        ],
    },
    Entry {
        rule: "payload_checks",
        names: Names::Warning(WarningKind::MaxReadRequestSmall),
        fires_in: "fake sysfs tree: an endpoint with MaxReadReq 128",
        silent_in: "a healthy endpoint (512)",
        tests: &[(INSPECT_SYSFS, "every_cause_is_named_behind_a_switch"), (INSPECT_AUDIT, "the_healthy_endpoint_has_no_warning")],
    },
    Entry {
        rule: "payload_checks",
        names: Names::Warning(WarningKind::RelaxedOrderingDisabled),
        fires_in: "fake sysfs tree: an endpoint with DevCtl RlxdOrd-",
        silent_in: "a healthy endpoint (RlxdOrd+)",
        tests: &[(INSPECT_AUDIT, "relaxed_ordering_disabled_fires_only_for_an_endpoint_without_it")],
    },
    Entry {
        rule: "aspm_check",
        names: Names::Warning(WarningKind::AspmEnabled),
        fires_in: "fake sysfs tree: an endpoint with ASPM L1 enabled",
        silent_in: "a healthy endpoint (ASPM disabled)",
        tests: &[(INSPECT_SYSFS, "every_cause_is_named_behind_a_switch"), (INSPECT_AUDIT, "the_healthy_endpoint_has_no_warning")],
    },
    Entry {
        rule: "aer_checks",
        names: Names::Warning(WarningKind::AerCorrectableErrors),
        fires_in: "fake sysfs tree: aer_dev_correctable counting 9 errors",
        silent_in: "counters all zero; no counters and no status bits",
        tests: &[(INSPECT_SYSFS, "every_cause_is_named_behind_a_switch"), (INSPECT_AUDIT, "uncorrectable_errors_fire_only_when_counted_or_unmasked")],
    },
    Entry {
        rule: "aer_checks",
        names: Names::Warning(WarningKind::AerUncorrectableErrors),
        fires_in: "fake sysfs tree: aer_dev_nonfatal counting 2; an unmasked Completion Timeout status bit",
        silent_in: "counters all zero; the same status bit masked",
        tests: &[(INSPECT_AUDIT, "uncorrectable_errors_fire_only_when_counted_or_unmasked")],
    },
    Entry {
        rule: "analyse: emulated",
        names: Names::Warning(WarningKind::EmulatedDevice),
        fires_in: "fake sysfs tree: an endpoint with QEMU's vendor ID 0x1b36 (its link nominal)",
        silent_in: "the same endpoint with a hardware vendor's ID",
        tests: &[(INSPECT_AUDIT, "an_emulated_device_is_named_by_its_hypervisor_ids_only")],
    },
    Entry {
        rule: "analyse: capability walk",
        names: Names::Warning(WarningKind::CapabilityListCorrupt),
        fires_in: "fake sysfs tree: a capability list that loops back to 0x40",
        silent_in: "a sound list; one cut short by an unprivileged 64-byte read (unavailable, not corrupt)",
        tests: &[(INSPECT_AUDIT, "a_capability_list_that_loops_is_named_and_a_sound_one_is_not")],
    },
    Entry {
        rule: "bandwidth line",
        names: Names::Sentence,
        fires_in: "a port whose LnkCap reads 0: \"link capability not reported (LnkCap = 0): available bandwidth unknown\"",
        silent_in: "links with a capability: the kernel's line, word for word",
        tests: &[(TOPOLOGY, "a_port_whose_lnkcap_reads_zero_is_not_said_to_have_zero_bandwidth"), (TOPOLOGY, "matches_the_kernel_message")],
    },
];

const STREAM_AUDIT: &str = "tests/stream_causes_audit.rs";
const STREAM_SUMMARY: &str = "src/bench/stream/summary.rs";
const STREAM_SIM: &str = "tests/stream_sim.rs";

const STREAM: &[Entry] = &[
    Entry {
        rule: "bubble cause",
        names: Names::Bubble(WaitCause::NoFreeBuffer),
        fires_in: "simulated d2h ring with a slow host (host_use_ns=60000); simulated h2d ring with a slow device; real-path fake: a FIFO with a slow reader",
        silent_in: "simulated d2h ring with a fast host; real-path fake: a FIFO with a slow writer",
        tests: &[
            (STREAM_AUDIT, "no_free_buffer_appears_only_when_the_consumer_is_slower"),
            ("tests/stream_sim_h2d.rs", "a_slow_device_is_consumer_bound_and_a_fast_one_producer_bound"),
            ("tests/stream_engines.rs", "a_slow_reader_is_consumer_bound_in_20_of_20_seeds"),
            ("tests/stream_engines.rs", "a_slow_writer_is_producer_bound_in_20_of_20_seeds"),
        ],
    },
    Entry {
        rule: "bubble cause",
        names: Names::Bubble(WaitCause::Credits),
        fires_in: "simulated ring on a link whose receiver holds its credits (stalls_per_s)",
        silent_in: "the same without holds, or with a dwell",
        tests: &[
            ("tests/stream_sim_credits.rs", "credits_bubbles_add_up_to_the_links_starvation"),
            ("tests/stream_sim_credits.rs", "without_holds_there_are_no_credits_bubbles"),
        ],
    },
    Entry {
        rule: "bubble cause",
        names: Names::Bubble(WaitCause::DeviceDwell),
        fires_in: "simulated d2h ring whose device pauses 12 µs between messages; co-simulated core with a dwell (where Icarus Verilog is installed)",
        silent_in: "simulated d2h ring without a dwell",
        tests: &[(STREAM_AUDIT, "device_dwell_appears_only_when_the_device_pauses"), ("tests/cosim_stream.rs", "a_short_stream_through_the_rtl_core")],
    },
    Entry {
        rule: "bubble cause",
        names: Names::Bubble(WaitCause::HostLate),
        fires_in: "simulated pull ring with a source far faster than the reads (5000 MB/s)",
        silent_in: "simulated pull ring with a slow source (100 MB/s): its waits are the source's",
        tests: &[(STREAM_AUDIT, "host_late_appears_only_when_the_reads_are_the_limit"), ("tests/stream_sim_pull.rs", "a_fast_source_waits_when_lossless")],
    },
    Entry {
        rule: "bubble cause",
        names: Names::Bubble(WaitCause::ProducerIdle),
        fires_in: "simulated pull ring with a slow source; simulated h2d ring whose host prepares each message; real-path fake: a FIFO with a slow writer",
        silent_in: "simulated h2d ring whose host needs no preparation; real-path fake: a FIFO with a slow reader",
        tests: &[
            (STREAM_AUDIT, "producer_idle_appears_only_when_the_producer_has_nothing_to_send"),
            ("tests/stream_engines.rs", "a_slow_writer_is_producer_bound_in_20_of_20_seeds"),
            ("tests/stream_engines.rs", "a_slow_reader_is_consumer_bound_in_20_of_20_seeds"),
        ],
    },
    Entry {
        rule: "bubble cause",
        names: Names::Bubble(WaitCause::None),
        fires_in: "a message that started at once: marked so, and counted in no bubble class",
        silent_in: "a message that waited: its wait always has a cause (never a `none` class)",
        tests: &[(STREAM_AUDIT, "a_message_that_did_not_wait_is_in_no_bubble_class")],
    },
    Entry {
        rule: "bubble cause",
        names: Names::Bubble(WaitCause::Unknown),
        fires_in: "no engine assigns it yet (kept for a device that cannot tell why it waited)",
        silent_in: "every simulated scenario of the stream audit",
        tests: &[(STREAM_AUDIT, "a_message_that_did_not_wait_is_in_no_bubble_class")],
    },
    Entry {
        rule: "verdict",
        names: Names::Words("consumer"),
        fires_in: "ring full ≥ 50 % of the time, or the producer waiting for a free buffer ≥ 25 %: simulated slow host (d2h), slow device (h2d)",
        silent_in: "full 40 % with 20 % of waits; simulated fast host",
        tests: &[
            (STREAM_SUMMARY, "each_verdict_fires_only_where_the_ring_or_the_bubbles_show_it"),
            (STREAM_SIM, "a_slow_host_is_consumer_bound_and_a_fast_one_producer_bound"),
            ("tests/stream_sim_h2d.rs", "a_slow_device_is_consumer_bound_and_a_fast_one_producer_bound"),
        ],
    },
    Entry {
        rule: "verdict",
        names: Names::Words("producer: its own pause"),
        fires_in: "ring empty ≥ 50 % and the producer's pause ≥ 25 % of the time (d2h dwell; h2d host preparation)",
        silent_in: "the same ring with a pause of 10 % (its transfer named instead)",
        tests: &[
            (STREAM_SUMMARY, "each_verdict_fires_only_where_the_ring_or_the_bubbles_show_it"),
            ("tests/stream_sim_models.rs", "h2d_occupancy_is_of_the_device_buffers"),
        ],
    },
    Entry {
        rule: "verdict",
        names: Names::Words("producer: its transfer"),
        fires_in: "ring empty ≥ 50 % with little pause: the link or the producer's transfer of each message; simulated fast host",
        silent_in: "ring empty 40 % of the time",
        tests: &[(STREAM_SUMMARY, "each_verdict_fires_only_where_the_ring_or_the_bubbles_show_it"), (STREAM_SIM, "a_slow_host_is_consumer_bound_and_a_fast_one_producer_bound")],
    },
    Entry {
        rule: "verdict",
        names: Names::Words("balanced"),
        fires_in: "ring full 30 % and empty 30 % of the time",
        silent_in: "ring empty 60 %",
        tests: &[(STREAM_SUMMARY, "each_verdict_fires_only_where_the_ring_or_the_bubbles_show_it")],
    },
    Entry {
        rule: "verdict (pull)",
        names: Names::Words("producer"),
        fires_in: "pull: the host waited for the source ≥ 50 % of the time (simulated slow source)",
        silent_in: "pull with the source waiting 20 %, however full the ring",
        tests: &[(STREAM_SUMMARY, "each_verdict_fires_only_where_the_ring_or_the_bubbles_show_it"), ("tests/stream_sim_models.rs", "pull_comes_out_at_its_model")],
    },
    Entry {
        rule: "verdict (pull)",
        names: Names::Words("consumer"),
        fires_in: "pull: the source idle less than half the time (the host's one read in flight sets the rate)",
        silent_in: "pull with the source idle 60 %",
        tests: &[(STREAM_SUMMARY, "each_verdict_fires_only_where_the_ring_or_the_bubbles_show_it"), ("tests/stream_sim_models.rs", "pull_comes_out_at_its_model")],
    },
];

const CROSSCHECK_FILE: &str = "src/bench/crosscheck.rs";
const MODEL_VS_SIM: &str = "tests/model_vs_sim.rs";

const CROSSCHECK: &[Entry] = &[
    Entry {
        rule: "explain",
        names: Names::Words("flow control: …"),
        fires_in: "finite credits and a 300 ns wire, where the point simulated again without them agrees with the model",
        silent_in: "large credits and no wire (nothing to put the gap on)",
        tests: &[
            (CROSSCHECK_FILE, "the_credit_loop_explains_only_where_finite_credits_or_a_wire_are_configured"),
            (MODEL_VS_SIM, "finite_credits_and_a_long_wire_agree_or_are_explained"),
        ],
    },
    Entry {
        rule: "explain_ack_timer",
        names: Names::Words("Ack timing: …"),
        fires_in: "Acks coalesced over 4 TLPs, reads with one tag: groups that never fill, Acked by the timer",
        silent_in: "one Ack per TLP",
        tests: &[(CROSSCHECK_FILE, "the_ack_timer_explains_only_where_acks_are_coalesced")],
    },
    Entry {
        rule: "explain_flit_phase",
        names: Names::Words("flit phase: …"),
        fires_in: "Gen6 read whose gap is within one flit per round trip",
        silent_in: "the same gap at Gen3; a Gen6 gap beyond the bound",
        tests: &[
            (CROSSCHECK_FILE, "the_flit_phase_explains_only_a_gen6_gap_within_one_flit_per_round_trip"),
            (MODEL_VS_SIM, "the_whole_grid_agrees_within_half_a_percent_or_names_the_cause"),
        ],
    },
    Entry {
        rule: "explain_both",
        names: Names::Words("read requests wait behind write TLPs …"),
        fires_in: "both at once, the read rate between the model with no wait and with a whole write TLP of wait",
        silent_in: "a read rate 3× slower or 2× faster than that",
        tests: &[
            (CROSSCHECK_FILE, "requests_behind_writes_explain_only_a_read_rate_between_no_wait_and_a_whole_write_tlp"),
            (MODEL_VS_SIM, "the_whole_grid_agrees_within_half_a_percent_or_names_the_cause"),
        ],
    },
    Entry {
        rule: "explain_both",
        names: Names::Words("read requests go out in one group per round …"),
        fires_in: "Gen3 x4 both at once, 8 tags whose completions free within one write TLP (+20.7 %, the locked round within 0.5 %)",
        silent_in: "a read rate outside the locked round's range",
        tests: &[
            (MODEL_VS_SIM, "reads_locked_into_one_group_per_round_are_explained_by_the_locked_round"),
            (CROSSCHECK_FILE, "requests_behind_writes_explain_only_a_read_rate_between_no_wait_and_a_whole_write_tlp"),
        ],
    },
    Entry {
        rule: "explain_requests_before_window",
        names: Names::Words("… went out before the first completion …"),
        fires_in: "both at once, faster than the model by less than the early requests' share of the link bytes",
        silent_in: "faster by more than that share; slower than the model",
        tests: &[
            (CROSSCHECK_FILE, "requests_before_the_window_explain_only_a_small_speed_up"),
            (MODEL_VS_SIM, "the_whole_grid_agrees_within_half_a_percent_or_names_the_cause"),
        ],
    },
    Entry {
        rule: "unexplained",
        names: Names::Words("UNEXPLAINED"),
        fires_in: "a point outside 0.5 % with no cause shown",
        silent_in: "a point within 0.5 %; one with its cause shown; the default grid (none)",
        tests: &[
            (CROSSCHECK_FILE, "a_gap_with_no_cause_shown_is_unexplained_and_printed_so"),
            (MODEL_VS_SIM, "the_whole_grid_agrees_within_half_a_percent_or_names_the_cause"),
        ],
    },
];

const FAMILIES: &[Family] = &[
    Family { marker: "dma/run", names_heading: "cause", entries: RUN },
    Family { marker: "inspect", names_heading: "code", entries: INSPECT },
    Family { marker: "stream", names_heading: "names", entries: STREAM },
    Family { marker: "crosscheck", names_heading: "explanation", entries: CROSSCHECK },
];

/// One family's table as docs/findings.md prints it.
fn table(family: &Family) -> String {
    let mut out = format!("| rule | {} | fires in | silent in | tests |\n|---|---|---|---|---|\n", family.names_heading);
    for e in family.entries {
        let tests: Vec<String> = e.tests.iter().map(|(file, name)| format!("`{file}`: `{name}`")).collect();
        out += &format!("| `{}` | {} | {} | {} | {} |\n", e.rule, e.names.cell(), e.fires_in, e.silent_in, tests.join("<br>"));
    }
    out
}

fn table_start(family: &Family) -> String {
    format!("<!-- {} audit table: generated by `PCIEPERF_REGENERATE=1 cargo test --lib audit`; do not edit -->\n", family.marker)
}

fn table_end(family: &Family) -> String {
    format!("<!-- end of {} audit table -->", family.marker)
}

fn listed(family: &[Entry], wanted: impl Fn(&Names) -> bool) -> bool {
    family.iter().any(|e| wanted(&e.names))
}

/// The names of the `fn explain…` rules in crosscheck.rs: each must have an entry.
fn crosscheck_rules(source: &str) -> Vec<&str> {
    source.match_indices("\nfn explain").map(|(at, _)| source[at + 4..].split('(').next().unwrap_or_default()).collect()
}

#[test]
fn audit_covers_every_rule_and_the_doc_is_current() {
    for cause in Cause::ALL {
        assert!(listed(RUN, |n| matches!(n, Names::Cause(c) if *c == cause)), "cause `{}` has no audit entry (fires in / silent in / test)", cause.name());
    }
    for kind in WarningKind::ALL {
        assert!(listed(INSPECT, |n| matches!(n, Names::Warning(w) if *w == kind)), "warning `{}` has no audit entry", kind.code());
    }
    for cause in crate::bench::stream::record::CAUSES {
        assert!(listed(STREAM, |n| matches!(n, Names::Bubble(b) if *b == cause)), "bubble cause {cause:?} has no audit entry");
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |file: &str| std::fs::read_to_string(root.join(file)).unwrap_or_default();
    // The verdict's branches: a new one fails here until its entries are added and this updated.
    let summary = read(STREAM_SUMMARY);
    let verdict_fn = &summary[summary.find("\nfn verdict(").expect("fn verdict in summary.rs")..];
    let verdict_fn = &verdict_fn[..verdict_fn.find("\n}\n").unwrap_or(verdict_fn.len())];
    let built = verdict_fn.matches("Verdict {").count() - verdict_fn.matches("-> Verdict {").count();
    assert_eq!(built, 4, "a verdict branch was added or removed: update the stream audit entries");
    assert_eq!(STREAM.iter().filter(|e| e.rule.starts_with("verdict")).count(), 6);
    let crosscheck = read(CROSSCHECK_FILE);
    let rules = crosscheck_rules(&crosscheck);
    assert!(rules.len() >= 5, "{rules:?}");
    for rule in rules {
        assert!(CROSSCHECK.iter().any(|e| e.rule == rule), "crosscheck's `{rule}` has no audit entry");
    }
    for family in FAMILIES {
        for e in family.entries {
            assert!(!e.fires_in.is_empty() && !e.silent_in.is_empty() && !e.tests.is_empty(), "{}: a scenario pair and a test", e.rule);
            for (file, name) in e.tests {
                assert!(read(file).contains(&format!("fn {name}()")), "{}: test {file}: {name} does not exist", e.rule);
            }
        }
    }
    let path = root.join("docs/findings.md");
    let mut doc = std::fs::read_to_string(&path).unwrap_or_default();
    let mut stale = Vec::new();
    for family in FAMILIES {
        let (start_marker, end_marker) = (table_start(family), table_end(family));
        let (Some(start), Some(end)) = (doc.find(&start_marker), doc.find(&end_marker)) else { panic!("docs/findings.md lacks the {} audit table markers", family.marker) };
        let wanted = table(family);
        if doc[start + start_marker.len()..end] != wanted {
            stale.push(family.marker);
            doc = format!("{}{start_marker}{wanted}{}", &doc[..start], &doc[end..]);
        }
    }
    if !stale.is_empty() && std::env::var_os("PCIEPERF_REGENERATE").is_some() {
        std::fs::write(&path, doc).unwrap();
        return;
    }
    assert!(stale.is_empty(), "docs/findings.md's {stale:?} audit tables are stale: run PCIEPERF_REGENERATE=1 cargo test --lib audit");
}

#[test]
fn warning_kind_all_lists_every_variant_once() {
    // A new variant breaks this match until it is listed in `WarningKind::ALL` (and so in the audit).
    let index = |w: &WarningKind| match w {
        WarningKind::LinkDown => 0,
        WarningKind::LinkSpeedBelowCapability => 1,
        WarningKind::LinkWidthBelowCapability => 2,
        WarningKind::MaxPayloadReserved => 3,
        WarningKind::MaxPayloadBelowSupported => 4,
        WarningKind::MaxReadRequestSmall => 5,
        WarningKind::RelaxedOrderingDisabled => 6,
        WarningKind::AspmEnabled => 7,
        WarningKind::AerCorrectableErrors => 8,
        WarningKind::AerUncorrectableErrors => 9,
        WarningKind::EmulatedDevice => 10,
        WarningKind::CapabilityListCorrupt => 11,
    };
    for (i, kind) in WarningKind::ALL.iter().enumerate() {
        assert_eq!(index(kind), i, "{}", kind.code());
    }
    let codes: std::collections::BTreeSet<_> = WarningKind::ALL.iter().map(|w| w.code()).collect();
    assert_eq!(codes.len(), WarningKind::ALL.len(), "codes are distinct");
}

#[test]
fn stream_causes_list_every_wait_cause_once() {
    // A new wait cause breaks this match until it is listed in `record::CAUSES` (and the audit).
    let index = |c: &WaitCause| match c {
        WaitCause::None => 0,
        WaitCause::NoFreeBuffer => 1,
        WaitCause::Credits => 2,
        WaitCause::DeviceDwell => 3,
        WaitCause::HostLate => 4,
        WaitCause::ProducerIdle => 5,
        WaitCause::Unknown => 6,
    };
    for (i, cause) in crate::bench::stream::record::CAUSES.iter().enumerate() {
        assert_eq!(index(cause), i, "{cause:?}");
    }
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
        Cause::GpuPowerState => 25,
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
