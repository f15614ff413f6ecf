//! The terminal view of a results document: conditions, one row per point beside the model's
//! ceiling, clocks, the T(N) fit, stalls, verification, interrupts and what limits the result.

use std::fmt::Write;

use crate::bench::diagnose::format_bytes_approx;
use crate::bench::results::{Results, Stopped};
use crate::bench::stalls::StallSource;
use crate::table::{Align, Table};
use crate::units::{format_ns, format_size};

/// A model limit's name as the results document spells it (`link`, `latency`, …).
pub fn limit_name(limit: crate::model::Limit) -> String {
    serde_json::to_value(limit).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn rate(mbps: f64) -> String {
    if mbps >= 100.0 { format!("{mbps:.0}") } else { format!("{mbps:.2}") }
}

/// Title line: command, target, and "simulated" when it is.
pub fn title(results: &Results) -> String {
    let c = &results.conditions;
    let label = if results.simulated { format!(" — {} (no hardware involved)", results.label().to_uppercase()) } else { String::new() };
    format!("pcieperf {} — target {} ({}){label}", c.command, c.target, c.engine.description)
}

/// The conditions block.
pub fn conditions(results: &Results) -> String {
    let c = &results.conditions;
    let mut out = String::new();
    let link = match &c.link {
        Some(l) => format!("{}\n             from {}", l.summary(), l.source),
        None => format!("unknown: {}", c.link_unknown.as_deref().unwrap_or("the engine does not report it")),
    };
    let clock = match (c.host_clock.tsc_hz, c.host_clock.tsc_hz_run) {
        (Some(hz), Some(run)) => format!("TSC at {:.3} GHz, calibrated against CLOCK_MONOTONIC_RAW (over the run: {:+.0} ppm)", hz / 1e9, (run / hz - 1.0) * 1e6),
        (Some(hz), None) => format!("TSC at {:.3} GHz, calibrated against CLOCK_MONOTONIC_RAW", hz / 1e9),
        (None, _) => "CLOCK_MONOTONIC_RAW".into(),
    };
    let clock = format!("{clock}, {:.0} ns per timestamp pair (subtracted)", c.host_clock.timestamp_overhead_ns);
    let _ = writeln!(out, "link:        {link}");
    for assumption in c.link.iter().flat_map(|l| &l.assumed) {
        let _ = writeln!(out, "             assumed: {assumption}");
    }
    for (label, text) in crate::report::link_path::lines(c) {
        let _ = writeln!(out, "{:<13}{text}", format!("{label}:"));
    }
    if let Some(emulator) = &c.emulated_by {
        let _ = writeln!(out, "EMULATED:    {emulator}: the link is nominal and the rates are the emulator's, not PCI Express throughput");
    }
    let _ = writeln!(out, "host:        {} ({}), pcieperf {}, started {}", c.host, c.kernel, c.tool_version, c.start_time_utc);
    let _ = writeln!(out, "host clock:  {clock}; engine clock: {}", if c.simulated { format!("virtual ({})", results.label()) } else { "the engine's host clock".into() });
    let until = if c.ci_target > 0.0 {
        format!("until the median's 95 % interval is within ± {} % (at least 10 samples and a tenth of the budget, or 4 ms when transfers take 0.5 ms or more), the rate drifts (a slope beyond 5 standard errors), or", c.ci_target * 100.0)
    } else {
        "for the whole budget (--ci-target 0):".into()
    };
    let _ = writeln!(
        out,
        "procedure:   warm-up, repeat {until} {} s (engine clock) / {} s (host clock) per point; deadline {} s per transfer; seed {}",
        c.duration_s,
        c.wall_limit_s,
        c.deadline_s,
        c.seed
    );
    out
}

/// Usefulness of the per-point table's columns (0 = most), for a terminal too narrow for all
/// of them: the rate, the model beside it and its limit stay longest.
const POINT_COLUMN_RANK: [usize; 15] = [0, 1, 2, 6, 9, 13, 4, 3, 5, 10, 11, 14, 8, 12, 7];

/// The per-point table: measured beside the model's ceiling; within `width` characters when
/// given (columns left out are said under it), else every column.
pub fn points_table(results: &Results, width: Option<usize>) -> String {
    let rate_header = format!("MB/s ({})", results.label());
    let mut table = Table::new(&[
        ("mode", Align::Left),
        ("size", Align::Right),
        (rate_header.as_str(), Align::Right),
        ("95% CI", Align::Right),
        ("sustained", Align::Right),
        ("time p99/max (MB/s at p99)", Align::Right),
        ("model MB/s", Align::Right),
        ("% of model", Align::Right),
        ("model limit", Align::Left),
        ("samples", Align::Right),
        ("stopped", Align::Left),
        ("time engine/host", Align::Right),
        ("stalls", Align::Right),
        ("max stall", Align::Right),
        ("verified", Align::Right),
    ]);
    for p in &results.points {
        let s = p.summary.as_ref();
        let dash = || "-".to_string();
        let c = p.ceiling.as_ref();
        let stall_source = match p.stalls.source {
            StallSource::Device => " (dev)",
            StallSource::Host => "",
            StallSource::None => "",
        };
        table.row(vec![
            p.mode.name().into(),
            format_size(p.size_bytes),
            s.map_or_else(|| p.error.as_ref().map_or_else(dash, |_| "NO RESULT".into()), |s| rate(s.median_mbps)),
            s.and_then(|s| s.median_ci_mbps).map_or_else(|| "<6 samples".into(), |(lo, hi)| format!("{}–{}", rate(lo), rate(hi))),
            s.map_or_else(dash, |s| rate(s.sustained_mbps)),
            s.map_or_else(dash, |s| format!("{} ({})", times_in_one_unit(&[s.time_ns.p99, s.time_ns.max]), rate(s.p99_mbps))),
            c.map_or_else(|| "no link info".into(), |c| rate(c.mbps)),
            c.and_then(|c| c.percent_reached).map_or_else(dash, |v| format!("{v:.1}")),
            c.map_or_else(dash, |c| limit_name(c.limit)),
            p.samples.len().to_string(),
            match &p.convergence.drift {
                Some(d) => format!("{} {:+.1} %/s", p.convergence.stop_reason, d.percent_per_s),
                None => p.convergence.stop_reason.clone(),
            },
            format!("{}/{}", format_ns(p.convergence.engine_ns), format_ns(p.convergence.wall_ns)),
            format!("{}{stall_source}", p.stalls.over_threshold),
            format_ns(p.stalls.max_stall_ns),
            if p.verification.failed > 0 {
                format!("FAILED {}", p.verification.failed)
            } else if p.verification.passed > 0 {
                format!("{} ok", p.verification.passed)
            } else {
                "no".into()
            },
        ]);
    }
    match width {
        None => table.render(),
        Some(width) => match table.render_fitting(width, &POINT_COLUMN_RANK) {
            (text, 0) => text,
            (text, left_out) => format!("{text}({left_out} columns left out to fit {width} columns: --wide, or a pipe, shows all)\n"),
        },
    }
}

/// Times that belong together (p99/max) in the unit of the largest: `9.50/10.7 µs`.
fn times_in_one_unit(times_ns: &[f64]) -> String {
    let largest = times_ns.iter().copied().fold(0.0, f64::max);
    let unit_text = format_ns(largest);
    let unit = unit_text.rsplit(' ').next().unwrap_or("ns");
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "µs" => 1e3,
        _ => 1.0,
    };
    let values: Vec<String> = times_ns
        .iter()
        .map(|ns| {
            let value = ns / scale;
            let decimals = if value >= 100.0 { 0 } else if value >= 10.0 { 1 } else { 2 };
            format!("{value:.decimals$}")
        })
        .collect();
    format!("{} {unit}", values.join("/"))
}

