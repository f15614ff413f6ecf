//! `lspci -x/-xxx/-xxxx` hex dumps (the format `lspci -F FILE` reads): a device line starting
//! with its address, then rows `OFF: xx xx …`, several devices per file.
//!
//! Read as pciutils' dump reader (`lib/dump.c`) reads them, so that pcieperf and `lspci -F` see
//! the same bytes in the same file:
//! - a device line is `bus:dev.func ` or `domain:bus:dev.func ` (4–6 hex digits of domain, two
//!   of bus and device, one decimal digit of function) followed by a space;
//! - a row is 2–8 hex digits, `: `, then bytes of two hex digits separated by single spaces; a
//!   row's offset is where its bytes go, so rows may come in any order or be missing (missing
//!   bytes read as `ff`, as a failed config read does); the device's length is one past the
//!   highest byte given;
//! - a blank line ends a device; every other line (lspci's verbose text, a device line a mail
//!   client wrapped, a signature) is ignored.
//!
//! pciutils refuses a malformed row and bytes beyond 4096; so does pcieperf (naming the line).
//! What lspci passes over silently gets a warning here, so a damaged paste is visible: ignored
//! lines, missing rows, unusual lengths, duplicated addresses, out-of-range device numbers. Two
//! limits of lspci's reader are lifted with a warning: lines longer than 253 characters and a
//! last line without a newline (lspci stops with "line too long or unterminated").

use std::path::Path;

use crate::error::InvalidInput;

use super::address::Bdf;
use super::config::ConfigSpace;

/// One device of a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpDevice {
    pub bdf: Bdf,
    pub config: ConfigSpace,
    /// 1-based line of the device's address line.
    pub line: usize,
}

/// A whole dump: its devices in file order and what was odd about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dump {
    pub devices: Vec<DumpDevice>,
    pub warnings: Vec<String>,
}

/// Config space lengths lspci writes: -x (64; 128 for a CardBus bridge), -xxx (256), -xxxx (4096).
const LENGTHS: [usize; 4] = [64, 128, 256, 4096];
const MAX_CONFIG_BYTES: usize = 4096;
/// pciutils reads lines with `fgets` into 256 bytes: 253 characters plus newline fit.
const LSPCI_MAX_LINE: usize = 253;
/// Ignored lines named one by one before the rest are only counted.
const SHOWN_IGNORED: usize = 5;

fn error(line: usize, message: impl std::fmt::Display) -> InvalidInput {
    InvalidInput::new(format!("dump line {line}: {message}"))
}

/// Whether `text` starts with `shape`, where `#` is any hex digit (pciutils' `dump_validate`).
fn shaped(text: &[u8], shape: &[u8]) -> bool {
    text.len() >= shape.len() && text.iter().zip(shape).all(|(t, s)| if *s == b'#' { t.is_ascii_hexdigit() } else { t == s })
}

/// How many hex digits `text` starts with, at most `max`.
fn hex_digits(text: &[u8], max: usize) -> usize {
    text.iter().take(max).take_while(|b| b.is_ascii_hexdigit()).count()
}

/// The address of a device line, as pciutils accepts it (see the module documentation).
fn device_line(text: &str) -> Option<Bdf> {
    let bytes = text.as_bytes();
    // A domain is 4–6 hex digits and a colon; without one the line starts with the bus.
    let digits = hex_digits(bytes, 6);
    let start = if (4..=6).contains(&digits) && bytes.get(digits) == Some(&b':') && shaped(&bytes[digits + 1..], b"##:##.# ") { digits + 1 } else { 0 };
    if start == 0 && !shaped(bytes, b"##:##.# ") {
        return None;
    }
    let hex = |range: std::ops::Range<usize>| u32::from_str_radix(&text[range], 16).ok();
    let domain = if start == 0 { 0 } else { hex(0..start - 1)? };
    let function = bytes[start + 6];
    // pciutils reads the function with %d: a hex letter there makes the line text, not a device.
    function.is_ascii_digit().then_some(())?;
    Some(Bdf { domain, bus: hex(start..start + 2)? as u8, device: hex(start + 3..start + 5)? as u8, function: function - b'0' })
}

