//! The lines of a run's conditions that say what the device's path looked like while measuring:
//! the link of every hop sampled before, during and after, which state the ceiling is for,
//! NVML's view of a GPU, NUMA placement and the engine's host memory. A view only.

use crate::bench::link_watch::{CeilingFrom, LinkPath, PathSample};
use crate::bench::nvml::{describe, NvmlRecord};
use crate::bench::results::RunConditions;

/// `(label, text)` pairs for the conditions block, in the order shown.
pub fn lines(c: &RunConditions) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match (&c.link_path, &c.link_path_unknown) {
        (Some(path), _) => out.extend(path_lines(path, c.link.is_some())),
        (None, Some(why)) => out.push(("link path", format!("not sampled: {why}"))),
        (None, None) => {}
    }
    if let Some(nvml) = &c.nvml {
        out.push(("NVML", nvml_line(nvml)));
    }
    if let Some(numa) = &c.numa {
        out.push(("NUMA", numa.describe()));
    }
    if let Some(iommu) = &c.iommu {
        out.push(("IOMMU", iommu.describe()));
    }
    if let Some(memory) = c.host_memory {
        let name = serde_json::to_value(memory).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        out.push(("host memory", name.replace('_', "-")));
    }
    out
}

fn hops(sample: &PathSample) -> String {
    sample
        .hops
        .iter()
        .map(|h| {
            let below = if h.below_capability() { format!(" (can {})", crate::pci::path_state::link_text(h.max_speed_gts, h.max_width)) } else { String::new() };
            format!("{} {}{below}", h.bdf, h.link_text())
        })
        .collect::<Vec<_>>()
        .join(" → ")
}

/// The samples, and which state the ceiling is for when there is a ceiling (`has_ceiling`).
fn path_lines(path: &LinkPath, has_ceiling: bool) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(before) = &path.before {
        out.push(("path before", hops(before)));
    }
    match path.ceiling_sample().filter(|_| path.ceiling_from == CeilingFrom::During) {
        Some(sample) => {
            let changed = path.during.iter().any(|s| s.hops != sample.hops);
            let note = if changed { ", the state changed between samples" } else { "" };
            out.push(("path during", format!("{} ({} sample(s) every {:.0} ms, fastest shown{note})", hops(sample), path.during.len(), path.interval_ms)));
        }
        None => out.push(("path during", format!("no sample: the run ended within the first {:.0} ms", path.interval_ms))),
    }
    if let Some(after) = &path.after {
        out.push(("path after", hops(after)));
    }
    let hop = path.ceiling_hop().map_or(String::new(), |h| format!(": {} at {}", h.link_text(), h.bdf));
    let when = match path.ceiling_from {
        CeilingFrom::During => "the narrowest hop as sampled during the run",
        CeilingFrom::Before => "the narrowest hop as sampled before the run",
    };
    if has_ceiling {
        out.push(("ceiling for", format!("{when}{hop}")));
    }
    out
}

fn nvml_line(nvml: &NvmlRecord) -> String {
    if !nvml.available {
        return format!("not available ({})", nvml.reason.as_deref().unwrap_or("no reason given"));
    }
    let name = nvml.name.as_deref().unwrap_or("GPU");
    let state = |s: &Option<crate::bench::nvml::GpuState>| s.as_ref().map_or("not read".to_string(), describe);
    format!("{name}: before {}; after {}", state(&nvml.before), state(&nvml.after))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use super::*;
    use crate::bench::dma::{measure, DmaOptions, Quiet};
    use crate::bench::results::Mode;
    use crate::engine::sim::SimEngine;
    use crate::engine::OpenOptions;
    use crate::pci::path_state::HopState;

    fn conditions_with_path() -> RunConditions {
        let mut engine = SimEngine::open("sim", &OpenOptions::default()).unwrap();
        let mut options = DmaOptions::new(vec![Mode::D2h], vec![65536]);
        options.duration = Duration::from_millis(5);
        let mut c = measure(&mut engine, &options, &AtomicBool::new(false), &mut Quiet).unwrap().conditions;
        let hop = |speed| HopState { bdf: "0000:01:00.0".into(), speed_gts: Some(speed), width: Some(16), max_speed_gts: Some(16.0), max_width: Some(16) };
        let sample = |at_ms, speed| PathSample { at_ms, hops: vec![hop(speed)], gpu: None };
        c.link_path = Some(LinkPath {
            device: "0000:01:00.0".into(),
            interval_ms: 100.0,
            before: Some(sample(0.0, 2.5)),
            during: vec![sample(100.0, 16.0)],
            after: Some(sample(200.0, 2.5)),
            ceiling_from: CeilingFrom::During,
        });
        c.numa = None; // the NUMA line has its own tests (tests/numa_placement.rs)
        c
    }

    #[test]
    fn the_ceiling_line_names_the_state_during_the_run_only_where_there_is_a_ceiling() {
        let mut c = conditions_with_path();
        let shown = lines(&c);
        let labels: Vec<&str> = shown.iter().map(|(label, _)| *label).collect();
        assert_eq!(labels, ["path before", "path during", "path after", "ceiling for"]);
        assert_eq!(shown[0].1, "0000:01:00.0 2.5 GT/s x16 (can 16 GT/s x16)");
        assert_eq!(shown[3].1, "the narrowest hop as sampled during the run: 16 GT/s x16 at 0000:01:00.0");
        c.link = None;
        assert!(lines(&c).iter().all(|(label, _)| *label != "ceiling for"), "no ceiling, no line saying what it is for");
    }
}
