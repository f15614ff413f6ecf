//! Why the gap: name what limits a run's result, most important first (DESIGN.md question 3).

use crate::bench::results::{Cause, Finding, Fit, Mode, Point, Results, Stopped};
use crate::model::{self, Limit};
use crate::pci::health::AerChange;
use crate::units::format_size;

/// Share of the ceiling above which the link itself is taken to be the limit.
pub const NEAR_CEILING_PERCENT: f64 = 90.0;

/// A size that is not a round number (N½), decimal with four significant digits.
pub fn format_bytes_approx(bytes: f64) -> String {
    match bytes {
        b if b >= 1e9 => format!("{:.3} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.3} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.3} kB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// A finding for a result above the model's ceiling: by how much, and which assumption must be
/// wrong. `resolution` is the relative resolution of the time behind the result (0.002 for
/// 25.4 s counted in 0.1 s units) and `timer` names that timer.
pub fn above_ceiling(what: &str, measured_mbps: f64, ceiling_mbps: f64, resolution: f64, timer: &str) -> Option<String> {
    if !(measured_mbps > ceiling_mbps && ceiling_mbps > 0.0) {
        return None;
    }
    let excess = (measured_mbps / ceiling_mbps - 1.0) * 100.0;
    let cause = if excess <= resolution * 100.0 {
        format!("within the resolution of {timer} (± {:.2} %): quantisation, not a faster link", resolution * 100.0)
    } else {
        format!(
            "more than the resolution of {timer} (± {:.2} %) allows: the clock (slow, or not covering the whole transfer), \
             the device's link report (a wider or faster link than stated) or the model's conditions (MaxPayload, header format) must be wrong",
            resolution * 100.0
        )
    };
    Some(format!("{what}: {measured_mbps:.2} MB/s is {excess:.2} % above the model's ceiling of {ceiling_mbps:.2} MB/s; {cause}"))
}

/// One rule of the diagnosis: the findings it draws from a run — none when its condition does
/// not hold — given the findings of the rules listed before it (a gap to the ceiling counts as
/// explained only by a cause found earlier).
pub type Rule = fn(&Results, &[Finding]) -> Vec<Finding>;

/// Every rule, in the order its findings are listed: most important first.
pub const RULES: &[Rule] = &[
    stopped_early,
    points_without_result,
    verification_failed,
    aer_counters_moved,
    emulated_device,
    link_below_capability,
    stalls_over_threshold,
    copy_to_user_dominates,
    read_bound_by_latency,
    reads_behind_writes,
    credit_limited,
    fit_findings,
    spread_and_above_ceiling,
    gap_to_ceiling,
    no_link_info,
];

/// The modes in the order their per-mode findings are listed.
const MODES: [Mode; 3] = [Mode::D2h, Mode::H2d, Mode::Both];

/// Findings for a run, most important first.
pub fn findings(results: &Results) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in RULES {
        let found = rule(results, &out);
        out.extend(found);
    }
    out
}

fn finding(cause: Cause, message: String) -> Finding {
    Finding { cause, message }
}

/// The run stopped before the end: every figure is partial.
pub fn stopped_early(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let message = match &results.stopped {
        Some(Stopped::Interrupted) => "interrupted (Ctrl-C): results are partial".to_string(),
        Some(Stopped::Error { message }) => format!("stopped early: {message}; results are partial"),
        None => return Vec::new(),
    };
    vec![finding(Cause::Incomplete, message)]
}

/// Each point where no timed transfer completed, with why.
pub fn points_without_result(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    results.points.iter().filter_map(|p| p.error.clone()).map(|error| finding(Cause::NoSample, error)).collect()
}

/// Data that did not verify, with the first failure.
pub fn verification_failed(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let v = &results.verification;
    let message = v.first_failure.as_ref().map(|failure| format!("{} transfer(s) failed verification; first: {failure}", v.failed));
    message.map(|m| finding(Cause::VerificationFailed, m)).into_iter().collect()
}

/// AER counters on the device's path that moved while measuring.
pub fn aer_counters_moved(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let message = results.link_health.as_ref().and_then(|h| link_errors(&h.changes));
    message.map(|m| finding(Cause::LinkErrors, m)).into_iter().collect()
}

/// A device a hypervisor emulates (or may emulate, inside a virtual machine): its link is nominal.
pub fn emulated_device(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let c = &results.conditions;
    let message = if let Some(emulator) = &c.emulated_by {
        format!(
            "the device is emulated by a hypervisor ({emulator}): its link is nominal and the rates are the emulator's, \
             not PCI Express throughput; they are not compared with the model's ceiling"
        )
    } else if let Some(vm) = c.virtual_machine.as_ref().filter(|_| !results.simulated) {
        format!("measured inside a virtual machine ({vm}): if the hypervisor emulates this device, its link is nominal and the rates are the emulator's")
    } else {
        return Vec::new();
    };
    vec![finding(Cause::Emulated, message)]
}

/// A link trained below what both of its ends can do.
pub fn link_below_capability(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    // An emulated device's link is nominal: how it trained explains nothing.
    let link = results.conditions.link.as_ref().filter(|c| c.below_capability() && results.conditions.emulated_by.is_none());
    let Some((trained, capable)) = link.and_then(|c| Some((c.params.link, c.capable?))) else { return Vec::new() };
    let ratio = trained.encoded_mbps() / capable.encoded_mbps() * 100.0;
    let message = format!("link trained at {trained} but both ends can do {capable}: the ceiling is {ratio:.0} % of what it could be");
    vec![finding(Cause::LinkBelowCapability, message)]
}

/// Stalls above the threshold, over every point.
pub fn stalls_over_threshold(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let stalled: Vec<_> = results.points.iter().filter(|p| p.stalls.over_threshold > 0).collect();
    if stalled.is_empty() {
        return Vec::new();
    }
    let count: u64 = stalled.iter().map(|p| p.stalls.over_threshold).sum();
    let longest = stalled.iter().map(|p| p.stalls.max_stall_ns).fold(0.0, f64::max);
    let message = format!(
        "{count} stall(s) above {:.0} µs at {} point(s), longest {:.1} µs",
        results.conditions.stall_threshold_ns / 1e3,
        stalled.len(),
        longest / 1e3
    );
    vec![finding(Cause::Stall, message)]
}

/// The first point where the copy to user space takes over a fifth of each step.
pub fn copy_to_user_dominates(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let message = results.points.iter().find_map(|point| {
        let s = point.summary.as_ref()?;
        let copy = s.copy_median_ns.filter(|&c| c > 0.2 * s.time_ns.median)?;
        Some(format!(
            "copy to user space takes {:.0} % of each {} {} step: {:.1} MB/s without it, {:.1} MB/s with it",
            copy / s.time_ns.median * 100.0,
            point.mode.name(),
            format_size(point.size_bytes),
            s.transfer_only_median_mbps,
            s.median_mbps
        ))
    });
    message.map(|m| finding(Cause::CopyToUser, m)).into_iter().collect()
}

/// Device reads whose ceiling is set by latency × tags: at every size measured, or up to the
/// largest size where it is (a 4 KiB read waits for its completions whatever the link).
pub fn read_bound_by_latency(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    if results.conditions.emulated_by.is_some() {
        return Vec::new(); // the emulator answers reads, not a link with completion latency
    }
    let bound: Vec<&Point> = results.points.iter().filter(|p| p.mode == Mode::H2d && p.summary.is_some() && latency_bound(p)).collect();
    let Some(up_to) = bound.iter().max_by_key(|p| p.size_bytes) else { return Vec::new() };
    let cause = "the model's ceiling is set by completion latency × outstanding read requests (tags), not by the link's bytes";
    let message = if h2d_latency_bound_throughout(results) {
        format!("h2d is a device read: even at {} {cause}", format_size(up_to.size_bytes))
    } else {
        format!("h2d is a device read: up to {} ({} size(s)) {cause}; larger reads are not", format_size(up_to.size_bytes), bound.len())
    };
    vec![finding(Cause::ReadLatency, message)]
}

fn latency_bound(point: &Point) -> bool {
    point.ceiling.as_ref().is_some_and(|c| c.limit == Limit::Latency)
}

/// True when even the largest h2d size measured is bound by latency × tags: only then does read
/// latency explain a gap at the largest size.
fn h2d_latency_bound_throughout(results: &Results) -> bool {
    largest(results, Mode::H2d).is_some_and(latency_bound)
}

/// Share of a rate that reads behind writes or finite credits must take for their rules to name
/// them (below it, within the model's agreement with the link simulator), in percent.
pub const NAMED_COST_PERCENT: f64 = 0.5;

/// Both at once, at the largest size: a result near the model's ceiling where that ceiling is
/// set by reads waiting behind the writes (model::bidir), not by the link's bytes.
pub fn reads_behind_writes(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let Some(conditions) = &results.conditions.link else { return Vec::new() };
    let Some(point) = largest(results, Mode::Both) else { return Vec::new() };
    let Some(reached) = point.ceiling.as_ref().and_then(|c| c.percent_reached) else { return Vec::new() };
    let params = &conditions.params;
    let slowed = crate::model::bidir::bidirectional(params, point.size_bytes).read.mbps;
    let free = crate::model::bidir::bidirectional_without_interference(params, point.size_bytes).read.mbps;
    let cost = (1.0 - slowed / free) * 100.0;
    if !(cost > NAMED_COST_PERCENT && reached >= NEAR_CEILING_PERCENT) {
        return Vec::new();
    }
    let message = format!(
        "both at {}: reads wait behind the writes — a read request cannot start inside a write TLP and the writes' Ack/UpdateFC DLLPs go ahead of completions — \
         so the model gives the reads {slowed:.1} MB/s instead of {free:.1} MB/s ({cost:.1} % less); the result reaches {reached:.1} % of that level: \
         more tags or shorter write TLPs would help, a faster link less",
        format_size(point.size_bytes)
    );
    vec![finding(Cause::ReadsBehindWrites, message)]
}

/// Per direction, at the largest size: a result near a ceiling that the receiver's finite
/// credits set (the engine stated them in its conditions), below what the link's bytes allow.
pub fn credit_limited(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let Some(conditions) = &results.conditions.link else { return Vec::new() };
    let Some(credits) = &conditions.credits else { return Vec::new() };
    let params = &conditions.params;
    let mut out = Vec::new();
    for mode in [Mode::D2h, Mode::H2d] {
        let Some(point) = largest(results, mode) else { continue };
        let Some(reached) = point.ceiling.as_ref().and_then(|c| c.percent_reached) else { continue };
        let size = point.size_bytes;
        let (credited, free, class) = match mode {
            Mode::D2h => (model::credit::write_throughput(params, credits, size), model::write_throughput(params, size), credits.posted),
            _ => (model::credit::read_throughput(params, credits, size), model::read_throughput(params, size), credits.non_posted),
        };
        let cost = (1.0 - credited.mbps / free.mbps) * 100.0;
        if !(cost > NAMED_COST_PERCENT && reached >= NEAR_CEILING_PERCENT) {
            continue;
        }
        let advertised = class.map_or("infinite credits".to_string(), |c| format!("{} header and {} data credits", c.header, c.data));
        let message = format!(
            "{} at {}: credit-limited — the receiver advertises {advertised} and a credit comes back {:.0} ns after its TLP \
             (wire {} ns each way, Ack and UpdateFC); the model gives {:.1} MB/s with them, {:.1} MB/s with credits that never limit ({cost:.1} % less); \
             the result reaches {reached:.1} % of the credit-limited level: more credits or a shorter loop would help, a faster link would not",
            mode.name(),
            format_size(size),
            credits.return_ns(params),
            credits.wire_delay_ns,
            credited.mbps,
            free.mbps
        );
        out.push(finding(Cause::CreditLimited, message));
    }
    out
}

/// Per mode: a fit that does not describe the measurements, or small transfers below N½.
pub fn fit_findings(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    results.fits.iter().filter_map(|fit| fit_finding(results, fit)).collect()
}

fn fit_finding(results: &Results, fit: &Fit) -> Option<Finding> {
    if let Some(why) = &fit.rejected {
        let copy = if results.conditions.copy_to_user && fit.mode != Mode::H2d {
            " — the copy to user space grows faster than the transfer and dominates large sizes"
        } else {
            ""
        };
        return Some(finding(Cause::FitRejected, format!("{} fit of T(N) = N/(B·f) + m not shown: {why}{copy}", fit.mode.name())));
    }
    let smallest = results.points.iter().filter(|p| p.mode == fit.mode).map(|p| p.bytes_per_step).min().unwrap_or(0);
    (fit.m_us > 0.0 && (smallest as f64) < fit.n_half_bytes).then(|| {
        let message = format!(
            "{} transfers below N½ = {} spend more than half their time in the per-transfer cost m = {:.2} µs",
            fit.mode.name(),
            format_bytes_approx(fit.n_half_bytes),
            fit.m_us
        );
        finding(Cause::PerTransferOverhead, message)
    })
}

/// Per mode: transfers much slower than the median, and a median above the ceiling.
pub fn spread_and_above_ceiling(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let emulated = results.conditions.emulated_by.is_some();
    let mut out = Vec::new();
    for mode in MODES {
        out.extend(spread(results, mode).map(|m| finding(Cause::Spread, m)));
        // An emulated device's link is nominal: being above its ceiling says nothing.
        out.extend(worst_above_ceiling(results, mode).filter(|_| !emulated).map(|m| finding(Cause::AboveCeiling, m)));
    }
    out
}

/// Per mode, at the largest size: near the ceiling, what limits it; below it, the gap, called
/// unexplained when no earlier finding explains it.
pub fn gap_to_ceiling(results: &Results, earlier: &[Finding]) -> Vec<Finding> {
    if results.conditions.emulated_by.is_some() {
        return Vec::new();
    }
    let explained: Vec<&Cause> = earlier.iter().map(|f| &f.cause).filter(|c| !matches!(c, Cause::Incomplete | Cause::VerificationFailed)).collect();
    MODES.into_iter().filter_map(|mode| ceiling_finding(results, mode, &explained)).collect()
}

fn ceiling_finding(results: &Results, mode: Mode, explained: &[&Cause]) -> Option<Finding> {
    let point = largest(results, mode)?;
    let (Some(ceiling), Some(summary)) = (&point.ceiling, &point.summary) else { return None };
    let percent = ceiling.percent_reached.unwrap_or(0.0);
    let at = format!("{} at {}", mode.name(), format_size(point.size_bytes));
    if percent >= NEAR_CEILING_PERCENT {
        let (cause, what) = match ceiling.limit {
            Limit::Latency => (Cause::ReadLatency, "completion latency × outstanding read requests (tags) is the limit, not the link's bytes"),
            Limit::OppositeDirection => (Cause::Link, "the link is the limit (its opposite direction: requests and DLLPs)"),
            Limit::Link => (Cause::Link, "the link is the limit"),
        };
        return Some(finding(cause, format!("{at} reaches {percent:.1} % of the model's ceiling ({:.1} MB/s, {}): {what}", ceiling.mbps, ceiling.limit.name())));
    }
    let message = format!("{at} reaches {:.1} MB/s, {percent:.1} % of the model's ceiling ({:.1} MB/s)", summary.median_mbps, ceiling.mbps);
    let is_explained = explained.iter().any(|c| match c {
        Cause::ReadLatency => mode != Mode::D2h && h2d_latency_bound_throughout(results),
        Cause::ReadsBehindWrites => mode == Mode::Both,
        Cause::PerTransferOverhead => fits_explain(results, mode, point.bytes_per_step),
        _ => true,
    });
    Some(finding(if is_explained { Cause::BelowCeiling } else { Cause::Unexplained }, message))
}

/// A target that did not report its link: nothing to compare with.
pub fn no_link_info(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    if results.conditions.link.is_some() {
        return Vec::new();
    }
    vec![finding(Cause::NoLinkInfo, "the target did not report its link: no model ceiling to compare with".into())]
}

/// Transfers slower than this multiple of the median count as slow.
pub const SLOW_FACTOR: f64 = 1.5;

/// The point of `mode` with the widest spread, when some of its transfers were slow: how many,
/// and by how much.
fn spread(results: &Results, mode: Mode) -> Option<String> {
    let worst = results
        .points
        .iter()
        .filter(|p| p.mode == mode)
        .filter_map(|p| Some((p, p.summary.as_ref()?)))
        .max_by(|a, b| (a.1.time_ns.max / a.1.time_ns.median).total_cmp(&(b.1.time_ns.max / b.1.time_ns.median)))?;
    let (point, summary) = worst;
    let median = summary.time_ns.median;
    let slow = point.samples.iter().filter(|s| s.time_ns() > SLOW_FACTOR * median).count();
    (slow > 0).then(|| {
        format!(
            "{} at {}: {slow} of {} transfers took more than {SLOW_FACTOR}× the median ({}); the slowest {:.1}×, p99 {:.2}× — \
             the median is robust to them, the sustained rate is not",
            mode.name(),
            format_size(point.size_bytes),
            point.samples.len(),
            crate::units::format_ns(median),
            summary.time_ns.max / median,
            summary.time_ns.p99 / median
        )
    })
}

/// The point of `mode` furthest above its ceiling, if any is above.
fn worst_above_ceiling(results: &Results, mode: Mode) -> Option<String> {
    results
        .points
        .iter()
        .filter(|p| p.mode == mode)
        .filter_map(|p| Some((p, p.summary.as_ref()?.median_mbps, p.ceiling.as_ref()?.mbps)))
        .filter(|(_, measured, ceiling)| measured > ceiling)
        .max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2)))
        .and_then(|(p, measured, ceiling)| {
            let what = format!("{} at {}", mode.name(), format_size(p.size_bytes));
            above_ceiling(&what, measured, ceiling, 0.0, "the engine's clock")
        })
}

