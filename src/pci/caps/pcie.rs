//! PCI Express Capability (PCIe Base Spec §7.5.3): device, link and their "2" registers.
//!
//! What is shown follows lspci's rules so both tools agree on the same bytes: link registers
//! only for port types that have a link, the "2" registers only from capability version 2, and
//! no LnkCap2/LnkCtl2 for endpoints other than device 0 function 0 (lspci's rule for functions
//! whose link registers are reserved).

use serde::Serialize;

use super::flag;
use super::regs::*;
use crate::pci::config::ConfigSpace;

/// Device/Port Type (PCI Express Capabilities register bits 7:4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PortType {
    Endpoint,
    LegacyEndpoint,
    RootComplexIntegratedEndpoint,
    RootComplexEventCollector,
    RootPort,
    UpstreamPort,
    DownstreamPort,
    PcieToPciBridge,
    PciToPcieBridge,
    Unknown,
}

impl PortType {
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => PortType::Endpoint,
            1 => PortType::LegacyEndpoint,
            9 => PortType::RootComplexIntegratedEndpoint,
            10 => PortType::RootComplexEventCollector,
            4 => PortType::RootPort,
            5 => PortType::UpstreamPort,
            6 => PortType::DownstreamPort,
            7 => PortType::PcieToPciBridge,
            8 => PortType::PciToPcieBridge,
            _ => PortType::Unknown,
        }
    }

    /// The names lspci prints.
    pub fn name(self) -> &'static str {
        match self {
            PortType::Endpoint => "Endpoint",
            PortType::LegacyEndpoint => "Legacy Endpoint",
            PortType::RootComplexIntegratedEndpoint => "Root Complex Integrated Endpoint",
            PortType::RootComplexEventCollector => "Root Complex Event Collector",
            PortType::RootPort => "Root Port",
            PortType::UpstreamPort => "Upstream Port",
            PortType::DownstreamPort => "Downstream Port",
            PortType::PcieToPciBridge => "PCI-Express to PCI/PCI-X Bridge",
            PortType::PciToPcieBridge => "PCI/PCI-X to PCI-Express Bridge",
            PortType::Unknown => "Unknown",
        }
    }

    /// Root complex integrated functions have no link.
    pub fn has_link(self) -> bool {
        !matches!(self, PortType::RootComplexIntegratedEndpoint | PortType::RootComplexEventCollector)
    }

    /// Ports facing away from the root: their LnkSta describes the link to their children, and a
    /// speed below LnkCap is the child's doing, not a downgrade (lspci prints no "(downgraded)").
    pub fn is_downstream_port(self) -> bool {
        matches!(self, PortType::RootPort | PortType::DownstreamPort | PortType::PciToPcieBridge)
    }

    pub fn is_endpoint(self) -> bool {
        matches!(self, PortType::Endpoint | PortType::LegacyEndpoint)
    }
}

/// Link speed field value → GT/s (Supported Link Speeds Vector position), as lspci maps them.
pub fn speed_gts(code: u8) -> Option<f64> {
    match code {
        1 => Some(2.5),
        2 => Some(5.0),
        3 => Some(8.0),
        4 => Some(16.0),
        5 => Some(32.0),
        6 => Some(64.0),
        _ => None,
    }
}

/// "8GT/s" as lspci writes speeds, "unknown" for reserved codes.
pub fn speed_label(gts: Option<f64>) -> String {
    gts.map_or_else(|| "unknown".to_string(), |g| format!("{g}GT/s"))
}

/// LnkCtl2 Target Link Speed as lspci writes it: its table says "Unknown" for reserved codes.
pub fn target_speed_label(gts: Option<f64>) -> String {
    gts.map_or_else(|| "Unknown".to_string(), |g| format!("{g}GT/s"))
}

fn l0s_latency(code: u32) -> &'static str {
    ["<64ns", "<128ns", "<256ns", "<512ns", "<1us", "<2us", "<4us", "unlimited"][code as usize & 7]
}

