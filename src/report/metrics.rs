//! Prometheus text exposition (format 0.0.4) of a run's summary and of an inspection's link
//! health, for fleet monitoring: node_exporter's textfile collector reads these files, and
//! `promtool check metrics` passes them (tested). Conventions: base units in names
//! (`_bytes_per_second`, `_seconds`, `_bytes`), `_total` for counters, no sample timestamps (the
//! textfile collector refuses them) but a `…_timestamp_seconds` gauge saying when the figures
//! were taken. Every run series carries `simulated="true|false"`.
//!
//! Devices are labelled as node_exporter's `pcidevice` collector labels them (`segment`, `bus`,
//! `device`, `function`, in its hex spelling), so `on(segment, bus, device, function)` joins the
//! two without `label_replace`; names, driver and NUMA node are on one `…_info` series.

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::bench::results::{Point, Results};
use crate::pci::{Bdf, DeviceReport, Inspection};

fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One sample: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// A metric family: what a file writes under one HELP/TYPE and what the exporter serves.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    pub samples: Vec<Sample>,
}

/// Families built one after another; a family without samples is left out (noise).
#[derive(Default)]
struct Families(Vec<Family>);

impl Families {
    fn add(&mut self, name: &'static str, kind: Kind, help: &'static str, samples: impl IntoIterator<Item = Sample>) {
        debug_assert_eq!(kind == Kind::Counter, name.ends_with("_total"), "{name}: counters and only counters end in _total");
        let samples: Vec<Sample> = samples.into_iter().collect();
        if !samples.is_empty() {
            self.0.push(Family { name, kind, help, samples });
        }
    }
}

/// Prometheus text exposition format 0.0.4 (what the textfile collector and promtool read).
pub fn text(families: &[Family]) -> String {
    let mut out = String::new();
    for family in families {
        let kind = if family.kind == Kind::Counter { "counter" } else { "gauge" };
        let _ = writeln!(out, "# HELP {} {}\n# TYPE {} {kind}", family.name, family.help, family.name);
        for sample in &family.samples {
            let labels: Vec<String> = sample.labels.iter().map(|(k, v)| format!("{k}=\"{}\"", label_value(v))).collect();
            let value = if sample.value.is_nan() { "NaN".to_string() } else { format!("{}", sample.value) };
            let _ = writeln!(out, "{}{{{}}} {value}", family.name, labels.join(","));
        }
    }
    out
}

/// The same families through the `prometheus-client` crate's OpenMetrics encoder (what
/// `pcieperf serve` answers a scrape with).
pub fn openmetrics(families: Vec<Family>) -> Result<String, std::fmt::Error> {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(Collector(families)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    Ok(out)
}

/// The two exposition formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus text format 0.0.4: what promtool, the textfile collector and `curl` users read.
    Text,
    /// OpenMetrics 1.0: what Prometheus asks for first.
    OpenMetrics,
}

impl Exposition {
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Text => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format for an `Accept` header, as Prometheus's client libraries negotiate it:
    /// OpenMetrics when it is offered at least as strongly as the text format, else the text
    /// format (also for no header, `*/*`, or one naming neither).
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        let (mut openmetrics_q, mut text_q) = (0.0f64, 0.0f64);
        for item in accept.unwrap_or_default().split(',') {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let q = parts.filter_map(|p| p.strip_prefix("q=")).find_map(|q| q.parse::<f64>().ok()).unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics_q = openmetrics_q.max(q),
                "text/plain" | "text/*" | "*/*" => text_q = text_q.max(q),
                _ => {}
            }
        }
        if openmetrics_q > 0.0 && openmetrics_q >= text_q { Exposition::OpenMetrics } else { Exposition::Text }
    }
}

#[derive(Debug)]
struct Collector(Vec<Family>);

impl prometheus_client::collector::Collector for Collector {
    fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType};
        for family in &self.0 {
            // OpenMetrics names a counter family without `_total`; the encoder adds it to samples.
            let (name, kind) = match family.kind {
                Kind::Counter => (family.name.trim_end_matches("_total"), MetricType::Counter),
                Kind::Gauge => (family.name, MetricType::Gauge),
            };
            let mut metric = encoder.encode_descriptor(name, family.help, None, kind)?;
            for sample in &family.samples {
                let labels: Vec<(&str, &str)> = sample.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let sample_encoder = metric.encode_family(&labels)?;
                match family.kind {
                    Kind::Counter => ConstCounter::new(sample.value.max(0.0)).encode(sample_encoder)?,
                    Kind::Gauge => ConstGauge::new(sample.value).encode(sample_encoder)?,
                }
            }
        }
        Ok(())
    }
}

fn unix_seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64().floor())
}

/// The metrics text of a run whose results were written at `written` (now, for a run that just
/// ended; the results file's modification time, for `report`).
pub fn render(results: &Results, written: SystemTime) -> String {
    text(&run_families(results, written))
}

