//! The document 001 §4 register flow against the simulated endpoint.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pcieperf::bench::demo::{block_amount, label, run_demo, start_code, DemoOptions, DemoReport, MODES};
use pcieperf::bench::demo_run::{DemoDocument, SCHEMA};
use pcieperf::bench::results::Stopped;
use pcieperf::engine::sim::demo_registers as reg;
use pcieperf::engine::sim::{AccessKind, SimEngine};
use pcieperf::engine::{EngineError, Mmio, OpenOptions};
use pcieperf::model::{Link, Mode};

static NOT_CANCELLED: AtomicBool = AtomicBool::new(false);

fn sim(target: &str) -> SimEngine {
    SimEngine::open(target, &OpenOptions { seed: 1, ..OpenOptions::default() }).unwrap()
}

fn demo(engine: &mut SimEngine, modes: &[Mode]) -> Result<DemoReport, EngineError> {
    let link = pcieperf::engine::Engine::conditions(engine).unwrap();
    run_demo(engine, &link, &DemoOptions { modes: modes.to_vec(), ..DemoOptions::default() }, &NOT_CANCELLED)
}

type Access = (AccessKind, u8, u64, Option<u32>);

fn w((bar, offset): (u8, u64), value: u32) -> Access {
    (AccessKind::Write, bar, offset, Some(value))
}

fn r((bar, offset): (u8, u64)) -> Access {
    (AccessKind::Read, bar, offset, None)
}

/// Steps 0–11 of 001 §4 (then stall count and status), with the poll collapsed to one read.
fn expected(mode: Mode, blocks: u32) -> Vec<Access> {
    let mut seq = vec![
        r(reg::VERSION),
        w(reg::BUFFER1, 0x1000_0000),
        w(reg::BUFFER2, 0x1000_2000),
        w(reg::FIXED, 0x2000),
        w(reg::BLOCK_AMOUNT, blocks),
        w(reg::THRESHOLD, 0x0C35),
        w(reg::START, start_code(mode)),
    ];
    if mode != Mode::H2d {
        seq.push(r(reg::TX_RESULT));
    }
    if mode != Mode::D2h {
        seq.push(r(reg::RX_RESULT));
    }
    seq.extend([r(reg::MAX_STALL), r(reg::RX_BIT_ERRORS), r(reg::TX_BIT_ERRORS), r(reg::STALL_COUNT), r(reg::PCI_STATUS)]);
    seq
}

fn recorded(engine: &SimEngine, swapped: bool) -> Vec<Access> {
    engine
        .mmio_log()
        .iter()
        .map(|a| {
            let value = if swapped { (a.value as u32).swap_bytes() } else { a.value as u32 };
            (a.kind, a.bar, a.offset, (a.kind == AccessKind::Write).then_some(value))
        })
        .collect()
}

#[test]
fn register_sequence_is_document_001_steps_0_to_11() {
    let gen1x4: Link = "gen1x4".parse().unwrap();
    let blocks = block_amount(gen1x4);
    assert_eq!(blocks, 0xA343C * 4);
    for mode in MODES {
        let mut engine = sim("sim:doc001");
        demo(&mut engine, &[mode]).unwrap();
        assert_eq!(recorded(&engine, false), expected(mode, blocks), "{mode:?}");
        let log = engine.mmio_log();
        let start = log.iter().position(|a| a.kind == AccessKind::Write && (a.bar, a.offset) == reg::START).unwrap();
        assert!(log[start + 1].at_ns - log[start].at_ns >= 30e9, "step 7 waits 30 s before polling");
    }
    let mut engine = sim("sim:doc001");
    demo(&mut engine, &MODES).unwrap();
    let all: Vec<Access> = MODES.iter().flat_map(|m| expected(*m, blocks)).collect();
    assert_eq!(recorded(&engine, false), all);
}

#[test]
fn polling_repeats_until_the_result_is_ready() {
    // A 10 s wait on a 26 s run: the TX result reads 0 until the device finishes.
    let mut engine = sim("sim:doc001");
    let link = pcieperf::engine::Engine::conditions(&engine).unwrap();
    let options = DemoOptions { modes: vec![Mode::D2h], wait: Duration::from_secs(10), ..DemoOptions::default() };
    let report = run_demo(&mut engine, &link, &options, &NOT_CANCELLED).unwrap();
    let polls: Vec<_> = engine.mmio_log().iter().filter(|a| (a.bar, a.offset) == reg::TX_RESULT).collect();
    assert!(polls.len() > 10, "{} polls", polls.len());
    assert!(polls[..polls.len() - 1].iter().all(|a| a.value == 0));
    assert_eq!(polls.last().unwrap().value, u64::from(report.results[0].tx_tenths.unwrap()));
}

