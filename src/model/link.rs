//! Link generations, widths and encodings: the raw material of every throughput figure.
//!
//! Sources: PCI Express Base Specification 1.0a–6.0 (signalling rates, 8b/10b for 2.5 and 5 GT/s,
//! 128b/130b for 8–32 GT/s, 1b/1b PAM4 with 256-byte flits for 64 GT/s).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;

/// A PCI Express generation, i.e. a signalling rate per lane.
/// Written `gen1`…`gen6` in documents; the `Gen1` spelling of documents before
/// `pcieperf.results/3` is still read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    #[serde(alias = "Gen1")]
    Gen1,
    #[serde(alias = "Gen2")]
    Gen2,
    #[serde(alias = "Gen3")]
    Gen3,
    #[serde(alias = "Gen4")]
    Gen4,
    #[serde(alias = "Gen5")]
    Gen5,
    #[serde(alias = "Gen6")]
    Gen6,
}

/// How bits on the wire carry bytes of data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Encoding {
    /// 8b/10b, Gen1–Gen2: every byte is a 10-bit symbol.
    B8b10b,
    /// 128b/130b, Gen3–Gen5: 2 sync bits per 128-bit block.
    B128b130b,
    /// Gen6 flit mode, PAM4: 1b/1b at the physical layer; framing overhead lives in the flit.
    Flit1b1b,
}

impl Encoding {
    /// Fraction of signalled bits that carry bytes.
    pub fn efficiency(self) -> f64 {
        match self {
            Encoding::B8b10b => 8.0 / 10.0,
            Encoding::B128b130b => 128.0 / 130.0,
            Encoding::Flit1b1b => 1.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::B8b10b => "8b/10b",
            Encoding::B128b130b => "128b/130b",
            Encoding::Flit1b1b => "1b/1b flit (PAM4)",
        }
    }
}

impl Generation {
    pub const ALL: [Generation; 6] = [
        Generation::Gen1,
        Generation::Gen2,
        Generation::Gen3,
        Generation::Gen4,
        Generation::Gen5,
        Generation::Gen6,
    ];

    /// Generation from its number, 1–6.
    pub fn from_number(number: u32) -> Result<Self, InvalidInput> {
        Generation::ALL
            .get((number as usize).wrapping_sub(1))
            .copied()
            .ok_or_else(|| InvalidInput::new(format!("invalid generation {number}: allowed 1, 2, 3, 4, 5, 6")))
    }

    /// Generation from a signalling rate in GT/s (2.5, 5, 8, 16, 32, 64).
    pub fn from_gts(gts: f64) -> Option<Self> {
        Generation::ALL.iter().copied().find(|g| (g.gts() - gts).abs() < 1e-6)
    }

    pub fn number(self) -> u32 {
        self as u32 + 1
    }

    /// Signalling rate per lane in GT/s.
    pub fn gts(self) -> f64 {
        match self {
            Generation::Gen1 => 2.5,
            Generation::Gen2 => 5.0,
            Generation::Gen3 => 8.0,
            Generation::Gen4 => 16.0,
            Generation::Gen5 => 32.0,
            Generation::Gen6 => 64.0,
        }
    }

    pub fn encoding(self) -> Encoding {
        match self {
            Generation::Gen1 | Generation::Gen2 => Encoding::B8b10b,
            Generation::Gen3 | Generation::Gen4 | Generation::Gen5 => Encoding::B128b130b,
            Generation::Gen6 => Encoding::Flit1b1b,
        }
    }

    /// Bytes per second per lane after encoding, in MB/s (10^6 B/s). Gen1: 250.
    pub fn lane_mbps(self) -> f64 {
        self.gts() * 1e3 / 8.0 * self.encoding().efficiency()
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gen{}", self.number())
    }
}

/// Link widths the specification defines.
pub const WIDTHS: [u32; 7] = [1, 2, 4, 8, 12, 16, 32];

