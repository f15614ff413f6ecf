//! The per-device report: what was decoded, what limits the device, what it could deliver. Its
//! JSON form is versioned (`SCHEMA`, `SCHEMA_VERSION`) and documented in docs/inspect.md.

use serde::Serialize;

use crate::model::{self, Conditions, Traffic};
use crate::table::{Align, Table};

use super::address::Bdf;
use super::analysis::{self, Context, Warning};
use super::caps::aer::Aer;
use super::caps::pcie::{speed_label, PcieCap};
use super::config::Bar;
use super::device::{CapListing, Device};
use super::ids::PciIds;
use super::sysfs::AerCounters;
use super::conditions;
use super::topology::{Bandwidth, Hop};
use super::Machine;

pub const SCHEMA: &str = "pcieperf.inspect";
pub const SCHEMA_VERSION: u32 = 1;

/// Transfer size at which the ceiling is quoted: large enough that per-transfer costs vanish.
pub const CEILING_TRANSFER_BYTES: u64 = 4 << 20;

/// The whole inspection.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    pub schema: &'static str,
    pub version: u32,
    pub source: String,
    pub pci_ids: Option<String>,
    /// Live scan as root (full config space readable).
    pub privileged: bool,
    pub devices: Vec<DeviceReport>,
    pub notes: Vec<String>,
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
pub struct Ceiling {
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
    /// Upstream devices, nearest first, with their links.
    pub path: Vec<Hop>,
    pub bandwidth: Option<Bandwidth>,
    pub ceiling: Option<Ceiling>,
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
    pub pcie: Option<PcieCap>,
    pub msi: Option<super::caps::msi::Msi>,
    pub msix: Option<super::caps::msix::MsiX>,
    pub power_management: Option<super::caps::pm::PowerManagement>,
    /// `-vv`: the raw registers, one line each.
    #[serde(skip)]
    pub raw: Vec<String>,
    /// `-v`: decoded capability lines in lspci's vocabulary.
    #[serde(skip)]
    pub details: Vec<String>,
}

fn link_ceiling(conditions: &Conditions) -> LinkCeiling {
    let link = conditions.params.link;
    LinkCeiling {
        link: link.to_string(),
        speed_gts: link.generation.gts(),
        width: link.width,
        write_mbps: model::ceiling(conditions, Traffic::Write, CEILING_TRANSFER_BYTES).mbps,
        read_mbps: model::ceiling(conditions, Traffic::Read, CEILING_TRANSFER_BYTES).mbps,
    }
}

