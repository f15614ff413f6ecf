//! Prometheus text exposition of a run's summary, for fleet monitoring (node_exporter's
//! textfile collector reads such files). Every series carries `simulated="true|false"`.

use std::fmt::Write;

use crate::bench::results::Results;

fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The metrics text.
pub fn render(results: &Results) -> String {
    let base = format!(
        "target=\"{}\",simulated=\"{}\"",
        label_value(&results.conditions.target),
        results.simulated
    );
    let mut out = String::new();
    let mut family = |name: &str, help: &str, rows: Vec<(String, f64)>| {
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, value) in rows {
            let _ = writeln!(out, "{name}{{{base}{labels}}} {value}");
        }
    };
    let per_point = |f: &dyn Fn(&crate::bench::results::Point) -> Option<f64>| -> Vec<(String, f64)> {
        results
            .points
            .iter()
            .filter_map(|p| Some((format!(",mode=\"{}\",size_bytes=\"{}\"", p.mode.name(), p.size_bytes), f(p)?)))
            .collect()
    };
    family("pcieperf_throughput_mbps", "Median throughput in MB/s (10^6 bytes/s).", per_point(&|p| Some(p.summary.as_ref()?.median_mbps)));
    family("pcieperf_ceiling_mbps", "Model ceiling for the same link and size, in MB/s.", per_point(&|p| Some(p.ceiling.as_ref()?.mbps)));
    family("pcieperf_ceiling_ratio", "Measured median divided by the model ceiling.", per_point(&|p| Some(p.ceiling.as_ref()?.percent_reached? / 100.0)));
    family("pcieperf_stalls_over_threshold", "Stalls longer than the threshold.", per_point(&|p| Some(p.stalls.over_threshold as f64)));
    family("pcieperf_max_stall_seconds", "Longest stall, in seconds.", per_point(&|p| Some(p.stalls.max_stall_ns / 1e9)));
    family(
        "pcieperf_fit_m_seconds",
        "Fitted per-transfer cost m of T(N) = N/(B·f) + m, in seconds.",
        results.fits.iter().map(|f| (format!(",mode=\"{}\"", f.mode.name()), f.m_us / 1e6)).collect(),
    );
    family(
        "pcieperf_fit_f",
        "Fitted efficiency f of T(N) = N/(B·f) + m.",
        results.fits.iter().filter_map(|f| Some((format!(",mode=\"{}\"", f.mode.name()), f.f?))).collect(),
    );
    family("pcieperf_verify_failures", "Transfers that failed data verification.", vec![(String::new(), results.verification.failed as f64)]);
    family("pcieperf_run_complete", "1 when the run finished, 0 when it stopped early.", vec![(String::new(), f64::from(u8::from(results.complete)))]);
    out
}
