//! The PCI-Status word of the Smartlogic performance-demo endpoint (document 001 §3, result 8).
//!
//! A 32-bit summary the endpoint builds from its PCI Express Device Control and Link Status
//! registers. Bit layout as document 001 lists it (field names as the PCIe spec's Device Control
//! register uses them):
//!
//! | bits | field |
//! |---|---|
//! | 0 | Correctable Error Reporting Enable |
//! | 1 | Non-Fatal Error Reporting Enable |
//! | 2 | Fatal Error Reporting Enable (001 prints "Non_fatal" twice; Device Control bit 2 is Fatal) |
//! | 3 | Unsupported Request Reporting Enable |
//! | 4 | Enable Relaxed Ordering |
//! | 7:5 | Max_Payload_Size (128 << value) |
//! | 8 | Extended Tag Field (001: "supported"; Device Control bit 8 is the enable) |
//! | 9 | Phantom Functions Enable |
//! | 10 | Aux Power PM Enable |
//! | 11 | Enable No Snoop |
//! | 14:12 | Max_Read_Request_Size (128 << value) |
//! | 19:16 | Current Link Speed (1 = 2.5 GT/s … 6 = 64 GT/s) |
//! | 25:20 | Negotiated Link Width |
//! | 31 | MSI Enabled |
//!
//! Bits 15 and 26–30 are not documented; they are reported, not interpreted.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Generation;

/// Bits document 001 does not describe.
pub const UNDOCUMENTED_MASK: u32 = (1 << 15) | (0x1F << 26);

/// A decoded PCI-Status word.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StatusWord {
    pub raw: u32,
    pub correctable_error_reporting: bool,
    pub non_fatal_error_reporting: bool,
    pub fatal_error_reporting: bool,
    pub unsupported_request_reporting: bool,
    pub relaxed_ordering: bool,
    /// Max_Payload_Size field (bits 7:5), raw.
    pub max_payload_code: u8,
    /// 128 << code; codes 6 and 7 are reserved (`None`).
    pub max_payload_bytes: Option<u64>,
    pub extended_tag: bool,
    pub phantom_functions: bool,
    pub aux_power_pm: bool,
    pub no_snoop: bool,
    /// Max_Read_Request_Size field (bits 14:12), raw.
    pub max_read_request_code: u8,
    pub max_read_request_bytes: Option<u64>,
    /// Current Link Speed field (bits 19:16), raw.
    pub link_speed_code: u8,
    /// Signalling rate in GT/s, when the code names one.
    pub link_speed_gts: Option<f64>,
    /// Negotiated link width (bits 25:20).
    pub link_width: u8,
    pub msi_enabled: bool,
    /// Bits 15 and 26–30, which document 001 does not describe.
    pub undocumented_bits: u32,
}

fn bit(raw: u32, n: u32) -> bool {
    raw >> n & 1 == 1
}

fn field(raw: u32, high: u32, low: u32) -> u32 {
    raw >> low & ((1 << (high - low + 1)) - 1)
}

fn size_code(code: u32) -> Option<u64> {
    (code <= 5).then(|| 128u64 << code)
}

/// Decode a PCI-Status word. 0x90412100 → MPS 128, MRRS 512, extended tag, 2.5 GT/s, x4, MSI.
pub fn decode_status(raw: u32) -> StatusWord {
    let speed = field(raw, 19, 16);
    StatusWord {
        raw,
        correctable_error_reporting: bit(raw, 0),
        non_fatal_error_reporting: bit(raw, 1),
        fatal_error_reporting: bit(raw, 2),
        unsupported_request_reporting: bit(raw, 3),
        relaxed_ordering: bit(raw, 4),
        max_payload_code: field(raw, 7, 5) as u8,
        max_payload_bytes: size_code(field(raw, 7, 5)),
        extended_tag: bit(raw, 8),
        phantom_functions: bit(raw, 9),
        aux_power_pm: bit(raw, 10),
        no_snoop: bit(raw, 11),
        max_read_request_code: field(raw, 14, 12) as u8,
        max_read_request_bytes: size_code(field(raw, 14, 12)),
        link_speed_code: speed as u8,
        link_speed_gts: (1..=6).contains(&speed).then(|| Generation::ALL[speed as usize - 1].gts()),
        link_width: field(raw, 25, 20) as u8,
        msi_enabled: bit(raw, 31),
        undocumented_bits: raw & UNDOCUMENTED_MASK,
    }
}

impl StatusWord {
    /// The trained link the word reports, when speed code and width are valid.
    pub fn link(&self) -> Option<crate::model::Link> {
        let generation = crate::model::Generation::from_number(self.link_speed_code as u32).ok()?;
        crate::model::Link::new(generation, self.link_width as u32).ok()
    }

    /// (field, value) pairs in bit order, for a table.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let on = |b: bool| if b { "enabled" } else { "disabled" }.to_string();
        let size = |bytes: Option<u64>, code: u8| match bytes {
            Some(b) => format!("{b} bytes"),
            None => format!("reserved code {code}"),
        };
        vec![
            ("bit 0 correctable error reporting", on(self.correctable_error_reporting)),
            ("bit 1 non-fatal error reporting", on(self.non_fatal_error_reporting)),
            ("bit 2 fatal error reporting", on(self.fatal_error_reporting)),
            ("bit 3 unsupported request reporting", on(self.unsupported_request_reporting)),
            ("bit 4 relaxed ordering", on(self.relaxed_ordering)),
            ("bits 7:5 max payload size", size(self.max_payload_bytes, self.max_payload_code)),
            ("bit 8 extended tag", on(self.extended_tag)),
            ("bit 9 phantom functions", on(self.phantom_functions)),
            ("bit 10 aux power PM", on(self.aux_power_pm)),
            ("bit 11 no snoop", on(self.no_snoop)),
            ("bits 14:12 max read request size", size(self.max_read_request_bytes, self.max_read_request_code)),
            (
                "bits 19:16 link speed",
                match self.link_speed_gts {
                    Some(gts) => format!("{gts} GT/s"),
                    None => format!("unknown code {}", self.link_speed_code),
                },
            ),
            ("bits 25:20 link width", format!("x{}", self.link_width)),
            ("bit 31 MSI", on(self.msi_enabled)),
            ("bits 15, 30:26 (undocumented)", format!("{:#010x}", self.undocumented_bits)),
        ]
    }
}

impl fmt::Display for StatusWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "PCI-Status {:#010x} ({})", self.raw, self.raw)?;
        for (name, value) in self.lines() {
            writeln!(f, "  {name:<36} {value}")?;
        }
        Ok(())
    }
}
