//! `inspect -t`: the bus tree exactly as `lspci -t` (pciutils 3.9, `ls-tree.c`) draws it, so the
//! two outputs can be compared line for line.
//!
//! lspci's rules, restated: every function of class 06 with a type 1 or 2 header is a bridge
//! with the primary, secondary and subordinate bus numbers of its header; on a live machine the
//! parent sysfs reports adds one for a parent that is not such a bridge. Bridges all hang below
//! one host bridge (pciutils 3.9 compares bus ranges so that the host bridge always wins, which
//! flattens the bridge tree; the device tree comes out right anyway). A device goes to its
//! sysfs parent's first bus, else to the host bridge's bus of its number, else to the most
//! recently listed bridge whose range covers its bus, else to a new bus of the host bridge.
//! Drawing: `-[ss]-` or `-[ss-uu]-` after a bridge, `+-` for every device but the last of a bus,
//! `\-` for the last, `[dddd:bb]` labels when a bridge has several buses (or one, for the host).

use super::address::Bdf;
use super::config::ConfigSpace;

/// What the tree needs about one function, in address order.
#[derive(Debug, Clone)]
pub struct TreeDevice {
    pub bdf: Bdf,
    /// (primary, secondary, subordinate) bus numbers when the function is a bridge.
    pub bridge_buses: Option<(u8, u8, u8)>,
    /// The parent device sysfs names (live machine only).
    pub parent: Option<Bdf>,
    /// `-tv`'s name (lspci's `Vendor Device`, or numbers with `-n`).
    pub name: String,
    /// Matches `-s`/`-d`.
    pub selected: bool,
}

/// A bridge's bus numbers as lspci reads them for the tree: class 06 and a type 1 or 2 header
/// within the first 64 bytes (a shorter dump is no bridge to lspci).
pub fn bridge_buses(config: &ConfigSpace) -> Option<(u8, u8, u8)> {
    let bridge_class = config.class_code().is_some_and(|c| c >> 16 == 0x06);
    let header = config.u8_at(0x0e)? & 0x7f;
    (config.has(0, 64) && bridge_class && matches!(header, 1 | 2)).then(|| (config.bytes()[0x18], config.bytes()[0x19], config.bytes()[0x1a]))
}

struct Bridge {
    domain: u32,
    primary: u32,
    secondary: u32,
    subordinate: u32,
    device: Option<usize>,
    buses: Vec<usize>,
    /// In the order they were attached; lspci walks them newest first.
    children: Vec<usize>,
}

struct Bus {
    domain: u32,
    number: u32,
    devices: Vec<usize>,
}

struct Forest<'a> {
    devices: &'a [TreeDevice],
    bridges: Vec<Bridge>,
    buses: Vec<Bus>,
    /// Device index → the bridge it opens.
    bridge_of: Vec<Option<usize>>,
    /// Device index → its parent's index (sysfs).
    parent_of: Vec<Option<usize>>,
    filtered: bool,
}

const HOST: usize = 0;

/// The tree lspci -t prints (`verbose`: with names, as -tv), one line per leaf; `filtered`:
/// `-s`/`-d` were given, and only what leads to a selected device is drawn.
pub fn render(devices: &[TreeDevice], verbose: bool, filtered: bool) -> String {
    let mut out = Vec::new();
    write(devices, verbose, filtered, &mut out).expect("writing to memory cannot fail");
    String::from_utf8_lossy(&out).into_owned()
}

/// [`render`] to `writer` as it is drawn: a tree 255 bridges deep is 2 KB of indentation a
/// line, and 65,536 of them are 134 MB of text, which is not held.
pub fn write(devices: &[TreeDevice], verbose: bool, filtered: bool, writer: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut forest = Forest::grow(devices);
    forest.filtered = filtered;
    let mut out = Sink { lines: Vec::new(), writer, failed: None };
    forest.show_bridge(HOST, &mut Vec::new(), &mut out, verbose);
    out.pass()?;
    out.failed.map_or(Ok(()), Err)
}

/// Lines drawn, handed to the writer every [`Sink::BATCH_BYTES`]; the first error is kept and
/// the rest of the tree is not written.
struct Sink<'w> {
    lines: Vec<u8>,
    writer: &'w mut dyn std::io::Write,
    failed: Option<std::io::Error>,
}

impl Sink<'_> {
    const BATCH_BYTES: usize = 1 << 16;

    fn line(&mut self, text: &[u8]) {
        self.lines.extend_from_slice(text);
        self.lines.push(b'\n');
        if self.lines.len() >= Self::BATCH_BYTES {
            if let Err(e) = self.pass() {
                self.failed.get_or_insert(e);
            }
        }
    }

    fn pass(&mut self) -> std::io::Result<()> {
        if self.failed.is_none() {
            self.writer.write_all(&self.lines)?;
        }
        self.lines.clear();
        Ok(())
    }
}

