//! `-d [vendor]:[device][:class[:prog_if]]`, parsed and matched exactly as lspci's `-d`
//! (pciutils `pci_filter_parse_id`): hex fields, empty or `*` for any, `x` in the class for any
//! digit (`-d ::02xx` is every network controller).

use std::str::FromStr;

use crate::error::InvalidInput;

use super::address::{filter_field, split_fields};
use super::config::ConfigSpace;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdFilter {
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    /// Base class and subclass (16 bits) and which of their bits must match.
    pub class: Option<(u16, u16)>,
    pub prog_if: Option<u8>,
}

impl IdFilter {
    pub fn matches(&self, config: &ConfigSpace) -> bool {
        let same = |wanted: Option<u16>, have: Option<u16>| wanted.is_none_or(|w| have == Some(w));
        let class = config.class_code();
        same(self.vendor, config.vendor_id())
            && same(self.device, config.device_id())
            && self.class.is_none_or(|(value, mask)| class.is_some_and(|c| ((c >> 8) as u16 ^ value) & mask == 0))
            && self.prog_if.is_none_or(|p| class.is_some_and(|c| c as u8 == p))
    }
}

/// A class field with `x` wildcards: (value, mask of the digits given).
fn class_field(field: Option<&str>) -> Result<Option<(u16, u16)>, ()> {
    let Some(field) = field.filter(|f| !f.is_empty() && *f != "*") else { return Ok(None) };
    let (mut value, mut mask, mut bound): (u32, u32, u32) = (0, 0, 0);
    for c in field.chars() {
        let digit = if c == 'x' || c == 'X' { None } else { Some(c.to_digit(16).ok_or(())?) };
        value = (value << 4) | digit.unwrap_or(0);
        mask = (mask << 4) | if digit.is_some() { 0xf } else { 0 };
        bound = (bound << 4) | digit.unwrap_or(1);
        if bound > 0xffff {
            return Err(());
        }
    }
    Ok(Some((value as u16, mask as u16)))
}

impl FromStr for IdFilter {
    type Err = InvalidInput;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| InvalidInput::new(format!("-d {text}: {why} (expected [vendor]:[device][:class[:prog_if]] such as 10ee: or ::0108)"));
        if text.len() >= 64 {
            return Err(bad("Expression too long"));
        }
        let fields = split_fields(text, ':', 4).ok_or_else(|| bad("Too many fields"))?;
        if fields[1].is_none() {
            return Err(bad("At least two fields must be given"));
        }
        Ok(IdFilter {
            vendor: filter_field(fields[0], 0xffff).map_err(|_| bad("Invalid vendor ID"))?.map(|v| v as u16),
            device: filter_field(fields[1], 0xffff).map_err(|_| bad("Invalid device ID"))?.map(|v| v as u16),
            class: class_field(fields[2]).map_err(|_| bad("Invalid class code"))?,
            prog_if: filter_field(fields[3], 0xff).map_err(|_| bad("Invalid programming interface code"))?.map(|v| v as u8),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches_as_lspci() {
        let mut bytes = vec![0u8; 64];
        bytes[..4].copy_from_slice(&[0xee, 0x10, 0x38, 0x70]);
        bytes[9..12].copy_from_slice(&[0x02, 0x08, 0x01]);
        let config = ConfigSpace::new(bytes);
        for yes in ["10ee:", ":7038", "10ee:7038:0108", "::01xx", "::x1x8:02", "*:*"] {
            assert!(yes.parse::<IdFilter>().unwrap().matches(&config), "{yes}");
        }
        for no in ["8086:", "::02xx", "::0108:01"] {
            assert!(!no.parse::<IdFilter>().unwrap().matches(&config), "{no}");
        }
        for (bad, why) in [("10ee", "At least two"), ("1:2:3:4:5", "Too many"), ("10000:", "vendor"), ("::1xxxx", "class")] {
            assert!(bad.parse::<IdFilter>().unwrap_err().0.contains(why), "{bad}");
        }
    }
}