/// A row's offset and the text after `OFF: `, when the line has the shape of a row.
fn row(text: &str) -> Option<(usize, &str)> {
    let digits = hex_digits(text.as_bytes(), 8);
    ((2..=8).contains(&digits) && text.as_bytes()[digits..].starts_with(b": ")).then_some(())?;
    Some((usize::from_str_radix(&text[..digits], 16).ok()?, &text[digits + 2..]))
}

/// A device being read: 4096 bytes preset to `ff` (an unreadable byte), which were given, and
/// one past the highest. One is reused for every device of a dump (8 KiB set once, not per
/// device); each device keeps only its own bytes.
struct Building {
    bdf: Bdf,
    line: usize,
    bytes: Vec<u8>,
    given: Vec<bool>,
    len: usize,
}

impl Building {
    fn new() -> Self {
        Building { bdf: Bdf { domain: 0, bus: 0, device: 0, function: 0 }, line: 0, bytes: vec![0xff; MAX_CONFIG_BYTES], given: vec![false; MAX_CONFIG_BYTES], len: 0 }
    }

    fn start(&mut self, bdf: Bdf, line: usize) {
        (self.bdf, self.line) = (bdf, line);
    }

    /// Store a row's bytes from `offset` on, exactly as pciutils does (single spaces between
    /// bytes, one trailing space allowed).
    fn store_row(&mut self, mut offset: usize, mut rest: &str, number: usize) -> Result<(), InvalidInput> {
        loop {
            let b = rest.as_bytes();
            let is_byte = b.len() >= 2 && b[0].is_ascii_hexdigit() && b[1].is_ascii_hexdigit() && (b.len() == 2 || b[2] == b' ');
            if !is_byte {
                break;
            }
            if offset >= MAX_CONFIG_BYTES {
                return Err(error(number, format!("byte at offset 0x{offset:x}: config space holds at most 4096 bytes (lspci refuses this dump too)")));
            }
            self.bytes[offset] = u8::from_str_radix(&rest[..2], 16).expect("two hex digits");
            self.given[offset] = true;
            offset += 1;
            self.len = self.len.max(offset);
            rest = rest.get(3..).unwrap_or("");
        }
        if !rest.is_empty() {
            let shown: String = rest.chars().take(12).collect();
            return Err(error(number, format!("malformed row at '{shown}': expected bytes of two hex digits separated by single spaces (lspci refuses this dump too)")));
        }
        Ok(())
    }

    /// The device read so far, leaving `self` clean for the next one (only bytes below `len`
    /// were touched).
    fn finish(&mut self, warnings: &mut Vec<String>) -> DumpDevice {
        let (bdf, line, len) = (self.bdf, self.line, self.len);
        if let Some(first) = self.given[..len].iter().position(|g| !g) {
            let missing = self.given[..len].iter().filter(|g| !**g).count();
            warnings.push(format!("device {bdf} (line {line}): {missing} byte(s) below 0x{len:x} missing from offset 0x{first:x} on, read as ff (as lspci reads them)"));
        }
        if !LENGTHS.contains(&len) {
            warnings.push(format!(
                "device {bdf} (line {line}): {len} bytes of config space, not 64, 256 or 4096 (lspci -x, -xxx, -xxxx); fields beyond byte {len} are unavailable — truncated paste?"
            ));
        }
        let config = ConfigSpace::new(self.bytes[..len].to_vec());
        self.bytes[..len].fill(0xff);
        self.given[..len].fill(false);
        self.len = 0;
        DumpDevice { bdf, config, line }
    }
}

/// Lines pciutils passes over, collected for one warning.
#[derive(Default)]
struct Ignored {
    shown: Vec<String>,
    count: usize,
}

impl Ignored {
    fn add(&mut self, number: usize, line: &str, why: &str) {
        self.count += 1;
        if self.shown.len() < SHOWN_IGNORED {
            let text: String = line.chars().take(40).collect();
            self.shown.push(format!("line {number} '{text}' ({why})"));
        }
    }

    fn warning(&self) -> Option<String> {
        (self.count > 0).then(|| {
            let more = if self.count > self.shown.len() { format!("; {} more", self.count - self.shown.len()) } else { String::new() };
            format!("{} line(s) ignored as lspci ignores them: {}{more}", self.count, self.shown.join("; "))
        })
    }
}

/// Parse a whole dump. Errors name the 1-based line; oddities lspci passes over are warnings.
pub fn parse(text: &str) -> Result<Dump, InvalidInput> {
    let mut devices = Vec::new();
    let warnings = parse_each(text.as_bytes(), |device| devices.push(device))?;
    Ok(Dump { devices, warnings })
}

