//! `lspci -x/-xxx/-xxxx` hex dumps (the format `lspci -F FILE` reads): a device line starting
//! with its address, then rows `OFF: xx xx …`, several devices per file. Lines lspci's verbose
//! output adds (indented by a tab) are skipped so a pasted `lspci -vvxxx` works too.
//!
//! Stricter than lspci on purpose: a malformed row, a gap, a duplicated address or a length other
//! than 64, 128, 256 or 4096 bytes is an error naming the line, not a silently short device.

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

const LENGTHS: [usize; 4] = [64, 128, 256, 4096];

fn error(line: usize, message: impl std::fmt::Display) -> InvalidInput {
    InvalidInput::new(format!("dump line {line}: {message}"))
}

/// `[domain:]bus:dev.func` at the start of a line, followed by a space or the end of the line.
fn device_line(text: &str) -> Option<&str> {
    let address = text.split(' ').next()?;
    let shape_ok = address.contains('.') && address.matches(':').count() >= 1 && address.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
    shape_ok.then_some(address)
}

/// `OFF: ` at the start of a line: 1–8 hex digits, a colon and a space (or nothing) after it.
fn row_offset(text: &str) -> Option<(&str, &str)> {
    let (offset, rest) = text.split_once(':')?;
    let shape_ok = !offset.is_empty() && offset.len() <= 8 && offset.bytes().all(|b| b.is_ascii_hexdigit());
    (shape_ok && (rest.is_empty() || rest.starts_with(' '))).then_some((offset, rest))
}

struct Building {
    bdf: Bdf,
    line: usize,
    bytes: Vec<u8>,
    last_line: usize,
}

impl Building {
    fn finish(self) -> Result<DumpDevice, InvalidInput> {
        if !LENGTHS.contains(&self.bytes.len()) {
            return Err(error(
                self.last_line,
                format!(
                    "device {} (line {}) has {} bytes of config space; a dump holds 64, 128, 256 or 4096 (lspci -x, -xxx, -xxxx) — truncated?",
                    self.bdf,
                    self.line,
                    self.bytes.len()
                ),
            ));
        }
        Ok(DumpDevice { bdf: self.bdf, config: ConfigSpace::new(self.bytes), line: self.line })
    }
}

/// Parse a whole dump. Errors name the 1-based line.
pub fn parse(text: &str) -> Result<Vec<DumpDevice>, InvalidInput> {
    let mut devices: Vec<DumpDevice> = Vec::new();
    let mut current: Option<Building> = None;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            if let Some(done) = current.take() {
                devices.push(done.finish()?);
            }
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            continue; // lspci -v text
        }
        if let Some((offset, rest)) = row_offset(line) {
            let building = current.as_mut().ok_or_else(|| error(number, "hex row before any device address line"))?;
            let offset = usize::from_str_radix(offset, 16).map_err(|_| error(number, "bad offset"))?;
            if offset != building.bytes.len() {
                return Err(error(number, format!("row at offset 0x{offset:x} but 0x{:x} bytes read so far: rows must be contiguous", building.bytes.len())));
            }
            parse_row(rest, number, &mut building.bytes)?;
            building.last_line = number;
            continue;
        }
        if let Some(address) = device_line(line) {
            let bdf: Bdf = address.parse().map_err(|e: InvalidInput| error(number, e.0))?;
            if let Some(done) = current.take() {
                devices.push(done.finish()?);
            }
            if let Some(previous) = devices.iter().find(|d| d.bdf == bdf) {
                return Err(error(number, format!("device {bdf} appears twice (first at line {})", previous.line)));
            }
            current = Some(Building { bdf, line: number, bytes: Vec::new(), last_line: number });
            continue;
        }
        let shown: String = line.chars().take(40).collect();
        return Err(error(number, format!("expected a device address (01:00.0 …) or a hex row (00: 86 80 …), found '{shown}'")));
    }
    if let Some(done) = current.take() {
        devices.push(done.finish()?);
    }
    Ok(devices)
}

fn parse_row(rest: &str, number: usize, bytes: &mut Vec<u8>) -> Result<(), InvalidInput> {
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    if tokens.is_empty() {
        return Err(error(number, "hex row without bytes"));
    }
    for token in tokens {
        if token.len() != 2 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            let shown: String = token.chars().take(12).collect();
            return Err(error(number, format!("'{shown}' is not a byte: expected two hex digits")));
        }
        if bytes.len() >= 4096 {
            return Err(error(number, "more than 4096 bytes of config space"));
        }
        bytes.push(u8::from_str_radix(token, 16).map_err(|_| error(number, "bad hex"))?);
    }
    Ok(())
}

/// Write devices in `lspci -xxxx` form (what `lspci -F` reads back).
pub fn write(devices: &[(Bdf, &[u8])]) -> String {
    let mut out = String::new();
    for (bdf, bytes) in devices {
        out += &format!("{bdf} Device\n");
        for (row, chunk) in bytes.chunks(16).enumerate() {
            let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            out += &format!("{:02x}: {}\n", row * 16, hex.join(" "));
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
        let devices = parse(&text).unwrap();
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[1].bdf.to_string(), "0000:01:00.0");
        assert_eq!(devices[1].config.len(), 256);
        let again = parse(&write(&[(devices[1].bdf, devices[1].config.bytes())])).unwrap();
        assert_eq!(again[0].config, devices[1].config);
    }

    #[test]
    fn errors_name_the_line() {
        let bad_hex = format!("00:00.0 x\n{}30: zz 00\n", rows(48));
        assert!(parse(&bad_hex).unwrap_err().0.contains("line 5"));
        let truncated = format!("00:00.0 x\n{}", rows(48));
        assert!(parse(&truncated).unwrap_err().0.contains("48 bytes"));
        let duplicate = format!("00:00.0 x\n{}\n00:00.0 y\n{}", rows(64), rows(64));
        assert!(parse(&duplicate).unwrap_err().0.contains("appears twice"));
        assert!(parse("00: 00 11\n").unwrap_err().0.contains("before any device"));
        assert!(parse("hello\n").unwrap_err().0.contains("line 1"));
        let odd = format!("00:00.0 x\n{}40: 0\n", rows(64));
        assert!(parse(&odd).unwrap_err().0.contains("line 6"));
    }
}
