//! Vendor, device and class names from pci.ids (the file lspci reads). A missing file is not an
//! error: devices are then shown by numeric ID, as `lspci -n` does.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::lspci::Naming;

/// Where Debian's `pciutils` and `hwdata` packages put the file.
pub const DEFAULT_PATHS: [&str; 2] = ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"];

#[derive(Debug, Default, Clone)]
pub struct PciIds {
    vendors: HashMap<u16, (String, HashMap<u16, String>)>,
    classes: HashMap<u8, (String, HashMap<u8, String>)>,
    /// (base class, sub-class, programming interface) → its name.
    prog_ifs: HashMap<(u8, u8, u8), String>,
    /// (vendor, device, subsystem vendor, subsystem) → the subsystem's name.
    subsystems: HashMap<(u16, u16, u16, u16), String>,
    /// The file read, if any.
    pub source: Option<PathBuf>,
}

/// A name as shown: pci.ids is outside text, its control characters are escaped.
fn shown(name: &str) -> String {
    crate::printable::one_line(name)
}

fn hex_name(text: &str, digits: usize) -> Option<(u32, &str)> {
    let id = text.get(..digits)?;
    let name = text.get(digits..)?.strip_prefix("  ")?;
    Some((u32::from_str_radix(id, 16).ok()?, name.trim_end()))
}

/// `SSVID SSDID  name` (the part after two tabs), split by whitespace as pciutils splits it.
fn subsystem_entry(text: &str) -> Option<(u16, u16, &str)> {
    let (sub_vendor, rest) = text.split_at_checked(4)?;
    let rest = rest.strip_prefix([' ', '\t'])?;
    let (sub_device, name) = rest.split_at_checked(4)?;
    let name = name.strip_prefix([' ', '\t'])?.trim();
    Some((u16::from_str_radix(sub_vendor, 16).ok()?, u16::from_str_radix(sub_device, 16).ok()?, name))
}

impl PciIds {
    /// Load `path`, or the first default path that exists; an empty database when none does.
    pub fn load(path: Option<&Path>) -> Self {
        Self::load_filtered(path, None)
    }

    /// As [`PciIds::load`], keeping only the vendors in `vendors`: the file has some 40 000
    /// entries and a machine needs a few dozen, so skipping the rest is most of the speed.
    pub fn load_for(path: Option<&Path>, vendors: &BTreeSet<u16>) -> Self {
        Self::load_filtered(path, Some(vendors))
    }

    fn load_filtered(path: Option<&Path>, vendors: Option<&BTreeSet<u16>>) -> Self {
        let candidates: Vec<PathBuf> = match path {
            Some(p) => vec![p.to_path_buf()],
            None => DEFAULT_PATHS.iter().map(PathBuf::from).collect(),
        };
        for candidate in candidates {
            if let Ok(bytes) = crate::bounded::read(&candidate, crate::bounded::PCI_IDS) {
                let mut ids = PciIds::parse_filtered(&String::from_utf8_lossy(&bytes), vendors);
                ids.source = Some(candidate);
                return ids;
            }
        }
        PciIds::default()
    }

    /// Parse pci.ids text: vendors, their devices (one tab), their subsystems (two tabs),
    /// then `C xx` classes and their subclasses. Malformed lines are skipped, as lspci does.
    pub fn parse(text: &str) -> Self {
        Self::parse_filtered(text, None)
    }