/// A link: generation and negotiated width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Link {
    pub generation: Generation,
    pub width: u32,
}

impl Link {
    pub fn new(generation: Generation, width: u32) -> Result<Self, InvalidInput> {
        check_width(width)?;
        Ok(Link { generation, width })
    }

    /// Raw signalling rate of all lanes in Gb/s (GT/s × width), before encoding.
    pub fn raw_gbps(&self) -> f64 {
        self.generation.gts() * self.width as f64
    }

    /// Rate after encoding in MB/s (10^6 B/s): the ceiling for every byte on the link.
    /// Gen1 x1: 250, Gen1 x4: 1000, Gen3 x8: 7876.9.
    pub fn encoded_mbps(&self) -> f64 {
        self.generation.lane_mbps() * self.width as f64
    }

    /// Time for one byte on one lane, in ns (a "symbol time" for 8b/10b: 4 ns at Gen1).
    /// Bytes are striped across lanes, so a link moves `width` bytes per symbol time.
    pub fn byte_time_ns(&self) -> f64 {
        1e3 / self.generation.lane_mbps()
    }

    /// Multiplier the performance demo of document 001 uses: speed multiplier × width.
    pub fn demo_link_multiplier(&self) -> u32 {
        let speed = match self.generation {
            Generation::Gen1 => 1,
            Generation::Gen2 => 2,
            _ => 4,
        };
        speed * self.width
    }
}

/// Refuse widths the specification does not define.
pub fn check_width(width: u32) -> Result<(), InvalidInput> {
    if WIDTHS.contains(&width) {
        Ok(())
    } else {
        Err(InvalidInput::new(format!("invalid link width x{width}: allowed x1, x2, x4, x8, x12, x16, x32")))
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} x{}", self.generation, self.width)
    }
}

impl FromStr for Link {
    type Err = InvalidInput;

    /// Parse `gen3x8`, `Gen3 x8`, `g3x8` (case-insensitive).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase();
        let bad = || InvalidInput::new(format!("invalid link '{text}': expected genNxW such as gen3x8 (N 1–6, W 1, 2, 4, 8, 12, 16, 32)"));
        let rest = compact.strip_prefix("gen").or_else(|| compact.strip_prefix('g')).ok_or_else(bad)?;
        let (gen, width) = rest.split_once('x').ok_or_else(bad)?;
        let generation = Generation::from_number(gen.parse().map_err(|_| bad())?)?;
        Link::new(generation, width.parse().map_err(|_| bad())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_after_encoding() {
        assert_eq!("gen1x1".parse::<Link>().unwrap().encoded_mbps(), 250.0);
        assert_eq!("gen1x4".parse::<Link>().unwrap().encoded_mbps(), 1000.0);
        assert_eq!("gen2x1".parse::<Link>().unwrap().encoded_mbps(), 500.0);
        let gen3x8: Link = "Gen3 x8".parse().unwrap();
        assert!((gen3x8.encoded_mbps() - 7876.923).abs() < 1e-3);
        assert_eq!("gen6x16".parse::<Link>().unwrap().encoded_mbps(), 128_000.0);
        assert_eq!("gen1x1".parse::<Link>().unwrap().byte_time_ns(), 4.0);
    }

    #[test]
    fn invalid_links_name_the_allowed_values() {
        assert!("gen3x3".parse::<Link>().unwrap_err().0.contains("x1, x2, x4"));
        assert!("gen9x4".parse::<Link>().unwrap_err().0.contains("allowed 1, 2, 3"));
        assert!("pcie".parse::<Link>().is_err());
    }

    #[test]
    fn demo_multiplier_follows_document_001() {
        assert_eq!("gen1x4".parse::<Link>().unwrap().demo_link_multiplier(), 4);
        assert_eq!("gen2x2".parse::<Link>().unwrap().demo_link_multiplier(), 4);
        assert_eq!("gen3x8".parse::<Link>().unwrap().demo_link_multiplier(), 32);
    }
}
