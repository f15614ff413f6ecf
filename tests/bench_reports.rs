//! The results document and its views: JSON round trip and schema, CSV, HTML, text, comparison,
//! metrics; and the main job's plan against a test engine.

mod support;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use pcieperf::bench::dma::{measure, DmaOptions, Quiet};
use pcieperf::bench::results::{Mode, Results, PREVIOUS_SCHEMA, SCHEMA};
use pcieperf::bench::run;
use pcieperf::engine::DataModel;
use pcieperf::report::view::{self, Document, Format, ViewOptions};
use pcieperf::report::{compare, csv, html, json, metrics, text};
use support::TestEngine;

fn sample_run(simulated: bool, rate_mbps: f64) -> Results {
    let mut engine = TestEngine::new(DataModel::Generator, 3);
    engine.info.simulated = simulated;
    engine.info.description = "in-memory test engine".into();
    engine.rate_mbps = rate_mbps;
    engine.device_clock = true;
    let mut o = DmaOptions::new(vec![Mode::D2h, Mode::H2d], vec![4096, 65536, 1 << 20]);
    o.seed = 3;
    o.duration = Duration::from_millis(100);
    measure(&mut engine, &o, &AtomicBool::new(false), &mut Quiet).unwrap()
}

#[test]
fn the_json_document_round_trips_and_carries_its_conditions() {
    let r = sample_run(true, 1000.0);
    let text = json::to_string(&r);
    assert_eq!(json::from_str(&text).unwrap(), r);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], SCHEMA);
    assert_eq!(v["simulated"], true);
    assert_eq!(v["complete"], true);
    let c = &v["conditions"];
    for key in ["target", "simulated", "engine", "link", "sizes_bytes", "host", "kernel", "tool_version", "seed", "start_time_utc", "host_clock"] {
        assert!(c.get(key).is_some_and(|x| !x.is_null()), "conditions.{key} missing");
    }
    assert_eq!(c["seed"], 3);
    assert_eq!(c["sizes_bytes"], serde_json::json!([4096, 65536, 1048576]));
    let p = &v["points"][0];
    assert!(p["samples"].as_array().unwrap().len() >= 5);
    assert!(p["samples"][0]["engine_ns"].as_f64().unwrap() > 0.0);
    assert!(p["summary"]["median_MBps"].as_f64().unwrap() > 0.0);
    assert!(p["ceiling"]["MBps"].as_f64().unwrap() > 0.0);
    assert_eq!(v["fits"].as_array().unwrap().len(), 2);
    // A simulated run counts no host interrupts: they would say nothing about the device.
    assert!(v.get("interrupts").is_none_or(|i| i.is_null()), "{}", v["interrupts"]);
    // A real one whose device no sysfs vector or /proc/interrupts line names: the host's total,
    // labelled so in text.
    let real = sample_run(false, 1000.0);
    if std::path::Path::new("/proc/interrupts").exists() {
        assert_eq!(real.interrupts.as_ref().unwrap().scope, "host_total");
        assert!(text::render(&real).contains("on the whole host, not the device's own count"));
    }
}

/// Records what the procedure reports through the progress hooks.
#[derive(Default)]
struct Recorder {
    total: usize,
    started: Vec<(Mode, u64)>,
    done: usize,
    ended: bool,
}

impl pcieperf::bench::dma::Progress for Recorder {
    fn begin(&mut self, points: usize) {
        self.total = points;
    }
    fn point_started(&mut self, _index: usize, mode: Mode, size_bytes: u64) {
        self.started.push((mode, size_bytes));
    }
    fn point_done(&mut self, _index: usize, _point: &pcieperf::bench::results::Point) {
        self.done += 1;
    }
    fn end(&mut self) {
        self.ended = true;
    }
}