/// A run's families.
pub fn run_families(results: &Results, written: SystemTime) -> Vec<Family> {
    let mut base = vec![("target", results.conditions.target.clone()), ("simulated", results.simulated.to_string())];
    if let Some(bdf) = results.conditions.engine.pci_address.as_deref().and_then(|a| a.parse::<Bdf>().ok()) {
        base.extend(location_labels(&bdf));
    }
    let with = |extra: &[(&'static str, String)]| [&base[..], extra].concat();
    let per_point = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<Sample> {
        results
            .points
            .iter()
            .filter_map(|p| Some(Sample { labels: with(&[("mode", p.mode.name().to_string()), ("size_bytes", p.size_bytes.to_string())]), value: f(p)? }))
            .collect()
    };
    let per_fit = |f: &dyn Fn(&crate::bench::results::Fit) -> Option<f64>| -> Vec<Sample> {
        results.fits.iter().filter_map(|fit| Some(Sample { labels: with(&[("mode", fit.mode.name().to_string())]), value: f(fit)? })).collect()
    };
    let once = |value: f64| [Sample { labels: with(&[]), value }];
    let per_direction: Vec<Sample> = results
        .points
        .iter()
        .filter_map(|p| Some((p, p.directions?)))
        .flat_map(|(p, d)| {
            [("h2d", d.h2d_median_mbps), ("d2h", d.d2h_median_mbps)].map(|(direction, mbps)| Sample {
                labels: with(&[("mode", p.mode.name().to_string()), ("size_bytes", p.size_bytes.to_string()), ("direction", direction.to_string())]),
                value: mbps * 1e6,
            })
        })
        .collect();
    let mut out = Families::default();
    use Kind::*;
    out.add("pcieperf_throughput_bytes_per_second", Gauge, "Median measured throughput.", per_point(&|p| Some(p.summary.as_ref()?.median_mbps * 1e6)));
    out.add(
        "pcieperf_direction_throughput_bytes_per_second",
        Gauge,
        "Median throughput of each direction of a both-directions-at-once point, on its own.",
        per_direction,
    );
    out.add("pcieperf_ceiling_bytes_per_second", Gauge, "Model ceiling for the same link, conditions and size.", per_point(&|p| Some(p.ceiling.as_ref()?.mbps * 1e6)));
    out.add("pcieperf_ceiling_ratio", Gauge, "Measured median divided by the model ceiling.", per_point(&|p| Some(p.ceiling.as_ref()?.percent_reached? / 100.0)));
    // Per-run figures are gauges: a newer run may count fewer, which a counter must never do.
    out.add("pcieperf_stalls_over_threshold", Gauge, "Transfers slower than the stall threshold in the run.", per_point(&|p| Some(p.stalls.over_threshold as f64)));
    out.add("pcieperf_max_stall_seconds", Gauge, "Longest stall.", per_point(&|p| Some(p.stalls.max_stall_ns / 1e9)));
    out.add("pcieperf_fit_per_transfer_seconds", Gauge, "Fitted per-transfer cost m of T(N) = N/(B*f) + m.", per_fit(&|f| Some(f.m_us / 1e6)));
    out.add("pcieperf_fit_efficiency_ratio", Gauge, "Fitted efficiency f of T(N) = N/(B*f) + m.", per_fit(&|f| f.f));
    out.add("pcieperf_verify_failures", Gauge, "Transfers that failed data verification in the run.", once(results.verification.failed as f64));
    out.add("pcieperf_run_complete", Gauge, "1 when the run finished, 0 when it stopped early.", once(f64::from(u8::from(results.complete))));
    out.add("pcieperf_run_timestamp_seconds", Gauge, "When the run's results were written, Unix time.", once(unix_seconds(written)));
    out.0
}

/// node_exporter's `pcidevice` labels for one function: hex, segment 4 digits, bus and device 2,
/// function 1 (its `device` is the device number, not the address).
pub fn location_labels(bdf: &Bdf) -> [(&'static str, String); 4] {
    [
        ("segment", format!("{:04x}", bdf.domain)),
        ("bus", format!("{:02x}", bdf.bus)),
        ("device", format!("{:02x}", bdf.device)),
        ("function", format!("{:x}", bdf.function)),
    ]
}

fn device_labels(d: &DeviceReport) -> Vec<(&'static str, String)> {
    location_labels(&d.bdf).into()
}

/// The non-numeric facts of a device, value 1: what a dashboard shows beside its figures.
fn info_labels(d: &DeviceReport) -> Vec<(&'static str, String)> {
    let hex = |v: Option<u16>| v.map_or(String::new(), |v| format!("0x{v:04x}"));
    let mut labels = device_labels(d);
    labels.extend([
        ("address", d.bdf.to_string()),
        ("vendor_id", hex(d.vendor_id)),
        ("device_id", hex(d.device_id)),
        ("name", d.name.clone()),
        ("class_name", d.class_name.clone().unwrap_or_default()),
        ("driver", d.driver.clone().unwrap_or_default()),
        ("numa_node", d.numa_node.map_or(String::new(), |n| n.to_string())),
    ]);
    labels
}

/// Link health of every inspected device as text (`inspect --metrics`).
pub fn inspection(inspection: &Inspection, at: SystemTime) -> String {
    text(&inspection_families(inspection, at))
}

/// Link health of every inspected device: what a fleet alerts on ("this GPU trained at x8",
/// "AER correctables rising").
pub fn inspection_families(inspection: &Inspection, at: SystemTime) -> Vec<Family> {
    let mut out = Families::default();
    use Kind::*;
    let each = |f: &dyn Fn(&DeviceReport) -> Option<f64>| -> Vec<Sample> {
        inspection.devices.iter().filter_map(|d| Some(Sample { labels: device_labels(d), value: f(d)? })).collect()
    };
    let gts = |v: Option<f64>| v.map(|g| g * 1e9);
    let info = inspection.devices.iter().map(|d| Sample { labels: info_labels(d), value: 1.0 });
    out.add("pcieperf_pcie_device_info", Gauge, "Names, IDs, driver and NUMA node of the device; value 1.", info);
    out.add("pcieperf_pcie_link_speed_transfers_per_second", Gauge, "Current link speed (LnkSta), transfers/s per lane.", each(&|d| gts(d.link_status.speed_gts)));
    out.add("pcieperf_pcie_link_width_lanes", Gauge, "Current link width (LnkSta).", each(&|d| d.link_status.width.map(f64::from)));
    out.add("pcieperf_pcie_link_capable_speed_transfers_per_second", Gauge, "Highest supported link speed (LnkCap2/LnkCap).", each(&|d| gts(d.link_capable.speed_gts)));
    out.add("pcieperf_pcie_link_capable_width_lanes", Gauge, "Maximum link width (LnkCap).", each(&|d| d.link_capable.width.map(f64::from)));
    out.add("pcieperf_pcie_max_payload_bytes", Gauge, "MaxPayload configured (DevCtl).", each(&|d| d.max_payload_bytes.map(f64::from)));
    out.add("pcieperf_pcie_max_read_request_bytes", Gauge, "MaxReadReq configured (DevCtl).", each(&|d| d.max_read_request_bytes.map(f64::from)));
    out.add(
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
                let mut labels = device_labels(d);
                labels.extend([("severity", severity.to_string()), ("type", kind.clone())]);
                aer.push(Sample { labels, value: *count as f64 });
            }
        }
    }
    out.add("pcieperf_pcie_aer_errors_total", Counter, "AER errors the kernel counted (aer_dev_*), by severity and type.", aer);
    let mut warnings = Vec::new();
    for d in &inspection.devices {
        let mut causes: std::collections::BTreeMap<&str, u32> = Default::default();
        for w in &d.warnings {
            *causes.entry(w.code).or_default() += 1;
        }
        for (cause, count) in causes {
            let mut labels = device_labels(d);
            labels.push(("cause", cause.to_string()));
            warnings.push(Sample { labels, value: f64::from(count) });
        }
    }
    out.add("pcieperf_pcie_warnings", Gauge, "pcieperf inspect warnings now, by cause (see docs/inspect.md).", warnings);
    let source = || vec![("source", inspection.source.clone())];
    out.add("pcieperf_inspect_devices", Gauge, "Devices inspected.", [Sample { labels: source(), value: inspection.devices.len() as f64 }]);
    out.add("pcieperf_inspect_timestamp_seconds", Gauge, "When the devices were read, Unix time.", [Sample { labels: source(), value: unix_seconds(at) }]);
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates_as_prometheus_client_libraries_do() {
        use Exposition::*;
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Exposition::negotiate(Some(prometheus)), OpenMetrics);
        assert_eq!(Exposition::negotiate(Some("text/plain; version=0.0.4")), Text);
        assert_eq!(Exposition::negotiate(None), Text);
        assert_eq!(Exposition::negotiate(Some("*/*")), Text);
        assert_eq!(Exposition::negotiate(Some("application/json")), Text);
        assert_eq!(Exposition::negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.5")), Text);
        assert_eq!(Exposition::negotiate(Some("application/openmetrics-text;q=0, text/plain")), Text);
        assert_eq!(Exposition::negotiate(Some("APPLICATION/OpenMetrics-Text")), OpenMetrics);
    }

    #[test]
    fn locations_are_spelled_as_node_exporter_spells_them() {
        let bdf: Bdf = "0000:3b:00.1".parse().unwrap();
        let labels = location_labels(&bdf);
        assert_eq!(labels.clone().map(|(_, v)| v), ["0000", "3b", "00", "1"]);
        assert_eq!(labels.map(|(k, _)| k), ["segment", "bus", "device", "function"]);
    }
}
