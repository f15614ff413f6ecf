//! lspci's own lines, printed as lspci prints them so that users switching between `lspci` and
//! `pcieperf inspect` read the same text: the device line (`-n`/`-nn` naming, `(rev NN)`,
//! `(prog-if NN)`), `Subsystem:`, capability headings it does not decode, and the
//! `-x/-xxx/-xxxx` hex dump (byte for byte lspci's, so it reads back through `--dump`).
//! Formats follow pciutils 3.9 (`lspci.c`: `show_terse`, `show_verbose`,
//! `show_hex_dump`).

use super::caps::regs::{field, PCI_DBG_PORT_BAR, PCI_DBG_PORT_OFFSET, PCI_SID_CHASSIS_NR, PCI_SID_ESR_FIC, PCI_SID_ESR_NSLOTS};
use super::config::{ConfigSpace, HeaderType};
use super::Bdf;

/// `-n` given 0, 1 or 2 times: names, numbers, or both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Naming {
    pub names: bool,
    pub numbers: bool,
}

impl Naming {
    pub fn from_count(n: u8) -> Naming {
        Naming { names: n != 1, numbers: n >= 1 }
    }

    /// A name with its numeric form: `Name`, `1234`, or `Name [1234]`.
    pub fn show(&self, name: &str, number: String) -> String {
        match (self.names, self.numbers) {
            (true, true) => format!("{name} [{number}]"),
            (false, _) => number,
            (true, false) => name.to_string(),
        }
    }
}

/// A vendor and a device (or subsystem) name as pciutils' `format_name_pair` prints them, with
/// its fallbacks: `Vendor Device`, `Vendor Device 1234`, `Device 8086:1234`; `-nn`:
/// `Vendor Device [8086:1234]`, `Vendor Device [8086:1234]`, `Device [8086:1234]`; `-n`: numbers.
pub fn name_pair(vendor: Option<&str>, device: Option<&str>, ids: (u16, u16), naming: Naming) -> String {
    let number = format!("{:04x}:{:04x}", ids.0, ids.1);
    match (vendor, device) {
        _ if !naming.names => number,
        (Some(v), Some(d)) => naming.show(&format!("{v} {d}"), number),
        (Some(v), None) if naming.numbers => format!("{v} Device [{number}]"),
        (Some(v), None) => format!("{v} Device {:04x}", ids.1),
        (None, _) if naming.numbers => format!("Device [{number}]"),
        (None, _) => format!("Device {number}"),
    }
}

/// lspci's name buffers: 128 bytes on the device line, 256 for `Subsystem:` and the tree.
pub const SHORT_NAME_BYTES: usize = 128;
pub const LONG_NAME_BYTES: usize = 256;

/// A name cut as pciutils cuts one that overflows its buffer: to `size - 1` bytes, the last
/// three replaced by dots.
pub fn fit(name: String, size: usize) -> String {
    if name.len() < size {
        return name;
    }
    let mut bytes = name.into_bytes();
    bytes.truncate(size - 4);
    bytes.extend_from_slice(b"...");
    String::from_utf8_lossy(&bytes).into_owned()
}

/// One name as pciutils' `format_name` prints it: `Name`, or `Class 0200` when unknown; `-nn`:
/// `Name [0200]`, `Class [0200]`; `-n`: `0200`.
pub fn name_or(name: Option<&str>, unknown: &str, number: String, naming: Naming) -> String {
    match name {
        _ if !naming.names => number,
        None if naming.numbers => format!("{unknown} [{number}]"),
        None => format!("{unknown} {number}"),
        Some(name) => naming.show(name, number),
    }
}

/// What the device line needs about one device.
pub struct Identity<'a> {
    pub bdf: Bdf,
    pub config: &'a ConfigSpace,
    /// pci.ids' names of the vendor and of the device.
    pub names: (Option<&'a str>, Option<&'a str>),
    pub class_name: Option<&'a str>,
    /// The class name is the sub-class's (not only the base class's).
    pub class_name_exact: bool,
    /// The programming interface's name (lspci prints it whatever `-n` says).
    pub prog_if_name: Option<&'a str>,
    /// pci.ids' names of the subsystem vendor and of the subsystem (lspci's lookup rules).
    pub subsystem_names: (Option<&'a str>, Option<&'a str>),
}