/// A `both` point direction by direction, when the engine timed each direction.
fn directions_table(results: &Results) -> Option<String> {
    let mut table = Table::new(&[
        ("size", Align::Right),
        ("h2d MB/s", Align::Right),
        ("d2h MB/s", Align::Right),
        ("sum MB/s", Align::Right),
        ("both, to the last end MB/s", Align::Right),
    ]);
    for p in &results.points {
        let (Some(d), Some(s)) = (&p.directions, &p.summary) else { continue };
        table.row(vec![format_size(p.size_bytes), rate(d.h2d_median_mbps), rate(d.d2h_median_mbps), rate(d.sum_mbps), rate(s.median_mbps)]);
    }
    (!table.is_empty()).then(|| table.render())
}

fn clocks_table(results: &Results) -> Option<String> {
    // The smallest and largest size of each mode: the difference is a per-transfer constant.
    let with_device: Vec<_> =
        results.points.iter().filter_map(|p| Some((p, p.summary.as_ref()?))).filter(|(_, s)| s.device_median_ns.is_some()).collect();
    let rows: Vec<_> = with_device
        .iter()
        .filter(|(p, _)| {
            let sizes = with_device.iter().filter(|(q, _)| q.mode == p.mode).map(|(q, _)| q.size_bytes);
            let (lo, hi) = sizes.fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
            p.size_bytes == lo || p.size_bytes == hi
        })
        .copied()
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut table = Table::new(&[
        ("mode", Align::Left),
        ("size", Align::Right),
        ("engine clock", Align::Right),
        ("device clock", Align::Right),
        ("difference", Align::Right),
    ]);
    for (p, s) in rows {
        table.row(vec![
            p.mode.name().into(),
            format_size(p.size_bytes),
            format_ns(s.time_ns.median - s.copy_median_ns.unwrap_or(0.0)),
            format_ns(s.device_median_ns.unwrap_or(0.0)),
            format_ns(s.host_minus_device_ns.unwrap_or(0.0)),
        ]);
    }
    Some(table.render())
}

