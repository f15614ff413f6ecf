//! The configuration header as lspci 3.9's `-v`/`-vv` prints it (`lspci.c`: `show_verbose`,
//! `show_bases`, `show_rom`, `show_htype1`): `Control:`/`Status:`/`Latency:`/`Interrupt:` (`-vv`),
//! `Flags:` (`-v`), BIST, regions, expansion ROM, and a bridge's bus numbers, windows,
//! `Secondary status:` and `BridgeCtl:`. From a dump, addresses and the IRQ are the registers';
//! on a live machine (not `-b`) they are the kernel's, from sysfs `resource` and `irq`, as
//! libpci's sysfs access fills them, with the registers read only to find `[virtual]` regions.

use super::caps::flag;
use super::config::{ConfigSpace, HeaderType, COMMAND, STATUS};
use super::sysfs::Resource;

const COMMAND_IO: u16 = 0x1;
const COMMAND_MEMORY: u16 = 0x2;
const COMMAND_MASTER: u16 = 0x4;
const INTERRUPT_LINE: usize = 0x3c;
const INTERRUPT_PIN: usize = 0x3d;
const BIST: usize = 0x0f;
const BIST_CAPABLE: u8 = 0x80;
const BIST_START: u8 = 0x40;
const ROM_ADDRESS_MASK: u64 = !0x7ff;

/// What the header lines need beyond the bytes: the kernel's view (live only) and the NUMA node.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeaderFacts<'a> {
    pub kernel: Option<KernelView<'a>>,
    pub numa_node: Option<i32>,
}

/// What lspci takes from sysfs instead of the registers on a live machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelView<'a> {
    /// `resource`'s lines (BARs 0–5, then the ROM); empty where it could not be read.
    pub resources: &'a [Resource],
    /// `irq`, where readable.
    pub irq: Option<u32>,
}

