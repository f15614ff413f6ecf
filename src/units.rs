//! Sizes and rates as users type them and as the documents print them.
//!
//! Sizes: `128`, `128B`, `4kB`/`1MB`/`1GB` (powers of 10), `4KiB`/`1MiB`/`1GiB` (powers of 2).
//! One rule: a size means one thing or is refused. Decimal suffixes are accepted only as SI
//! writes them (`kB`, `MB`, `GB`); binary ones in any case (`KiB`, `kib`). A bare `k`/`M`/`G`
//! and other spellings of the decimal ones (`KB`, `kb`, `mb`, `Gb`) are refused, because fio
//! reads `4k` as 4096, JEDEC's `KB` is 1024 and `Mb` is a megabit, while the documents' `MB` is
//! 10^6: the user must say which. Size lists: `64,128,256`, ranges `4KiB..64MiB` (doubling, the
//! default step), `64..4096:x4` (multiply), `64..1024:+64` (add), and mixtures of those.
//! Rates: `MBps` = 10^6 bytes/s throughout, as in the source documents.
//! Numbers (addresses, offsets, register values): `31` or `0x1f`, see [`parse_number`].

use crate::error::InvalidInput;

/// One megabyte per second as the documents define it: 10^6 bytes per second.
pub const BYTES_PER_MB: f64 = 1e6;

/// Suffixes in lower case; decimal ones must also be spelt exactly as SI writes them.
const SIZE_SUFFIXES: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
];

/// The only accepted spellings of the decimal suffixes.
const SI_SPELLINGS: &[&str] = &["kB", "MB", "GB"];

/// Largest size accepted anywhere: 1 TiB. Larger values are almost certainly typos.
pub const MAX_SIZE_BYTES: u64 = 1 << 40;

/// A number as users type it: decimal (`31`) or hex after `0x` or `0X` (`0x1f`), with `_`
/// allowed between digits (`0x8000_0000`, `1_000`); `None` otherwise. Callers trim and word
/// their own message, since what the number is (an address, an offset) is theirs to say.
pub fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => text.replace('_', "").parse().ok(),
    }
}

/// Parse one size such as `4KiB`, `1MB`, `1.5MB` or `128` into bytes.
pub fn parse_size(text: &str) -> Result<u64, InvalidInput> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let suffix_lower = suffix.trim().to_ascii_lowercase();
    let bad = || {
        InvalidInput::new(format!(
            "invalid size '{text}': expected a number with an optional suffix B, kB, MB, GB \
             (powers of 10) or KiB, MiB, GiB (powers of 2)"
        ))
    };
    let decimal_misspelt = matches!(suffix_lower.as_str(), "kb" | "mb" | "gb") && !SI_SPELLINGS.contains(&suffix.trim());
    if matches!(suffix_lower.as_str(), "k" | "m" | "g") || decimal_misspelt {
        let letter = suffix_lower[..1].to_ascii_uppercase();
        return Err(InvalidInput::new(format!(
            "ambiguous size '{text}': write {number}{}B for 10^{} bytes or {number}{letter}iB for 2^{} bytes",
            letter.replace('K', "k"),
            match letter.as_str() { "K" => 3, "M" => 6, _ => 9 },
            match letter.as_str() { "K" => 10, "M" => 20, _ => 30 },
        )));
    }
    let multiplier = if suffix_lower.is_empty() {
        1
    } else {
        SIZE_SUFFIXES
            .iter()
            .find(|(name, _)| *name == suffix_lower)
            .map(|(_, m)| *m)
            .ok_or_else(bad)?
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * multiplier as f64;
    if bytes.fract() != 0.0 {
        return Err(InvalidInput::new(format!("invalid size '{text}': not a whole number of bytes")));
    }
    if bytes > MAX_SIZE_BYTES as f64 {
        return Err(InvalidInput::new(format!("size '{text}' is larger than the 1 TiB limit")));
    }
    Ok(bytes as u64)
}

/// Parse a size list: comma-separated sizes and ranges (see the module documentation).
/// The result is sorted and free of duplicates; zero sizes are refused.
pub fn parse_size_list(text: &str) -> Result<Vec<u64>, InvalidInput> {
    let mut sizes = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item.split_once("..") {
            Some((start, rest)) => sizes.extend(parse_range(item, start, rest)?),
            None => sizes.push(parse_size(item)?),
        }
    }
    if sizes.is_empty() {
        return Err(InvalidInput::new(format!("no sizes in '{text}'")));
    }
    if sizes.contains(&0) {
        return Err(InvalidInput::new("a size of 0 bytes moves nothing: sizes must be at least 1 byte"));
    }
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

