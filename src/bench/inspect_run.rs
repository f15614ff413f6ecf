//! `pcieperf inspect` below the command line: the pci layer's inspection of every device, and
//! on the live machine the measurement targets found (the `pcieperf.inspect/1` document).

use serde::Serialize;

use crate::engine::{self, Candidate};
use crate::pci::{self, DeviceReport, InspectOptions, Inspection};

/// The inspection and the targets `dma`/`run` could measure.
#[derive(Debug, Clone, Serialize)]
pub struct InspectDocument {
    #[serde(flatten)]
    pub inspection: Inspection,
    /// Measurement targets of this machine; empty for a dump or another sysfs tree.
    pub targets: Vec<Candidate>,
    /// The target `pcieperf run` would measure unasked, when one of `targets` is usable.
    #[serde(skip)]
    pub chosen: Option<String>,
}

/// Inspect the source of `options`; with `find_targets`, also detect the targets (only
/// meaningful on the live machine).
pub fn run(options: &InspectOptions, find_targets: bool) -> anyhow::Result<InspectDocument> {
    let inspection = pci::inspect(options)?;
    let targets = if find_targets { engine::detect() } else { Vec::new() };
    let choice = engine::choose(None, &targets);
    let chosen = targets.iter().any(|t| t.target == choice.target).then_some(choice.target);
    Ok(InspectDocument { inspection, targets, chosen })
}

impl InspectDocument {
    /// Devices whose registers were only partly readable.
    pub fn partly_decoded(&self) -> usize {
        self.inspection.devices.iter().filter(|d| !d.unavailable.is_empty()).count()
    }

    /// What the partly decoded devices lack and what would show it, in one line (`None` when
    /// every device was read whole).
    pub fn partly_decoded_note(&self, from_dump: bool) -> Option<String> {
        let mut partly = PartlyDecoded::default();
        self.inspection.devices.iter().for_each(|d| partly.add(d));
        partly.note(from_dump)
    }

    /// Whether any device has a warning (what `--strict` fails on).
    pub fn warned(&self) -> bool {
        self.inspection.devices.iter().any(|d| !d.warnings.is_empty())
    }
}

/// Devices whose registers were only partly readable, counted as reports go by (a streamed view
/// keeps no report).
#[derive(Debug, Default)]
pub struct PartlyDecoded {
    devices: usize,
    capabilities: bool,
    extended: bool,
}

impl PartlyDecoded {
    pub fn add(&mut self, device: &DeviceReport) {
        let lacking = |prefix: &str| device.unavailable.iter().any(|u| u.starts_with(prefix));
        self.devices += usize::from(!device.unavailable.is_empty());
        self.capabilities |= lacking("capabilities");
        self.extended |= lacking("extended capabilities");
    }

    /// What the partly decoded devices lack and what would show it, in one line (`None` when
    /// every device was read whole). Names only what is missing: a 256-byte dump lacks the
    /// extended capabilities (AER) but has MaxPayload and ASPM.
    pub fn note(&self, from_dump: bool) -> Option<String> {
        let what = match (self.capabilities, self.extended) {
            (true, true) => "MaxPayload, ASPM and AER",
            (true, false) => "MaxPayload and ASPM",
            (false, true) => "AER (the extended capabilities)",
            (false, false) => "some registers",
        };
        let fix = match (from_dump, self.capabilities) {
            (false, _) => "root",
            (true, true) => "a longer dump (lspci -xxx or -xxxx as root)",
            (true, false) => "a 4096-byte dump (lspci -xxxx as root)",
        };
        let limited = self.devices;
        (limited > 0).then(|| format!("{limited} device(s) only partly decoded; {fix} is needed for {what} (-v lists what is missing)"))
    }
}