// `IORESOURCE_*` flags of sysfs `resource` (lspci's `PCI_IORESOURCE_*`).
const IORESOURCE_IO: u64 = 0x100;
const IORESOURCE_MEM: u64 = 0x200;
const IORESOURCE_TYPE_BITS: u64 = 0x1f00;
const IORESOURCE_PREFETCH: u64 = 0x2000;
const IORESOURCE_MEM_64: u64 = 0x10_0000;
const IORESOURCE_PCI_EA_BEI: u64 = 0x20;
/// The register bits libpci keeps in a kernel address (`PCI_ADDR_FLAG_MASK`).
const ADDR_FLAG_MASK: u64 = 0xf;

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
    let irq = facts.kernel.and_then(|k| k.irq).unwrap_or(u32::from(b(INTERRUPT_LINE)));
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
            out.extend(regions(config, 6, verbose, facts.kernel));
            out.extend(rom(config, 0x30, facts.kernel));
        }
        HeaderType::Bridge => {
            out.extend(regions(config, 2, verbose, facts.kernel));
            out.extend(bridge(config, verbose, facts.kernel));
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
fn flags_line(cmd: u16, status: u16, latency: u8, irq: u32, numa_node: Option<i32>) -> String {
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

/// One region as `show_bases` sees it: the address, the register-style flags, the size, the
/// kernel's flags, and what the hardware holds (live only: to tell `[virtual]` and `<ignored>`).
#[derive(Default)]
struct Region {
    position: u64,
    flags: u32,
    size: u64,
    kernel_flags: u64,
    hw_lower: u32,
    hw_upper: u32,
    broken: bool,
    virtual_: bool,
}

/// lspci's `ioflg_to_pciflg`: the kernel's flags as a BAR's low bits.
fn register_flags(kernel_flags: u64) -> u32 {
    if kernel_flags & IORESOURCE_IO != 0 {
        1
    } else if kernel_flags & IORESOURCE_MEM == 0 {
        0
    } else {
        let width = if kernel_flags & IORESOURCE_MEM_64 != 0 { 0x4 } else { 0 };
        width | if kernel_flags & IORESOURCE_PREFETCH != 0 { 0x8 } else { 0 }
    }
}

/// The regions from the registers alone (a dump, or `-b`).
fn regions_from_registers(config: &ConfigSpace, count: usize) -> Vec<Region> {
    let addresses = bar_addresses(config, count);
    (0..count)
        .map(|i| Region { position: addresses[i], flags: config.u32_at(0x10 + 4 * i).filter(|f| *f != u32::MAX).unwrap_or(0), ..Region::default() })
        .collect()
}

/// The regions as the kernel placed them (sysfs `resource`), the registers read beside them
/// as lspci reads them — including its read of the upper half at byte offset +1.
fn regions_from_kernel(config: &ConfigSpace, count: usize, resources: &[Resource]) -> Vec<Region> {
    let register = |at: usize| config.u32_at(at).unwrap_or(0);
    (0..count)
        .map(|i| {
            let r = resources.get(i).copied().unwrap_or_default();
            let mut region = Region { position: r.start | (r.flags & ADDR_FLAG_MASK), flags: register_flags(r.flags), size: r.size_bytes(), kernel_flags: r.flags, ..Region::default() };
            region.hw_lower = register(0x10 + 4 * i);
            if region.hw_lower & 1 == region.flags & 1 {
                if r.flags & IORESOURCE_TYPE_BITS == IORESOURCE_MEM && region.hw_lower & 0x6 == 0x4 {
                    if i + 1 >= count {
                        region.broken = true;
                    } else {
                        region.hw_upper = register(0x10 + 4 * i + 1);
                    }
                }
                region.virtual_ = region.position != 0 && region.hw_lower == 0 && region.hw_upper == 0 && r.flags & IORESOURCE_PCI_EA_BEI == 0;
            }
            region
        })
        .collect()
}

/// `Region 0: Memory at fb000000 (64-bit, prefetchable) [size=1M]` (`-v`: without `Region 0: `).
fn regions(config: &ConfigSpace, count: usize, verbose: u8, kernel: Option<KernelView>) -> Vec<String> {
    let cmd = config.u16_at(COMMAND).unwrap_or(0);
    let regions = match kernel {
        Some(k) if !k.resources.is_empty() => regions_from_kernel(config, count, k.resources),
        _ => regions_from_registers(config, count),
    };
    let mut out = Vec::new();
    for (i, region) in regions.iter().enumerate() {
        if region.position == 0 && region.flags == 0 && region.size == 0 {
            continue;
        }
        let mut line = if verbose > 1 { format!("Region {i}: ") } else { String::new() };
        let unset = if region.hw_lower != 0 || region.hw_upper != 0 { "<ignored>" } else { "<unassigned>" };
        if region.flags & 1 == 1 {
            let address = region.position & !0x3;
            line += "I/O ports at ";
            line += &if address != 0 || cmd & COMMAND_IO != 0 { format!("{address:04x}") } else if region.hw_lower != 0 { "<ignored>".into() } else { "<unassigned>".into() };
            line += disabled(region.virtual_, cmd & COMMAND_IO == 0);
        } else {
            let address = region.position & !0xf;
            line += "Memory at ";
            line += &if region.broken { "<broken-64-bit-slot>".to_string() } else if address != 0 { format!("{address:08x}") } else { unset.to_string() };
            let width = ["32-bit", "low-1M", "64-bit", "type 3"][(region.flags as usize >> 1) & 3];
            line += &format!(" ({width}, {}prefetchable)", if region.flags & 0x8 != 0 { "" } else { "non-" });
            line += disabled(region.virtual_, cmd & COMMAND_MEMORY == 0);
        }
        if region.kernel_flags & IORESOURCE_PCI_EA_BEI != 0 {
            line += " [enhanced]";
        }
        out.push(line + &size_suffix(region.size));
    }
    out
}

fn disabled(virtual_: bool, off: bool) -> &'static str {
    if virtual_ {
        " [virtual]"
    } else if off {
        " [disabled]"
    } else {
        ""
    }
}

/// `Expansion ROM at …` from the ROM register at `reg` (and, live, the kernel's ROM resource),
/// when it holds anything.
fn rom(config: &ConfigSpace, reg: usize, kernel: Option<KernelView>) -> Option<String> {
    let value = config.u32_at(reg)?;
    let resource = kernel.and_then(|k| k.resources.get(6).copied());
    let (address, size, kernel_flags) = match resource {
        Some(r) => (r.start | (r.flags & ADDR_FLAG_MASK), r.size_bytes(), r.flags),
        None => (if value == u32::MAX { 0 } else { u64::from(value) }, 0, 0),
    };
    let mut flags = u64::from(value);
    if address == 0 && flags == 0 && size == 0 {
        return None;
    }
    let virtual_ = resource.is_some() && address & ROM_ADDRESS_MASK != 0 && flags & ROM_ADDRESS_MASK == 0 && kernel_flags & IORESOURCE_PCI_EA_BEI == 0;
    if virtual_ {
        flags = address;
    }
    let cmd = config.u16_at(COMMAND).unwrap_or(0);
    let mut line = "Expansion ROM at ".to_string();
    line += &if address & ROM_ADDRESS_MASK != 0 {
        format!("{:08x}", address & ROM_ADDRESS_MASK)
    } else if flags & ROM_ADDRESS_MASK != 0 {
        "<ignored>".to_string()
    } else {
        "<unassigned>".to_string()
    };
    if virtual_ {
        line += " [virtual]";
    }
    if flags & 1 == 0 {
        line += " [disabled]";
    } else if !virtual_ && cmd & COMMAND_MEMORY == 0 {
        line += " [disabled by cmd]";
    }
    if kernel_flags & IORESOURCE_PCI_EA_BEI != 0 {
        line += " [enhanced]";
    }
    Some(line + &size_suffix(size))
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
fn bridge(config: &ConfigSpace, verbose: u8, kernel: Option<KernelView>) -> Vec<String> {
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
    lines.extend(rom(config, 0x38, kernel));
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
        let resources = [Resource { start: 0xfb00_0000, end: 0xfb0f_ffff, flags: 0x14_220c }];
        let kernel = Some(KernelView { resources: &resources, irq: Some(41) });
        let v = lines(&config, 1, HeaderFacts { kernel, numa_node: Some(0) });
        assert_eq!(v, ["Flags: bus master, fast devsel, latency 0, IRQ 41, NUMA node 0", "Memory at fb000000 (64-bit, prefetchable) [size=1M]"]);
    }

    /// Seen on a Firecracker guest's virtio functions: BAR 1 holds the upper half of BAR 0's
    /// address. From the bytes lspci 3.9 prints it as a region of its own; live it prints the
    /// kernel's resources, where that line is empty, and the kernel's IRQ.
    #[test]
    fn the_upper_half_of_a_64_bit_bar_shows_only_from_a_dump() {
        let mut bytes = endpoint();
        bytes[0x10..0x18].copy_from_slice(&[0x04, 0, 0, 0, 0x40, 0, 0, 0]);
        let config = ConfigSpace::new(bytes);
        let dump = lines(&config, 2, HeaderFacts::default());
        assert_eq!(dump[3..], ["Interrupt: pin A routed to IRQ 11", "Region 0: Memory at 4000000000 (64-bit, non-prefetchable)", "Region 1: Memory at <unassigned> (32-bit, non-prefetchable)"]);
        let resources = [Resource { start: 0x40_0000_0000, end: 0x40_0007_ffff, flags: 0x14_0204 }, Resource::default()];
        let live = lines(&config, 2, HeaderFacts { kernel: Some(KernelView { resources: &resources, irq: Some(0) }), numa_node: None });
        assert_eq!(live[3..], ["Interrupt: pin A routed to IRQ 0", "Region 0: Memory at 4000000000 (64-bit, non-prefetchable) [size=512K]"]);
        // A region the kernel placed where the register holds nothing is virtual.
        bytes = endpoint();
        bytes[0x10..0x14].copy_from_slice(&[0; 4]);
        let config = ConfigSpace::new(bytes);
        let resources = [Resource { start: 0xfe00_0000, end: 0xfe00_ffff, flags: 0x4_0200 }];
        let live = lines(&config, 2, HeaderFacts { kernel: Some(KernelView { resources: &resources, irq: Some(16) }), numa_node: None });
        assert_eq!(live.last().unwrap(), "Region 0: Memory at fe000000 (32-bit, non-prefetchable) [virtual] [size=64K]");
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