/// The device line: `00:1f.3 Audio device: Intel … (rev 21)`, after the slot name
/// ([`super::lspci_machine::slot_name`]); `verbose` adds `(prog-if NN)`.
pub fn device_line(id: &Identity, naming: Naming, slot: &str, verbose: bool) -> String {
    let config = id.config;
    // A byte lspci cannot read is ff, as a failed config read returns.
    let class_code = config.class_code().unwrap_or(0xff_ffff);
    let class = (class_code >> 8) as u16;
    // A class named only by its base class gets its number too (pciutils' PCI_LOOKUP_MIXED).
    let class_naming = if id.class_name_exact { naming } else { Naming { numbers: true, ..naming } };
    let class_text = fit(name_or(id.class_name, "Class", format!("{class:04x}"), class_naming), SHORT_NAME_BYTES);
    let (vendor, device) = (config.vendor_id().unwrap_or(0xffff), config.device_id().unwrap_or(0xffff));
    let mut line = format!("{slot} {class_text}: {}", fit(name_pair(id.names.0, id.names.1, (vendor, device), naming), SHORT_NAME_BYTES));
    if let Some(revision) = Some(config.revision().unwrap_or(0xff)).filter(|r| *r != 0) {
        line += &format!(" (rev {revision:02x})");
    }
    let prog_if = class_code as u8;
    if verbose && (prog_if != 0 || id.prog_if_name.is_some()) {
        line += &format!(" (prog-if {prog_if:02x}{})", id.prog_if_name.map_or(String::new(), |name| format!(" [{}]", fit(name.to_string(), SHORT_NAME_BYTES))));
    }
    line
}

/// Subsystem IDs: the header's for a type 0 function, the (decoded) Subsystem ID capability's
/// for a bridge.
pub fn subsystem_ids(config: &ConfigSpace, ssvid_capability: Option<(u16, u16)>) -> Option<(u16, u16)> {
    let ids = match config.header_type()? {
        HeaderType::Bridge => ssvid_capability?,
        _ => config.subsystem()?,
    };
    (ids.0 != 0 && ids.0 != 0xffff).then_some(ids)
}

/// `Subsystem: …` (shown from `-v` on), when the device has subsystem IDs.
pub fn subsystem_line(id: &Identity, ids: (u16, u16), naming: Naming) -> String {
    named_subsystem(ids, id.subsystem_names, naming)
}

/// `Subsystem: Vendor Name` as the `Subsystem:` line and the Subsystem ID capability print it.
pub fn named_subsystem(ids: (u16, u16), (vendor, name): (Option<&str>, Option<&str>), naming: Naming) -> String {
    format!("Subsystem: {}", fit(name_pair(vendor, name, ids, naming), LONG_NAME_BYTES))
}

fn flag(value: u16, bit: u16) -> char {
    if value & bit != 0 { '+' } else { '-' }
}

/// `-x` (64 bytes; 128 for a CardBus bridge), `-xxx` (256), `-xxxx` (4096), as far as the bytes
/// go, exactly as lspci prints them; a device without 64 readable bytes gets lspci's warning.
pub fn hex_dump(config: &ConfigSpace, level: u8) -> String {
    if !config.has(0, 64) {
        return "WARNING: Cannot show hex-dump of the config space\n".to_string();
    }
    let mut count = if config.header_type() == Some(HeaderType::CardBus) && config.has(0, 128) { 128 } else { 64 };
    if level >= 3 && config.has(0, 256) {
        count = 256;
        if level >= 4 && config.has(0, 4096) {
            count = 4096;
        }
    }
    super::dump::hex_rows(&config.bytes()[..count])
}