fn l1_latency(code: u32) -> &'static str {
    ["<1us", "<2us", "<4us", "<8us", "<16us", "<32us", "<64us", "unlimited"][code as usize & 7]
}

/// ASPM Support field of LnkCap.
pub fn aspm_support(code: u32) -> &'static str {
    ["not supported", "L0s", "L1", "L0s L1"][code as usize & 3]
}

/// ASPM Control field of LnkCtl.
pub fn aspm_control(code: u16) -> &'static str {
    ["Disabled", "L0s Enabled", "L1 Enabled", "L0s L1 Enabled"][code as usize & 3]
}

pub(super) fn completion_timeout_ranges(code: u32) -> &'static str {
    match code {
        0 => "Not Supported",
        1 => "Range A",
        2 => "Range B",
        3 => "Range AB",
        6 => "Range BC",
        7 => "Range ABC",
        14 => "Range BCD",
        15 => "Range ABCD",
        _ => "Unknown",
    }
}

pub(super) fn completion_timeout_value(code: u16) -> &'static str {
    match code {
        0 => "50us to 50ms",
        1 => "50us to 100us",
        2 => "1ms to 10ms",
        5 => "16ms to 55ms",
        6 => "65ms to 210ms",
        9 => "260ms to 900ms",
        10 => "1s to 3.5s",
        13 => "4s to 13s",
        14 => "17s to 64s",
        _ => "Unknown",
    }
}

/// Device Capabilities, Control and Status.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceRegs {
    pub devcap: u32,
    pub devctl: u16,
    pub devsta: u16,
    /// DevCap Max_Payload_Size Supported: 128 << field (lspci prints reserved codes the same way).
    pub max_payload_supported_bytes: u32,
    pub extended_tag_supported: bool,
    /// Endpoint L0s/L1 Acceptable Latency (endpoints only).
    pub acceptable_latency_l0s: Option<&'static str>,
    pub acceptable_latency_l1: Option<&'static str>,
    pub function_level_reset: bool,
    pub correctable_error_reporting: bool,
    pub non_fatal_error_reporting: bool,
    pub fatal_error_reporting: bool,
    pub unsupported_request_reporting: bool,
    pub relaxed_ordering: bool,
    pub extended_tag_enabled: bool,
    pub no_snoop: bool,
    pub max_payload_bytes: u32,
    pub max_read_request_bytes: u32,
    pub correctable_error_detected: bool,
    pub non_fatal_error_detected: bool,
    pub fatal_error_detected: bool,
    pub unsupported_request_detected: bool,
    pub transactions_pending: bool,
}

/// Link Capabilities, Control and Status.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkRegs {
    pub lnkcap: u32,
    pub lnkctl: u16,
    pub lnksta: u16,
    pub port_number: u8,
    pub max_speed_code: u8,
    pub max_speed_gts: Option<f64>,
    pub max_width: u8,
    pub aspm_support: &'static str,
    pub l0s_exit_latency: Option<&'static str>,
    pub l1_exit_latency: Option<&'static str>,
    pub dll_active_reporting: bool,
    pub aspm_control: &'static str,
    pub aspm_l0s_enabled: bool,
    pub aspm_l1_enabled: bool,
    /// Read Completion Boundary (lspci shows it for root ports, endpoints and PCIe-to-PCI bridges).
    pub rcb_bytes: Option<u32>,
    pub link_disabled: bool,
    pub common_clock: bool,
    pub speed_code: u8,
    pub speed_gts: Option<f64>,
    pub width: u8,
    pub training: bool,
    pub dl_active: bool,
}

/// Device Capabilities 2 and Device Control 2.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Device2Regs {
    pub devcap2: u32,
    pub devctl2: u16,
    pub completion_timeout_ranges: &'static str,
    pub completion_timeout_disable_supported: bool,
    pub ten_bit_tag_completer: bool,
    pub ten_bit_tag_requester: bool,
    pub completion_timeout: &'static str,
    pub completion_timeout_disabled: bool,
    pub ten_bit_tag_requester_enabled: bool,
}

