//! Why the gap: name what limits a run's result, most important first (DESIGN.md question 3).

use crate::bench::link_watch::{narrowest_mbits, CeilingFrom, PathSample};
use crate::bench::nvml::NvmlRecord;
use crate::bench::results::{Cause, Finding, Fit, Mode, Point, Results, Stopped};
use crate::engine::HostMemory;
use crate::pci::path_state::link_text;
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
    idle_downshift,
    narrow_uplink,
    remote_numa,
    replays,
    gpu_power_state,
    pageable_staging,
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

/// A link trained below what both of its ends can do: the narrowest hop as sampled during the
/// run when the path was sampled, else the conditions read before it.
pub fn link_below_capability(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    // An emulated device's link is nominal: how it trained explains nothing.
    if results.conditions.emulated_by.is_some() {
        return Vec::new();
    }
    if let Some(path) = results.conditions.link_path.as_ref().filter(|p| p.ceiling_from == CeilingFrom::During) {
        let Some(hop) = path.ceiling_hop().filter(|h| h.below_capability()) else { return Vec::new() };
        let message = format!(
            "link trained below capability during the run: {} at {} at its fastest of {} sample(s), though it can do {}; the ceiling is {:.0} % of what it could be",
            hop.bdf,
            hop.link_text(),
            path.during.len(),
            link_text(hop.max_speed_gts, hop.max_width),
            percent(hop.mbits(), hop.max_mbits())
        );
        return vec![finding(Cause::LinkBelowCapability, message)];
    }
    let link = results.conditions.link.as_ref().filter(|c| c.below_capability());
    let Some((trained, capable)) = link.and_then(|c| Some((c.params.link, c.capable?))) else { return Vec::new() };
    let ratio = trained.encoded_mbps() / capable.encoded_mbps() * 100.0;
    let message = format!("link trained at {trained} but both ends can do {capable}: the ceiling is {ratio:.0} % of what it could be");
    vec![finding(Cause::LinkBelowCapability, message)]
}

fn percent(part: u32, whole: u32) -> f64 {
    if whole == 0 { 100.0 } else { f64::from(part) / f64::from(whole) * 100.0 }
}

/// The path's narrowest hop before or after the run slower than during it (a GPU idles at
/// 2.5 GT/s and trains up under load), or the reverse: slower during the run than around it.
pub fn idle_downshift(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let Some(path) = results.conditions.link_path.as_ref().filter(|p| p.ceiling_from == CeilingFrom::During) else { return Vec::new() };
    let outside: Vec<(&str, &PathSample)> = [("before", &path.before), ("after", &path.after)].into_iter().filter_map(|(w, s)| Some((w, s.as_ref()?))).collect();
    let with_hop = |s: &&PathSample| s.narrowest().is_some();
    let fastest_during = path.ceiling_sample();
    let slowest_during = path.during.iter().filter(with_hop).min_by_key(|s| narrowest_mbits(s));
    let (Some(fast), Some(slow)) = (fastest_during, slowest_during) else { return Vec::new() };
    let text = |s: &PathSample| s.narrowest().map_or_else(String::new, |h| format!("{} at {}", h.link_text(), h.bdf));
    let mut out = Vec::new();
    let idle: Vec<String> = outside.iter().filter(|(_, s)| narrowest_mbits(s) < narrowest_mbits(fast)).map(|(w, s)| format!("{} {w}", text(s))).collect();
    if !idle.is_empty() {
        let message = format!(
            "idle downshift: the link was slower around the run ({}) than during it ({}, {:.0} ms in): a reading taken only before the run describes the idle link; the ceiling is for the state during the run",
            idle.join(", "),
            text(fast),
            fast.at_ms
        );
        out.push(finding(Cause::IdleDownshift, message));
    }
    let slowest_outside = outside.iter().map(|(_, s)| narrowest_mbits(s)).min();
    if slowest_outside.is_some_and(|m| narrowest_mbits(slow) < m) {
        let around = outside.iter().map(|(w, s)| format!("{} {w}", text(s))).collect::<Vec<_>>().join(", ");
        let message = format!(
            "the link trained down during the run: {} {:.0} ms in, {around}: figures measured while it was down are below what the link allows (power or thermal management, or a link retraining after errors)",
            text(slow),
            slow.at_ms
        );
        out.push(finding(Cause::DownshiftDuringRun, message));
    }
    out
}

