//! Views of a `pcieperf.inspect/1` document: one line per device with the link analysis,
//! lspci's `-v`/`-x` blocks, and the measurement targets found.

use std::fmt::Write;

use crate::bench::inspect_run::InspectDocument;
use crate::pci::lspci::{self, Naming};
use crate::pci::lspci_machine::{self, MachineFacts, SlotNaming};
use crate::pci::report::{self, DeviceReport, Style};

/// lspci's detail flags, as counted on the command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Detail {
    /// `-v`, `-vv`, `-vvv`.
    pub verbose: u8,
    /// `-n`, `-nn`.
    pub numeric: u8,
    /// `-x`, `-xxx`, `-xxxx`.
    pub hex: u8,
    /// `-m`, `-mm`: lspci's machine-readable views.
    pub machine: u8,
    /// `-P`, `-PP`: slots named by their path through the bridges above.
    pub path: u8,
    /// `-D`: every slot with its domain.
    pub domains: bool,
    /// `-k`: the kernel driver in use (also in the `-vmm` view).
    pub kernel: bool,
    /// `-b`: lspci's bus-centric view (no sizes from the kernel's resources).
    pub bus_centric: bool,
}

impl Detail {
    /// Whether the view is one block or line per device, printable as each device is inspected
    /// (`-v`, `-x`, `-m`, `-k`); the default table sizes its columns to every row first.
    pub fn per_device(&self) -> bool {
        self.machine > 0 || self.verbose > 0 || self.hex > 0 || self.kernel
    }

    /// How lspci's lines look with these flags; `domains`: some device has a non-zero domain.
    pub fn style(&self, domains: bool) -> Style {
        let slots = SlotNaming { domains: domains || self.domains, domains_requested: self.domains, path: self.path };
        Style { verbose: self.verbose, naming: Naming::from_count(self.numeric), slots, bus_centric: self.bus_centric }
    }
}

/// The table, or with `-v`/`-x`/`-m`/`-k` lspci's blocks.
pub fn text(document: &InspectDocument, detail: Detail) -> String {
    let inspection = &document.inspection;
    let style = detail.style(inspection.domains);
    if detail.per_device() {
        return inspection.devices.iter().map(|device| device_text(device, style, detail)).collect();
    }
    let mut out = report::render_table(&inspection.devices, style.naming);
    out += "GB/s = 10^9 B/s: model write ceiling at 4 MiB transfers, path as trained / capable; -v: details\n";
    out + &targets(document)
}

/// One device's block or line in a [`Detail::per_device`] view.
pub fn device_text(device: &DeviceReport, style: Style, detail: Detail) -> String {
    if detail.machine > 0 { machine_readable(device, style, detail) } else { lspci_style(device, style, detail) }
}

/// The document as pretty JSON with its members in name order, ending in a newline.
pub fn json(document: &InspectDocument) -> String {
    let value = serde_json::to_value(document).expect("inspections serialise: plain data");
    serde_json::to_string_pretty(&value).expect("a JSON value serialises") + "\n"
}

/// `-v` and `-x` views: one block per device, each ended by a blank line, as lspci prints them.
fn lspci_style(device: &DeviceReport, style: Style, detail: Detail) -> String {
    let hex = detail.hex;
    let mut out = String::new();
    if style.verbose > 0 {
        out += &report::render_verbose(device, style);
    } else {
        out += &lspci::device_line(&device.identity(), style.naming, &device.slot_name(style.slots, false), false);
        out.push('\n');
        // -k without -v: lspci's terse block, the subsystem and the driver -v would print.
        if let (true, Some(ids)) = (detail.kernel, device.subsystem_vendor_id.zip(device.subsystem_id)) {
            out += &format!("\t{}\n", lspci::subsystem_line(&device.identity(), ids, style.naming));
        }
        if let Some(driver) = device.driver.as_ref().filter(|_| detail.kernel) {
            out += &format!("\tKernel driver in use: {driver}\n");
        }
        if let Some(line) = crate::pci::modules::line(&device.kernel_modules).filter(|_| detail.kernel) {
            out += &format!("\t{line}\n");
        }
    }
    if hex > 0 {
        out += &lspci::hex_dump(&device.config, hex);
    }
    // lspci ends a block with a blank line only when the block has more than the device line.
    if style.verbose > 0 || hex > 0 {
        out.push('\n');
    }
    out
}

/// `-m`/`-mm` lines and `-vm`/`-vmm` blocks, as lspci prints them.
fn machine_readable(device: &DeviceReport, style: Style, detail: Detail) -> String {
    let facts = MachineFacts {
        slot: device.slot_name(style.slots, true),
        subsystem: device.subsystem_vendor_id.zip(device.subsystem_id),
        driver: device.driver.as_deref(),
        modules: &device.kernel_modules,
        numa_node: device.numa_node,
    };
    let id = device.identity();
    if detail.verbose > 0 { lspci_machine::block(&id, &facts, style.naming, detail.machine, detail.kernel) } else { lspci_machine::line(&id, &facts, style.naming) }
}

/// The measurement targets found, and which one `pcieperf run` would use unasked.
fn targets(document: &InspectDocument) -> String {
    if document.targets.is_empty() {
        return String::new();
    }
    let chosen = document.chosen.as_deref();
    let mut out = "\nMeasurement targets (pcieperf dma --target …):\n".to_string();
    for target in &document.targets {
        let mark = if Some(target.target.as_str()) == chosen { "run would use" } else if target.usable { "usable" } else { "not usable" };
        let _ = writeln!(out, "  {} [{mark}]: {}", target.target, target.reason);
    }
    if chosen.is_none() {
        out += "  none usable unasked: pcieperf run measures the simulated endpoint `sim`\n";
    }
    out
}