/// Link Capabilities 2, Control 2, Status 2.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link2Regs {
    /// `None` where lspci hides it (non-zero endpoint functions); 0 means a PCIe 2.x device.
    pub lnkcap2: Option<u32>,
    pub lnkctl2: Option<u16>,
    pub lnksta2: u16,
    /// Highest speed in the Supported Link Speeds Vector.
    pub max_supported_speed_gts: Option<f64>,
    /// LnkCtl2 Target Link Speed; a field of 0 reads as 2.5 GT/s (hard-wired, as lspci says).
    pub target_speed_gts: Option<f64>,
}

/// The decoded capability.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PcieCap {
    pub offset: usize,
    pub version: u8,
    pub port_type: PortType,
    pub slot_implemented: bool,
    /// Device/Port Type code (bits 7:4), also when `port_type` is Unknown.
    pub device_port_type: u8,
    /// Interrupt Message Number (bits 13:9): the MSI/MSI-X vector of this capability's events.
    pub interrupt_message_number: u8,
    pub device: Option<DeviceRegs>,
    pub link: Option<LinkRegs>,
    pub device2: Option<Device2Regs>,
    pub link2: Option<Link2Regs>,
    /// LnkCap2 of a version 2 capability as read, also where lspci hides it (the kernel's
    /// `pcie_get_speed_cap()` reads it on every function).
    #[serde(skip)]
    pub lnkcap2: Option<u32>,
    /// The header's and the capability's own bytes (at most 0x40 each, as read) and lspci's
    /// function-zero rule, from which its `-vv` lines are made when shown
    /// ([`super::pcie_text`] also reads the header type and BARs): kept as bytes, not text,
    /// because a machine holds every function's capability while it is inspected.
    #[serde(skip)]
    text_source: (Vec<u8>, Vec<u8>, bool),
}

/// Decode the capability at `offset`. `function_zero` is device 0 function 0 (lspci's rule).
pub fn decode(config: &ConfigSpace, offset: usize, function_zero: bool) -> Option<PcieCap> {
    let flags = config.u16_at(offset + PCI_EXP_FLAGS)?;
    let version = field(flags, PCI_EXP_FLAGS_VERS) as u8;
    let device_port_type = field(flags, PCI_EXP_FLAGS_TYPE) as u8;
    let port_type = PortType::from_code(device_port_type);
    let mut cap = PcieCap {
        offset,
        version,
        port_type,
        slot_implemented: is_set(flags, PCI_EXP_FLAGS_SLOT),
        device_port_type,
        interrupt_message_number: field(flags, PCI_EXP_FLAGS_IRQ) as u8,
        device: None,
        link: None,
        device2: None,
        link2: None,
        lnkcap2: if version >= 2 { config.u32_at(offset + PCI_EXP_LNKCAP2) } else { None },
        text_source: (config.bytes_from(0, 0x40.min(offset)), config.bytes_from(offset, 0x40), function_zero),
    };
    cap.device = device_regs(config, offset, port_type);
    if port_type.has_link() {
        cap.link = link_regs(config, offset, port_type);
    }
    if version >= 2 {
        cap.device2 = device2_regs(config, offset);
        if port_type.has_link() {
            cap.link2 = link2_regs(config, offset, port_type, function_zero);
        }
    }
    Some(cap)
}

