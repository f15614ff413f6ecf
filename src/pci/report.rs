//! The per-device report: what was decoded, what limits the device, what it could deliver. Its
//! JSON form is versioned (`SCHEMA`, `pcieperf.<kind>/<major>` as every pcieperf document) and
//! documented in docs/inspect.md.

use std::sync::Arc;

use serde::Serialize;

use crate::model::{self, Conditions, Mode};
use crate::table::{Align, Table};

use super::address::Bdf;
use super::analysis::{self, Context, Warning};
use super::caps::aer::Aer;
use super::caps::pcie::{speed_label, PcieCap};
use super::caps::table::{Body, Decoded};
use super::config::Bar;
use super::lspci::{self, Identity, Naming};
use super::device::{CapListing, Device};
use super::ids::PciIds;
use super::sysfs::AerCounters;
use super::conditions;
use super::path_summary::PathSummary;
use super::walk;
use super::topology::{Bandwidth, Hop};
use super::Machine;

pub const SCHEMA: &str = "pcieperf.inspect/1";

/// Transfer size at which the ceiling is quoted: large enough that per-transfer costs vanish.
pub const CEILING_TRANSFER_BYTES: u64 = 4 << 20;

/// The whole inspection.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    pub schema: &'static str,
    pub source: String,
    pub pci_ids: Option<String>,
    /// Live scan as root (full config space readable).
    pub privileged: bool,
    pub devices: Vec<DeviceReport>,
    pub notes: Vec<String>,
    /// Some device of the source has a non-zero PCI domain: lspci then prints every domain.
    #[serde(skip)]
    pub domains: bool,
}

/// A link: speed in GT/s and width in lanes, and where the figures came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkState {
    pub speed_gts: Option<f64>,
    pub width: Option<u8>,
    /// "config" (decoded registers), "sysfs" (kernel attributes) or "unavailable".
    pub source: &'static str,
}

/// Model ceiling of one link at large transfers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkCeiling {
    pub link: String,
    pub speed_gts: f64,
    pub width: u32,
    #[serde(rename = "write_MBps")]
    pub write_mbps: f64,
    #[serde(rename = "read_MBps")]
    pub read_mbps: f64,
}

/// What the model says the device can move, for the link as trained now (the narrowest hop on
/// the path) and as capable, under the device's conditions ([`super::conditions`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceCeiling {
    pub transfer_bytes: u64,
    pub max_payload_bytes: u64,
    pub max_read_request_bytes: u64,
    /// The root port's Read Completion Boundary (64 when unknown).
    pub read_completion_boundary_bytes: u64,
    /// Outstanding read requests: 32, 256 with Extended Tag, 768 with 10-bit tags enabled.
    pub tags: u32,
    /// Model inputs that are typical values, not readings.
    pub assumed: Vec<String>,
    pub trained: Option<LinkCeiling>,
    pub capable: Option<LinkCeiling>,
    /// Rates are MB/s = 10^6 bytes/s.
    pub summary: String,
}

/// AER as decoded (status bits) and as counted by the kernel.
#[derive(Debug, Clone, Serialize)]
pub struct AerReport {
    pub status: Option<Aer>,
    pub counters: Option<AerCounters>,
}