fn copy_table(results: &Results) -> Option<String> {
    if !results.conditions.copy_to_user {
        return None;
    }
    let mut table = Table::new(&[
        ("mode", Align::Left),
        ("size", Align::Right),
        ("transfer only MB/s", Align::Right),
        ("with copy MB/s", Align::Right),
        ("copy", Align::Right),
    ]);
    for p in &results.points {
        let Some(s) = &p.summary else { continue };
        let Some(copy) = s.copy_median_ns else { continue };
        table.row(vec![
            p.mode.name().into(),
            format_size(p.size_bytes),
            rate(s.transfer_only_median_mbps),
            rate(s.median_mbps),
            format_ns(copy),
        ]);
    }
    (!table.is_empty()).then(|| table.render())
}

fn fits_table(results: &Results) -> Option<String> {
    if results.fits.is_empty() {
        return None;
    }
    let mut table = Table::new(&[
        ("mode", Align::Left),
        ("B MB/s", Align::Right),
        ("f", Align::Right),
        ("m", Align::Right),
        ("B·f MB/s", Align::Right),
        ("N½", Align::Right),
        ("residuals % (per size)", Align::Left),
    ]);
    for fit in results.fits.iter().filter(|f| f.rejected.is_none()) {
        table.row(vec![
            fit.mode.name().into(),
            fit.bus_mbps.map_or("?".into(), rate),
            fit.f.map_or("?".into(), |f| format!("{f:.4}")),
            format_ns(fit.m_us * 1e3),
            rate(fit.asymptotic_mbps),
            format_bytes_approx(fit.n_half_bytes.max(0.0)),
            residuals_cell(&fit.residuals),
        ]);
    }
    (!table.is_empty()).then(|| table.render())
}

/// Most residuals listed one by one; more are summarised, so a sweep of thousands of sizes
/// still gives a table a terminal can show.
const RESIDUALS_LISTED: usize = 12;

fn residuals_cell(residuals: &[(u64, f64)]) -> String {
    if residuals.len() <= RESIDUALS_LISTED {
        return residuals.iter().map(|(_, r)| format!("{:+.1}", r * 100.0)).collect::<Vec<_>>().join(" ");
    }
    let Some(&(worst_size, worst)) = residuals.iter().max_by(|a, b| a.1.abs().total_cmp(&b.1.abs())) else { return String::new() };
    let rms = (residuals.iter().map(|(_, r)| r * r).sum::<f64>() / residuals.len() as f64).sqrt();
    format!("{} sizes: rms {:.1}, worst {:+.1} at {}", residuals.len(), rms * 100.0, worst * 100.0, format_bytes_approx(worst_size as f64))
}