fn device_regs(config: &ConfigSpace, offset: usize, port_type: PortType) -> Option<DeviceRegs> {
    let devcap = config.u32_at(offset + PCI_EXP_DEVCAP)?;
    let devctl = config.u16_at(offset + PCI_EXP_DEVCTL)?;
    let devsta = config.u16_at(offset + PCI_EXP_DEVSTA)?;
    let endpoint = port_type.is_endpoint();
    Some(DeviceRegs {
        devcap,
        devctl,
        devsta,
        max_payload_supported_bytes: 128 << field(devcap, PCI_EXP_DEVCAP_PAYLOAD),
        extended_tag_supported: is_set(devcap, PCI_EXP_DEVCAP_EXT_TAG),
        acceptable_latency_l0s: endpoint.then(|| l0s_latency(field(devcap, PCI_EXP_DEVCAP_L0S))),
        acceptable_latency_l1: endpoint.then(|| l1_latency(field(devcap, PCI_EXP_DEVCAP_L1))),
        function_level_reset: is_set(devcap, PCI_EXP_DEVCAP_FLRESET),
        correctable_error_reporting: is_set(devctl, PCI_EXP_DEVCTL_CERE),
        non_fatal_error_reporting: is_set(devctl, PCI_EXP_DEVCTL_NFERE),
        fatal_error_reporting: is_set(devctl, PCI_EXP_DEVCTL_FERE),
        unsupported_request_reporting: is_set(devctl, PCI_EXP_DEVCTL_URRE),
        relaxed_ordering: is_set(devctl, PCI_EXP_DEVCTL_RELAXED),
        extended_tag_enabled: is_set(devctl, PCI_EXP_DEVCTL_EXT_TAG),
        no_snoop: is_set(devctl, PCI_EXP_DEVCTL_NOSNOOP),
        max_payload_bytes: 128 << field(devctl, PCI_EXP_DEVCTL_PAYLOAD),
        max_read_request_bytes: 128 << field(devctl, PCI_EXP_DEVCTL_READRQ),
        correctable_error_detected: is_set(devsta, PCI_EXP_DEVSTA_CED),
        non_fatal_error_detected: is_set(devsta, PCI_EXP_DEVSTA_NFED),
        fatal_error_detected: is_set(devsta, PCI_EXP_DEVSTA_FED),
        unsupported_request_detected: is_set(devsta, PCI_EXP_DEVSTA_URD),
        transactions_pending: is_set(devsta, PCI_EXP_DEVSTA_TRPND),
    })
}

fn link_regs(config: &ConfigSpace, offset: usize, port_type: PortType) -> Option<LinkRegs> {
    let lnkcap = config.u32_at(offset + PCI_EXP_LNKCAP)?;
    let lnkctl = config.u16_at(offset + PCI_EXP_LNKCTL)?;
    let lnksta = config.u16_at(offset + PCI_EXP_LNKSTA)?;
    let aspm = field(lnkcap, PCI_EXP_LNKCAP_ASPM);
    let shows_rcb = matches!(port_type, PortType::RootPort | PortType::Endpoint | PortType::LegacyEndpoint | PortType::PcieToPciBridge);
    let max_speed_code = field(lnkcap, PCI_EXP_LNKCAP_SPEED) as u8;
    let speed_code = field(lnksta, PCI_EXP_LNKSTA_SPEED) as u8;
    Some(LinkRegs {
        lnkcap,
        lnkctl,
        lnksta,
        port_number: field(lnkcap, PCI_EXP_LNKCAP_PORT) as u8,
        max_speed_code,
        max_speed_gts: speed_gts(max_speed_code),
        max_width: field(lnkcap, PCI_EXP_LNKCAP_WIDTH) as u8,
        aspm_support: aspm_support(aspm),
        // Exit latencies are shown only for the ASPM states supported (bit 0 L0s, bit 1 L1).
        l0s_exit_latency: (aspm & 1 != 0).then(|| l0s_latency(field(lnkcap, PCI_EXP_LNKCAP_L0S))),
        l1_exit_latency: (aspm & 2 != 0).then(|| l1_latency(field(lnkcap, PCI_EXP_LNKCAP_L1))),
        dll_active_reporting: is_set(lnkcap, PCI_EXP_LNKCAP_DLLA),
        aspm_control: aspm_control(lnkctl & PCI_EXP_LNKCTL_ASPM),
        aspm_l0s_enabled: is_set(lnkctl, PCI_EXP_LNKCTL_ASPM_L0S),
        aspm_l1_enabled: is_set(lnkctl, PCI_EXP_LNKCTL_ASPM_L1),
        rcb_bytes: shows_rcb.then_some(if is_set(lnkctl, PCI_EXP_LNKCTL_RCB) { 128 } else { 64 }),
        link_disabled: is_set(lnkctl, PCI_EXP_LNKCTL_DISABLE),
        common_clock: is_set(lnkctl, PCI_EXP_LNKCTL_CLOCK),
        speed_code,
        speed_gts: speed_gts(speed_code),
        width: field(lnksta, PCI_EXP_LNKSTA_WIDTH) as u8,
        training: is_set(lnksta, PCI_EXP_LNKSTA_TRAIN),
        dl_active: is_set(lnksta, PCI_EXP_LNKSTA_DL_ACT),
    })
}

