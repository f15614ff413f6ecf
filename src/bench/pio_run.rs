//! `pcieperf pio` below the command line: the model's conditions, pinning, document 000's tests
//! through [`super::pio`], and what the run adds about an emulated device.

use std::path::Path;

use super::pin::{pin_here, Pinning};
use super::pio::{run_pio, PioOptions, PioRun};
use crate::engine::Engine;
use crate::error::InvalidInput;

/// A finished run and, when the model could not predict, why.
pub struct PioOutcome {
    pub run: PioRun,
    pub no_prediction: Option<String>,
}

/// Run the tests of `options` (its `bar` is the engine's default BAR) on `engine`, opened from
/// `target`; `sysfs_root` is where a real device's conditions are read.
pub fn run(engine: &mut dyn Engine, target: &str, sysfs_root: &Path, mut options: PioOptions) -> anyhow::Result<PioOutcome> {
    let info = engine.info().clone();
    let conditions = super::conditions::resolve_in(engine, sysfs_root);
    let no_prediction = conditions.as_ref().err().cloned();
    let conditions = conditions.ok();
    let pinning = if info.simulated { Pinning { cpu: None, warnings: Vec::new() } } else { pin_here() };
    let mmio = engine
        .mmio()
        .ok_or_else(|| InvalidInput::new(format!("{target}: this target has no registers; pio needs bar:BDF or sim:PRESET")))?;
    options.bar = mmio.default_bar();
    let mut run = run_pio(mmio, &info, conditions.as_ref(), pinning, &options)?;
    if let Some(emulator) = info.pci_address.as_deref().and_then(|bdf| crate::pci::emulated::emulator_of(sysfs_root, bdf)) {
        run.notes.push(crate::pci::emulated::nominal_link_sentence(&emulator));
    }
    Ok(PioOutcome { run, no_prediction })
}

impl PioRun {
    /// Read-backs of Test 5 that differed from what was written.
    pub fn mismatches(&self) -> u64 {
        self.tests.iter().flat_map(|t| &t.cases).filter_map(|c| c.mismatches).sum()
    }
}