/// lspci's heading of a capability it names without decoding a body (pciutils 3.9
/// `show_caps`): fixed names, Slot ID and Debug Port from the capability's upper word, and
/// `Capability ID 0x15 [0000]` for IDs it does not know.
pub fn plain_capability_heading(config: &ConfigSpace, at: usize, id: u8) -> Option<String> {
    let cap = config.u16_at(at + 2)?;
    Some(match id {
        0x00 => "Null".to_string(),
        0x04 => format!("Slot ID: {} slots, First{}, chassis {:02x}", field(cap, PCI_SID_ESR_NSLOTS), flag(cap, PCI_SID_ESR_FIC), field(cap, PCI_SID_CHASSIS_NR)),
        0x06 => "CompactPCI hot-swap <?>".to_string(),
        // Nothing, not even a line end, for a PCI-X capability in a CardBus header.
        0x07 => ["PCI-X non-bridge device", "PCI-X bridge device"].get(usize::from(config.u8_at(0x0e)? & 0x7f)).unwrap_or(&"").to_string(),
        0x0a => format!("Debug port: BAR={} offset={:04x}", field(cap, PCI_DBG_PORT_BAR), field(cap, PCI_DBG_PORT_OFFSET)),
        0x0b => "CompactPCI central resource control <?>".to_string(),
        0x0c => "Hot-plug capable".to_string(),
        0x0e => "AGP3 <?>".to_string(),
        0x0f => "Secure device <?>".to_string(),
        0x13 => "PCI Advanced Features".to_string(),
        0x15.. => format!("Capability ID {id:#04x} [{cap:04x}]"),
        _ => return None,
    })
}

/// lspci's heading of an extended capability it names without decoding (pciutils 3.9
/// `show_ext_caps`): `Power Budgeting <?>` and the like, `Extended Capability ID 0x2a` for IDs
/// it does not know; `None` for those it decodes.
pub fn plain_extended_heading(id: u16) -> Option<String> {
    let fixed = match id {
        0x00 => "Null",
        0x04 => "Power Budgeting <?>",
        0x06 => "Root Complex Internal Link <?>",
        0x08 => "Multi-Function Virtual Channel <?>",
        0x0a => "Root Complex Register Block <?>",
        0x11 => "Multi-Root I/O Virtualization <?>",
        0x16 => "Dynamic Power Allocation <?>",
        0x1a => "Protocol Multiplexing <?>",
        0x1c => "LN Requester <?>",
        0x20 => "PCI Express over M_PHY <?>",
        0x21 => "FRS Queueing <?>",
        0x22 => "Readiness Time Reporting <?>",
        0x25 => "Data Link Feature <?>",
        0x26 => "Physical Layer 16.0 GT/s <?>",
        0x27 => "Lane Margining at the Receiver <?>",
        0x28 => "Hierarchy ID <?>",
        0x29 => "Native PCIe Enclosure Management <?>",
        0x01..=0x0b | 0x0d..=0x13 | 0x15..=0x24 | 0x2e => return None,
        _ => return Some(format!("Extended Capability ID {id:#x}")),
    };
    Some(fixed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_pairs_as_pciutils() {
        let [plain, numeric, mixed] = [0, 1, 2].map(Naming::from_count);
        assert_eq!(name_pair(Some("V"), Some("D"), (1, 2), plain), "V D");
        assert_eq!(name_pair(Some("V"), None, (1, 2), plain), "V Device 0002");
        assert_eq!(name_pair(None, Some("D"), (1, 2), plain), "Device 0001:0002");
        assert_eq!(name_pair(Some("V"), Some("D"), (1, 2), mixed), "V D [0001:0002]");
        assert_eq!(name_pair(Some("V"), None, (1, 2), mixed), "V Device [0001:0002]");
        assert_eq!(name_pair(None, None, (1, 2), mixed), "Device [0001:0002]");
        assert_eq!(name_pair(Some("V"), Some("D"), (1, 2), numeric), "0001:0002");
    }

    #[test]
    fn hex_dump_lengths() {
        let config = ConfigSpace::new(vec![0; 256]);
        assert_eq!(hex_dump(&config, 1).lines().count(), 4);
        assert_eq!(hex_dump(&config, 3).lines().count(), 16);
        assert_eq!(hex_dump(&config, 4).lines().count(), 16);
        assert!(hex_dump(&ConfigSpace::new(vec![0; 48]), 1).starts_with("WARNING"));
    }
}