/// The finding for AER counters that moved during the run, naming each (totals left out when
/// their file's own counters say more); `None` when nothing moved.
fn link_errors(changes: &[AerChange]) -> Option<String> {
    if changes.is_empty() {
        return None;
    }
    let named: Vec<&AerChange> = changes.iter().filter(|c| !c.is_total()).collect();
    let listed: Vec<String> = (if named.is_empty() { changes.iter().collect() } else { named })
        .iter()
        .map(|c| format!("{} {} {} → {}", c.bdf, c.counter, c.before, c.after))
        .collect();
    let consequence = if changes.iter().all(AerChange::is_correctable) {
        "correctable errors are replayed, which costs bandwidth: the figures may be below what the link allows"
    } else {
        "uncorrectable errors may have dropped or corrupted transfers: treat the figures as suspect"
    };
    Some(format!("AER counters on the device's path moved during the run ({}): {consequence}", listed.join(", ")))
}

/// True when the per-transfer cost m still takes a tenth or more of a step of `bytes`.
fn fits_explain(results: &Results, mode: Mode, bytes: u64) -> bool {
    results.fits.iter().any(|f| f.mode == mode && f.rejected.is_none() && f.m_us > 0.0 && f.n_half_bytes * 9.0 > bytes as f64)
}

/// The point at the largest size measured for `mode`.
fn largest(results: &Results, mode: Mode) -> Option<&Point> {
    results.points.iter().filter(|p| p.mode == mode && p.summary.is_some()).max_by_key(|p| p.size_bytes)
}

