//! Prometheus text exposition (format 0.0.4) of a run's summary and of an inspection's link
//! health, for fleet monitoring: node_exporter's textfile collector reads these files, and
//! `promtool check metrics` passes them (tested). Conventions: base units in names
//! (`_bytes_per_second`, `_seconds`, `_bytes`), `_total` for counters, no sample timestamps (the
//! textfile collector refuses them) but a `…_timestamp_seconds` gauge saying when the figures
//! were taken. Every run series carries `simulated="true|false"`.

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::bench::results::{Point, Results};
use crate::pci::{DeviceReport, Inspection};

fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// `name="value",…` from pairs, values escaped.
pub fn labels(pairs: &[(&str, String)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k}=\"{}\"", label_value(v))).collect::<Vec<_>>().join(",")
}

/// Metric families written one after another, each with its HELP and TYPE once.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Exposition {
    /// One family; nothing is written when it has no samples (an empty family is noise).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str, samples: impl IntoIterator<Item = (String, f64)>) {
        let samples: Vec<(String, f64)> = samples.into_iter().collect();
        if samples.is_empty() {
            return;
        }
        debug_assert_eq!(kind == Kind::Counter, name.ends_with("_total"), "{name}: counters and only counters end in _total");
        let kind = if kind == Kind::Counter { "counter" } else { "gauge" };
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let value = if value.is_nan() { "NaN".to_string() } else { format!("{value}") };
            let _ = writeln!(self.text, "{name}{{{labels}}} {value}");
        }
    }

    pub fn finish(self) -> String {
        self.text
    }
}

fn unix_seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64().floor())
}

/// The metrics text of a run whose results were written at `written` (now, for a run that just
/// ended; the results file's modification time, for `report`).
pub fn render(results: &Results, written: SystemTime) -> String {
    let base = [("target", results.conditions.target.clone()), ("simulated", results.simulated.to_string())];
    let with = |extra: &[(&str, String)]| labels(&[&base[..], extra].concat());
    let per_point = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<(String, f64)> {
        results.points.iter().filter_map(|p| Some((with(&[("mode", p.mode.name().to_string()), ("size_bytes", p.size_bytes.to_string())]), f(p)?))).collect()
    };
    let per_fit = |f: &dyn Fn(&crate::bench::results::Fit) -> Option<f64>| -> Vec<(String, f64)> {
        results.fits.iter().filter_map(|fit| Some((with(&[("mode", fit.mode.name().to_string())]), f(fit)?))).collect()
    };
    let mut out = Exposition::default();
    use Kind::*;
    out.family("pcieperf_throughput_bytes_per_second", Gauge, "Median measured throughput.", per_point(&|p| Some(p.summary.as_ref()?.median_mbps * 1e6)));
    out.family("pcieperf_ceiling_bytes_per_second", Gauge, "Model ceiling for the same link, conditions and size.", per_point(&|p| Some(p.ceiling.as_ref()?.mbps * 1e6)));
    out.family("pcieperf_ceiling_ratio", Gauge, "Measured median divided by the model ceiling.", per_point(&|p| Some(p.ceiling.as_ref()?.percent_reached? / 100.0)));
    out.family("pcieperf_stalls_over_threshold_total", Counter, "Transfers slower than the stall threshold.", per_point(&|p| Some(p.stalls.over_threshold as f64)));
    out.family("pcieperf_max_stall_seconds", Gauge, "Longest stall.", per_point(&|p| Some(p.stalls.max_stall_ns / 1e9)));
    out.family("pcieperf_fit_per_transfer_seconds", Gauge, "Fitted per-transfer cost m of T(N) = N/(B*f) + m.", per_fit(&|f| Some(f.m_us / 1e6)));
    out.family("pcieperf_fit_efficiency_ratio", Gauge, "Fitted efficiency f of T(N) = N/(B*f) + m.", per_fit(&|f| f.f));
    out.family("pcieperf_verify_failures_total", Counter, "Transfers that failed data verification.", [(with(&[]), results.verification.failed as f64)]);
    out.family("pcieperf_run_complete", Gauge, "1 when the run finished, 0 when it stopped early.", [(with(&[]), f64::from(u8::from(results.complete)))]);
    out.family("pcieperf_run_timestamp_seconds", Gauge, "When the run's results were written, Unix time.", [(with(&[]), unix_seconds(written))]);
    out.finish()
}

