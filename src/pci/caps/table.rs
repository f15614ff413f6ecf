//! The capability table: capability ID → decoder, one line per capability pcieperf decodes (as
//! pciutils' `show_caps`/`show_ext_caps` switches, made data). Every capability a walk finds is
//! decoded once, at its own offset, into a [`Decoded`]; device decoding picks its fields from
//! those and the lspci-style report renders them ([`Decoded::lines`]), neither reads the bytes
//! again. IDs without a line get lspci's plain heading.

use super::aer::{self, Aer};
use super::{ari, dsn, ltr};
use super::msi::{self, Msi};
use super::msix::{self, MsiX};
use super::pcie::{self, PcieCap};
use super::pm::{self, PowerManagement};
use super::regs::*;
use super::vendor::{self, VendorSpecific};
use crate::pci::config::ConfigSpace;
use crate::pci::lspci;
use crate::pci::walk::CapEntry;

/// Where a decoder reads: the bytes, its capability's offset, and whether the function is
/// device 0 function 0 (lspci hides some PCI Express registers of the others).
pub struct At<'a> {
    pub config: &'a ConfigSpace,
    pub offset: usize,
    pub function_zero: bool,
    /// The Device/Port Type of the function's (last) PCI Express capability, which the
    /// extended capabilities' text depends on as lspci's does.
    pub express_type: Option<u8>,
}

/// A capability's decoded body.
// A handful per device, decoded once: boxing the large PCI Express variant would only add an
// allocation each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Body {
    Pcie(PcieCap),
    Msi(Msi),
    MsiX(MsiX),
    Pm(PowerManagement),
    Aer(Aer),
    Vendor(VendorSpecific),
    /// The Subsystem ID capability's (vendor, subsystem), when its 8 bytes were read.
    Subsystem(Option<(u16, u16)>),
    /// Lines only: the heading and the `-vv` lines of a capability nothing else reads.
    Text(Vec<String>),
    /// A capability lspci names without decoding: its heading, `None` for the ID table's name.
    Plain(Option<String>),
}

/// One line of the table.
pub struct Decoder {
    pub id: u16,
    /// `None` when the capability's registers were not all read (lspci then prints its name only).
    pub decode: fn(&At) -> Option<Body>,
}

/// Standard capabilities (list from 0x34).
pub const STANDARD: &[Decoder] = &[
    Decoder { id: PCI_CAP_ID_PM, decode: |at| pm::decode(at.config, at.offset).map(Body::Pm) },
    Decoder { id: PCI_CAP_ID_MSI, decode: |at| msi::decode(at.config, at.offset).map(Body::Msi) },
    Decoder { id: PCI_CAP_ID_VNDR, decode: |at| Some(Body::Vendor(vendor::decode(at.config, at.offset))) },
    Decoder { id: PCI_CAP_ID_SSVID, decode: |at| Some(Body::Subsystem(subsystem_ids(at))) },
    Decoder { id: PCI_CAP_ID_EXP, decode: |at| pcie::decode(at.config, at.offset, at.function_zero).map(Body::Pcie) },
    Decoder { id: PCI_CAP_ID_MSIX, decode: |at| msix::decode(at.config, at.offset).map(Body::MsiX) },
];

/// Extended capabilities (list from 0x100).
pub const EXTENDED: &[Decoder] = &[
    Decoder { id: PCI_EXT_CAP_ID_AER, decode: |at| aer::decode(at.config, at.offset, matches!(at.express_type, Some(4 | 10))).map(Body::Aer) },
    // lspci prints nothing, not even a line end, for a serial number it could not read.
    Decoder { id: PCI_EXT_CAP_ID_DSN, decode: |at| Some(Body::Text(dsn::lines(at.config, at.offset).unwrap_or_else(|| vec![String::new()]))) },
    Decoder { id: PCI_EXT_CAP_ID_ARI, decode: |at| Some(Body::Text(ari::lines(at.config, at.offset))) },
    Decoder { id: PCI_EXT_CAP_ID_LTR, decode: |at| Some(Body::Text(ltr::lines(at.config, at.offset))) },
    Decoder { id: PCI_EXT_CAP_ID_VNDR, decode: |at| Some(Body::Text(vec![vendor::extended_heading(at.config, at.offset)])) },
];

fn subsystem_ids(at: &At) -> Option<(u16, u16)> {
    at.config.has(at.offset, 8).then_some(())?;
    Some((at.config.u16_at(at.offset + PCI_SSVID_VENDOR)?, at.config.u16_at(at.offset + PCI_SSVID_DEVICE)?))
}

/// A capability found on a walk, decoded at its offset.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub entry: CapEntry,
    pub extended: bool,
    pub body: Option<Body>,
}

/// Decode every capability of a walk once, each by its table line (or as lspci's plain heading).
pub fn decode_all(config: &ConfigSpace, entries: &[CapEntry], extended: bool, function_zero: bool, express_type: Option<u8>) -> Vec<Decoded> {
    let table = if extended { EXTENDED } else { STANDARD };
    entries
        .iter()
        .map(|entry| {
            let at = At { config, offset: entry.offset, function_zero, express_type };
            let body = match table.iter().find(|d| d.id == entry.id) {
                Some(decoder) => (decoder.decode)(&at),
                None if extended => Some(Body::Plain(lspci::plain_extended_heading(entry.id))),
                None => Some(Body::Plain(lspci::plain_capability_heading(config, entry.offset, entry.id as u8))),
            };
            Decoded { entry: *entry, extended, body }
        })
        .collect()
}

