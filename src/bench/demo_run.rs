//! `pcieperf demo` below the command line: the conditions, the co-simulation settings, the
//! register flow of [`super::demo`], and the `pcieperf.demo/2` document they make.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;

use super::demo::{demo_bytes, run_demo, DemoOptions, DemoReport};
use crate::engine::{Engine, EngineInfo};

/// `pcieperf demo --json`, named as every pcieperf document is.
pub const SCHEMA: &str = "pcieperf.demo/2";

/// Block amount of a co-simulated demo: 8 × 8 KiB = 64 KiB per direction.
const COSIM_BLOCK_AMOUNT: u32 = 8;

/// What the demo found, with what it ran on.
#[derive(Debug, Clone, Serialize)]
pub struct DemoDocument {
    pub schema: &'static str,
    pub pcieperf_version: &'static str,
    pub simulated: bool,
    pub engine: EngineInfo,
    pub seed: u64,
    /// How this run departs from the document's flow (co-simulation's smaller block amount).
    pub notes: Vec<String>,
    pub demo: DemoReport,
}

/// Run the flow on `engine` (opened from `target` with `seed`), with the engine's device clock
/// and, for a co-simulated engine, a small block amount and fast polling.
pub fn run(engine: &mut dyn Engine, target: &str, seed: u64, mut options: DemoOptions, cancel: &AtomicBool) -> anyhow::Result<DemoDocument> {
    let info = engine.info().clone();
    let conditions = super::conditions::resolve(engine)
        .map_err(|why| anyhow::anyhow!("{target}: no link conditions ({why}); the block amount needs the link"))?;
    options.device_clock_hz = info.device_clock_hz;
    options.link_omits_skp_and_dllps = engine.link_omits_skp_and_dllps();
    let mut notes = Vec::new();
    if info.co_simulated {
        // Simulated time is expensive: a small block amount, and a poll every 5 µs instead of
        // the document's 30 s wait.
        let block_amount = options.block_amount.unwrap_or(COSIM_BLOCK_AMOUNT);
        options.block_amount = Some(block_amount);
        options.wait = Duration::ZERO;
        options.poll_interval = Duration::from_micros(5);
        options.timeout = Duration::from_millis(100);
        notes.push(format!(
            "co-simulation: block amount {block_amount} ({} bytes per direction) instead of the document's 0xA343C × link multiplier; results polled every 5 µs of simulated time",
            demo_bytes(block_amount)
        ));
    }
    let mmio = engine.mmio().ok_or_else(|| {
        anyhow::anyhow!("{target}: this target has no registers; `pcieperf demo` needs the performance-demo endpoint (e.g. sim:doc001)")
    })?;
    let demo = run_demo(mmio, &conditions, &options, cancel)?;
    Ok(DemoDocument { schema: SCHEMA, pcieperf_version: env!("CARGO_PKG_VERSION"), simulated: info.simulated, engine: info, seed, notes, demo })
}