fn device2_regs(config: &ConfigSpace, offset: usize) -> Option<Device2Regs> {
    let devcap2 = config.u32_at(offset + PCI_EXP_DEVCAP2)?;
    let devctl2 = config.u16_at(offset + PCI_EXP_DEVCTL2)?;
    Some(Device2Regs {
        devcap2,
        devctl2,
        completion_timeout_ranges: completion_timeout_ranges(field(devcap2, PCI_EXP_DEVCAP2_TIMEOUT_RANGE)),
        completion_timeout_disable_supported: is_set(devcap2, PCI_EXP_DEVCAP2_TIMEOUT_DIS),
        ten_bit_tag_completer: is_set(devcap2, PCI_EXP_DEVCAP2_10BIT_TAG_COMP),
        ten_bit_tag_requester: is_set(devcap2, PCI_EXP_DEVCAP2_10BIT_TAG_REQ),
        completion_timeout: completion_timeout_value(field(devctl2, PCI_EXP_DEVCTL2_TIMEOUT_VALUE) as u16),
        completion_timeout_disabled: is_set(devctl2, PCI_EXP_DEVCTL2_TIMEOUT_DIS),
        ten_bit_tag_requester_enabled: is_set(devctl2, PCI_EXP_DEVCTL2_10BIT_TAG_REQ),
    })
}

/// Highest speed in a Supported Link Speeds Vector (LnkCap2 bits 7:1).
pub fn max_supported_speed(lnkcap2: u32) -> Option<f64> {
    let vector = field(lnkcap2, PCI_EXP_LNKCAP2_SPEED);
    (0..7).rev().find(|bit| vector >> bit & 1 == 1).and_then(|bit| speed_gts(bit as u8 + 1))
}

/// The Supported Link Speeds text lspci 3.9 prints.
pub fn supported_speeds_label(lnkcap2: u32) -> &'static str {
    match field(lnkcap2, PCI_EXP_LNKCAP2_SPEED) {
        v if v & 0x60 != 0 => "RsvdP",
        v if v & 0x10 != 0 => "2.5-32GT/s",
        v if v & 0x08 != 0 => "2.5-16GT/s",
        v if v & 0x04 != 0 => "2.5-8GT/s",
        v if v & 0x02 != 0 => "2.5-5GT/s",
        v if v & 0x01 != 0 => "2.5GT/s",
        _ => "Unknown",
    }
}

fn link2_regs(config: &ConfigSpace, offset: usize, port_type: PortType, function_zero: bool) -> Option<Link2Regs> {
    let lnksta2 = config.u16_at(offset + PCI_EXP_LNKSTA2)?;
    let shown = !port_type.is_endpoint() || function_zero;
    let lnkcap2 = if shown { Some(config.u32_at(offset + PCI_EXP_LNKCAP2)?) } else { None };
    let lnkctl2 = if shown { Some(config.u16_at(offset + PCI_EXP_LNKCTL2)?) } else { None };
    Some(Link2Regs {
        lnkcap2,
        lnkctl2,
        lnksta2,
        max_supported_speed_gts: lnkcap2.and_then(max_supported_speed),
        target_speed_gts: lnkctl2.and_then(|w| speed_gts((field(w, PCI_EXP_LNKCTL2_SPEED) as u8).max(1))),
    })
}

