//! Bus/device/function addresses: `0000:01:00.0` (sysfs, `lspci -D`) and `01:00.0` (`lspci`), and
//! the `-s [[domain:]bus:][dev][.func]` selector.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::error::InvalidInput;

/// A PCI function address. Ordered as lspci and sysfs list devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl Bdf {
    pub fn new(domain: u32, bus: u8, device: u8, function: u8) -> Result<Self, InvalidInput> {
        if device > 0x1f || function > 7 {
            return Err(InvalidInput::new(format!(
                "invalid PCI address {domain:04x}:{bus:02x}:{device:02x}.{function}: device is 00–1f, function 0–7"
            )));
        }
        Ok(Bdf { domain, bus, device, function })
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}.{}", self.domain, self.bus, self.device, self.function)
    }
}

impl Serialize for Bdf {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

fn hex_field(text: &str, max_digits: usize) -> Option<u32> {
    if text.is_empty() || text.len() > max_digits || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

impl FromStr for Bdf {
    type Err = InvalidInput;

    /// `[domain:]bus:device.function`, hex except the function (as lspci writes them).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidInput::new(format!("invalid PCI address '{text}': expected [domain:]bus:device.function such as 0000:01:00.0"));
        let (rest, function) = text.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [bus, device] => (0, hex_field(bus, 2).ok_or_else(bad)?, hex_field(device, 2).ok_or_else(bad)?),
            [domain, bus, device] => (
                hex_field(domain, 8).ok_or_else(bad)?,
                hex_field(bus, 2).ok_or_else(bad)?,
                hex_field(device, 2).ok_or_else(bad)?,
            ),
            _ => return Err(bad()),
        };
        if function.len() != 1 || !function.as_bytes()[0].is_ascii_digit() {
            return Err(bad());
        }
        let function = u32::from(function.as_bytes()[0] - b'0');
        Bdf::new(domain, bus as u8, device as u8, function as u8)
            .map_err(|_| InvalidInput::new(format!("invalid PCI address '{text}': device is 00–1f, function 0–7")))
    }
}

/// `-s [[domain:]bus:][device][.function]`: every part left out matches anything, as in lspci.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selector {
    pub domain: Option<u32>,
    pub bus: Option<u8>,
    pub device: Option<u8>,
    pub function: Option<u8>,
}

impl Selector {
    pub fn matches(&self, bdf: &Bdf) -> bool {
        self.domain.is_none_or(|d| d == bdf.domain)
            && self.bus.is_none_or(|b| b == bdf.bus)
            && self.device.is_none_or(|d| d == bdf.device)
            && self.function.is_none_or(|f| f == bdf.function)
    }
}

/// One field of a filter as pciutils parses it (`parse_hex_field`): empty or `*` is "any"; hex
/// digits of any count whose value stays within `max`.
pub(crate) fn filter_field(field: Option<&str>, max: u32) -> Result<Option<u32>, ()> {
    let Some(field) = field.filter(|f| !f.is_empty() && *f != "*") else { return Ok(None) };
    let mut value: u64 = 0;
    for c in field.chars() {
        value = value * 16 + u64::from(c.to_digit(16).ok_or(())?);
        if value > u64::from(max) {
            return Err(());
        }
    }
    Ok(Some(value as u32))
}

/// Split as pciutils' `split_to_fields` does: at most `count` fields, absent ones `None`.
pub(crate) fn split_fields(text: &str, separator: char, count: usize) -> Option<Vec<Option<&str>>> {
    let parts: Vec<&str> = text.split(separator).collect();
    (parts.len() <= count).then(|| (0..count).map(|i| parts.get(i).copied()).collect())
}

impl FromStr for Selector {
    type Err = InvalidInput;

    /// `[[[domain]:][bus]:][device][.[function]]`, parsed exactly as lspci's `-s` (pciutils
    /// `pci_filter_parse_slot`), with lspci's messages.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| InvalidInput::new(format!("-s {text}: {why} (expected [[[domain]:][bus]:][device][.[function]] such as 01:00.0, 0000:01:00.0 or 3:)"));
        if text.len() >= 64 {
            return Err(bad("Expression too long"));
        }
        let fields = split_fields(text, ':', 3).ok_or_else(|| bad("Too many fields"))?;
        let mut i = 0;
        let mut selector = Selector::default();
        if fields[2].is_some() {
            selector.domain = filter_field(fields[0], 0x7fff_ffff).map_err(|_| bad("Invalid domain number"))?;
            i += 1;
        }
        if fields[i + 1].is_some() {
            selector.bus = filter_field(fields[i], 0xff).map_err(|_| bad("Invalid bus number"))?.map(|b| b as u8);
            i += 1;
        }
        if let Some(slot) = fields[i].filter(|f| !f.is_empty() && *f != "*") {
            let parts = split_fields(slot, '.', 2).ok_or_else(|| bad("Invalid slot/function number"))?;
            selector.device = filter_field(parts[0], 0x1f).map_err(|_| bad("Invalid slot number"))?.map(|d| d as u8);
            selector.function = filter_field(parts[1], 7).map_err(|_| bad("Invalid function number"))?.map(|f| f as u8);
        }
        Ok(selector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_addresses() {
        let bdf: Bdf = "01:00.1".parse().unwrap();
        assert_eq!(bdf.to_string(), "0000:01:00.1");
        assert_eq!("10000:ff:1f.7".parse::<Bdf>().unwrap().to_string(), "10000:ff:1f.7");
        for bad in ["01:20.0", "01:00.8", "1:0", "zz:00.0", "0000:01:00.0.1", ""] {
            assert!(bad.parse::<Bdf>().is_err(), "{bad}");
        }
    }

    #[test]
    fn selector_parts_are_optional() {
        let bdf: Bdf = "0000:03:00.1".parse().unwrap();
        for yes in ["03:00.1", "3:", "0000:03:00.1", ".1", "03:", "0:03:0"] {
            assert!(yes.parse::<Selector>().unwrap().matches(&bdf), "{yes}");
        }
        for no in ["04:", "03:00.0", "1:03:00.1"] {
            assert!(!no.parse::<Selector>().unwrap().matches(&bdf), "{no}");
        }
        for (bad, why) in [("03:00.9", "Invalid function number"), ("a:b:c:d", "Too many fields"), ("zz:", "Invalid bus number"), ("02:20", "Invalid slot number")] {
            assert!(bad.parse::<Selector>().unwrap_err().0.contains(why), "{bad}");
        }
        // As lspci: two fields are bus:device, three are domain:bus:device; any count of digits.
        assert_eq!("0002:".parse::<Selector>().unwrap().bus, Some(2));
        assert_eq!("1::".parse::<Selector>().unwrap().domain, Some(1));
        assert_eq!("000003.1".parse::<Selector>().unwrap().device, Some(3));
    }
}