/// Each device's parent as lspci places it (the bridge that opens the bus it hangs on; `None`
/// on a bus of the host bridge): what `-P`/`-PP` name a slot by.
pub fn parents(devices: &[TreeDevice]) -> Vec<Option<usize>> {
    let forest = Forest::grow(devices);
    let mut bridge_of_bus = vec![HOST; forest.buses.len()];
    for (b, bridge) in forest.bridges.iter().enumerate() {
        for &bus in &bridge.buses {
            bridge_of_bus[bus] = b;
        }
    }
    let mut parent = vec![None; devices.len()];
    for (bus, owner) in bridge_of_bus.into_iter().enumerate() {
        for &index in &forest.buses[bus].devices {
            parent[index] = forest.bridges[owner].device;
        }
    }
    parent
}

impl<'a> Forest<'a> {
    fn grow(devices: &'a [TreeDevice]) -> Self {
        let host = Bridge { domain: 0, primary: u32::MAX, secondary: 0, subordinate: u32::MAX, device: None, buses: Vec::new(), children: Vec::new() };
        let parent_of = devices.iter().map(|d| d.parent.and_then(|p| devices.iter().position(|e| e.bdf == p))).collect();
        let mut forest = Forest { devices, bridges: vec![host], buses: Vec::new(), bridge_of: vec![None; devices.len()], parent_of, filtered: false };
        for (index, device) in devices.iter().enumerate() {
            if let Some((primary, secondary, subordinate)) = device.bridge_buses {
                forest.add_bridge(index, primary, secondary, subordinate);
            }
        }
        for index in 0..devices.len() {
            if let Some(parent) = forest.parent_of[index].filter(|p| forest.bridge_of[*p].is_none()) {
                let bus = devices[index].bdf.bus;
                forest.add_bridge(parent, devices[parent].bdf.bus, bus, bus);
            }
        }
        forest.link_bridges();
        for b in 0..forest.bridges.len() {
            let (domain, secondary) = (forest.bridges[b].domain, forest.bridges[b].secondary);
            if forest.find_bus(b, domain, secondary).is_none() {
                forest.new_bus(b, domain, secondary);
            }
        }
        for index in 0..devices.len() {
            forest.insert(index, HOST);
        }
        forest
    }

    fn add_bridge(&mut self, device: usize, primary: u8, secondary: u8, subordinate: u8) {
        let domain = self.devices[device].bdf.domain;
        let (primary, secondary, subordinate) = (u32::from(primary), u32::from(secondary), u32::from(subordinate));
        self.bridges.push(Bridge { domain, primary, secondary, subordinate, device: Some(device), buses: Vec::new(), children: Vec::new() });
        self.bridge_of[device] = Some(self.bridges.len() - 1);
    }

    /// Each bridge below its parent's bridge, else below the bridge with the narrowest range
    /// holding its primary bus (ranges compared as pciutils 3.9 compares them, unsigned).
    fn link_bridges(&mut self) {
        for b in 0..self.bridges.len() {
            let parent = self.bridges[b].device.and_then(|d| self.parent_of[d]);
            let mut best = parent.and_then(|p| self.bridge_of[p]);
            if best.is_none() {
                let span = |c: &Bridge| c.subordinate.wrapping_sub(c.primary);
                let this = &self.bridges[b];
                for (c, candidate) in self.bridges.iter().enumerate() {
                    let covers = (c == HOST || candidate.domain == this.domain) && (candidate.secondary..=candidate.subordinate).contains(&this.primary);
                    if c != b && covers && best.is_none_or(|x| span(&self.bridges[x]) > span(candidate)) {
                        best = Some(c);
                    }
                }
            }
            if let Some(best) = best {
                self.bridges[best].children.push(b);
            }
        }
    }

    fn find_bus(&self, bridge: usize, domain: u32, number: u32) -> Option<usize> {
        self.bridges[bridge].buses.iter().copied().find(|&u| self.buses[u].domain == domain && self.buses[u].number == number)
    }

    fn new_bus(&mut self, bridge: usize, domain: u32, number: u32) -> usize {
        self.buses.push(Bus { domain, number, devices: Vec::new() });
        self.bridges[bridge].buses.push(self.buses.len() - 1);
        self.buses.len() - 1
    }

    fn insert(&mut self, index: usize, bridge: usize) {
        let bdf = self.devices[index].bdf;
        let (domain, number) = (bdf.domain, u32::from(bdf.bus));
        let mut bus = None;
        if let Some(parent_bridge) = self.parent_of[index].and_then(|p| self.bridge_of[p]) {
            bus = Some(self.bridges[parent_bridge].buses.first().copied().unwrap_or_else(|| self.new_bus(parent_bridge, domain, number)));
        }
        let bus = match bus.or_else(|| self.find_bus(bridge, domain, number)) {
            Some(bus) => bus,
            None => {
                let covering = self.bridges[bridge].children.iter().rev().copied().find(|&c| {
                    let c = &self.bridges[c];
                    c.domain == domain && c.secondary <= number && number <= c.subordinate
                });
                if let Some(child) = covering {
                    return self.insert(index, child);
                }
                self.new_bus(bridge, domain, number)
            }
        };
        self.buses[bus].devices.push(index);
    }