impl PcieCap {
    /// Human-readable lines for `-v`, in lspci's vocabulary.
    /// lspci's heading: `Express (v2) Root Port (Slot+), MSI 00`; the version from `-vv` on.
    pub fn heading(&self, verbose: u8) -> String {
        let version = if verbose >= 2 { format!("(v{}) ", self.version) } else { String::new() };
        let slot = format!(" (Slot{})", flag(self.slot_implemented));
        let kind = match self.port_type {
            PortType::Unknown => format!("Unknown type {}", self.device_port_type),
            PortType::RootPort | PortType::DownstreamPort | PortType::PciToPcieBridge => self.port_type.name().to_string() + &slot,
            other => other.name().to_string(),
        };
        format!("Express {version}{kind}, MSI {:02x}", self.interrupt_message_number)
    }

    /// The heading and, as lspci's `-vv` prints them, every register's lines.
    pub fn describe(&self) -> Vec<String> {
        let (header, bytes, function_zero) = &self.text_source;
        let mut space = header.clone();
        space.resize(self.offset, 0);
        space.extend_from_slice(bytes);
        let details = super::pcie_text::lines(&ConfigSpace::new(space), self.offset, *function_zero);
        std::iter::once(self.heading(2)).chain(details).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen3_x8_endpoint() -> ConfigSpace {
        let mut bytes = vec![0u8; 256];
        let at = 0x40;
        bytes[at..at + 4].copy_from_slice(&[0x10, 0x00, 0x02, 0x00]);
        bytes[at + 4..at + 8].copy_from_slice(&0x0000_8002u32.to_le_bytes()); // MPS 512 supported
        bytes[at + 8..at + 10].copy_from_slice(&(1u16 << 5 | 2 << 12 | 1 << 4).to_le_bytes()); // 256 / 512, RO
        bytes[at + 0xc..at + 0x10].copy_from_slice(&(3u32 | 8 << 4 | 3 << 10).to_le_bytes());
        bytes[at + 0x10..at + 0x12].copy_from_slice(&2u16.to_le_bytes()); // L1 enabled
        bytes[at + 0x12..at + 0x14].copy_from_slice(&(1u16 | 4 << 4).to_le_bytes()); // 2.5GT/s x4
        bytes[at + 0x2c..at + 0x30].copy_from_slice(&0x0eu32.to_le_bytes());
        ConfigSpace::new(bytes)
    }

    #[test]
    fn decodes_device_and_link_fields() {
        let cap = decode(&gen3_x8_endpoint(), 0x40, true).unwrap();
        assert_eq!(cap.port_type, PortType::Endpoint);
        let d = cap.device.unwrap();
        assert_eq!((d.max_payload_supported_bytes, d.max_payload_bytes, d.max_read_request_bytes), (512, 256, 512));
        assert!(d.relaxed_ordering);
        let l = cap.link.unwrap();
        assert_eq!((l.max_speed_gts, l.max_width, l.speed_gts, l.width), (Some(8.0), 8, Some(2.5), 4));
        assert_eq!((l.aspm_support, l.aspm_control), ("L0s L1", "L1 Enabled"));
        let l2 = cap.link2.unwrap();
        assert_eq!(l2.max_supported_speed_gts, Some(8.0));
        assert_eq!(l2.target_speed_gts, Some(2.5), "a zero target field reads as 2.5 GT/s");
    }

    #[test]
    fn non_zero_endpoint_functions_hide_link2() {
        let cap = decode(&gen3_x8_endpoint(), 0x40, false).unwrap();
        assert_eq!(cap.link2.unwrap().lnkctl2, None);
    }
}
