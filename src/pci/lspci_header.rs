//! The configuration header as lspci 3.9's `-v`/`-vv` prints it (`lspci.c`: `show_verbose`,
//! `show_bases`, `show_rom`, `show_htype1`): `Control:`/`Status:`/`Latency:`/`Interrupt:` (`-vv`),
//! `Flags:` (`-v`), BIST, regions, expansion ROM, and a bridge's bus numbers, windows,
//! `Secondary status:` and `BridgeCtl:`. Addresses are the registers' (as lspci reads a dump);
//! sizes are the kernel's when known.

use super::caps::flag;
use super::config::{ConfigSpace, HeaderType, COMMAND, STATUS};

const COMMAND_IO: u16 = 0x1;
const COMMAND_MEMORY: u16 = 0x2;
const COMMAND_MASTER: u16 = 0x4;
const INTERRUPT_LINE: usize = 0x3c;
const INTERRUPT_PIN: usize = 0x3d;
const BIST: usize = 0x0f;
const BIST_CAPABLE: u8 = 0x80;
const BIST_START: u8 = 0x40;
const ROM_ADDRESS_MASK: u64 = !0x7ff;

/// What the header lines need beyond the bytes: BAR sizes (sysfs, live only) and the NUMA node.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeaderFacts<'a> {
    pub bar_sizes_bytes: &'a [Option<u64>],
    pub numa_node: Option<i32>,
}

fn devsel(status: u16) -> &'static str {
    ["fast", "medium", "slow", "??"][usize::from(status >> 9 & 3)]
}

fn bit(value: u16, n: u32) -> char {
    flag(value >> n & 1 == 1)
}

/// Every header line lspci prints between `Subsystem:` and the capabilities, at `verbose`.
pub fn lines(config: &ConfigSpace, verbose: u8, facts: HeaderFacts) -> Vec<String> {
    // lspci prints nothing of a header it could not read whole.
    if !config.has(0, 64) {
        return Vec::new();
    }
    let b = |at: usize| config.u8_at(at).unwrap_or(0);
    let w = |at: usize| config.u16_at(at).unwrap_or(0);
    let header = config.header_type().unwrap_or(HeaderType::Unknown(0x7f));
    let class = w(0x0a);
    let mut out = Vec::new();
    let (bist, min_gnt, max_lat, known) = match header {
        HeaderType::Normal => {
            if class == 0x0604 {
                out.push(format!("!!! Invalid class {class:04x} for header type 00"));
            }
            (b(BIST), b(0x3e), b(0x3f), true)
        }
        HeaderType::Bridge | HeaderType::CardBus => {
            if class >> 8 != 0x06 {
                out.push(format!("!!! Invalid class {class:04x} for header type {:02x}", b(0x0e) & 0x7f));
            }
            (b(BIST), 0, 0, true)
        }
        HeaderType::Unknown(code) => {
            out.push(format!("!!! Unknown header type {code:02x}"));
            (0, 0, 0, false)
        }
    };
    let (cmd, status) = (w(COMMAND), w(STATUS));
    let irq = b(INTERRUPT_LINE);
    if known && verbose > 1 {
        out.push(format!(
            "Control: I/O{} Mem{} BusMaster{} SpecCycle{} MemWINV{} VGASnoop{} ParErr{} Stepping{} SERR{} FastB2B{} DisINTx{}",
            bit(cmd, 0), bit(cmd, 1), bit(cmd, 2), bit(cmd, 3), bit(cmd, 4), bit(cmd, 5), bit(cmd, 6), bit(cmd, 7), bit(cmd, 8), bit(cmd, 9), bit(cmd, 10)
        ));
        out.push(format!(
            "Status: Cap{} 66MHz{} UDF{} FastB2B{} ParErr{} DEVSEL={} >TAbort{} <TAbort{} <MAbort{} >SERR{} <PERR{} INTx{}",
            bit(status, 4), bit(status, 5), bit(status, 6), bit(status, 7), bit(status, 8), devsel(status), bit(status, 11), bit(status, 12), bit(status, 13), bit(status, 14), bit(status, 15), bit(status, 3)
        ));
        if cmd & COMMAND_MASTER != 0 {
            out.push(latency_line(b(0x0d), min_gnt, max_lat, b(0x0c)));
        }
    }
    if verbose > 1 {
        let pin = if known { b(INTERRUPT_PIN) } else { 0 };
        if pin != 0 || irq != 0 {
            let pin = if pin != 0 { char::from(b'A'.wrapping_add(pin - 1)) } else { '?' };
            out.push(format!("Interrupt: pin {pin} routed to IRQ {irq}"));
        }
        if let Some(node) = facts.numa_node {
            out.push(format!("NUMA node: {node}"));
        }
    }
    if known && verbose <= 1 {
        out.push(flags_line(cmd, status, b(0x0d), irq, facts.numa_node));
    }
    if bist & BIST_CAPABLE != 0 {
        out.push(if bist & BIST_START != 0 { "BIST is running".to_string() } else { format!("BIST result: {:02x}", bist & 0x0f) });
    }
    match header {
        HeaderType::Normal => {
            out.extend(regions(config, 6, verbose, facts.bar_sizes_bytes));
            out.extend(rom(config, 0x30));
        }
        HeaderType::Bridge => {
            out.extend(regions(config, 2, verbose, facts.bar_sizes_bytes));
            out.extend(bridge(config, verbose));
        }
        _ => {}
    }
    out
}