/// The metrics text of a run that just ended.
pub fn render_now(results: &Results) -> String {
    render(results, SystemTime::now())
}

fn device_labels(d: &DeviceReport) -> Vec<(&'static str, String)> {
    vec![("device", d.bdf.to_string()), ("name", d.name.clone())]
}

/// Link health of every inspected device: what a fleet alerts on ("this GPU trained at x8",
/// "AER correctables rising").
pub fn inspection(inspection: &Inspection, at: SystemTime) -> String {
    let mut out = Exposition::default();
    use Kind::*;
    let each = |f: &dyn Fn(&DeviceReport) -> Option<f64>| -> Vec<(String, f64)> {
        inspection.devices.iter().filter_map(|d| Some((labels(&device_labels(d)), f(d)?))).collect()
    };
    let gts = |v: Option<f64>| v.map(|g| g * 1e9);
    out.family("pcieperf_pcie_link_speed_transfers_per_second", Gauge, "Current link speed (LnkSta), transfers/s per lane.", each(&|d| gts(d.link_status.speed_gts)));
    out.family("pcieperf_pcie_link_width_lanes", Gauge, "Current link width (LnkSta).", each(&|d| d.link_status.width.map(f64::from)));
    out.family("pcieperf_pcie_link_capable_speed_transfers_per_second", Gauge, "Highest supported link speed (LnkCap2/LnkCap).", each(&|d| gts(d.link_capable.speed_gts)));
    out.family("pcieperf_pcie_link_capable_width_lanes", Gauge, "Maximum link width (LnkCap).", each(&|d| d.link_capable.width.map(f64::from)));
    out.family("pcieperf_pcie_max_payload_bytes", Gauge, "MaxPayload configured (DevCtl).", each(&|d| d.max_payload_bytes.map(f64::from)));
    out.family("pcieperf_pcie_max_read_request_bytes", Gauge, "MaxReadReq configured (DevCtl).", each(&|d| d.max_read_request_bytes.map(f64::from)));
    out.family(
        "pcieperf_pcie_ceiling_write_bytes_per_second",
        Gauge,
        "Model write ceiling at 4 MiB transfers on the path as trained.",
        each(&|d| Some(d.ceiling.as_ref()?.trained.as_ref()?.write_mbps * 1e6)),
    );
    let mut aer = Vec::new();
    for d in &inspection.devices {
        let Some(counters) = &d.aer.counters else { continue };
        for (severity, map) in [("correctable", &counters.correctable), ("nonfatal", &counters.nonfatal), ("fatal", &counters.fatal)] {
            for (kind, count) in map.iter().filter(|(k, _)| !k.starts_with("TOTAL_")) {
                let mut l = device_labels(d);
                l.extend([("severity", severity.to_string()), ("type", kind.clone())]);
                aer.push((labels(&l), *count as f64));
            }
        }
    }
    out.family("pcieperf_pcie_aer_errors_total", Counter, "AER errors the kernel counted (aer_dev_*), by severity and type.", aer);
    let mut warnings = Vec::new();
    for d in &inspection.devices {
        let mut causes: std::collections::BTreeMap<&str, u32> = Default::default();
        for w in &d.warnings {
            *causes.entry(w.code).or_default() += 1;
        }
        for (cause, count) in causes {
            let mut l = device_labels(d);
            l.push(("cause", cause.to_string()));
            warnings.push((labels(&l), f64::from(count)));
        }
    }
    out.family("pcieperf_pcie_warnings", Gauge, "pcieperf inspect warnings now, by cause (see docs/inspect.md).", warnings);
    out.family("pcieperf_inspect_devices", Gauge, "Devices inspected.", [(labels(&[("source", inspection.source.clone())]), inspection.devices.len() as f64)]);
    out.family("pcieperf_inspect_timestamp_seconds", Gauge, "When the devices were read, Unix time.", [(labels(&[("source", inspection.source.clone())]), unix_seconds(at))]);
    out.finish()
}