#[test]
fn progress_hooks_see_every_point_in_order() {
    let mut engine = TestEngine::new(DataModel::Generator, 1);
    let o = DmaOptions::new(vec![Mode::H2d, Mode::Both], vec![4096, 8192]);
    let mut recorder = Recorder::default();
    measure(&mut engine, &o, &AtomicBool::new(false), &mut recorder).unwrap();
    assert_eq!(recorder.total, 4);
    assert_eq!(recorder.started, vec![(Mode::H2d, 4096), (Mode::H2d, 8192), (Mode::Both, 4096), (Mode::Both, 8192)]);
    assert_eq!(recorder.done, 4);
    assert!(recorder.ended);
}

#[test]
fn the_document_is_written_atomically_and_other_schemas_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let r = sample_run(true, 1000.0);
    json::write(&path, &r).unwrap();
    assert_eq!(json::read(&path).unwrap(), r);
    // Only the file itself is left: the temporary file was renamed over it.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let other = json::to_string(&r).replace(SCHEMA, "pcieperf.results/99");
    assert!(json::from_str(&other).unwrap_err().0.contains("unsupported results schema"));
    assert!(json::from_str("[1, 2").is_err());
    assert!(json::write(&dir.path().join("missing-dir/run.json"), &r).is_err());
}

#[test]
fn every_human_view_says_simulated_when_it_is() {
    let sim = sample_run(true, 1000.0);
    assert!(text::render(&sim).contains("SIMULATED"));
    assert!(text::points_table(&sim, None).contains("MB/s (simulated)"));
    let page = html::render(&sim);
    assert!(page.contains("<title>pcieperf results (simulated)"));
    assert!(page.contains("<svg") && !page.contains("<script"));
    assert!(page.matches("<svg").count() >= 1, "the rate plot");
    let table = csv::render(&sim);
    assert!(table.starts_with("simulated,"));
    assert!(table.lines().skip(1).all(|l| l.starts_with("true,")));
    assert!(metrics::render(&sim, std::time::SystemTime::now()).contains("simulated=\"true\""));

    let real = sample_run(false, 1000.0);
    assert!(!text::render(&real).to_lowercase().contains("simulated"));
    assert!(!html::render(&real).to_lowercase().contains("simulated"));
    assert!(csv::render(&real).lines().skip(1).all(|l| l.starts_with("false,")));
}

#[test]
fn csv_has_one_row_per_point_with_every_column() {
    let r = sample_run(true, 1000.0);
    let table = csv::render(&r);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 1 + r.points.len());
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header, csv::COLUMNS);
    for line in &lines[1..] {
        assert_eq!(line.split(',').count(), header.len(), "{line}");
    }
    let median_col = header.iter().position(|h| *h == "median_MBps").unwrap();
    let first: f64 = lines[1].split(',').nth(median_col).unwrap().parse().unwrap();
    assert!((first - r.points[0].summary.as_ref().unwrap().median_mbps).abs() <= 0.005);
    // Numbers rounded to what they mean: at most 4 decimals, and times in whole nanoseconds.
    for line in &lines[1..] {
        for (name, value) in header.iter().zip(line.split(',')) {
            let decimals = value.split_once('.').map_or(0, |(_, d)| d.len());
            assert!(decimals <= 4, "{name} = {value}");
            if name.ends_with("_ns") || name.ends_with("_ns_spent") {
                assert_eq!(decimals, 0, "{name} = {value}");
            }
        }
    }
}

#[test]
fn the_text_summary_shows_ceiling_fit_clocks_and_findings() {
    let r = sample_run(true, 1000.0);
    let out = text::render(&r);
    for needle in ["% of model", "T(N) = N/(B·f) + m", "Clocks", "Verification", "What limits the result", "4KiB", "1MiB", "Summary (best median per mode)", "f 0.500, m 10.0 µs"] {
        assert!(out.contains(needle), "missing {needle}:\n{out}");
    }
}