/// One line per mode: the best figure beside the model, the fit, stalls and verification.
pub fn headline(results: &Results) -> String {
    let mut out = String::new();
    let mut modes: Vec<_> = results.points.iter().map(|p| p.mode).collect();
    modes.dedup();
    for mode in modes {
        let points: Vec<_> = results.points.iter().filter(|p| p.mode == mode).collect();
        let Some(best) = points.iter().filter_map(|p| Some((p, p.summary.as_ref()?))).max_by(|a, b| a.1.median_mbps.total_cmp(&b.1.median_mbps))
        else {
            let _ = writeln!(out, "  {:<4}  no samples", mode.name());
            continue;
        };
        let (p, s) = best;
        let model = match (&p.ceiling, results.conditions.emulated_by.is_some()) {
            (_, true) => "not compared with the model (emulated device: its link is nominal)".into(),
            (Some(c), false) => match c.percent_reached {
                Some(percent) => format!("{percent:.1} % of the model's {} MB/s", rate(c.mbps)),
                None => format!("the model's {} MB/s", rate(c.mbps)),
            },
            (None, false) => "no model ceiling (link unknown)".into(),
        };
        let fit = results.fits.iter().find(|f| f.mode == mode && f.rejected.is_none()).map_or(String::new(), |f| {
            let f_text = f.f.map_or(String::new(), |f| format!("f {f:.3}, "));
            format!("; {f_text}m {}, N½ {}", format_ns(f.m_us * 1e3), format_bytes_approx(f.n_half_bytes.max(0.0)))
        });
        let stalls: u64 = points.iter().map(|p| p.stalls.over_threshold).sum();
        let longest = points.iter().map(|p| p.stalls.max_stall_ns).fold(0.0, f64::max);
        let (passed, failed): (u64, u64) = points.iter().fold((0, 0), |(a, b), p| (a + p.verification.passed, b + p.verification.failed));
        let verified = if failed > 0 { format!("{failed} FAILED verification") } else { format!("{passed} verified") };
        let interval = s.median_ci_mbps.map_or(String::new(), |(lo, hi)| format!(" [95% CI {}–{}]", rate(lo), rate(hi)));
        let directions = p.directions.map_or(String::new(), |d| {
            format!(" (each direction: h2d {} + d2h {} = {} MB/s)", rate(d.h2d_median_mbps), rate(d.d2h_median_mbps), rate(d.sum_mbps))
        });
        let _ = writeln!(
            out,
            "  {:<4}  {} MB/s{interval}{directions} ({}) at {} = {model}{fit}; {stalls} stalls > {:.0} µs (longest {}); {verified}",
            mode.name(),
            rate(s.median_mbps),
            results.label(),
            format_size(p.size_bytes),
            results.conditions.stall_threshold_ns / 1e3,
            format_ns(longest)
        );
    }
    out
}

/// The whole summary.
pub fn render(results: &Results) -> String {
    render_within(results, None)
}

/// [`render`] with the per-point table within `width` characters (a terminal's).
pub fn render_within(results: &Results, width: Option<usize>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(results));
    out.push_str(&conditions(results));
    let _ = writeln!(out, "Rates in MB/s = 10^6 bytes/s: the median transfer with its 95 % confidence interval, then the slow tail (p99 and slowest transfer time, and the rate at the p99 time); {}; model = pcieperf's ceiling for the same conditions and size.\n", if results.simulated {
        format!("every figure is {}", results.label())
    } else {
        "measured figures".into()
    });
    out.push_str(&points_table(results, width));
    if let Some(directions) = directions_table(results) {
        let _ = writeln!(
            out,
            "\nBoth directions at once, each on its own (medians, {}; sum = h2d + d2h, as nvbandwidth reports a bidirectional copy; the last column is both directions' bytes over the time until both ended):",
            results.label()
        );
        out.push_str(&directions);
    }
    if let Some(copy) = copy_table(results) {
        let _ = writeln!(out, "\nCopy to user space (host clock; document 002 saw 1000 → 250 MB/s):");
        out.push_str(&copy);
    }
    if let Some(clocks) = clocks_table(results) {
        let _ = writeln!(out, "\nClocks (medians; the host sees slightly more than the device, document 000 §5.2):");
        out.push_str(&clocks);
    }
    if let Some(fits) = fits_table(results) {
        let _ = writeln!(out, "\nTransfer model T(N) = N/(B·f) + m fitted over the sizes (document 002):");
        out.push_str(&fits);
    }
    let v = &results.verification;
    let _ = writeln!(out, "\nVerification: {} — {} passed, {} failed, {} unchecked", v.method, v.passed, v.failed, v.unchecked);
    if let Some(failure) = &v.first_failure {
        let _ = writeln!(out, "  first failure: {failure}");
    }
    if let Some(irq) = &results.interrupts {
        let scope = match irq.scope.as_str() {
            "device_vectors" => format!("on the device's IRQ {} (its vectors in sysfs)", irq.irqs.join(", ")),
            "device" => format!("on the device's IRQ {}", irq.irqs.join(", ")),
            _ => "on the whole host, not the device's own count (sysfs lists no vector and no /proc/interrupts line names the device)".into(),
        };
        let _ = writeln!(out, "Interrupts during the run: {} {scope}", irq.count);
        if irq.per_irq.len() > 1 {
            for vector in &irq.per_irq {
                let _ = writeln!(out, "  IRQ {:>4}: {:>10}  {}", vector.irq, vector.count, crate::printable::escaped(&vector.description));
            }
        }
    }
    if let Some(health) = &results.link_health {
        let counters: usize = health.before.functions.iter().map(|f| f.counters.len()).sum();
        let path: Vec<&str> = health.before.functions.iter().map(|f| f.bdf.as_str()).collect();
        let moved = if health.changes.is_empty() { "none moved".to_string() } else { format!("{} moved", health.changes.len()) };
        let gone = if health.after.is_none() { " (the device had left sysfs by the end)" } else { "" };
        let _ = writeln!(out, "AER counters before/after on {}: {counters} read, {moved}{gone}", path.join(" → "));
    }
    let _ = writeln!(out, "\nSummary (best median per mode):");
    out.push_str(&headline(results));
    if !results.findings.is_empty() {
        let _ = writeln!(out, "\nWhat limits the result:");
        for f in &results.findings {
            let _ = writeln!(out, "  - {}", f.message);
        }
    }
    out.push_str(&incomplete(results.stopped.as_ref()));
    // A live run's strings (its target, a device's message) come from outside: shown escaped.
    crate::printable::escaped(&out).into_owned()
}