/// Parse a dump from `input` line by line, handing each device to `each` as soon as it ends:
/// memory is what `each` keeps, not the text (a 65,536-device dump is 55 MB of hex). Returns the
/// warnings; errors as [`parse`].
pub fn parse_each(mut input: impl std::io::BufRead, mut each: impl FnMut(DumpDevice)) -> Result<Vec<String>, InvalidInput> {
    let mut parser = Parser::new();
    let mut raw = Vec::new();
    loop {
        raw.clear();
        if input.read_until(b'\n', &mut raw).map_err(crate::bounded::into_invalid)? == 0 {
            break;
        }
        // Device names in verbose text may be in any encoding; only addresses and rows matter.
        // A newline never ends a multi-byte sequence, so line by line reads as the whole text.
        if let Some(device) = parser.line(&String::from_utf8_lossy(&raw))? {
            each(device);
        }
    }
    Ok(parser.end(each))
}

/// The state of [`parse_each`] between lines.
struct Parser {
    warnings: Vec<String>,
    ignored: Ignored,
    long_lines: Vec<usize>,
    building: Building,
    /// Whether `building` holds a device (after its address line, before its end).
    open: bool,
    /// Lines read so far.
    number: usize,
    /// Each address's first line: duplicates are found in constant time (dumps of 65,536 devices).
    first_line: std::collections::HashMap<Bdf, usize>,
}

impl Parser {
    fn new() -> Self {
        let (warnings, ignored, long_lines, first_line) = Default::default();
        Parser { warnings, ignored, long_lines, building: Building::new(), open: false, number: 0, first_line }
    }

    /// The open device, if any, ended.
    fn finish(&mut self) -> Option<DumpDevice> {
        std::mem::take(&mut self.open).then(|| self.building.finish(&mut self.warnings))
    }

    /// Read one line (with its newline, if it has one); the device it ends, if any.
    fn line(&mut self, raw: &str) -> Result<Option<DumpDevice>, InvalidInput> {
        self.number += 1;
        let number = self.number;
        if !raw.ends_with('\n') {
            self.warnings.push(format!("line {number}, the last, has no newline (lspci refuses such a dump: \"line too long or unterminated\")"));
        }
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.len() > LSPCI_MAX_LINE && line.chars().count() > LSPCI_MAX_LINE {
            self.long_lines.push(number);
        }
        if let Some(bdf) = device_line(line) {
            let ended = self.finish();
            if bdf.device > 0x1f || bdf.function > 7 {
                self.warnings.push(format!("line {number}: device {bdf} is outside 00–1f.0–7; read as lspci reads it"));
            }
            if let Some(first) = self.first_line.get(&bdf) {
                self.warnings.push(format!("line {number}: device {bdf} appears again (first at line {first}); lspci lists both, pcieperf keeps the first"));
            } else {
                self.first_line.insert(bdf, number);
            }
            self.building.start(bdf, number);
            self.open = true;
            return Ok(ended);
        }
        if line.is_empty() {
            return Ok(self.finish());
        }
        if let Some((offset, rest)) = row(line) {
            match self.open {
                true => self.building.store_row(offset, rest, number)?,
                false => self.ignored.add(number, line, "a row outside any device: after a blank line or before the first address"),
            }
        } else if !line.starts_with(char::is_whitespace) {
            // Indented lines are lspci's verbose text, expected in `lspci -vvxxx` output.
            let why = if device_like(line) { "an address without the space lspci needs after it" } else { "neither a device address nor a row" };
            self.ignored.add(number, line, why);
        }
        Ok(None)
    }

    /// End of input: the last device to `each`, and every warning.
    fn end(mut self, mut each: impl FnMut(DumpDevice)) -> Vec<String> {
        if let Some(device) = self.finish() {
            each(device);
        }
        self.warnings.extend(self.ignored.warning());
        if !self.long_lines.is_empty() {
            self.warnings.push(format!("line(s) {:?} are longer than {LSPCI_MAX_LINE} characters (lspci refuses such a dump: \"line too long\")", self.long_lines));
        }
        self.warnings
    }
}

/// A line that is an address with nothing after it: a device line whose text a mail client
/// wrapped onto the next line, or stripped.
fn device_like(line: &str) -> bool {
    device_line(&format!("{line} ")).is_some()
}