/// Everything pcieperf knows about one function.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    pub bdf: Bdf,
    pub vendor_id: Option<u16>,
    pub device_id: Option<u16>,
    pub name: String,
    pub class_code: Option<u32>,
    pub class_name: Option<String>,
    pub port_type: Option<&'static str>,
    /// Who emulates this function ("QEMU (Red Hat): vendor ID 0x1b36"), when its IDs say it is
    /// a hypervisor's: its link is nominal, not physical.
    pub emulated_by: Option<String>,
    pub max_payload_supported_bytes: Option<u32>,
    pub max_payload_bytes: Option<u32>,
    /// Smallest MaxPayload supported by the device and every port on its path to the root.
    pub path_max_payload_supported_bytes: Option<u32>,
    pub max_read_request_bytes: Option<u32>,
    pub link_capable: LinkState,
    pub link_status: LinkState,
    pub target_speed_gts: Option<f64>,
    pub aspm: Option<&'static str>,
    pub aer: AerReport,
    /// Upstream devices, nearest first, with their links (shared by the functions of a bus).
    pub path: Arc<[Hop]>,
    /// `path` as the `-v` line shows it ([`path_text`]), made once a bridge, not once a function.
    #[serde(skip)]
    pub path_line: Arc<str>,
    pub bandwidth: Option<Bandwidth>,
    pub ceiling: Option<DeviceCeiling>,
    pub warnings: Vec<Warning>,
    /// Fields that could not be decoded and what is needed to see them.
    pub unavailable: Vec<String>,
    pub notes: Vec<String>,
    pub capabilities: Vec<CapListing>,
    pub extended_capabilities: Vec<CapListing>,
    pub bars: Vec<Bar>,
    /// Primary, secondary and subordinate bus numbers of a bridge (type 1 header).
    pub bridge_buses: Option<(u8, u8, u8)>,
    pub numa_node: Option<i32>,
    pub driver: Option<String>,
    /// sysfs `modalias`, and the modules it resolves to (filled by the views that show them).
    #[serde(skip)]
    pub modalias: Option<String>,
    /// sysfs `resource` and `irq` (live only): what lspci prints instead of the registers.
    #[serde(skip)]
    pub kernel_resources: Option<Vec<super::sysfs::Resource>>,
    #[serde(skip)]
    pub kernel_irq: Option<u32>,
    #[serde(skip)]
    pub kernel_modules: Vec<String>,
    pub pcie: Option<PcieCap>,
    pub msi: Option<super::caps::msi::Msi>,
    pub msix: Option<super::caps::msix::MsiX>,
    pub power_management: Option<super::caps::pm::PowerManagement>,
    pub revision: Option<u8>,
    pub subsystem_vendor_id: Option<u16>,
    pub subsystem_id: Option<u16>,
    /// The bytes read, for lspci's lines and `-x` (the JSON carries decoded fields only).
    #[serde(skip)]
    pub config: super::config::ConfigSpace,
    /// `Capabilities: [off] …` sections in lspci's order and vocabulary.
    #[serde(skip)]
    pub capability_sections: Vec<CapabilitySection>,
    #[serde(skip)]
    pub class_name_exact: bool,
    #[serde(skip)]
    pub prog_if_name: Option<String>,
    /// pci.ids' names of the vendor and the device, for lspci's device line.
    #[serde(skip)]
    pub names: (Option<String>, Option<String>),
    /// pci.ids' names of the subsystem vendor and the subsystem, for lspci's `Subsystem:` line.
    #[serde(skip)]
    pub subsystem_names: (Option<String>, Option<String>),
    /// The bridges above as lspci places them, nearest first ([`super::lspci_paths`]), filled
    /// only for `-P`/`-PP`.
    #[serde(skip)]
    pub lspci_path: Vec<Bdf>,
}

/// One capability as `-v` lists it: its heading and its decoded fields (`-vv`).
#[derive(Debug, Clone)]
pub struct CapabilitySection {
    /// The heading as `-vv` prints it.
    pub heading: String,
    /// The heading as `-v` prints it, when shorter (no capability versions).
    pub brief: Option<String>,
    /// A Subsystem ID capability's IDs and names: its heading follows `-n`/`-nn`.
    pub subsystem: Option<((u16, u16), (Option<String>, Option<String>))>,
    pub details: Vec<String>,
}

fn link_ceiling(conditions: &Conditions) -> LinkCeiling {
    let link = conditions.params.link;
    LinkCeiling {
        link: link.to_string(),
        speed_gts: link.generation.gts(),
        width: link.width,
        write_mbps: model::ceiling(conditions, Mode::D2h, CEILING_TRANSFER_BYTES).mbps,
        read_mbps: model::ceiling(conditions, Mode::H2d, CEILING_TRANSFER_BYTES).mbps,
    }
}

fn ceiling(conditions: &Conditions) -> DeviceCeiling {
    let trained = link_ceiling(conditions);
    let capable = conditions.on_capable_link().map(|c| link_ceiling(&c));
    let part = |label: &str, c: &LinkCeiling| format!("{label} {}: write {:.0} MB/s, read {:.0} MB/s", c.link, c.write_mbps, c.read_mbps);
    let summary = capable.iter().map(|c| part("capable", c)).chain([part("trained", &trained)]).collect::<Vec<_>>().join("; ");
    let p = &conditions.params;
    DeviceCeiling {
        transfer_bytes: CEILING_TRANSFER_BYTES,
        max_payload_bytes: p.mps_bytes,
        max_read_request_bytes: p.mrrs_bytes,
        read_completion_boundary_bytes: p.rcb_bytes,
        tags: p.tags,
        assumed: conditions.assumed.clone(),
        trained: Some(trained),
        capable,
        summary,
    }
}