#[test]
fn byte_swapped_endpoint_is_detected_and_still_measured() {
    let mut straight = sim("sim:doc001");
    let mut swapped = sim("sim:doc001,byteswap=1");
    let a = demo(&mut straight, &[Mode::D2h]).unwrap();
    let b = demo(&mut swapped, &[Mode::D2h]).unwrap();
    assert!(!a.byte_swapped && b.byte_swapped);
    assert_eq!(swapped.mmio_log()[0].value, 0x0016_0208, "the version register reads 00_YY_MM_DD");
    assert_eq!(b.version, 0x0802_1600);
    assert_eq!(a.results, b.results);
    assert_eq!(recorded(&swapped, true), recorded(&straight, false), "every value written swapped");
}

#[test]
fn doc001_preset_lands_near_the_documents_figures() {
    let mut engine = sim("sim:doc001");
    let report = demo(&mut engine, &MODES).unwrap();
    assert_eq!(report.bytes, 21_913_010_176);
    assert_eq!(report.status.raw, 0x9041_2100);
    let document = [839.578934, 817.649633, 793.949644];
    for (result, doc) in report.results.iter().zip(document) {
        // The preset's physical parameters (latency, tags, stalls) were chosen from the document's
        // platform; the figures follow from the model plus those effects, so they land within a
        // few per cent of the measured board, not on it.
        assert!((result.mbps / doc - 1.0).abs() < 0.03, "{:?}: {} vs document {doc}", result.mode, result.mbps);
        assert!(result.mbps < result.theory_mbps, "never above the model's ceiling");
        assert!(result.max_stall_us > 1.0 && result.max_stall_us < 12.0, "document 001: typical 1–12 µs");
        assert_eq!(result.stalls_over_threshold, 0);
        assert_eq!((result.rx_bit_errors, result.tx_bit_errors), (0, 0));
    }
    // Read is slower than write, and both at once slower still, as in the document.
    assert!(report.results[0].mbps > report.results[1].mbps && report.results[1].mbps > report.results[2].mbps);
}

#[test]
fn gen5x16_demo_runs_and_stays_under_the_ceiling() {
    let mut engine = sim("sim:gen5x16");
    let report = demo(&mut engine, &MODES).unwrap();
    assert_eq!(report.block_amount, 0xA343C * 64);
    for result in &report.results {
        assert!(result.mbps > 0.0 && result.percent_of_theory < 100.5, "{result:?}");
    }
}

/// A bus that loses writes to one register, as a broken driver would.
struct LosesWrites<'a>(&'a mut SimEngine, (u8, u64));

impl Mmio for LosesWrites<'_> {
    fn read32(&mut self, bar: u8, offset: u64) -> Result<u32, EngineError> {
        self.0.read32(bar, offset)
    }
    fn write32(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError> {
        if (bar, offset) == self.1 { Ok(()) } else { self.0.write32(bar, offset, value) }
    }
    fn sleep(&mut self, duration: Duration) {
        self.0.sleep(duration)
    }
}

#[test]
fn a_device_that_never_finishes_times_out() {
    let mut engine = sim("sim:doc001");
    let link = pcieperf::engine::Engine::conditions(&engine).unwrap();
    let options = DemoOptions { modes: vec![Mode::H2d], timeout: Duration::from_secs(120), ..DemoOptions::default() };
    let err = run_demo(&mut LosesWrites(&mut engine, reg::FIXED), &link, &options, &NOT_CANCELLED).unwrap_err();
    assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("still 0"));
}

/// The second measurement goes wrong: a signal comes during its wait (`cancel`), or else its
/// start is lost, so it never finishes.
struct SecondGoesWrong<'a> {
    engine: &'a mut SimEngine,
    starts: u32,
    cancel: Option<&'a AtomicBool>,
}

