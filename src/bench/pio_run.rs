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
        run.without_link_comparison();
    }
    Ok(PioOutcome { run, no_prediction })
}

impl PioRun {
    /// An emulated BAR's accesses are the emulator's: no ratio to the model and no link
    /// explanation of the gap ("completion latency shorter than assumed" says nothing there).
    pub fn without_link_comparison(&mut self) {
        for case in self.tests.iter_mut().flat_map(|t| &mut t.cases) {
            (case.ratio_to_model, case.gap) = (None, None);
        }
    }

    /// Read-backs of Test 5 that differed from what was written.
    pub fn mismatches(&self) -> u64 {
        self.tests.iter().flat_map(|t| &t.cases).filter_map(|c| c.mismatches).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emulated_bar_gets_no_ratio_to_the_model_and_no_link_explanation() {
        let mut engine = crate::engine::sim::SimEngine::open("sim:doc000", &crate::engine::OpenOptions::default()).unwrap();
        let options = PioOptions { count: 50, ..PioOptions::default() };
        let mut run = run(&mut engine, "sim:doc000", Path::new("/nonexistent"), options).unwrap().run;
        let explained = |run: &PioRun| run.tests.iter().flat_map(|t| &t.cases).filter(|c| c.gap.is_some() || c.ratio_to_model.is_some()).count();
        assert!(explained(&run) > 0, "simulated: each case beside the model");
        run.without_link_comparison();
        assert_eq!(explained(&run), 0, "an emulated BAR's accesses are the emulator's");
    }
}