    /// `-s`/`-d` keep a device when it, or anything below it, matches.
    fn device_shown(&self, index: usize) -> bool {
        !self.filtered || self.devices[index].selected || self.bridge_of[index].is_some_and(|b| self.bridges[b].buses.iter().any(|&u| self.bus_shown(u)))
    }

    fn bus_shown(&self, bus: usize) -> bool {
        !self.filtered || self.buses[bus].devices.iter().any(|&d| self.device_shown(d))
    }

    fn show_bridge(&self, bridge: usize, line: &mut Vec<u8>, out: &mut Sink, verbose: bool) {
        line.push(b'-');
        let at = line.len();
        let buses = &self.bridges[bridge].buses;
        if let [bus] = buses[..] {
            if !self.bus_shown(bus) {
                return print(line, at, out);
            }
            if bridge == HOST {
                write_at(line, at, &format!("[{:04x}:{:02x}]-", self.bridges[HOST].domain, self.buses[bus].number));
            }
            return self.show_bus(bus, line, out, verbose);
        }
        let mut empty = true;
        for (bus, branch) in with_branches(buses).filter(|&(u, _)| self.bus_shown(u)) {
            write_at(line, at, &format!("{branch}[{:04x}:{:02x}]-", self.buses[bus].domain, self.buses[bus].number));
            self.show_bus(bus, line, out, verbose);
            empty = false;
        }
        if empty {
            print(line, at, out);
        }
    }

    fn show_bus(&self, bus: usize, line: &mut Vec<u8>, out: &mut Sink, verbose: bool) {
        let at = line.len();
        let devices = &self.buses[bus].devices;
        let mut empty = true;
        for (device, branch) in with_branches(devices).filter(|&(d, _)| self.device_shown(d)) {
            write_at(line, at, if devices.len() == 1 { "--" } else { branch });
            self.show_device(device, line, out, verbose);
            empty = false;
        }
        if empty {
            print(line, at, out);
        }
    }

    fn show_device(&self, index: usize, line: &mut Vec<u8>, out: &mut Sink, verbose: bool) {
        let device = &self.devices[index];
        line.extend(format!("{:02x}.{:x}", device.bdf.device, device.bdf.function).bytes());
        if let Some(b) = self.bridge_of[index] {
            let Bridge { secondary, subordinate, .. } = self.bridges[b];
            line.extend(match (secondary, subordinate) {
                (0, _) => "-".to_string(),
                (s, u) if s == u => format!("-[{s:02x}]-"),
                (s, u) => format!("-[{s:02x}-{u:02x}]-"),
            }.bytes());
            return self.show_bridge(b, line, out, verbose);
        }
        if verbose {
            line.extend(format!("  {}", device.name).bytes());
        }
        print(line, line.len(), out);
    }
}

/// Each item with its branch: `+-`, and `\\-` for the last (shown or not, as lspci draws it).
fn with_branches(items: &[usize]) -> impl Iterator<Item = (usize, &'static str)> + '_ {
    items.iter().enumerate().map(|(i, &item)| (item, if i + 1 == items.len() { "\\-" } else { "+-" }))
}

fn write_at(line: &mut Vec<u8>, at: usize, text: &str) {
    line.truncate(at);
    line.extend(text.bytes());
}

/// Print the line up to `end`, then keep only its vertical rules for the lines below: `+` and
/// `|` become `|`, everything else a space (lspci's `print_it`).
fn print(line: &mut Vec<u8>, end: usize, out: &mut Sink) {
    line.truncate(end);
    out.line(line);
    for byte in line.iter_mut() {
        *byte = if matches!(*byte, b'+' | b'|') { b'|' } else { b' ' };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(bus: u8, device: u8, bridge: Option<(u8, u8, u8)>) -> TreeDevice {
        TreeDevice { bdf: Bdf { domain: 0, bus, device, function: 0 }, bridge_buses: bridge, parent: None, name: format!("dev{bus}.{device}"), selected: true }
    }

    /// The expected text is `lspci -F DUMP -t`'s on the same devices (pciutils 3.9).
    #[test]
    fn draws_a_switch_as_lspci() {
        let devices = [
            device(0, 0, None),
            device(0, 1, Some((0, 1, 3))),
            device(1, 0, Some((1, 2, 3))),
            device(2, 0, Some((2, 3, 3))),
            device(2, 1, Some((2, 4, 4))),
            device(3, 0, None),
        ];
        let expected = "-[0000:00]-+-00.0\n           \\-01.0-[01-03]----00.0-[02-03]--+-00.0-[03]----00.0\n                                           \\-01.0-[04]--\n";
        assert_eq!(render(&devices, false, false), expected);
        assert!(render(&devices, true, false).contains("00.0  dev0.0\n"));
    }
}