#[cfg(test)]
#[path = "diagnose_audit.rs"]
mod audit;

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use super::*;
    use crate::bench::dma::{measure, DmaOptions, Quiet};
    use crate::engine::sim::SimEngine;
    use crate::engine::OpenOptions;

    /// A short simulated run at one d2h size: a real results document for the rules to read.
    fn simulated_run() -> Results {
        let mut engine = SimEngine::open("sim", &OpenOptions::default()).unwrap();
        let mut options = DmaOptions::new(vec![Mode::D2h], vec![65536]);
        options.duration = Duration::from_millis(20);
        options.wall_limit = Duration::from_secs(2);
        measure(&mut engine, &options, &AtomicBool::new(false), &mut Quiet).unwrap()
    }

    fn causes(found: &[Finding]) -> Vec<&Cause> {
        found.iter().map(|f| &f.cause).collect()
    }

    #[test]
    fn stopped_early_fires_only_for_a_run_that_stopped() {
        let mut results = simulated_run();
        results.stopped = None;
        assert!(stopped_early(&results, &[]).is_empty());
        results.stopped = Some(Stopped::Error { message: "device gone".into() });
        let found = stopped_early(&results, &[]);
        assert_eq!(causes(&found), [&Cause::Incomplete]);
        assert_eq!(found[0].message, "stopped early: device gone; results are partial");
    }

    #[test]
    fn stalls_rule_counts_stalls_over_every_point_and_is_silent_without_them() {
        let mut results = simulated_run();
        results.points[0].stalls.over_threshold = 0;
        assert!(stalls_over_threshold(&results, &[]).is_empty());
        results.points[0].stalls.over_threshold = 3;
        results.points[0].stalls.max_stall_ns = 120_000.0;
        let found = stalls_over_threshold(&results, &[]);
        assert_eq!(causes(&found), [&Cause::Stall]);
        assert!(found[0].message.starts_with("3 stall(s) above "), "{}", found[0].message);
        assert!(found[0].message.ends_with("at 1 point(s), longest 120.0 µs"), "{}", found[0].message);
    }

    #[test]
    fn no_link_info_fires_only_without_link_conditions() {
        let mut results = simulated_run();
        assert!(results.conditions.link.is_some(), "the simulator states its link");
        assert!(no_link_info(&results, &[]).is_empty());
        results.conditions.link = None;
        assert_eq!(causes(&no_link_info(&results, &[])), [&Cause::NoLinkInfo]);
    }

    #[test]
    fn a_gap_to_the_ceiling_is_explained_only_by_an_earlier_finding_that_applies_to_its_mode() {
        let mut results = simulated_run();
        let ceiling = results.points[0].ceiling.as_mut().expect("the simulator's points have a ceiling");
        ceiling.percent_reached = Some(50.0);
        assert_eq!(causes(&gap_to_ceiling(&results, &[])), [&Cause::Unexplained]);
        // Read latency explains h2d and both, never d2h (a device write).
        let latency = [finding(Cause::ReadLatency, String::new())];
        assert_eq!(causes(&gap_to_ceiling(&results, &latency)), [&Cause::Unexplained]);
        let stall = [finding(Cause::Stall, String::new())];
        assert_eq!(causes(&gap_to_ceiling(&results, &stall)), [&Cause::BelowCeiling]);
        // An incomplete run explains no gap.
        let incomplete = [finding(Cause::Incomplete, String::new())];
        assert_eq!(causes(&gap_to_ceiling(&results, &incomplete)), [&Cause::Unexplained]);
    }

    #[test]
    fn near_the_ceiling_the_finding_names_its_limit_and_an_emulated_device_gets_none() {
        let mut results = simulated_run();
        let ceiling = results.points[0].ceiling.as_mut().unwrap();
        ceiling.percent_reached = Some(95.0);
        ceiling.limit = Limit::Link;
        let found = gap_to_ceiling(&results, &[]);
        assert_eq!(causes(&found), [&Cause::Link]);
        assert!(found[0].message.ends_with("): the link is the limit"), "{}", found[0].message);
        results.conditions.emulated_by = Some("virtio".into());
        assert!(gap_to_ceiling(&results, &[]).is_empty());
        assert_eq!(causes(&emulated_device(&results, &[])), [&Cause::Emulated]);
    }

    /// The simulated run's point as both at once at 1 MiB, `reached` % of its ceiling, on Gen1 x1
    /// with MaxPayload and MaxReadRequest 512 and `tags` tags.
    fn both_at_once(tags: u32, reached: f64) -> Results {
        let mut results = simulated_run();
        let conditions = results.conditions.link.as_mut().expect("the simulator states its link");
        conditions.params = crate::model::LinkParams {
            mps_bytes: 512,
            mrrs_bytes: 512,
            tags,
            ..crate::model::LinkParams::typical("gen1x1".parse().unwrap())
        };
        let point = &mut results.points[0];
        point.mode = Mode::Both;
        point.size_bytes = 1 << 20;
        point.ceiling.as_mut().unwrap().percent_reached = Some(reached);
        results
    }

    #[test]
    fn reads_behind_writes_fires_near_a_ceiling_the_writes_hold_down() {
        let found = reads_behind_writes(&both_at_once(1, 97.0), &[]);
        assert_eq!(causes(&found), [&Cause::ReadsBehindWrites]);
        assert!(found[0].message.starts_with("both at 1MiB: reads wait behind the writes"), "{}", found[0].message);
        assert!(found[0].message.contains("reaches 97.0 % of that level"), "{}", found[0].message);
        // It explains a gap of both at once, never of one direction.
        let both = both_at_once(1, 50.0);
        assert_eq!(causes(&gap_to_ceiling(&both, &found)), [&Cause::BelowCeiling]);
        let mut one_way = both;
        one_way.points[0].mode = Mode::D2h;
        assert_eq!(causes(&gap_to_ceiling(&one_way, &found)), [&Cause::Unexplained]);
    }

    #[test]
    fn reads_behind_writes_is_silent_far_below_the_ceiling_with_many_tags_and_for_one_direction() {
        assert!(reads_behind_writes(&both_at_once(1, 50.0), &[]).is_empty(), "far below: something else limits it");
        assert!(reads_behind_writes(&both_at_once(256, 97.0), &[]).is_empty(), "256 tags: the link's bytes limit the reads");
        let mut one_way = both_at_once(1, 97.0);
        one_way.points[0].mode = Mode::D2h;
        assert!(reads_behind_writes(&one_way, &[]).is_empty());
        one_way.conditions.link = None;
        assert!(reads_behind_writes(&one_way, &[]).is_empty());
    }

    /// The simulated run's d2h point at 1 MiB, `reached` % of its ceiling, on Gen3 x8 with
    /// MaxPayload 256 and the given credits.
    fn with_credits(credits: Option<model::credit::CreditLoop>, reached: f64) -> Results {
        let mut results = simulated_run();
        let conditions = results.conditions.link.as_mut().unwrap();
        conditions.params = model::LinkParams { mps_bytes: 256, ..model::LinkParams::typical("gen3x8".parse().unwrap()) };
        conditions.credits = credits;
        let point = &mut results.points[0];
        point.size_bytes = 1 << 20;
        point.ceiling.as_mut().unwrap().percent_reached = Some(reached);
        results
    }

    fn credit_loop(header: u64, data: u64, wire_delay_ns: f64) -> Option<model::credit::CreditLoop> {
        let class = Some(model::credit::ClassCredits { header, data });
        Some(model::credit::CreditLoop { posted: class, non_posted: class, wire_delay_ns, update_fc_every_tlps: 1 })
    }

    #[test]
    fn credit_limited_fires_when_the_credits_cover_less_than_the_loop() {
        // 2 TLPs of 256 B per 1 µs loop: about 512 MB/s against the link's 7 GB/s.
        let found = credit_limited(&with_credits(credit_loop(2, 32, 500.0), 96.0), &[]);
        assert_eq!(causes(&found), [&Cause::CreditLimited]);
        let message = &found[0].message;
        assert!(message.starts_with("d2h at 1MiB: credit-limited — the receiver advertises 2 header and 32 data credits"), "{message}");
        assert!(message.contains("wire 500 ns each way") && message.contains("reaches 96.0 % of the credit-limited level"), "{message}");
    }

    #[test]
    fn credit_limited_is_silent_with_enough_credits_without_them_and_far_below() {
        assert!(credit_limited(&with_credits(credit_loop(1000, 100_000, 500.0), 96.0), &[]).is_empty(), "credits cover the loop");
        assert!(credit_limited(&with_credits(None, 96.0), &[]).is_empty(), "no credits stated");
        assert!(credit_limited(&with_credits(credit_loop(2, 32, 500.0), 40.0), &[]).is_empty(), "far below: something else limits it");
    }

    #[test]
    fn findings_lists_the_rules_in_table_order() {
        let mut results = simulated_run();
        results.stopped = Some(Stopped::Interrupted);
        results.conditions.link = None;
        let found = findings(&results);
        assert_eq!(found.first().map(|f| &f.cause), Some(&Cause::Incomplete));
        assert_eq!(found.last().map(|f| &f.cause), Some(&Cause::NoLinkInfo));
    }
}