/// Maximum number of sizes one range may expand to.
const MAX_RANGE_STEPS: usize = 4096;

fn parse_range(item: &str, start: &str, rest: &str) -> Result<Vec<u64>, InvalidInput> {
    let (end, step) = match rest.split_once(':') {
        Some((end, step)) => (end, step.trim()),
        None => (rest, "x2"),
    };
    let start = parse_size(start)?;
    let end = parse_size(end)?;
    if start == 0 || end < start {
        return Err(InvalidInput::new(format!(
            "invalid range '{item}': expected START..END with 0 < START <= END"
        )));
    }
    let bad_step = || {
        InvalidInput::new(format!(
            "invalid step in '{item}': use :xN to multiply (default :x2) or :+SIZE to add"
        ))
    };
    let next: Box<dyn Fn(u64) -> u64> = if let Some(factor) = step.strip_prefix('x') {
        let factor: u64 = factor.parse().map_err(|_| bad_step())?;
        if factor < 2 {
            return Err(bad_step());
        }
        Box::new(move |n| n.saturating_mul(factor))
    } else if let Some(add) = step.strip_prefix('+') {
        let add = parse_size(add)?;
        if add == 0 {
            return Err(bad_step());
        }
        Box::new(move |n| n.saturating_add(add))
    } else {
        return Err(bad_step());
    };
    let mut sizes = Vec::new();
    let mut n = start;
    while n <= end {
        sizes.push(n);
        if sizes.len() > MAX_RANGE_STEPS {
            return Err(InvalidInput::new(format!(
                "range '{item}' expands to more than {MAX_RANGE_STEPS} sizes"
            )));
        }
        n = next(n);
    }
    Ok(sizes)
}

/// Format a byte count the way a reader expects: in whichever of the binary (KiB, MiB, GiB) or
/// decimal (kB, MB, GB) units writes it as the smallest whole number, plain bytes otherwise.
/// 4096 → `4KiB`, 16 000 000 → `16MB`, 100 → `100B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: &[(u64, &str)] = &[
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1_000, "kB"),
    ];
    UNITS
        .iter()
        .filter(|&&(unit, _)| bytes >= unit && bytes % unit == 0)
        .min_by_key(|&&(unit, _)| bytes / unit)
        .map_or_else(|| format!("{bytes}B"), |&(unit, name)| format!("{}{}", bytes / unit, name))
}

/// Bytes moved in a time, as MB/s (10^6 bytes per second).
pub fn mbps(bytes: f64, nanoseconds: f64) -> f64 {
    if nanoseconds <= 0.0 {
        return 0.0;
    }
    bytes / nanoseconds * 1e9 / BYTES_PER_MB
}

/// Display units for rates. All computation is in MB/s; these only change what is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RateUnit {
    /// 10^6 bytes per second (the documents' convention)
    #[default]
    MBps,
    /// 10^9 bytes per second
    GBps,
    /// 10^9 bits per second
    Gbps,
}

impl crate::named::Named for RateUnit {
    const ALL: &'static [Self] = &[RateUnit::MBps, RateUnit::GBps, RateUnit::Gbps];
    fn name(self) -> &'static str {
        match self {
            RateUnit::MBps => "MBps",
            RateUnit::GBps => "GBps",
            RateUnit::Gbps => "Gbps",
        }
    }
    fn aliases(self) -> &'static [&'static str] {
        match self {
            RateUnit::MBps => &["MB/s"],
            RateUnit::GBps => &["GB/s"],
            RateUnit::Gbps => &["Gb/s"],
        }
    }
    // Gbps and GBps differ only in case.
    fn from_name(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == text || v.aliases().contains(&text))
    }
}

impl RateUnit {
    /// Convert a rate in MB/s into this unit.
    pub fn from_mbps(self, mbps: f64) -> f64 {
        match self {
            RateUnit::MBps => mbps,
            RateUnit::GBps => mbps / 1e3,
            RateUnit::Gbps => mbps * 8.0 / 1e3,
        }
    }

    /// The label printed beside numbers, with its definition.
    pub fn label(self) -> &'static str {
        match self {
            RateUnit::MBps => "MB/s",
            RateUnit::GBps => "GB/s",
            RateUnit::Gbps => "Gb/s",
        }
    }

    pub fn definition(self) -> &'static str {
        match self {
            RateUnit::MBps => "1 MB/s = 10^6 bytes/s",
            RateUnit::GBps => "1 GB/s = 10^9 bytes/s",
            RateUnit::Gbps => "1 Gb/s = 10^9 bits/s",
        }
    }
}

