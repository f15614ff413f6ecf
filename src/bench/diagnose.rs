//! Why the gap: name what limits a run's result, most important first (DESIGN.md question 3).

use crate::bench::results::{Cause, Finding, Mode, Results, Stopped};
use crate::model::Limit;
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

/// Findings for a run, most important first.
pub fn findings(results: &Results) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |cause: Cause, message: String| out.push(Finding { cause, message });
    match &results.stopped {
        Some(Stopped::Interrupted) => add(Cause::Incomplete, "interrupted (Ctrl-C): results are partial".into()),
        Some(Stopped::Error { message }) => add(Cause::Incomplete, format!("stopped early: {message}; results are partial")),
        None => {}
    }
    for point in results.points.iter().filter(|p| p.error.is_some()) {
        add(Cause::NoSample, point.error.clone().unwrap_or_default());
    }
    if let Some(failure) = &results.verification.first_failure {
        add(Cause::VerificationFailed, format!("{} transfer(s) failed verification; first: {failure}", results.verification.failed));
    }
    if let Some(message) = results.link_health.as_ref().and_then(|h| link_errors(&h.changes)) {
        add(Cause::LinkErrors, message);
    }
    let emulated = results.conditions.emulated_by.as_ref();
    if let Some(emulator) = emulated {
        add(
            Cause::Emulated,
            format!(
                "the device is emulated by a hypervisor ({emulator}): its link is nominal and the rates are the emulator's, \
                 not PCI Express throughput; they are not compared with the model's ceiling"
            ),
        );
    } else if let Some(vm) = results.conditions.virtual_machine.as_ref().filter(|_| !results.simulated) {
        add(
            Cause::Emulated,
            format!("measured inside a virtual machine ({vm}): if the hypervisor emulates this device, its link is nominal and the rates are the emulator's"),
        );
    }
    let link = results.conditions.link.as_ref();
    if let Some((trained, capable)) = link.filter(|c| c.below_capability()).and_then(|c| Some((c.params.link, c.capable?))) {
        let ratio = trained.encoded_mbps() / capable.encoded_mbps() * 100.0;
        add(
            Cause::LinkBelowCapability,
            format!("link trained at {trained} but both ends can do {capable}: the ceiling is {ratio:.0} % of what it could be"),
        );
    }
    let stalled: Vec<_> = results.points.iter().filter(|p| p.stalls.over_threshold > 0).collect();
    if !stalled.is_empty() {
        let count: u64 = stalled.iter().map(|p| p.stalls.over_threshold).sum();
        let longest = stalled.iter().map(|p| p.stalls.max_stall_ns).fold(0.0, f64::max);
        add(
            Cause::Stall,
            format!(
                "{count} stall(s) above {:.0} µs at {} point(s), longest {:.1} µs",
                results.conditions.stall_threshold_ns / 1e3,
                stalled.len(),
                longest / 1e3
            ),
        );
    }
    for point in &results.points {
        let Some(s) = &point.summary else { continue };
        if let Some(copy) = s.copy_median_ns.filter(|&c| c > 0.2 * s.time_ns.median) {
            add(
                Cause::CopyToUser,
                format!(
                    "copy to user space takes {:.0} % of each {} {} step: {:.1} MB/s without it, {:.1} MB/s with it",
                    copy / s.time_ns.median * 100.0,
                    point.mode.name(),
                    format_size(point.size_bytes),
                    s.transfer_only_median_mbps,
                    s.median_mbps
                ),
            );
            break;
        }
    }
    if let Some(p) = largest(results, Mode::H2d).filter(|p| p.ceiling.as_ref().is_some_and(|c| c.limit == Limit::Latency)) {
        add(
            Cause::ReadLatency,
            format!(
                "h2d is a device read: even at {} the model's ceiling is set by completion latency × outstanding read requests (tags), not by the link's bytes",
                format_size(p.size_bytes)
            ),
        );
    }
    for fit in &results.fits {
        if let Some(why) = &fit.rejected {
            let copy = if results.conditions.copy_to_user && fit.mode != Mode::H2d {
                " — the copy to user space grows faster than the transfer and dominates large sizes"
            } else {
                ""
            };
            add(Cause::FitRejected, format!("{} fit of T(N) = N/(B·f) + m not shown: {why}{copy}", fit.mode.name()));
            continue;
        }
        let smallest = results.points.iter().filter(|p| p.mode == fit.mode).map(|p| p.bytes_per_step).min().unwrap_or(0);
        if fit.m_us > 0.0 && (smallest as f64) < fit.n_half_bytes {
            add(
                Cause::PerTransferOverhead,
                format!(
                    "{} transfers below N½ = {} spend more than half their time in the per-transfer cost m = {:.2} µs",
                    fit.mode.name(),
                    format_bytes_approx(fit.n_half_bytes),
                    fit.m_us
                ),
            );
        }
    }
    for mode in [Mode::D2h, Mode::H2d, Mode::Both] {
        if let Some(finding) = spread(results, mode) {
            add(Cause::Spread, finding);
        }
        // An emulated device's link is nominal: being above its ceiling says nothing.
        if let Some(finding) = worst_above_ceiling(results, mode).filter(|_| emulated.is_none()) {
            add(Cause::AboveCeiling, finding);
        }
    }
    let explained: Vec<Cause> = out
        .iter()
        .map(|f| f.cause.clone())
        .filter(|c| !matches!(c, Cause::Incomplete | Cause::VerificationFailed))
        .collect();
    let mut add = |cause: Cause, message: String| out.push(Finding { cause, message });
    for mode in [Mode::D2h, Mode::H2d, Mode::Both] {
        let Some(point) = largest(results, mode).filter(|_| emulated.is_none()) else { continue };
        let (Some(ceiling), Some(summary)) = (&point.ceiling, &point.summary) else { continue };
        let percent = ceiling.percent_reached.unwrap_or(0.0);
        let at = format!("{} at {}", mode.name(), format_size(point.size_bytes));
        if percent >= NEAR_CEILING_PERCENT {
            let (cause, what) = match ceiling.limit {
                Limit::Latency => (Cause::ReadLatency, "completion latency × outstanding read requests (tags) is the limit, not the link's bytes"),
                Limit::OppositeDirection => (Cause::Link, "the link is the limit (its opposite direction: requests and DLLPs)"),
                Limit::Link => (Cause::Link, "the link is the limit"),
            };
            add(cause, format!("{at} reaches {percent:.1} % of the model's ceiling ({:.1} MB/s, {}): {what}", ceiling.mbps, ceiling.limit.name()));
        } else {
            let message = format!("{at} reaches {:.1} MB/s, {percent:.1} % of the model's ceiling ({:.1} MB/s)", summary.median_mbps, ceiling.mbps);
            let explained = explained.iter().any(|c| match c {
                Cause::ReadLatency => mode != Mode::D2h,
                Cause::PerTransferOverhead => fits_explain(results, mode, point.bytes_per_step),
                _ => true,
            });
            add(if explained { Cause::BelowCeiling } else { Cause::Unexplained }, message);
        }
    }
    if link.is_none() {
        add(Cause::NoLinkInfo, "the target did not report its link: no model ceiling to compare with".into());
    }
    out
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
fn largest(results: &Results, mode: Mode) -> Option<&crate::bench::results::Point> {
    results.points.iter().filter(|p| p.mode == mode && p.summary.is_some()).max_by_key(|p| p.size_bytes)
}