    fn parse_filtered(text: &str, vendors: Option<&BTreeSet<u16>>) -> Self {
        let mut ids = PciIds::default();
        let mut vendor: Option<u16> = None;
        let mut device: Option<u16> = None;
        let mut class: Option<u8> = None;
        let mut subclass: Option<u8> = None;
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if !line.starts_with('\t') {
                (device, subclass) = (None, None);
            }
            if let Some(rest) = line.strip_prefix("C ") {
                vendor = None;
                class = hex_name(rest, 2).map(|(id, name)| {
                    ids.classes.insert(id as u8, (shown(name), HashMap::new()));
                    id as u8
                });
            } else if let Some(rest) = line.strip_prefix('\t') {
                if let Some(subsystem) = rest.strip_prefix('\t') {
                    if let (Some(v), Some(d), Some((sv, sd, name))) = (vendor, device, subsystem_entry(subsystem)) {
                        ids.subsystems.insert((v, d, sv, sd), shown(name));
                    }
                    if let (Some(c), Some(s), Some((id, name))) = (class, subclass, hex_name(subsystem, 2)) {
                        ids.prog_ifs.insert((c, s, id as u8), shown(name));
                    }
                } else if let Some(v) = vendor {
                    device = hex_name(rest, 4).map(|(id, name)| {
                        ids.vendors.get_mut(&v).map(|(_, devices)| devices.insert(id as u16, shown(name)));
                        id as u16
                    });
                } else if let Some(c) = class {
                    subclass = hex_name(rest, 2).map(|(id, name)| {
                        ids.classes.get_mut(&c).map(|(_, subs)| subs.insert(id as u8, shown(name)));
                        id as u8
                    });
                }
            } else {
                class = None;
                vendor = hex_name(line, 4).filter(|(id, _)| vendors.is_none_or(|v| v.contains(&(*id as u16)))).map(|(id, name)| {
                    ids.vendors.insert(id as u16, (shown(name), HashMap::new()));
                    id as u16
                });
            }
        }
        ids
    }

    /// A subsystem's name as lspci looks it up (`id_lookup_subsys`): the entry under the
    /// device, else the device's own name when the subsystem IDs repeat the device's IDs.
    pub fn subsystem(&self, (vendor, device): (u16, u16), (sub_vendor, sub_device): (u16, u16)) -> Option<&str> {
        let entry = self.subsystems.get(&(vendor, device, sub_vendor, sub_device)).map(String::as_str);
        entry.or_else(|| self.device(vendor, device).filter(|_| (vendor, device) == (sub_vendor, sub_device)))
    }

    pub fn vendor(&self, vendor: u16) -> Option<&str> {
        self.vendors.get(&vendor).map(|(name, _)| name.as_str())
    }

    pub fn device(&self, vendor: u16, device: u16) -> Option<&str> {
        self.vendors.get(&vendor)?.1.get(&device).map(String::as_str)
    }

    /// Sub-class name, else base class name.
    pub fn class(&self, class_code: u32) -> Option<&str> {
        self.subclass(class_code).or_else(|| Some(self.classes.get(&((class_code >> 16) as u8))?.0.as_str()))
    }

    /// The programming interface's name as lspci finds it: from pci.ids, else, for an IDE
    /// controller, its mode bits spelled out (possibly empty: lspci then prints `[]`).
    pub fn prog_if(&self, class_code: u32) -> Option<String> {
        let [prog_if, sub, base, _] = class_code.to_le_bytes();
        if let Some(name) = self.prog_ifs.get(&(base, sub, prog_if)) {
            return Some(name.clone());
        }
        let ide_modes = [(0x80, "Master"), (0x08, "SecP"), (0x04, "SecO"), (0x02, "PriP"), (0x01, "PriO")];
        let words: Vec<&str> = ide_modes.iter().filter(|(bit, _)| prog_if & bit != 0).map(|(_, word)| *word).collect();
        (base == 1 && sub == 1 && prog_if & 0x70 == 0).then(|| words.join(" "))
    }

    /// The sub-class's own name.
    pub fn subclass(&self, class_code: u32) -> Option<&str> {
        self.classes.get(&((class_code >> 16) as u8))?.1.get(&((class_code >> 8) as u8)).map(String::as_str)
    }

    /// "Vendor Device", falling back to numeric IDs like lspci: "Vendor Device 1234", "Device 8086:1234".
    pub fn name(&self, vendor: u16, device: u16) -> String {
        self.named(vendor, device, Naming::from_count(0))
    }

    /// As [`PciIds::name`], in the form `-n`/`-nn` ask for.
    pub fn named(&self, vendor: u16, device: u16, naming: Naming) -> String {
        super::lspci::name_pair(self.vendor(vendor), self.device(vendor, device), (vendor, device), naming)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# comment\n10ee  Xilinx Corporation\n\t7038  FPGA Card XC7VX690T\n\t\t10ee 0007  Sub\n8086  Intel Corporation\nC 02  Network controller\n\t00  Ethernet controller\nC 06  Bridge\n";

    #[test]
    fn names_and_fallbacks() {
        let ids = PciIds::parse(SAMPLE);
        assert_eq!(ids.name(0x10ee, 0x7038), "Xilinx Corporation FPGA Card XC7VX690T");
        assert_eq!(ids.name(0x8086, 0x1234), "Intel Corporation Device 1234");
        assert_eq!(ids.name(0x1234, 0x5678), "Device 1234:5678");
        assert_eq!(ids.class(0x020000), Some("Ethernet controller"));
        assert_eq!(ids.class(0x060400), Some("Bridge"));
        assert_eq!(ids.subsystem((0x10ee, 0x7038), (0x10ee, 0x0007)), Some("Sub"));
        assert_eq!(ids.subsystem((0x10ee, 0x7038), (0x10ee, 0x7038)), Some("FPGA Card XC7VX690T"));
        assert_eq!(ids.subsystem((0x10ee, 0x7038), (0x10ee, 0x0008)), None);
        let only_xilinx = PciIds::parse_filtered(SAMPLE, Some(&BTreeSet::from([0x10ee])));
        assert_eq!(only_xilinx.name(0x10ee, 0x7038), "Xilinx Corporation FPGA Card XC7VX690T");
        assert_eq!(only_xilinx.vendor(0x8086), None);
        assert_eq!(only_xilinx.class(0x020000), Some("Ethernet controller"));
        let missing = PciIds::load(Some(Path::new("/nonexistent/pci.ids")));
        assert!(missing.source.is_none());
        assert_eq!(missing.name(0x10ee, 0x7038), "Device 10ee:7038");
    }
}