/// `-vv`'s `Latency: 0 (250ns min, 500ns max), Cache Line Size: 64 bytes`.
fn latency_line(latency: u8, min_gnt: u8, max_lat: u8, cache_line: u8) -> String {
    let mut line = format!("Latency: {latency}");
    if min_gnt != 0 || max_lat != 0 {
        let parts: Vec<String> = [(min_gnt, "min"), (max_lat, "max")].iter().filter(|(v, _)| *v != 0).map(|(v, name)| format!("{}ns {name}", u32::from(*v) * 250)).collect();
        line += &format!(" ({})", parts.join(", "));
    }
    if cache_line != 0 {
        line += &format!(", Cache Line Size: {} bytes", u32::from(cache_line) * 4);
    }
    line
}

/// `-v`'s `Flags: bus master, fast devsel, latency 0, IRQ 16, NUMA node 0`.
fn flags_line(cmd: u16, status: u16, latency: u8, irq: u8, numa_node: Option<i32>) -> String {
    let mut line = "Flags: ".to_string();
    for (set, text) in [
        (cmd & COMMAND_MASTER != 0, "bus master, "),
        (cmd & 0x20 != 0, "VGA palette snoop, "),
        (cmd & 0x80 != 0, "stepping, "),
        (cmd & 0x200 != 0, "fast Back2Back, "),
        (status & 0x20 != 0, "66MHz, "),
        (status & 0x40 != 0, "user-definable features, "),
    ] {
        if set {
            line += text;
        }
    }
    line += &format!("{} devsel", devsel(status));
    if cmd & COMMAND_MASTER != 0 {
        line += &format!(", latency {latency}");
    }
    if irq != 0 {
        line += &format!(", IRQ {irq}");
    }
    if let Some(node) = numa_node {
        line += &format!(", NUMA node {node}");
    }
    line
}

/// lspci's `show_size`: ` [size=64K]` in the largest binary unit that divides the size.
pub fn size_suffix(mut size: u64) -> String {
    if size == 0 {
        return String::new();
    }
    let mut unit = 0;
    while unit < 4 && size % 1024 == 0 {
        size /= 1024;
        unit += 1;
    }
    // lspci prints the count as a C `unsigned`: huge windows wrap as they do in lspci.
    format!(" [size={}{}]", size as u32, ["", "K", "M", "G", "T"][unit])
}

/// The base address registers as libpci reads them from the header: a 64-bit memory BAR takes
/// its upper half from the next register, which then reads as no address of its own.
fn bar_addresses(config: &ConfigSpace, count: usize) -> Vec<u64> {
    let raw = |i: usize| config.u32_at(0x10 + 4 * i).unwrap_or(0);
    let mut addresses = vec![0u64; count];
    let mut i = 0;
    while i < count {
        let x = raw(i);
        if x != 0 && x != u32::MAX {
            if x & 1 == 1 || x & 0x6 != 0x4 {
                addresses[i] = u64::from(x);
            } else if i + 1 < count {
                addresses[i] = u64::from(x) | u64::from(raw(i + 1)) << 32;
                i += 1;
            }
        }
        i += 1;
    }
    addresses
}