/// Read a dump from `path`, or standard input for `-`, within `crate::bounded::DUMP` (a regular
/// file or a pipe; devices and endless inputs are refused with a message), each device handed to
/// `each` as it ends ([`parse_each`]): the text is never held whole.
pub fn read_each(path: &Path, each: impl FnMut(DumpDevice)) -> Result<Vec<String>, InvalidInput> {
    if path != Path::new("-") {
        crate::bounded::check_file(path, crate::bounded::DUMP)?;
    }
    let input = crate::bounded::stream(path, crate::bounded::DUMP)?;
    parse_each(std::io::BufReader::with_capacity(1 << 16, input), each)
}

/// Write devices in `lspci -xxxx` form (what `lspci -F` reads back).
pub fn write(devices: &[(Bdf, &[u8])]) -> String {
    let mut out = String::new();
    for (bdf, bytes) in devices {
        out += &format!("{bdf} Device\n");
        out += &hex_rows(bytes);
        out += "\n";
    }
    out
}

/// Config bytes as lspci's `-x` prints them: `OFF: xx xx …`, 16 to a row.
pub fn hex_rows(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (row, chunk) in bytes.chunks(16).enumerate() {
        out += &format!("{:02x}:", row * 16);
        for b in chunk {
            out += &format!(" {b:02x}");
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(len: usize) -> String {
        (0..len / 16).map(|r| format!("{:02x}: {}\n", r * 16, vec!["ab"; 16].join(" "))).collect()
    }

    #[test]
    fn reads_several_devices_and_skips_verbose_text() {
        let text = format!("00:00.0 Host bridge: Intel\n\tControl: I/O-\n{}\n0000:01:00.0 VGA\n{}", rows(64), rows(256));
        let dump = parse(&text).unwrap();
        assert_eq!(dump.devices.len(), 2);
        assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
        assert_eq!(dump.devices[1].bdf.to_string(), "0000:01:00.0");
        assert_eq!(dump.devices[1].config.len(), 256);
        let again = parse(&write(&[(dump.devices[1].bdf, dump.devices[1].config.bytes())])).unwrap();
        assert_eq!(again.devices[0].config, dump.devices[1].config);
    }

    #[test]
    fn reads_what_lspci_reads_and_warns() {
        let gap = format!("00:00.0 x\n{}30: 00\n", rows(32));
        let dump = parse(&gap).unwrap();
        assert_eq!(dump.devices[0].config.len(), 0x31);
        assert_eq!(dump.devices[0].config.bytes()[0x20], 0xff);
        assert!(dump.warnings.iter().any(|w| w.contains("missing from offset 0x20")), "{:?}", dump.warnings);
        assert!(dump.warnings.iter().any(|w| w.contains("49 bytes")), "{:?}", dump.warnings);
        let wrapped = format!("00:1f.3 Audio device: Intel Corporation (rev\n21)\n{}", rows(64));
        let dump = parse(&wrapped).unwrap();
        assert_eq!(dump.devices[0].config.len(), 64);
        assert!(dump.warnings[0].contains("line 2 '21)'"), "{:?}", dump.warnings);
        let duplicate = format!("00:00.0 x\n{}\n00:00.0 y\n{}", rows(64), rows(64));
        assert!(parse(&duplicate).unwrap().warnings[0].contains("appears again"));
        assert!(parse("00: 00 11\n").unwrap().warnings[0].contains("outside any device"));
        assert!(parse("00:00.0\n00: 00\n").unwrap().warnings[0].contains("without the space"));
        assert!(parse(&format!("00:00.0 x\n{}", rows(64).trim_end())).unwrap().warnings[0].contains("no newline"));
    }

    #[test]
    fn refuses_what_lspci_refuses() {
        let bad_hex = format!("00:00.0 x\n{}30: zz 00\n", rows(48));
        assert!(parse(&bad_hex).unwrap_err().0.contains("line 5"));
        let odd = format!("00:00.0 x\n{}40: 0\n", rows(64));
        assert!(parse(&odd).unwrap_err().0.contains("line 6"));
        assert!(parse("00:00.0 x\n1000: 00\n").unwrap_err().0.contains("4096"));
        assert!(parse("00:00.0 x\n00:  00\n").unwrap_err().0.contains("malformed"));
    }
}