/// Each capability's section, rendered from its decoded body: lspci's heading (`[40]`,
/// `[100 v2]`), the decoder's lines nested; a list lspci could not read to its end ends with
/// lspci's line saying why.
fn capability_sections(device: &Device, names: &PciIds) -> Vec<CapabilitySection> {
    let config = &device.config;
    let (standard, extended) = device.decoded.split_at(device.caps.caps.len());
    let standard = standard.iter().map(|c| standard_section(device, c, names));
    let extended = extended.iter().map(|c| {
        let (at, lines) = (c.entry.offset, c.lines());
        let brief = Some(format!("Capabilities: [{at:03x}] {}", lines.name));
        CapabilitySection { heading: format!("Capabilities: [{at:03x} v{}] {}", c.entry.version, lines.name), brief, subsystem: None, details: lines.details }
    });
    let standard_end = device.caps.problem.as_ref().and_then(|p| walk::standard_end_line(p, config));
    let extended_end = device.ext_caps.problem.as_ref().and_then(|p| walk::extended_end_lines(p, config));
    let end = |lines: Option<(String, Option<String>)>| lines.map(|(heading, brief)| CapabilitySection { heading, brief, subsystem: None, details: Vec::new() });
    glue_empty_headings(standard.chain(end(standard_end)).chain(extended).chain(end(extended_end)).collect())
}

/// One standard capability's section; a Subsystem ID capability's heading carries its IDs' names.
fn standard_section(device: &Device, c: &Decoded, names: &PciIds) -> CapabilitySection {
    let (at, lines) = (c.entry.offset, c.lines());
    let subsystem = match &c.body {
        Some(Body::Subsystem(Some(ids))) => Some((*ids, subsystem_names(names, device.config.vendor_id().zip(device.config.device_id()), *ids))),
        _ => None,
    };
    let brief = lines.brief_name.map(|name| format!("Capabilities: [{at:02x}] {name}"));
    CapabilitySection { heading: format!("Capabilities: [{at:02x}] {}", lines.name), brief, subsystem, details: lines.details }
}

/// A heading lspci left without a line end runs into the next one, as on lspci's screen.
fn glue_empty_headings(sections: Vec<CapabilitySection>) -> Vec<CapabilitySection> {
    let mut glued: Vec<CapabilitySection> = Vec::new();
    for mut section in sections {
        if let Some(open) = glued.last().filter(|s| s.heading.ends_with("] ") && s.subsystem.is_none()) {
            let prefix = format!("{}\t", open.heading);
            section.heading.insert_str(0, &prefix);
            section.brief = section.brief.map(|b| prefix.clone() + &b);
            glued.pop();
        }
        glued.push(section);
    }
    glued
}

fn subsystem_names(names: &PciIds, device: Option<(u16, u16)>, subsystem: (u16, u16)) -> (Option<String>, Option<String>) {
    let name = device.and_then(|device| names.subsystem(device, subsystem));
    (names.vendor(subsystem.0).map(str::to_string), name.map(str::to_string))
}

/// Ceilings already computed, by the conditions they were computed for: the devices of a
/// machine share a few conditions, and each ceiling costs four model evaluations. Bounded, so a
/// machine of all-different devices costs a short scan a device, not a long one.
#[derive(Default)]
pub struct Ceilings {
    known: Vec<(Conditions, DeviceCeiling)>,
}

impl Ceilings {
    const KEPT: usize = 32;

    fn of(&mut self, conditions: &Conditions) -> DeviceCeiling {
        let same = |c: &Conditions| c.params == conditions.params && c.capable == conditions.capable && c.assumed == conditions.assumed;
        if let Some((_, known)) = self.known.iter().find(|(c, _)| same(c)) {
            return known.clone();
        }
        let computed = ceiling(conditions);
        if self.known.len() < Self::KEPT {
            self.known.push((conditions.clone(), computed.clone()));
        }
        computed
    }
}