/// A hop above the device narrower or slower than the device's own link, in the sample the
/// ceiling is for.
pub fn narrow_uplink(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let Some(sample) = results.conditions.link_path.as_ref().and_then(|p| p.ceiling_sample()) else { return Vec::new() };
    let (Some(device), Some(hop)) = (sample.hops.first(), sample.narrowest()) else { return Vec::new() };
    if hop.bdf == device.bdf || hop.mbits() >= device.mbits() {
        return Vec::new();
    }
    let message = format!(
        "narrow uplink: {} at {} is narrower or slower than the device's own link ({} at {}): the ceiling follows it, {:.0} % of what the device's link carries",
        hop.bdf,
        hop.link_text(),
        device.bdf,
        device.link_text(),
        percent(hop.mbits(), device.mbits())
    );
    vec![finding(Cause::NarrowUplink, message)]
}

/// The measuring thread or the buffers on another NUMA node than the device.
pub fn remote_numa(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let Some(numa) = &results.conditions.numa else { return Vec::new() };
    let (Some(remote), Some(device)) = (numa.remote_node(), numa.device_node) else { return Vec::new() };
    let what = match (numa.buffer_nodes.contains(&remote), numa.thread_node == Some(remote)) {
        (true, true) => "the buffers and the measuring thread are",
        (true, false) => "the buffers are",
        _ => "the measuring thread is",
    };
    let distance = match (numa.remote_distance, numa.local_distance) {
        (Some(remote), Some(local)) => format!(" (distance {remote}, local {local})"),
        (Some(remote), None) => format!(" (distance {remote})"),
        _ => String::new(),
    };
    let message = format!(
        "remote NUMA node: {what} on node {remote}, the device on node {device}{distance}: every transfer crosses the link between the sockets; place them on node {device} (--numa {device}, or numactl --cpunodebind={device} --membind={device})"
    );
    vec![finding(Cause::RemoteNuma, message)]
}

/// PCIe replays while measuring: the GPU's replay counter (NVML) rose, or correctable errors
/// (each one replayed) were counted by AER on the path.
pub fn replays(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let mut seen = Vec::new();
    if let Some((before, after)) = results.conditions.nvml.as_ref().and_then(NvmlRecord::replays_during) {
        seen.push(format!("NVML replay counter {before} → {after} (+{})", after - before));
    }
    let correctable = results.link_health.as_ref().map_or(0, |h| {
        h.changes.iter().filter(|c| c.is_correctable() && !c.is_total() && !c.counter.starts_with("aer_rootport")).map(|c| c.after.saturating_sub(c.before)).sum::<u64>()
    });
    if correctable > 0 {
        seen.push(format!("{correctable} correctable error(s) counted by AER on the path"));
    }
    if seen.is_empty() {
        return Vec::new();
    }
    let message = format!(
        "replays during the run: {}: each replay resends TLPs the receiver rejected, which costs bandwidth and latency; a rising count points at signal integrity (riser, slot, cable) — reseat or try another slot",
        seen.join("; ")
    );
    vec![finding(Cause::Replays, message)]
}

/// NVML's performance state in the samples taken while the GPU copied: any other than P0 (its
/// maximum-performance state) means clocks below their maximum. Before and after the run an
/// idle GPU is in P8 by design, so those samples are not judged.
pub fn gpu_power_state(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    let Some(path) = &results.conditions.link_path else { return Vec::new() };
    let states: Vec<u32> = path.during.iter().filter_map(|s| s.gpu.as_ref()?.pstate).collect();
    let below: Vec<u32> = states.iter().copied().filter(|&p| p > 0).collect();
    let Some(worst) = below.iter().max() else { return Vec::new() };
    let message = format!(
        "GPU power state: NVML reported P{worst} during the copy ({} of {} sample(s) below P0, the maximum-performance state): the GPU's clocks were below their maximum while it copied; `nvidia-smi -q -d PERFORMANCE` names the reason (power cap, thermal, application clocks, idle), and persistence mode or locked clocks (`nvidia-smi -lgc`) keep it in P0",
        below.len(),
        states.len()
    );
    vec![finding(Cause::GpuPowerState, message)]
}

