//! lspci's machine-readable views, printed as pciutils 3.9 prints them (`lspci.c`:
//! `show_machine`, `show_slot_name`, `show_slot_path`): `-m`/`-mm` one quoted line per device,
//! `-vm`/`-vmm` tagged blocks, and the slot names `-D` (always the domain) and `-P`/`-PP` (the
//! path through the bridges above) give every view.

use super::lspci::{fit, name_or, Identity, Naming, SHORT_NAME_BYTES};
use super::Bdf;

/// How lspci names a device's slot.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlotNaming {
    /// Domains shown for every device: some device of the source has a non-zero one (lspci's
    /// auto-detection) or `-D` asked.
    pub domains: bool,
    /// `-D` given.
    pub domains_requested: bool,
    /// `-P` given 0, 1 or 2 times.
    pub path: u8,
}

/// The slot name: `[dddd:]bb:dd.f`, or with `-P` the bridges above from the top down,
/// `00:1c.0/00.0`, and with `-PP` each hop with its bus, `00:1c.0/01:00.0`. `machine` views show
/// the domain of a device whose domain is non-zero (or with `-D`), not by the source's.
pub fn slot_name(bdf: &Bdf, upstream_nearest_first: &[Bdf], naming: SlotNaming, machine: bool) -> String {
    let domain = if machine { bdf.domain != 0 || naming.domains_requested } else { naming.domains };
    let mut out = if domain { format!("{:04x}:", bdf.domain) } else { String::new() };
    let chain: Vec<&Bdf> = if naming.path > 0 { upstream_nearest_first.iter().rev().chain([bdf]).collect() } else { vec![bdf] };
    for (at, hop) in chain.iter().enumerate() {
        if at == 0 || naming.path > 1 {
            out += &format!("{}{:02x}:{:02x}.{}", if at == 0 { "" } else { "/" }, hop.bus, hop.device, hop.function);
        } else {
            out += &format!("/{:02x}.{}", hop.device, hop.function);
        }
    }
    out
}

/// What a machine-readable view shows of one device besides its identity.
pub struct MachineFacts<'a> {
    pub slot: String,
    pub subsystem: Option<(u16, u16)>,
    pub driver: Option<&'a str>,
    /// Kernel modules that can drive it, shown with `-k` as `Module:` lines.
    pub modules: &'a [String],
    pub numa_node: Option<i32>,
}

/// `-m` (level 1) and `-mm` (level 2) without `-v`: one line, names quoted as a shell reads them.
pub fn line(id: &Identity, facts: &MachineFacts, naming: Naming) -> String {
    let names = Names::of(id, facts, naming);
    let mut out = facts.slot.clone();
    for name in [&names.class, &names.vendor, &names.device] {
        out += &quoted(name);
    }
    if names.revision != 0 {
        out += &format!(" -r{:02x}", names.revision);
    }
    out += &format!(" -p{:02x}", names.prog_if);
    match &names.subsystem {
        Some((vendor, device)) => out += &(quoted(vendor) + &quoted(device)),
        None => out += " \"\" \"\"",
    }
    out + "\n"
}

/// `-vm` (level 1: the slot tagged `Device:`) and `-vmm` (level 2: `Slot:`): one tagged line per
/// field, the block ended by a blank line. `-k` adds the driver in use.
pub fn block(id: &Identity, facts: &MachineFacts, naming: Naming, level: u8, kernel: bool) -> String {
    let names = Names::of(id, facts, naming);
    let mut out = format!("{}\t{}\n", if level >= 2 { "Slot:" } else { "Device:" }, facts.slot);
    out += &format!("Class:\t{}\nVendor:\t{}\nDevice:\t{}\n", names.class, names.vendor, names.device);
    if let Some((vendor, device)) = &names.subsystem {
        out += &format!("SVendor:\t{vendor}\nSDevice:\t{device}\n");
    }
    if names.revision != 0 {
        out += &format!("Rev:\t{:02x}\n", names.revision);
    }
    out += &format!("ProgIf:\t{:02x}\n", names.prog_if);
    if let Some(driver) = facts.driver.filter(|_| kernel) {
        out += &format!("Driver:\t{driver}\n");
    }
    for module in facts.modules.iter().filter(|_| kernel) {
        out += &format!("Module:\t{module}\n");
    }
    if let Some(node) = facts.numa_node.filter(|n| *n >= 0) {
        out += &format!("NUMANode:\t{node}\n");
    }
    out + "\n"
}