/// Build the report for `device` of `machine`, whose path to the root is summarised in `path`.
pub fn build(machine: &Machine, device: &Device, path: &PathSummary, names: &PciIds, ceilings: &mut Ceilings) -> DeviceReport {
    let bdf = &device.bdf;
    let regs = device.pcie.as_ref().and_then(|p| p.device.as_ref());
    let path_supported = regs.map(|r| path.max_payload_supported_bytes(r.max_payload_supported_bytes));
    let partner = path.nearest.filter(|p| analysis::is_port(p) || p.pcie.is_none());
    let warnings = analysis::analyse(device, &Context { link_partner: partner, path_max_payload_supported_bytes: path_supported });
    let (speed, width, status_source) = device.link_status();
    let (cap_speed, cap_width, cap_source) = device.link_capable();
    let bandwidth = conditions::bandwidth(device, path);
    let origin = if machine.live { "sysfs" } else { "lspci dump" };
    let ceiling = bandwidth.as_ref().and_then(|bw| conditions::from_path(device, path, bw, origin)).map(|c| ceilings.of(&c));
    let (vendor_id, device_id) = (device.config.vendor_id(), device.config.device_id());
    let class_code = device.config.class_code();
    let subsystem = lspci::subsystem_ids(&device.config, device.subsystem_capability());
    let attributes = device.attributes.as_ref();
    DeviceReport {
        bdf: *bdf,
        vendor_id,
        device_id,
        name: match (vendor_id, device_id) {
            (Some(v), Some(d)) => names.name(v, d),
            _ => "unknown device (config space not readable)".to_string(),
        },
        class_code,
        class_name: class_code.and_then(|c| names.class(c)).map(str::to_string),
        names: vendor_id.map_or((None, None), |v| (names.vendor(v).map(str::to_string), device_id.and_then(|d| names.device(v, d)).map(str::to_string))),
        prog_if_name: class_code.and_then(|c| names.prog_if(c)),
        class_name_exact: class_code.is_none_or(|c| names.subclass(c).is_some() || names.class(c).is_none()),
        port_type: device.pcie.as_ref().map(|p| p.port_type.name()),
        emulated_by: super::emulated::emulator(device),
        max_payload_supported_bytes: regs.map(|r| r.max_payload_supported_bytes),
        max_payload_bytes: regs.map(|r| r.max_payload_bytes),
        path_max_payload_supported_bytes: path_supported,
        max_read_request_bytes: regs.map(|r| r.max_read_request_bytes),
        link_capable: LinkState { speed_gts: cap_speed, width: cap_width, source: cap_source },
        link_status: LinkState { speed_gts: speed, width, source: status_source },
        target_speed_gts: device.pcie.as_ref().and_then(|p| p.link2.as_ref()).and_then(|l| l.target_speed_gts),
        aspm: device.pcie.as_ref().and_then(|p| p.link.as_ref()).map(|l| l.aspm_control),
        aer: AerReport { status: device.aer.clone(), counters: attributes.and_then(|a| a.aer.clone()) },
        path: path.hops.clone(),
        path_line: path.line.clone(),
        bandwidth,
        ceiling,
        warnings,
        unavailable: device.unavailable(machine.live),
        notes: device.notes.clone(),
        capabilities: device.capability_listing(),
        extended_capabilities: device.extended_capability_listing(),
        bars: device.bars(),
        bridge_buses: device.config.bridge_buses(),
        numa_node: attributes.and_then(|a| a.numa_node),
        driver: attributes.and_then(|a| a.driver.clone()),
        modalias: attributes.and_then(|a| a.modalias.clone()),
        kernel_resources: attributes.map(|a| a.resources.clone()),
        kernel_irq: attributes.and_then(|a| a.irq),
        kernel_modules: Vec::new(),
        pcie: device.pcie.clone(),
        msi: device.msi.clone(),
        msix: device.msix.clone(),
        power_management: device.pm.clone(),
        revision: device.config.revision(),
        subsystem_vendor_id: subsystem.map(|s| s.0),
        subsystem_id: subsystem.map(|s| s.1),
        subsystem_names: subsystem.map_or((None, None), |ids| subsystem_names(names, vendor_id.zip(device_id), ids)),
        lspci_path: Vec::new(),
        config: device.config.clone(),
        capability_sections: capability_sections(device, names),
    }
}

fn link_text(state: &LinkState) -> String {
    match (state.speed_gts, state.width) {
        (None, None) => "-".into(),
        (speed, width) => format!("{} x{}", speed_label(speed), width.map_or("?".into(), |w| w.to_string())),
    }
}

fn gbps(mbps: f64) -> String {
    format!("{:.1}", mbps / 1000.0)
}