/// The engine copies from and to pageable host memory.
pub fn pageable_staging(results: &Results, _earlier: &[Finding]) -> Vec<Finding> {
    if results.conditions.host_memory != Some(HostMemory::Pageable) {
        return Vec::new();
    }
    let message = "pageable staging: the host buffers are pageable, so the driver copies every transfer through a pinned staging buffer of its own (a CPU copy in series with the DMA); pinned or registered host memory lets the DMA reach the buffers directly"
        .to_string();
    vec![finding(Cause::PageableStaging, message)]
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
        // The ceiling already follows the narrowest hop: it explains no gap below it.
        Cause::NarrowUplink => false,
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

    fn hop(bdf: &str, speed_gts: f64, width: u8, max_speed_gts: f64, max_width: u8) -> crate::pci::path_state::HopState {
        crate::pci::path_state::HopState { bdf: bdf.into(), speed_gts: Some(speed_gts), width: Some(width), max_speed_gts: Some(max_speed_gts), max_width: Some(max_width) }
    }

    /// A GPU (Gen4 x16 capable) under a Gen4 x16 root port, its own speed before, during and
    /// after the run as given, the port's width `port_width`.
    fn sampled(before: f64, during: &[f64], after: f64, port_width: u8) -> Results {
        let sample = |at_ms: f64, speed: f64| PathSample {
            at_ms,
            hops: vec![hop("0000:01:00.0", speed, 16, 16.0, 16), hop("0000:00:01.0", 16.0, port_width, 16.0, 16)],
            gpu: None,
        };
        let mut results = simulated_run();
        results.conditions.link_path = Some(crate::bench::link_watch::LinkPath {
            device: "0000:01:00.0".into(),
            interval_ms: 100.0,
            before: Some(sample(0.0, before)),
            during: during.iter().enumerate().map(|(i, &s)| sample(100.0 * (i + 1) as f64, s)).collect(),
            after: Some(sample(100.0 * (during.len() + 1) as f64, after)),
            ceiling_from: if during.is_empty() { CeilingFrom::Before } else { CeilingFrom::During },
        });
        results
    }

    #[test]
    fn idle_downshift_fires_for_a_link_slower_around_the_run_and_names_the_reverse() {
        let found = idle_downshift(&sampled(2.5, &[16.0, 16.0], 2.5, 16), &[]);
        assert_eq!(causes(&found), [&Cause::IdleDownshift]);
        assert!(found[0].message.contains("2.5 GT/s x16 at 0000:01:00.0 before, 2.5 GT/s x16 at 0000:01:00.0 after"), "{}", found[0].message);
        assert!(found[0].message.contains("during it (16 GT/s x16 at 0000:00:01.0, 100 ms in)"), "{}", found[0].message);
        let found = idle_downshift(&sampled(16.0, &[16.0, 5.0], 16.0, 16), &[]);
        assert_eq!(causes(&found), [&Cause::DownshiftDuringRun]);
        assert!(found[0].message.contains("5 GT/s x16 at 0000:01:00.0 200 ms in"), "{}", found[0].message);
    }

    #[test]
    fn idle_downshift_is_silent_for_a_steady_link_and_without_a_sample_during_the_run() {
        assert!(idle_downshift(&sampled(16.0, &[16.0, 16.0], 16.0, 16), &[]).is_empty());
        assert!(idle_downshift(&sampled(2.5, &[], 16.0, 16), &[]).is_empty());
        assert!(idle_downshift(&simulated_run(), &[]).is_empty(), "no path sampled");
    }

    #[test]
    fn below_capability_is_judged_on_the_state_during_the_run() {
        // Idle before and after, at capability during: not below capability.
        assert!(link_below_capability(&sampled(2.5, &[16.0], 2.5, 16), &[]).is_empty());
        let found = link_below_capability(&sampled(16.0, &[8.0, 8.0], 16.0, 16), &[]);
        assert_eq!(causes(&found), [&Cause::LinkBelowCapability]);
        assert!(found[0].message.contains("0000:01:00.0 at 8 GT/s x16 at its fastest of 2 sample(s), though it can do 16 GT/s x16"), "{}", found[0].message);
    }

    #[test]
    fn a_narrow_uplink_is_named_and_explains_no_gap() {
        let results = sampled(16.0, &[16.0], 16.0, 8);
        let found = narrow_uplink(&results, &[]);
        assert_eq!(causes(&found), [&Cause::NarrowUplink]);
        assert!(found[0].message.starts_with("narrow uplink: 0000:00:01.0 at 16 GT/s x8 is narrower or slower than the device's own link (0000:01:00.0 at 16 GT/s x16)"), "{}", found[0].message);
        let mut gap = results;
        gap.points[0].ceiling.as_mut().unwrap().percent_reached = Some(50.0);
        assert_eq!(causes(&gap_to_ceiling(&gap, &found)), [&Cause::Unexplained]);
        assert!(narrow_uplink(&sampled(16.0, &[16.0], 16.0, 16), &[]).is_empty(), "as wide as the device's link");
        assert!(narrow_uplink(&sampled(16.0, &[2.5], 16.0, 8), &[]).is_empty(), "the device's own link is the narrowest");
    }

    fn placed(thread_node: Option<u32>, buffer_node: Option<u32>) -> Results {
        let mut results = simulated_run();
        results.conditions.numa = Some(crate::bench::numa::NumaPlacement {
            device_node: Some(1),
            thread_node,
            buffer_nodes: buffer_node.into_iter().collect(),
            local_distance: Some(10),
            remote_distance: Some(32),
            ..Default::default()
        });
        results
    }

    #[test]
    fn remote_numa_fires_when_the_thread_or_buffers_are_elsewhere() {
        let found = remote_numa(&placed(Some(0), Some(1)), &[]);
        assert_eq!(causes(&found), [&Cause::RemoteNuma]);
        assert!(found[0].message.starts_with("remote NUMA node: the measuring thread is on node 0, the device on node 1 (distance 32, local 10)"), "{}", found[0].message);
        assert!(remote_numa(&placed(Some(0), Some(0)), &[])[0].message.contains("the buffers and the measuring thread are on node 0"));
        assert!(remote_numa(&placed(Some(1), Some(1)), &[]).is_empty());
        assert!(remote_numa(&placed(None, None), &[]).is_empty());
        assert!(remote_numa(&simulated_run(), &[]).is_empty());
    }

    #[test]
    fn replays_fire_on_a_rising_nvml_counter_or_correctable_errors_only() {
        let state = |replays| Some(crate::bench::nvml::GpuState { replay_counter: Some(replays), ..Default::default() });
        let mut results = simulated_run();
        results.conditions.nvml = Some(NvmlRecord { available: true, reason: None, name: None, before: state(5), after: state(5) });
        assert!(replays(&results, &[]).is_empty());
        results.conditions.nvml.as_mut().unwrap().after = state(9);
        let found = replays(&results, &[]);
        assert_eq!(causes(&found), [&Cause::Replays]);
        assert!(found[0].message.starts_with("replays during the run: NVML replay counter 5 → 9 (+4)"), "{}", found[0].message);
        results.conditions.nvml = None;
        let change = |counter: &str| crate::pci::health::AerChange { bdf: "0000:01:00.0".into(), counter: counter.into(), before: 1, after: 3 };
        let snapshot = crate::pci::health::AerSnapshot { functions: vec![] };
        results.link_health = Some(crate::bench::results::LinkHealth { before: snapshot.clone(), after: Some(snapshot), changes: vec![change("aer_dev_nonfatal/DLP")] });
        assert!(replays(&results, &[]).is_empty(), "an uncorrectable error is not a replay");
        results.link_health.as_mut().unwrap().changes = vec![change("aer_dev_correctable/RxErr"), change("aer_dev_correctable/TOTAL_ERR_COR")];
        assert!(replays(&results, &[])[0].message.contains("2 correctable error(s) counted by AER"));
    }

    #[test]
    fn gpu_power_state_fires_only_below_p0_during_the_copy() {
        let with_states = |before: u32, during: &[u32], after: u32| {
            let mut results = sampled(16.0, &vec![16.0; during.len()], 16.0, 16);
            let state = |p| Some(crate::bench::nvml::GpuState { pstate: Some(p), ..Default::default() });
            let path = results.conditions.link_path.as_mut().unwrap();
            path.before.as_mut().unwrap().gpu = state(before);
            path.after.as_mut().unwrap().gpu = state(after);
            path.during.iter_mut().zip(during).for_each(|(s, &p)| s.gpu = state(p));
            results
        };
        let found = gpu_power_state(&with_states(8, &[0, 2, 0], 8), &[]);
        assert_eq!(causes(&found), [&Cause::GpuPowerState]);
        assert!(found[0].message.starts_with("GPU power state: NVML reported P2 during the copy (1 of 3 sample(s) below P0"), "{}", found[0].message);
        assert!(gpu_power_state(&with_states(8, &[0, 0, 0], 8), &[]).is_empty(), "idle around the run, P0 while copying");
        assert!(gpu_power_state(&with_states(0, &[], 8), &[]).is_empty(), "no sample during the copy");
        assert!(gpu_power_state(&sampled(16.0, &[16.0], 16.0, 16), &[]).is_empty(), "no NVML state");
        assert!(gpu_power_state(&simulated_run(), &[]).is_empty());
    }

    #[test]
    fn pageable_staging_fires_only_for_pageable_host_memory() {
        let mut results = simulated_run();
        assert!(pageable_staging(&results, &[]).is_empty());
        results.conditions.host_memory = Some(HostMemory::Pinned);
        assert!(pageable_staging(&results, &[]).is_empty());
        results.conditions.host_memory = Some(HostMemory::Pageable);
        assert_eq!(causes(&pageable_staging(&results, &[])), [&Cause::PageableStaging]);
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