/// On a terminal the per-point table fits its width, the least useful columns left out and
/// said so; piped (no width), every column.
#[test]
fn the_point_table_fits_a_terminal_and_keeps_every_column_when_piped() {
    let r = sample_run(true, 1000.0);
    let table_lines = |text: &str| -> Vec<String> {
        text.lines().skip_while(|l| !l.starts_with("mode ")).take_while(|l| !l.is_empty() && !l.starts_with('(')).map(str::to_string).collect()
    };
    let full = text::render_within(&r, None);
    assert!(table_lines(&full)[0].contains("max stall") && table_lines(&full)[0].contains("time p99/max"), "{full}");
    assert!(table_lines(&full).iter().any(|l| l.chars().count() > 100));
    let narrow = text::render_within(&r, Some(100));
    let lines = table_lines(&narrow);
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{narrow}");
    for kept in ["mode", "size", "MB/s (simulated)", "model MB/s", "% of model"] {
        assert!(lines[0].contains(kept), "{kept}: {}", lines[0]);
    }
    assert!(narrow.contains("columns left out to fit 100 columns: --wide, or a pipe, shows all"), "{narrow}");
    assert_eq!(text::render(&r), full);
}

#[test]
fn comparison_lists_differing_conditions_first_then_ratios() {
    let a = sample_run(true, 1000.0);
    let mut b = sample_run(true, 500.0);
    b.conditions.seed = 4;
    let out = compare::render(&a, &b, ("a.json", "b.json"));
    let conditions_at = out.find("Conditions that differ").unwrap();
    let seed_at = out.find("seed: A 3 | B 4").unwrap();
    assert!(out.find("start_time_utc").is_none_or(|at| at > seed_at));
    let ratios_at = out.find("B/A").unwrap();
    assert!(conditions_at < seed_at && seed_at < ratios_at, "{out}");
    // At 1 MiB the per-transfer cost is small: half the rate gives a ratio near 0.5.
    let line = out.lines().find(|l| l.starts_with("d2h") && l.contains("1MiB")).unwrap();
    let ratio: f64 = line.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert!((ratio - 0.5).abs() < 0.01, "{line}");
    assert!(line.ends_with("significant: B slower"), "{line}");
    let same = compare::render(&a, &a, ("a.json", "a.json"));
    assert!(same.lines().filter(|l| l.starts_with("d2h")).all(|l| l.ends_with("within noise")), "{same}");
    let row = &compare::compare(&a, &b, ("a", "b")).rows[0];
    let (low, high) = row.ratio_ci.unwrap();
    assert!(low <= row.ratio && row.ratio <= high && row.significant == Some(true), "{row:?}");
    // The start time and the clock's calibration are listed apart, as incidental.
    let mut later = a.clone();
    later.conditions.start_time_utc = "2030-01-01T00:00:00Z".into();
    let out = compare::render(&a, &later, ("a.json", "later.json"));
    assert!(out.contains("Conditions that differ (they can change the results):\n  none\nIncidental (differ between any two runs, change nothing measured): start_time_utc"), "{out}");
    let diffs = compare::differing_conditions(&a, &a);
    assert!(diffs.is_empty());
    // Nested conditions are compared field by field.
    let mut c = a.clone();
    c.conditions.link.as_mut().unwrap().params.mps_bytes = 128;
    let diffs = compare::differing_conditions(&a, &c);
    assert_eq!(diffs, vec![("link.params.mps_bytes".to_string(), "256".to_string(), "128".to_string())]);
}

#[test]
fn metrics_are_prometheus_text() {
    let r = sample_run(true, 1000.0);
    let m = metrics::render(&r, std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000));
    assert!(m.contains("# TYPE pcieperf_throughput_bytes_per_second gauge"));
    let line = m.lines().find(|l| l.starts_with("pcieperf_throughput_bytes_per_second{") && l.contains("mode=\"d2h\",size_bytes=\"4096\"")).unwrap();
    let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(value, r.points[0].summary.as_ref().unwrap().median_mbps * 1e6);
    assert!(m.contains("pcieperf_run_timestamp_seconds{target=\"test\",simulated=\"true\"} 1700000000"));
    assert!(m.contains("pcieperf_run_complete{target=\"test\",simulated=\"true\"} 1"));
}