/// The default view: one line per device, named as `-n`/`-nn` ask.
pub fn render_table(reports: &[DeviceReport], naming: Naming) -> String {
    let mut table = Table::new(&[
        ("BDF", Align::Left),
        ("Device", Align::Left),
        ("Link now", Align::Left),
        ("Capable", Align::Left),
        ("MPS/MRRS", Align::Left),
        ("Write now/max GB/s", Align::Right),
        ("Warn", Align::Right),
    ]);
    for r in reports {
        let mps = match (r.max_payload_bytes, r.max_read_request_bytes) {
            (Some(m), Some(q)) => format!("{m}/{q}"),
            _ => "-".into(),
        };
        let ceiling = r.ceiling.as_ref().map_or("-".into(), |c| {
            let now = c.trained.as_ref().map_or("-".into(), |t| gbps(t.write_mbps));
            let max = c.capable.as_ref().map_or("-".into(), |t| gbps(t.write_mbps));
            format!("{now}/{max}")
        });
        let ids = format!("{:04x}:{:04x}", r.vendor_id.unwrap_or(0xffff), r.device_id.unwrap_or(0xffff));
        let mut name = if naming.names { r.name.clone() } else { ids.clone() };
        // Long names are cut so that the table fits 100 columns; -v shows them whole.
        let room = if naming.numbers { 16 } else { 28 };
        if name.chars().count() > room {
            name = name.chars().take(room - 1).collect::<String>() + "…";
        }
        if naming.names && naming.numbers {
            name += &format!(" [{ids}]");
        }
        table.row(vec![r.bdf.to_string(), name, link_text(&r.link_status), link_text(&r.link_capable), mps, ceiling, r.warnings.len().to_string()]);
    }
    table.render()
}

/// How `-v` output looks: lspci's grades and naming.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// `-v` count: 1 headings and pcieperf's analysis, 2 adds Control/Status and every decoded
    /// capability field, 3 shows disabled bridge windows' addresses (as lspci).
    pub verbose: u8,
    pub naming: Naming,
    /// How slots are named: domains (auto-detected as lspci does, or `-D`), `-P`/`-PP` paths.
    pub slots: super::lspci_machine::SlotNaming,
    /// `-b`: regions as the card's registers hold them, without the kernel's sizes (as lspci -b).
    pub bus_centric: bool,
}

impl DeviceReport {
    /// Its slot as lspci names it with these options (`machine`: the `-m` views' domain rule).
    pub fn slot_name(&self, slots: super::lspci_machine::SlotNaming, machine: bool) -> String {
        super::lspci_machine::slot_name(&self.bdf, &self.lspci_path, slots, machine)
    }

    pub fn identity(&self) -> Identity<'_> {
        Identity { bdf: self.bdf, config: &self.config, names: (self.names.0.as_deref(), self.names.1.as_deref()), class_name: self.class_name.as_deref(), class_name_exact: self.class_name_exact, prog_if_name: self.prog_if_name.as_deref(), subsystem_names: (self.subsystem_names.0.as_deref(), self.subsystem_names.1.as_deref()) }
    }
}

/// `-v/-vv/-vvv`: lspci's lines for the device (graded as lspci grades them), then pcieperf's
/// analysis: link now and capable, path, bandwidth, ceiling, warnings.
pub fn render_verbose(report: &DeviceReport, style: Style) -> String {
    let id = report.identity();
    let mut out = lspci::device_line(&id, style.naming, &report.slot_name(style.slots, false), true);
    out.push('\n');
    for text in lspci_verbose_lines(report, &id, style).into_iter().chain(analysis_lines(report)) {
        out += "\t";
        out += &text;
        out.push('\n');
    }
    out
}

/// The lines lspci prints under the device line at `style.verbose`, in its order.
fn lspci_verbose_lines(report: &DeviceReport, id: &Identity<'_>, style: Style) -> Vec<String> {
    let mut lines = Vec::new();
    if let (Some(v), Some(d)) = (report.subsystem_vendor_id, report.subsystem_id) {
        lines.push(lspci::subsystem_line(id, (v, d), style.naming));
    }
    // `-b` is the bus's view: libpci then reads nothing of the kernel's.
    let kernel = report
        .kernel_resources
        .as_deref()
        .filter(|_| !style.bus_centric)
        .map(|resources| super::lspci_header::KernelView { resources, irq: report.kernel_irq });
    lines.extend(super::lspci_header::lines(&report.config, style.verbose, super::lspci_header::HeaderFacts { kernel, numa_node: report.numa_node.filter(|n| *n >= 0) }));
    for section in &report.capability_sections {
        lines.extend(capability_lines(section, style));
    }
    if let Some(driver) = &report.driver {
        lines.push(format!("Kernel driver in use: {driver}"));
    }
    lines.extend(super::modules::line(&report.kernel_modules));
    lines
}