/// A duration for humans: ns, µs, ms or s with three significant digits.
pub fn format_ns(ns: f64) -> String {
    let (value, unit) = match ns.abs() {
        n if n >= 1e9 => (ns / 1e9, "s"),
        n if n >= 1e6 => (ns / 1e6, "ms"),
        n if n >= 1e3 => (ns / 1e3, "µs"),
        _ => (ns, "ns"),
    };
    let decimals = if value.abs() >= 100.0 { 0 } else if value.abs() >= 10.0 { 1 } else { 2 };
    format!("{value:.decimals$} {unit}")
}

/// Parse `10s`, `500ms`, `50us`/`50µs`, `100ns`, `2m` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, InvalidInput> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        _ => return Err(InvalidInput::new(format!("invalid duration '{text}': use e.g. 10s, 500ms, 50us"))),
    };
    let value: f64 = number.parse().map_err(|_| InvalidInput::new(format!("invalid duration '{text}': use e.g. 10s, 500ms, 50us")))?;
    let seconds = value * scale;
    if !(seconds > 0.0 && seconds <= 86_400.0) {
        return Err(InvalidInput::new(format!("invalid duration '{text}': must be more than 0 and at most a day")));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        use std::time::Duration;
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("50us").unwrap(), Duration::from_micros(50));
        assert_eq!(parse_duration("50µs").unwrap(), Duration::from_micros(50));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn numbers_are_decimal_or_0x_hex() {
        assert_eq!(parse_number("31"), Some(31));
        assert_eq!(parse_number("0x1f"), Some(31));
        assert_eq!(parse_number("0X1F"), Some(31));
        assert_eq!(parse_number("0x8000_0000"), Some(0x8000_0000));
        assert_eq!(parse_number("1_000"), Some(1000));
        for bad in ["", "0x", "1f", "-1", "0xZZ", " 31", "0x1_0000_0000_0000_0000"] {
            assert_eq!(parse_number(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn sizes_take_decimal_and_binary_suffixes() {
        assert_eq!(parse_size("128").unwrap(), 128);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("1.5MB").unwrap(), 1_500_000);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("64B").unwrap(), 64);
    }

    #[test]
    fn ambiguous_and_malformed_sizes_are_refused() {
        assert!(parse_size("4k").unwrap_err().0.contains("ambiguous"));
        for misspelt in ["4KB", "4kb", "1mb", "1Mb", "1gB"] {
            let error = parse_size(misspelt).unwrap_err().0;
            assert!(error.contains("ambiguous") && error.contains("iB"), "{misspelt}: {error}");
        }
        assert_eq!(parse_size("4kB").unwrap(), 4_000);
        assert_eq!(parse_size("4kib").unwrap(), 4096);
        assert!(parse_size("x").is_err());
        assert!(parse_size("1.5B").is_err());
        assert!(parse_size("-4").is_err());
        assert!(parse_size("2TiB").is_err());
    }

    #[test]
    fn ranges_double_by_default_and_take_step_rules() {
        assert_eq!(parse_size_list("4KiB..32KiB").unwrap(), vec![4096, 8192, 16384, 32768]);
        assert_eq!(parse_size_list("64..1024:x4").unwrap(), vec![64, 256, 1024]);
        assert_eq!(parse_size_list("64..256:+64").unwrap(), vec![64, 128, 192, 256]);
        assert_eq!(parse_size_list("256,64,64,128").unwrap(), vec![64, 128, 256]);
        assert!(parse_size_list("0").is_err());
        assert!(parse_size_list("8..4").is_err());
        assert!(parse_size_list("1..4096:x1").is_err());
        assert!(parse_size_list("1..1MiB:+1").is_err());
    }

    #[test]
    fn sizes_format_back() {
        assert_eq!(format_size(4096), "4KiB");
        assert_eq!(format_size(1_000_000), "1MB");
        assert_eq!(format_size(100), "100B");
        assert_eq!(format_size(16_000_000), "16MB");
        assert_eq!(format_size(3 << 20), "3MiB");
    }

    #[test]
    fn rate_units_convert() {
        assert_eq!(mbps(400.0, 9648.0).to_string()[..5], *"41.45");
        assert_eq!(RateUnit::Gbps.from_mbps(1000.0), 8.0);
    }
}