/// `Region 0: Memory at fb000000 (64-bit, prefetchable) [size=1M]` (`-v`: without `Region 0: `).
fn regions(config: &ConfigSpace, count: usize, verbose: u8, sizes: &[Option<u64>]) -> Vec<String> {
    let cmd = config.u16_at(COMMAND).unwrap_or(0);
    let addresses = bar_addresses(config, count);
    let mut out = Vec::new();
    for (i, &position) in addresses.iter().enumerate() {
        let size = sizes.get(i).copied().flatten().unwrap_or(0);
        let flags = config.u32_at(0x10 + 4 * i).filter(|f| *f != u32::MAX).unwrap_or(0);
        if position == 0 && flags == 0 && size == 0 {
            continue;
        }
        let mut line = if verbose > 1 { format!("Region {i}: ") } else { String::new() };
        if flags & 1 == 1 {
            let address = position & !0x3;
            line += "I/O ports at ";
            line += &if address != 0 || cmd & COMMAND_IO != 0 { format!("{address:04x}") } else { "<unassigned>".to_string() };
            if cmd & COMMAND_IO == 0 {
                line += " [disabled]";
            }
        } else {
            let address = position & !0xf;
            line += "Memory at ";
            line += &if address != 0 { format!("{address:08x}") } else { "<unassigned>".to_string() };
            let width = ["32-bit", "low-1M", "64-bit", "type 3"][(flags as usize >> 1) & 3];
            line += &format!(" ({width}, {}prefetchable)", if flags & 0x8 != 0 { "" } else { "non-" });
            if cmd & COMMAND_MEMORY == 0 {
                line += " [disabled]";
            }
        }
        out.push(line + &size_suffix(size));
    }
    out
}

/// `Expansion ROM at …` from the ROM register at `reg`, when it holds anything.
fn rom(config: &ConfigSpace, reg: usize) -> Option<String> {
    let value = config.u32_at(reg)?;
    let address = if value == u32::MAX { 0 } else { u64::from(value) };
    if address == 0 && value == 0 {
        return None;
    }
    let cmd = config.u16_at(COMMAND).unwrap_or(0);
    let mut line = "Expansion ROM at ".to_string();
    line += &if address & ROM_ADDRESS_MASK != 0 {
        format!("{:08x}", address & ROM_ADDRESS_MASK)
    } else if u64::from(value) & ROM_ADDRESS_MASK != 0 {
        "<ignored>".to_string()
    } else {
        "<unassigned>".to_string()
    };
    if value & 1 == 0 {
        line += " [disabled]";
    } else if cmd & COMMAND_MEMORY == 0 {
        line += " [disabled by cmd]";
    }
    Some(line)
}

fn range(prefix: &str, base: u64, limit: u64, bits: u32, verbose: u8) -> String {
    let digits = bits.div_ceil(4) as usize;
    let mut line = format!("{prefix}:");
    if base <= limit || verbose > 2 {
        line += &format!(" {base:0digits$x}-{limit:0digits$x}");
    }
    line += &if base <= limit { size_suffix(limit - base + 1) } else { " [disabled]".to_string() };
    line + &format!(" [{bits}-bit]")
}