/// One `Capabilities:` heading and, from `-vv` on, its fields.
fn capability_lines(section: &CapabilitySection, style: Style) -> Vec<String> {
    let brief = section.brief.as_ref().filter(|_| style.verbose < 2);
    let heading = match &section.subsystem {
        Some((ids, (vendor, name))) => format!("{}{}", section.heading, lspci::named_subsystem(*ids, (vendor.as_deref(), name.as_deref()), style.naming)),
        None => brief.unwrap_or(&section.heading).clone(),
    };
    let nested: &[String] = if style.verbose >= 2 { &section.details } else { &[] };
    std::iter::once(heading).chain(nested.iter().map(|detail| format!("\t{detail}"))).collect()
}

/// Hops of a path shown before the rest are counted: a line of the same length at any depth
/// (the JSON lists every hop; the bandwidth line names the hop that limits).
const PATH_HOPS_SHOWN: usize = 6;

/// The hops from the device up, joined by arrows; a longer path shows its nearest and its
/// topmost hops around a count of the ones between.
pub fn path_text(path: &[Hop]) -> String {
    let hop = |h: &Hop| format!("{} ({} {})", h.bdf, h.port_type.unwrap_or("bridge"), link_text(&LinkState { speed_gts: h.speed_gts, width: h.width, source: "" }));
    if path.len() <= PATH_HOPS_SHOWN {
        return path.iter().map(hop).collect::<Vec<_>>().join(" → ");
    }
    let (near, top) = (&path[..PATH_HOPS_SHOWN / 2], &path[path.len() - PATH_HOPS_SHOWN / 2..]);
    let between = path.len() - PATH_HOPS_SHOWN;
    let shown = |hops: &[Hop]| hops.iter().map(hop).collect::<Vec<_>>().join(" → ");
    format!("{} → … {between} more bridge(s) … → {}", shown(near), shown(top))
}

/// pcieperf's own lines after lspci's: link, payload sizes, AER, path, bandwidth, ceiling,
/// warnings, what could not be read, notes.
fn analysis_lines(report: &DeviceReport) -> Vec<String> {
    let mut lines: Vec<String> = report.emulated_by.iter().map(|emulator| format!("pcieperf: emulated by {emulator} (link nominal, not physical)")).collect();
    lines.push(format!(
        "pcieperf: link now {} ({}), capable {} ({})",
        link_text(&report.link_status),
        report.link_status.source,
        link_text(&report.link_capable),
        report.link_capable.source
    ));
    if let (Some(mps), Some(mrrs)) = (report.max_payload_bytes, report.max_read_request_bytes) {
        lines.push(format!(
            "pcieperf: MaxPayload {mps} bytes (supported {}, smallest supported on path {}), MaxReadReq {mrrs} bytes",
            report.max_payload_supported_bytes.unwrap_or(0),
            report.path_max_payload_supported_bytes.unwrap_or(0)
        ));
    }
    if let Some(counters) = &report.aer.counters {
        lines.push(format!("pcieperf: AER counters: correctable {}, uncorrectable {}", counters.total_correctable(), counters.total_uncorrectable()));
    }
    if !report.path.is_empty() {
        lines.push(format!("pcieperf: path to root: {}", report.path_line));
    }
    if let Some(bw) = &report.bandwidth {
        lines.push(format!("pcieperf: bandwidth: {}", bw.message));
    }
    if let Some(c) = &report.ceiling {
        lines.push(format!(
            "pcieperf: ceiling ({} transfers, MPS {}, MRRS {}, RCB {}, {} tags; MB/s = 10^6 B/s): {}",
            crate::units::format_size(c.transfer_bytes),
            c.max_payload_bytes,
            c.max_read_request_bytes,
            c.read_completion_boundary_bytes,
            c.tags,
            c.summary
        ));
    }
    lines.extend(report.warnings.iter().map(|w| format!("pcieperf: warning [{}]: {}", w.code, w.message)));
    lines.extend(report.unavailable.iter().map(|u| format!("pcieperf: unavailable: {u}")));
    lines.extend(report.notes.iter().map(|n| format!("pcieperf: note: {n}")));
    lines
}