/// The names one device's machine-readable view prints, with pciutils' fallbacks.
struct Names {
    class: String,
    vendor: String,
    device: String,
    revision: u8,
    prog_if: u8,
    subsystem: Option<(String, String)>,
}

impl Names {
    fn of(id: &Identity, facts: &MachineFacts, naming: Naming) -> Names {
        let config = id.config;
        let class_code = config.class_code().unwrap_or(0xff_ffff);
        let class = (class_code >> 8) as u16;
        // A class named only by its base class gets its number too (pciutils' PCI_LOOKUP_MIXED).
        let class_naming = if id.class_name_exact { naming } else { Naming { numbers: true, ..naming } };
        let (vendor_id, device_id) = (config.vendor_id().unwrap_or(0xffff), config.device_id().unwrap_or(0xffff));
        let subsystem = facts.subsystem.map(|(vendor, device)| {
            (
                fit(name_or(id.subsystem_names.0, "Unknown vendor", format!("{vendor:04x}"), naming), SHORT_NAME_BYTES),
                fit(name_or(id.subsystem_names.1, "Device", format!("{device:04x}"), naming), SHORT_NAME_BYTES),
            )
        });
        Names {
            class: fit(name_or(id.class_name, "Class", format!("{class:04x}"), class_naming), SHORT_NAME_BYTES),
            vendor: fit(name_or(id.names.0, "Vendor", format!("{vendor_id:04x}"), naming), SHORT_NAME_BYTES),
            device: fit(name_or(id.names.1, "Device", format!("{device_id:04x}"), naming), SHORT_NAME_BYTES),
            revision: config.revision().unwrap_or(0xff),
            prog_if: class_code as u8,
            subsystem,
        }
    }
}

/// ` "text"` with `"` and `\` escaped, as pciutils' `print_shell_escaped`.
fn quoted(text: &str) -> String {
    let mut out = String::from(" \"");
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out + "\""
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bdf(text: &str) -> Bdf {
        text.parse().unwrap()
    }

    #[test]
    fn slot_names_follow_lspci_path_and_domain_rules() {
        let up = [bdf("0000:01:00.0"), bdf("0000:00:1c.0")];
        let device = bdf("0000:02:03.1");
        let plain = SlotNaming::default();
        assert_eq!(slot_name(&device, &up, plain, false), "02:03.1");
        assert_eq!(slot_name(&device, &up, SlotNaming { path: 1, ..plain }, false), "00:1c.0/00.0/03.1");
        assert_eq!(slot_name(&device, &up, SlotNaming { path: 2, ..plain }, false), "00:1c.0/01:00.0/02:03.1");
        assert_eq!(slot_name(&device, &up, SlotNaming { domains: true, domains_requested: true, path: 2 }, true), "0000:00:1c.0/01:00.0/02:03.1");
        // Machine views: the device's own non-zero domain, whatever the source's others have.
        assert_eq!(slot_name(&device, &[], SlotNaming { domains: true, ..plain }, true), "02:03.1");
        assert_eq!(slot_name(&bdf("0001:00:00.0"), &[], plain, true), "0001:00:00.0");
    }

    #[test]
    fn quotes_escape_as_a_shell_reads_them() {
        assert_eq!(quoted(r#"A "B" \C"#), r#" "A \"B\" \\C""#);
    }
}