/// A type 1 header's `Bus:` line, its I/O, memory and prefetchable windows (from the registers:
/// a dump has no kernel resource list), `Secondary status:`, ROM and `BridgeCtl:`.
fn bridge(config: &ConfigSpace, verbose: u8) -> Vec<String> {
    let b = |at: usize| u32::from(config.u8_at(at).unwrap_or(0));
    let w = |at: usize| u32::from(config.u16_at(at).unwrap_or(0));
    let mut lines = vec![format!("Bus: primary={:02x}, secondary={:02x}, subordinate={:02x}, sec-latency={}", b(0x18), b(0x19), b(0x1a), b(0x1b))];
    let (io_base, io_limit) = (b(0x1c), b(0x1d));
    let io_type = io_base & 0xf;
    if io_type != io_limit & 0xf || (io_type != 0 && io_type != 1) {
        lines.push(format!("!!! Unknown I/O range types {io_base:x}/{io_limit:x}"));
    } else {
        let upper = |at: usize| if io_type == 1 { u64::from(w(at)) << 16 } else { 0 };
        let base = u64::from(io_base & 0xf0) << 8 | upper(0x30);
        let limit = (u64::from(io_limit & 0xf0) << 8 | upper(0x32)) + 0xfff;
        lines.push(range("I/O behind bridge", base, limit, if io_type == 1 { 32 } else { 16 }, verbose));
    }
    let (mem_base, mem_limit) = (w(0x20), w(0x22));
    if mem_base & 0xf != mem_limit & 0xf || mem_base & 0xf != 0 {
        lines.push(format!("!!! Unknown memory range types {mem_base:x}/{mem_limit:x}"));
    } else {
        let base = u64::from(mem_base & 0xfff0) << 16;
        let limit = (u64::from(mem_limit & 0xfff0) << 16) + 0xfffff;
        lines.push(range("Memory behind bridge", base, limit, 32, verbose));
    }
    let (pref_base, pref_limit) = (w(0x24), w(0x26));
    let pref_type = pref_base & 0xf;
    if pref_type != pref_limit & 0xf || (pref_type != 0 && pref_type != 1) {
        lines.push(format!("!!! Unknown prefetchable memory range types {pref_base:x}/{pref_limit:x}"));
    } else {
        let upper = |at: usize| if pref_type == 1 { u64::from(config.u32_at(at).unwrap_or(0)) << 32 } else { 0 };
        let base = u64::from(pref_base & 0xfff0) << 16 | upper(0x28);
        let limit = (u64::from(pref_limit & 0xfff0) << 16 | upper(0x2c)) + 0xfffff;
        lines.push(range("Prefetchable memory behind bridge", base, limit, if pref_type == 1 { 64 } else { 32 }, verbose));
    }
    let secondary = w(0x1e) as u16;
    if verbose > 1 {
        let s = |n: u32| bit(secondary, n);
        lines.push(format!(
            "Secondary status: 66MHz{} FastB2B{} ParErr{} DEVSEL={} >TAbort{} <TAbort{} <MAbort{} <SERR{} <PERR{}",
            s(5), s(7), s(8), devsel(secondary), s(11), s(12), s(13), s(14), s(15)
        ));
    }
    lines.extend(rom(config, 0x38));
    if verbose > 1 {
        let control = w(0x3e) as u16;
        let c = |n: u32| bit(control, n);
        lines.push(format!("BridgeCtl: Parity{} SERR{} NoISA{} VGA{} VGA16{} MAbort{} >Reset{} FastB2B{}", c(0), c(1), c(2), c(3), c(4), c(5), c(6), c(7)));
        lines.push(format!("\tPriDiscTmr{} SecDiscTmr{} DiscTmrStat{} DiscTmrSERREn{}", c(8), c(9), c(10), c(11)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Vec<u8> {
        let mut bytes = vec![0u8; 64];
        bytes[0x04] = 0x06; // Mem+ BusMaster+
        bytes[0x06] = 0x10;
        bytes[0x10..0x14].copy_from_slice(&0xfb00_000cu32.to_le_bytes());
        bytes[0x3c] = 11;
        bytes[0x3d] = 1;
        bytes
    }

    #[test]
    fn endpoint_header_as_lspci() {
        let config = ConfigSpace::new(endpoint());
        let vv = lines(&config, 2, HeaderFacts::default());
        assert_eq!(vv[2..], ["Latency: 0", "Interrupt: pin A routed to IRQ 11", "Region 0: Memory at fb000000 (64-bit, prefetchable)"]);
        let v = lines(&config, 1, HeaderFacts { bar_sizes_bytes: &[Some(1 << 20)], numa_node: Some(0) });
        assert_eq!(v, ["Flags: bus master, fast devsel, latency 0, IRQ 11, NUMA node 0", "Memory at fb000000 (64-bit, prefetchable) [size=1M]"]);
    }

    #[test]
    fn sizes_as_lspci() {
        assert_eq!(size_suffix(0x100000), " [size=1M]");
        assert_eq!(size_suffix(0x1800), " [size=6K]");
        assert_eq!(size_suffix(0x1001), " [size=4097]");
    }

    #[test]
    fn bridge_control_lines() {
        let mut bytes = endpoint();
        bytes[0x0e] = 1;
        bytes[0x0a..0x0c].copy_from_slice(&0x0604u16.to_le_bytes());
        bytes[0x3e] = 0x02;
        let vv = lines(&ConfigSpace::new(bytes), 2, HeaderFacts::default());
        assert!(vv.contains(&"BridgeCtl: Parity- SERR+ NoISA- VGA- VGA16- MAbort- >Reset- FastB2B-".to_string()), "{vv:?}");
        assert!(vv.iter().any(|l| l.starts_with("Secondary status: 66MHz-")), "{vv:?}");
    }
}