#[test]
fn the_main_job_measures_three_modes_over_a_sweep_and_names_limits() {
    let mut engine = TestEngine::new(DataModel::Memory, 1);
    let mut options = run::options(true);
    options.seed = 1;
    let notes = run::fit_to_engine(&mut options, &engine.info.clone());
    assert!(notes.is_empty());
    let r = measure(&mut engine, &options, &AtomicBool::new(false), &mut Quiet).unwrap();
    assert!(r.complete);
    assert_eq!(r.conditions.command, "run");
    for mode in [Mode::D2h, Mode::H2d, Mode::Both] {
        assert_eq!(r.points.iter().filter(|p| p.mode == mode).count(), options.sizes.len());
    }
    assert_eq!(r.fits.len(), 3);
    assert_eq!(r.verification.failed, 0);
    assert!(!r.findings.is_empty());

    // An engine without concurrency or h2d: `run` skips what it cannot do and says so.
    let mut engine = TestEngine::new(DataModel::Opaque, 1);
    engine.info.concurrent = false;
    engine.info.directions = vec![pcieperf::engine::Direction::D2h];
    engine.info.max_transfer_bytes = 64 << 10;
    let mut options = run::options(true);
    let notes = run::fit_to_engine(&mut options, &engine.info.clone());
    assert_eq!(options.modes, vec![Mode::D2h]);
    assert!(options.sizes.iter().all(|&s| s <= 64 << 10));
    assert_eq!(notes.len(), 3, "{notes:?}");
}

#[test]
fn a_document_of_the_previous_version_is_read_as_this_one() {
    let r = sample_run(true, 1000.0);
    let text = json::to_string(&r);
    let mut old = text.replace(SCHEMA, PREVIOUS_SCHEMA);
    let mut spellings: Vec<(String, String)> =
        [("3dw", "Dw3"), ("4dw", "Dw4"), ("wire_accurate", "WireAccurate"), ("byte_exact", "ByteExact")].map(|(a, b)| (a.into(), b.into())).to_vec();
    spellings.extend((1..=6).map(|n| (format!("gen{n}"), format!("Gen{n}"))));
    for (new, before) in &spellings {
        old = old.replace(&format!("\"{new}\""), &format!("\"{before}\""));
    }
    assert!(old.contains("\"Gen") && old.contains("\"Dw"), "the sample states its link in the old spelling");
    let back = json::from_str(&old).unwrap();
    assert_eq!(back, r, "read as this version, schema included");
    assert!(matches!(view::read(&old).unwrap(), Document::Results(_)));
}

#[test]
fn the_view_table_renders_what_each_module_renders_and_refuses_what_a_document_lacks() {
    let r = sample_run(true, 1000.0);
    let written = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let options = ViewOptions { written, ..ViewOptions::default() };
    let document = view::read(&json::to_string(&r)).unwrap();
    assert_eq!(document.kind(), "results");
    assert_eq!(view::render(&document, Format::Text, &options).unwrap(), text::render(&r));
    assert_eq!(view::render(&document, Format::Csv, &options).unwrap(), csv::render(&r));
    assert_eq!(view::render(&document, Format::Metrics, &options).unwrap(), metrics::render(&r, written));
    let status = Document::Model(pcieperf::model::document::status(0x9041_2100));
    let refused = view::render(&status, Format::Csv, &options).unwrap_err().0;
    assert_eq!(refused, "a model status document has no CSV view (it has text, JSON)");
    assert!(view::compare(&document, &status, Format::Text, ("a", "b")).unwrap_err().0.contains("cannot compare"));
    for (i, a) in view::VIEWS.iter().enumerate() {
        assert!(!view::VIEWS[i + 1..].iter().any(|b| a.kind == b.kind && a.format == b.format), "{} {} twice", a.kind, a.format.name());
    }
}