impl Mmio for SecondGoesWrong<'_> {
    fn read32(&mut self, bar: u8, offset: u64) -> Result<u32, EngineError> {
        self.engine.read32(bar, offset)
    }
    fn write32(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError> {
        self.starts += u32::from((bar, offset) == reg::START);
        if self.starts == 2 && self.cancel.is_none() && (bar, offset) == reg::START {
            return Ok(());
        }
        self.engine.write32(bar, offset, value)
    }
    fn sleep(&mut self, duration: Duration) {
        if let Some(cancel) = self.cancel.filter(|_| self.starts >= 2) {
            cancel.store(true, Ordering::SeqCst);
        }
        self.engine.sleep(duration)
    }
}

#[test]
fn a_signal_ends_the_flow_with_the_finished_measurements() {
    let mut engine = sim("sim:doc001");
    let link = pcieperf::engine::Engine::conditions(&engine).unwrap();
    let cancel = AtomicBool::new(false);
    let mut device = SecondGoesWrong { engine: &mut engine, starts: 0, cancel: Some(&cancel) };
    let report = run_demo(&mut device, &link, &DemoOptions::default(), &cancel).unwrap();
    assert_eq!(report.results.iter().map(|r| r.mode).collect::<Vec<_>>(), [Mode::D2h], "the first measurement is kept");
    assert_eq!(report.stopped, Some(Stopped::Interrupted));
    assert_eq!(device.starts, 2, "no measurement is started after the signal");
    assert_eq!(Stopped::Interrupted.exit_code(), 130);
    let info = pcieperf::engine::Engine::info(&engine).clone();
    let document = DemoDocument { schema: SCHEMA, pcieperf_version: "test", simulated: true, engine: info, seed: 1, notes: Vec::new(), demo: report };
    assert!(pcieperf::report::demo::text(&document).ends_with("\nINCOMPLETE: interrupted by Ctrl-C.\n"));
    let json: serde_json::Value = serde_json::from_str(&pcieperf::report::demo::json(&document)).unwrap();
    assert_eq!(json["demo"]["stopped"]["reason"], "interrupted");
    assert_eq!(json["demo"]["results"].as_array().unwrap().len(), 1);

    // A signal before anything finished is the error itself, and starts nothing.
    let mut device = SecondGoesWrong { engine: &mut engine, starts: 0, cancel: Some(&cancel) };
    let err = run_demo(&mut device, &link, &DemoOptions::default(), &cancel).unwrap_err();
    assert!(matches!(err, EngineError::Interrupted), "{err}");
    assert_eq!(device.starts, 0);
}

#[test]
fn a_device_that_stops_finishing_keeps_the_measurements_before() {
    let mut engine = sim("sim:doc001");
    let link = pcieperf::engine::Engine::conditions(&engine).unwrap();
    let options = DemoOptions { timeout: Duration::from_secs(120), ..DemoOptions::default() };
    let mut device = SecondGoesWrong { engine: &mut engine, starts: 0, cancel: None };
    let report = run_demo(&mut device, &link, &options, &NOT_CANCELLED).unwrap();
    assert_eq!(report.results.iter().map(|r| r.mode).collect::<Vec<_>>(), [Mode::D2h]);
    let Some(Stopped::Error { message }) = &report.stopped else { panic!("{:?}", report.stopped) };
    assert!(message.starts_with(&label(Mode::H2d)) && message.contains("still 0"), "{message}");
    assert_eq!(device.starts, 2);
}

/// Not the demo endpoint: every register reads the same.
struct OtherDevice;

impl Mmio for OtherDevice {
    fn read32(&mut self, _: u8, _: u64) -> Result<u32, EngineError> {
        Ok(0xDEAD_BEEF)
    }
    fn write32(&mut self, _: u8, _: u64, _: u32) -> Result<(), EngineError> {
        panic!("must not write to a device that is not the demo endpoint")
    }
    fn sleep(&mut self, _: Duration) {}
}

#[test]
fn another_device_is_refused_before_any_write() {
    let err = run_demo(&mut OtherDevice, &pcieperf::engine::Engine::conditions(&sim("sim:doc001")).unwrap(), &DemoOptions::default(), &NOT_CANCELLED).unwrap_err();
    assert!(err.to_string().contains("0xdeadbeef") && err.to_string().contains("0x08021600"), "{err}");
}