/// What lspci prints of one capability: its heading text, its `-vv` lines, and its shorter
/// `-v` heading when it has one.
pub struct Lines {
    pub name: String,
    pub details: Vec<String>,
    pub brief_name: Option<String>,
}

impl Decoded {
    /// The capability's name in the PCI Code and ID Assignment Specification.
    pub fn id_name(&self) -> &'static str {
        if self.extended { super::ext_cap_name(self.entry.id) } else { super::cap_name(self.entry.id) }
    }

    /// The renderer: lspci's lines from the decoded body (the name heads them; a capability
    /// decoded to nothing is named by its ID).
    pub fn lines(&self) -> Lines {
        let mut lines = match &self.body {
            None => Vec::new(),
            Some(Body::Pcie(p)) => p.describe(),
            Some(Body::Msi(m)) => m.describe(),
            Some(Body::MsiX(m)) => m.describe(),
            Some(Body::Pm(p)) => p.describe(),
            Some(Body::Aer(a)) => a.describe(),
            Some(Body::Vendor(v)) => v.describe(),
            // lspci prints nothing, not even a line end, for a Subsystem ID capability cut off.
            Some(Body::Subsystem(_)) => vec![String::new()],
            Some(Body::Plain(heading)) => heading.iter().cloned().collect(),
            Some(Body::Text(lines)) => lines.clone(),
        };
        let name = if lines.is_empty() { self.id_name().to_string() } else { lines.remove(0) };
        let brief_name = match &self.body {
            Some(Body::Pcie(p)) => Some(p.heading(1)),
            _ => None,
        };
        Lines { name, details: lines, brief_name }
    }
}

/// The body of the first capability with `id` in `decoded` (as lspci finds one), when decoded.
pub fn first(decoded: &[Decoded], id: u16) -> Option<&Body> {
    decoded.iter().find(|d| d.entry.id == id)?.body.as_ref()
}

/// A decoded capability type, taken back out of its [`Body`].
pub trait FromBody: Clone {
    const ID: u16;
    fn from_body(body: &Body) -> Option<&Self>;
}

macro_rules! from_body {
    ($($variant:ident($ty:ty) = $id:expr),* $(,)?) => {$(
        impl FromBody for $ty {
            const ID: u16 = $id;
            fn from_body(body: &Body) -> Option<&Self> {
                if let Body::$variant(value) = body { Some(value) } else { None }
            }
        }
    )*};
}

from_body!(Pcie(PcieCap) = PCI_CAP_ID_EXP, Msi(Msi) = PCI_CAP_ID_MSI, MsiX(MsiX) = PCI_CAP_ID_MSIX, Pm(PowerManagement) = PCI_CAP_ID_PM, Aer(Aer) = PCI_EXT_CAP_ID_AER);

/// The first capability of `T`'s ID in `decoded` (one list), when it decoded.
pub fn first_of<T: FromBody>(decoded: &[Decoded]) -> Option<T> {
    first(decoded, T::ID).and_then(T::from_body).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_id_has_one_line() {
        for table in [STANDARD, EXTENDED] {
            for (i, d) in table.iter().enumerate() {
                assert!(table[i + 1..].iter().all(|other| other.id != d.id), "{:#x} twice", d.id);
            }
        }
    }

    #[test]
    fn decodes_each_capability_at_its_own_offset() {
        let mut bytes = vec![0u8; 256];
        bytes[0x42..0x44].copy_from_slice(&0x0003u16.to_le_bytes());
        bytes[0x52..0x54].copy_from_slice(&0x0002u16.to_le_bytes());
        let config = ConfigSpace::new(bytes);
        let entries = [CapEntry { offset: 0x40, id: PCI_CAP_ID_PM, version: 0 }, CapEntry { offset: 0x50, id: PCI_CAP_ID_PM, version: 0 }];
        let decoded = decode_all(&config, &entries, false, true, None);
        let versions: Vec<u8> = decoded.iter().map(|d| match &d.body { Some(Body::Pm(pm)) => pm.version, _ => 0 }).collect();
        assert_eq!(versions, vec![3, 2]);
        assert_eq!(decoded[0].lines().name, "Power Management version 3");
        let unknown = decode_all(&config, &[CapEntry { offset: 0x60, id: 0x16, version: 0 }], false, true, None);
        assert_eq!(unknown[0].lines().name, "Capability ID 0x16 [0000]");
    }

    #[test]
    fn a_second_aer_is_decoded_at_its_own_offset_as_lspci_does() {
        let mut bytes = vec![0u8; 0x200];
        bytes[0x104..0x108].copy_from_slice(&(1u32 << 14).to_le_bytes());
        bytes[0x144..0x148].copy_from_slice(&(1u32 << 20).to_le_bytes());
        let config = ConfigSpace::new(bytes);
        let entries = [0x100, 0x140].map(|offset| CapEntry { offset, id: PCI_EXT_CAP_ID_AER, version: 1 });
        let decoded = decode_all(&config, &entries, true, false, None);
        let uesta: Vec<String> = decoded.iter().map(|d| d.lines().details[0].clone()).collect();
        assert!(uesta[0].starts_with("UESta:\t") && uesta[0].contains("CmpltTO+") && uesta[0].contains("UnsupReq-"), "{uesta:?}");
        assert!(uesta[1].contains("CmpltTO-") && uesta[1].contains("UnsupReq+"), "{uesta:?}");
        assert_eq!(first_of::<Aer>(&decoded).map(|a| a.offset), Some(0x100));
        let cut = decode_all(&ConfigSpace::new(vec![0u8; 0x120]), &entries[..1], true, false, None);
        assert_eq!((cut[0].lines().name.as_str(), cut[0].lines().details.len()), ("Advanced Error Reporting", 0));
    }
}