fn ceiling(conditions: &Conditions) -> Ceiling {
    let trained = link_ceiling(conditions);
    let capable = conditions.on_capable_link().map(|c| link_ceiling(&c));
    let part = |label: &str, c: &LinkCeiling| format!("{label} {}: write {:.0} MB/s, read {:.0} MB/s", c.link, c.write_mbps, c.read_mbps);
    let summary = capable.iter().map(|c| part("capable", c)).chain([part("trained", &trained)]).collect::<Vec<_>>().join("; ");
    let p = &conditions.params;
    Ceiling {
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

fn details(device: &Device) -> (Vec<String>, Vec<String>) {
    let mut lines = Vec::new();
    let mut raw = Vec::new();
    if let Some(p) = &device.pcie {
        lines.extend(p.describe());
        raw.extend(p.raw());
    }
    if let Some(a) = &device.aer {
        lines.extend(a.describe());
        raw.extend(a.raw());
    }
    if let Some(m) = &device.msi {
        lines.extend(m.describe());
        raw.extend(m.raw());
    }
    if let Some(m) = &device.msix {
        lines.extend(m.describe());
        raw.extend(m.raw());
    }
    if let Some(pm) = &device.pm {
        lines.extend(pm.describe());
    }
    // The header; capability registers are listed above, decoded field by field.
    for row in device.config.bytes()[..device.config.len().min(64)].chunks(16).enumerate() {
        let hex: Vec<String> = row.1.iter().map(|b| format!("{b:02x}")).collect();
        raw.push(format!("{:03x}: {}", row.0 * 16, hex.join(" ")));
    }
    (lines, raw)
}

/// Build the report for `bdf` (which must be in `machine`).
pub fn build(machine: &Machine, bdf: &Bdf, names: &PciIds) -> DeviceReport {
    let device = &machine.devices[bdf];
    let upstream = machine.upstream(bdf);
    let partner = upstream.first().copied().filter(|p| analysis::is_port(p) || p.pcie.is_none());
    let warnings = analysis::analyse(device, &Context { link_partner: partner, upstream: upstream.clone() });
    let regs = device.pcie.as_ref().and_then(|p| p.device.as_ref());
    let (speed, width, status_source) = device.link_status();
    let (cap_speed, cap_width, cap_source) = device.link_capable();
    let bandwidth = conditions::bandwidth(device, &upstream);
    let origin = if machine.live { "sysfs" } else { "lspci dump" };
    let ceiling = bandwidth.as_ref().and_then(|bw| conditions::from_path(device, &upstream, bw, origin)).map(|c| ceiling(&c));
    let path_supported = regs.map(|r| {
        upstream
            .iter()
            .filter_map(|d| d.pcie.as_ref()?.device.as_ref().map(|r| r.max_payload_supported_bytes))
            .fold(r.max_payload_supported_bytes, u32::min)
    });
    let (vendor_id, device_id) = (device.config.vendor_id(), device.config.device_id());
    let class_code = device.config.class_code();
    let (details, raw) = details(device);
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
        path: upstream.iter().map(|d| conditions::hop(d)).collect(),
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
        pcie: device.pcie.clone(),
        msi: device.msi.clone(),
        msix: device.msix.clone(),
        power_management: device.pm.clone(),
        raw,
        details,
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

/// The default view: one line per device.
pub fn render_table(reports: &[DeviceReport]) -> String {
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
        let mut name = r.name.clone();
        if name.chars().count() > 48 {
            name = name.chars().take(47).collect::<String>() + "…";
        }
        table.row(vec![r.bdf.to_string(), name, link_text(&r.link_status), link_text(&r.link_capable), mps, ceiling, r.warnings.len().to_string()]);
    }
    table.render()
}

/// `-v` (and `-vv` with `raw`): every decoded field, the path, bandwidth, ceiling and warnings.
pub fn render_verbose(report: &DeviceReport, raw: bool) -> String {
    let mut out = format!("{} {}", report.bdf, report.name);
    if let Some(class) = &report.class_name {
        out += &format!(" [{class}]");
    }
    out.push('\n');
    let mut line = |text: String| {
        out += "\t";
        out += &text;
        out.push('\n');
    };
    if let (Some(v), Some(d)) = (report.vendor_id, report.device_id) {
        line(format!("IDs: {v:04x}:{d:04x}{}", report.class_code.map_or(String::new(), |c| format!(", class {c:06x}"))));
    }
    if let Some(driver) = &report.driver {
        line(format!("Driver: {driver}"));
    }
    if let Some(emulator) = &report.emulated_by {
        line(format!("Emulated by: {emulator} (link nominal, not physical)"));
    }
    if let Some(node) = report.numa_node {
        line(format!("NUMA node: {node}"));
    }
    for bar in &report.bars {
        let size = bar.size_bytes.map_or(String::new(), |s| format!(" [size={}]", crate::units::format_size(s)));
        let kind = if bar.kind == "io" { "I/O ports".to_string() } else { format!("Memory ({}-bit, {}prefetchable)", if bar.is_64bit { 64 } else { 32 }, if bar.prefetchable { "" } else { "non-" }) };
        line(format!("Region {}: {kind} at {:x}{size}", bar.index, bar.address));
    }
    if let Some((primary, secondary, subordinate)) = report.bridge_buses {
        line(format!("Bus: primary={primary:02x}, secondary={secondary:02x}, subordinate={subordinate:02x}"));
    }
    for cap in &report.capabilities {
        line(format!("Capabilities: [{:02x}] {}", cap.offset, cap.name));
    }
    for cap in &report.extended_capabilities {
        line(format!("Capabilities: [{:03x}] {}", cap.offset, cap.name));
    }
    for detail in &report.details {
        line(format!("  {detail}"));
    }
    line(format!("Link: now {} ({}), capable {} ({})", link_text(&report.link_status), report.link_status.source, link_text(&report.link_capable), report.link_capable.source));
    if let (Some(mps), Some(mrrs)) = (report.max_payload_bytes, report.max_read_request_bytes) {
        line(format!(
            "MaxPayload {mps} bytes (supported {}, smallest supported on path {}), MaxReadReq {mrrs} bytes",
            report.max_payload_supported_bytes.unwrap_or(0),
            report.path_max_payload_supported_bytes.unwrap_or(0)
        ));
    }
    if let Some(counters) = &report.aer.counters {
        line(format!("AER counters: correctable {}, uncorrectable {}", counters.total_correctable(), counters.total_uncorrectable()));
    }
    if !report.path.is_empty() {
        let hops: Vec<String> = report.path.iter().map(|h| format!("{} ({} {})", h.bdf, h.port_type.unwrap_or("bridge"), link_text(&LinkState { speed_gts: h.speed_gts, width: h.width, source: "" }))).collect();
        line(format!("Path to root: {}", hops.join(" → ")));
    }
    if let Some(bw) = &report.bandwidth {
        line(format!("Bandwidth: {}", bw.message));
    }
    if let Some(c) = &report.ceiling {
        line(format!(
            "Ceiling ({} transfers, MPS {}, MRRS {}, RCB {}, {} tags; MB/s = 10^6 B/s): {}",
            crate::units::format_size(c.transfer_bytes),
            c.max_payload_bytes,
            c.max_read_request_bytes,
            c.read_completion_boundary_bytes,
            c.tags,
            c.summary
        ));
    }
    for w in &report.warnings {
        line(format!("Warning [{}]: {}", w.code, w.message));
    }
    for u in &report.unavailable {
        line(format!("Unavailable: {u}"));
    }
    for n in &report.notes {
        line(format!("Note: {n}"));
    }
    if raw {
        for r in &report.raw {
            line(format!("  {r}"));
        }
    }
    out
}