/// The closing line of a document that stopped early (empty when it did not).
pub(super) fn incomplete(stopped: Option<&Stopped>) -> String {
    match stopped {
        Some(Stopped::Interrupted) => "\nINCOMPLETE: interrupted by Ctrl-C.\n".to_string(),
        Some(Stopped::Error { message }) => format!("\nINCOMPLETE: {message}\n"),
        None => String::new(),
    }
}

#[cfg(test)]
mod residual_tests {
    #[test]
    fn residuals_are_listed_then_summarised() {
        let few: Vec<(u64, f64)> = vec![(4096, 0.012), (65536, -0.003)];
        assert_eq!(super::residuals_cell(&few), "+1.2 -0.3");
        let many: Vec<(u64, f64)> = (1..=16_000).map(|i| (i * 4, if i == 700 { -0.05 } else { 0.001 })).collect();
        let cell = super::residuals_cell(&many);
        assert!(cell.starts_with("16000 sizes: rms 0.1, worst -5.0 at 2."), "{cell}");
    }

    #[test]
    fn an_emulated_devices_rates_are_never_a_percentage_of_a_ceiling() {
        use crate::bench::dma::{measure, DmaOptions, Quiet};
        let mut options = DmaOptions::new(vec![crate::bench::results::Mode::D2h], vec![4096, 65536]);
        let mut engine = crate::engine::sim::SimEngine::open("sim", &crate::engine::OpenOptions { seed: options.seed, ..Default::default() }).unwrap();
        options.duration = std::time::Duration::from_millis(20);
        let mut results = measure(&mut engine, &options, &std::sync::atomic::AtomicBool::new(false), &mut Quiet).unwrap();
        assert!(super::headline(&results).contains("% of the model's"), "a simulated device is compared");
        // What `dma::measure` does for a device whose IDs name a hypervisor (QEMU's NVMe).
        results.conditions.emulated_by = Some("QEMU NVMe (Red Hat): vendor ID 0x1b36".into());
        crate::bench::predict::without_comparison(&mut results.points, &mut results.fits);
        let line = super::headline(&results);
        assert!(!line.contains("% of") && line.contains("not compared with the model (emulated device"), "{line}");
        assert!(!line.contains("f 0."), "no fraction of the link either: {line}");
        let json: serde_json::Value = serde_json::from_str(&crate::report::json::to_string(&results)).unwrap();
        for point in json["points"].as_array().unwrap() {
            assert!(point["ceiling"]["percent_reached"].is_null(), "{}", point["ceiling"]);
        }
        let table = super::points_table(&results, None);
        assert!(!table.contains("647") && results.points.iter().all(|p| p.ceiling.as_ref().unwrap().percent_reached.is_none()), "{table}");
    }
}
