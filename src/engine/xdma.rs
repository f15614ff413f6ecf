//! `xdma:/dev/xdmaN` — the Xilinx XDMA IP through its Linux driver (Xilinx dma_ip_drivers).
//!
//! The driver creates, per card N, `/dev/xdmaN_h2c_K` and `/dev/xdmaN_c2h_K` (one node per DMA
//! channel K), `/dev/xdmaN_user` (the user BAR), `/dev/xdmaN_control` (the DMA registers) and
//! `/dev/xdmaN_events_K` (user interrupts). A pwrite() on an h2c node at offset A moves the
//! buffer to card address A (h2d: the card reads host memory); a pread() on a c2h node moves
//! card address A into the buffer (d2h). With an AXI memory-mapped design that is card memory,
//! so the data model is `Memory`. (AXI-Stream designs are a loopback: drive them with
//! `chardev:/dev/xdma0_h2c_0,/dev/xdma0_c2h_0`.)
//!
//! With several channels (`OpenOptions::channels`), a transfer of N bytes is cut into one
//! contiguous piece per channel, each moved by its own thread at the same time.
//!
//! Device clock: the driver's performance ioctl runs the engine on a cyclic descriptor of its
//! own, not on our pread/pwrite, so it cannot time one of our transfers. [`XdmaEngine::driver_perf`]
//! runs it as a separate measurement and converts its clock cycle count with the AXI clock
//! (`OpenOptions::device_clock_hz`, default 250 MHz: the AXI clock of the common XDMA
//! configurations such as Gen3 x8 with a 256-bit datapath; slower or narrower ones may run at
//! 125 or 62.5 MHz — set it to the design's).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::guard::WriteGuard;
use super::devfile::{self, Access, Deadline, HostClock};
use super::msgstream;
use super::ring::Streaming;
use super::{Candidate, EngineEntry, EngineFlag, Roots, DataModel, DeviceCounters, Direction, Engine, EngineError, EngineInfo, Io, Mmio, OpenOptions, Transfer};
use crate::error::InvalidInput;

/// Default AXI clock of the XDMA core (see the module documentation).
pub const DEFAULT_AXI_CLOCK_HZ: f64 = 250e6;

pub const ENTRY: EngineEntry = EngineEntry {
    name: "xdma",
    argument: "/dev/xdmaN",
    about: "Xilinx XDMA: h2c/c2h channel nodes, pread/pwrite at card addresses, the user BAR as registers",
    options: &[],
    flags: FLAGS,
    open: |o| Ok(Box::new(open(o.argument, o.options)?)),
    detect: Some(detect),
};

/// `--card-addr`, `--channels`, `--device-clock`: read by this engine alone.
const FLAGS: &[EngineFlag] = &[
    EngineFlag {
        name: "card-addr",
        value_name: "ADDR",
        help: "xdma: card address that device offset 0 maps to (hex 0x… or decimal) [default: 0]",
        check: |text| parse_card_addr(text).map(drop).map_err(|e| e.to_string()),
    },
    EngineFlag { name: "channels", value_name: "N", help: "xdma: DMA channels used at once [default: 1]", check: |text| parse_channels(text).map(drop) },
    EngineFlag {
        name: "device-clock",
        value_name: "HZ",
        help: "xdma: frequency of the card's counter (the AXI clock), which the driver cannot report [default: 250e6]",
        check: |text| parse_clock_hz(text).map(drop),
    },
];

fn parse_channels(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=64).contains(&n) => Ok(n),
        _ => Err("give a number of channels from 1 to 64".into()),
    }
}

fn parse_clock_hz(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(hz) if hz.is_finite() && hz > 0.0 => Ok(hz),
        _ => Err("give the clock in Hz, e.g. 250e6".into()),
    }
}

/// A card address as users write it: `0x80000000` (hex) or `4096` (decimal); for `--card-addr`.
pub fn parse_card_addr(text: &str) -> Result<u64, InvalidInput> {
    let text = text.trim().replace('_', "");
    crate::units::parse_number(&text).ok_or_else(|| InvalidInput::new(format!("invalid card address '{text}': write it in hex (0x80000000) or decimal")))
}

/// `xdma0_h2c_1` → (`xdma0`, `h2c`, 1).
pub fn parse_channel_name(name: &str) -> Option<(String, &'static str, u32)> {
    let (device, rest) = name.split_once('_')?;
    let number = device.strip_prefix("xdma")?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (direction, index) = rest.split_once('_')?;
    let direction = match direction {
        "h2c" => "h2c",
        "c2h" => "c2h",
        _ => return None,
    };
    Some((device.to_string(), direction, index.parse().ok()?))
}

/// The channel nodes of one card, by index.
#[derive(Debug, Default, Clone)]
pub struct Channels {
    pub h2c: Vec<(u32, PathBuf)>,
    pub c2h: Vec<(u32, PathBuf)>,
}

impl Channels {
    pub fn all_paths(&self) -> Vec<PathBuf> {
        self.h2c.iter().chain(&self.c2h).map(|(_, p)| p.clone()).collect()
    }
}

/// The channels beside a prefix such as `/dev/xdma0` (nodes `/dev/xdma0_h2c_K`, `_c2h_K`).
pub fn discover_channels(prefix: &Path) -> Channels {
    let mut channels = Channels::default();
    let (Some(dir), Some(stem)) = (prefix.parent(), prefix.file_name().and_then(|s| s.to_str())) else { return channels };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some((device, direction, index)) = parse_channel_name(&name) {
            if device == stem {
                let list = if direction == "h2c" { &mut channels.h2c } else { &mut channels.c2h };
                list.push((index, entry.path()));
            }
        }
    }
    channels.h2c.sort();
    channels.c2h.sort();
    channels
}

// Driver ioctls (xdma/cdev_sgdma.h of Xilinx dma_ip_drivers). The driver declares them with a
// *pointer* type, so the size field of the number is sizeof(void *) = 8, not the struct size.
const IOCTL_XDMA_PERF_START: libc::c_ulong = ioc(1, b'q', 1, 8); // _IOW('q', 1, struct *)
const IOCTL_XDMA_PERF_STOP: libc::c_ulong = ioc(1, b'q', 2, 8); // _IOW('q', 2, struct *)
const IOCTL_XDMA_PERF_GET: libc::c_ulong = ioc(2, b'q', 3, 8); // _IOR('q', 3, struct *)
const IOCTL_XDMA_ALIGN_GET: libc::c_ulong = ioc(2, b'q', 6, 8); // _IOR('q', 6, int *)
const IOCTL_XDMA_PERF_V1: u32 = 1;

/// Linux `_IOC(dir, type, nr, size)` (dir 1 = write, 2 = read).
const fn ioc(dir: u64, kind: u8, nr: u8, size: u64) -> libc::c_ulong {
    ((dir << 30) | (size << 16) | ((kind as u64) << 8) | nr as u64) as libc::c_ulong
}

/// The driver's `struct xdma_performance_ioctl` (version 1).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PerfIoctl {
    version: u32,
    transfer_size: u32,
    stopped: u32,
    iterations: u32,
    clock_cycle_count: u64,
    data_cycle_count: u64,
    pending_count: u64,
}

/// Result of the driver's own performance run on one channel.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverPerf {
    pub direction: Direction,
    pub channel: u32,
    pub transfer_bytes: u32,
    /// Descriptors (transfers of `transfer_bytes`) the engine completed.
    pub iterations: u32,
    pub clock_cycles: u64,
    /// Cycles in which the datapath moved data: `data_cycles / clock_cycles` is its utilisation.
    pub data_cycles: u64,
    pub pending: u64,
    pub axi_clock_hz: f64,
}

impl DriverPerf {
    /// Duration by the device's clock, in ns.
    pub fn device_ns(&self) -> f64 {
        self.clock_cycles as f64 / self.axi_clock_hz * 1e9
    }

    /// Bytes moved per device-clock second, in MB/s (10^6 B/s), when the driver counted iterations.
    pub fn device_mbps(&self) -> Option<f64> {
        (self.iterations > 0 && self.clock_cycles > 0).then(|| self.iterations as f64 * self.transfer_bytes as f64 / self.device_ns() * 1e3)
    }
}

pub struct XdmaEngine {
    info: EngineInfo,
    prefix: PathBuf,
    h2c: Vec<(u32, File)>,
    c2h: Vec<(u32, File)>,
    card_addr: u64,
    axi_clock_hz: f64,
    clock: HostClock,
    regs: Option<UserBar>,
    /// Why no h2c node was opened (the write guard), for streaming's refusal.
    h2c_refused: Option<String>,
}

/// Target argument: the node prefix, `/dev/xdma0`.
pub fn open(argument: &str, options: &OpenOptions) -> Result<XdmaEngine, EngineError> {
    if argument.is_empty() {
        return Err(InvalidInput::new("xdma needs the device prefix: xdma:/dev/xdma0").into());
    }
    let prefix = PathBuf::from(argument);
    let found = discover_channels(&prefix);
    if found.h2c.is_empty() && found.c2h.is_empty() {
        return Err(EngineError::Io {
            what: format!("no {argument}_h2c_* or {argument}_c2h_* nodes: is the XDMA driver (xdma.ko) loaded and the card's bitstream configured?"),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        });
    }
    let wanted = options.flag("channels", parse_channels)?.unwrap_or(1);
    let card_addr = options.flag("card-addr", |t| parse_card_addr(t).map_err(|e| e.to_string()))?.unwrap_or(0);
    let guard = options.write_guard();
    let pick = |list: &[(u32, PathBuf)], access| -> Result<Vec<(u32, File)>, EngineError> {
        if !list.is_empty() && list.len() < wanted {
            return Err(InvalidInput::new(format!("{wanted} channels asked for, but {argument} has only {}", list.len())).into());
        }
        list.iter().take(wanted).map(|(k, path)| Ok((*k, devfile::open_node(path, access, 0, "is xdma.ko loaded?", &guard)?))).collect()
    };
    // h2c nodes that are a user's files or block devices (not the driver's character devices)
    // are written only with consent; without it the card is measured c2h only.
    let h2c_refused = found.h2c.iter().find_map(|(_, path)| guard.check(path).err()).map(|e| e.to_string());
    let h2c = if h2c_refused.is_some() { Vec::new() } else { pick(&found.h2c, Access::Write)? };
    let c2h = pick(&found.c2h, Access::Read)?;
    let alignment = h2c.iter().chain(&c2h).map(|(_, f)| align_get(f)).max().unwrap_or(1).max(1);
    let mut directions = Vec::new();
    if !h2c.is_empty() {
        directions.push(Direction::H2d);
    }
    if !c2h.is_empty() {
        directions.push(Direction::D2h);
    }
    let axi_clock_hz = options.flag("device-clock", parse_clock_hz)?.unwrap_or(DEFAULT_AXI_CLOCK_HZ);
    let user = prefix.with_file_name(format!("{}_user", prefix.file_name().unwrap_or_default().to_string_lossy()));
    let regs = devfile::open_node(&user, Access::ReadWrite, 0, "", &guard).ok().map(|file| UserBar { file });
    let pci = sysfs_pci(&prefix);
    let info = EngineInfo {
        kind: "xdma".into(),
        target: format!("xdma:{argument}"),
        simulated: false,
        co_simulated: false,
        description: format!(
            "Xilinx XDMA {argument}: {} h2c / {} c2h channel(s) in use of {} / {}, card address {:#x}{}{}; AXI-Stream messages: {}",
            h2c.len(),
            c2h.len(),
            found.h2c.len(),
            found.c2h.len(),
            card_addr,
            if regs.is_some() { ", user BAR mapped" } else { "" },
            h2c_refused.as_ref().map(|e| format!("; h2c not opened: {e}")).unwrap_or_default(),
            msgstream::packet_reader_description()
        ),
        pci_address: pci,
        in_flight: h2c.len().max(c2h.len()).max(1) as u32,
        copies_per_transfer: 1,
        device_clock_hz: None,
        concurrent: !h2c.is_empty() && !c2h.is_empty(),
        directions,
        alignment_bytes: alignment,
        max_transfer_bytes: crate::units::MAX_SIZE_BYTES,
        capacity_bytes: None,
        data_model: DataModel::Memory,
    };
    Ok(XdmaEngine { info, prefix, h2c, c2h, card_addr, axi_clock_hz, clock: HostClock::start(), regs, h2c_refused })
}

/// The PCI device of the card: the driver's class devices link to it.
fn sysfs_pci(prefix: &Path) -> Option<String> {
    let stem = prefix.file_name()?.to_str()?;
    let device = std::fs::canonicalize(format!("/sys/class/xdma/{stem}_user/device")).ok()?;
    crate::pci::nodes::pci_address_in_path(&device)
}

/// Address alignment the engine needs (IOCTL_XDMA_ALIGN_GET); 1 when the node does not answer
/// (older drivers, or a plain file standing in for the node).
fn align_get(file: &File) -> u64 {
    let mut align: libc::c_int = 0;
    // SAFETY: the ioctl writes one int; on a node that does not know it, it fails with ENOTTY.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), IOCTL_XDMA_ALIGN_GET, &mut align) };
    if rc == 0 && align > 0 { align as u64 } else { 1 }
}

/// Cut `len` bytes into `parts` contiguous pieces aligned to `align` (the last takes the rest).
pub fn split(len: usize, parts: usize, align: usize) -> Vec<std::ops::Range<usize>> {
    let piece = (len / parts.max(1)).next_multiple_of(align.max(1)).max(align.max(1));
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < len {
        let end = if ranges.len() + 1 == parts { len } else { (start + piece).min(len) };
        ranges.push(start..end);
        start = end;
    }
    ranges
}

impl XdmaEngine {
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    fn check(&self, direction: Direction, len: usize, offset: u64) -> Result<(), EngineError> {
        if !self.info.directions.contains(&direction) {
            return Err(EngineError::Unsupported(format!("{} has no {} channel", self.prefix.display(), if direction == Direction::H2d { "h2c" } else { "c2h" })));
        }
        let align = self.info.alignment_bytes;
        if !(len as u64).is_multiple_of(align) || !(self.card_addr + offset).is_multiple_of(align) {
            return Err(InvalidInput::new(format!("the XDMA engine needs sizes and card addresses in multiples of {align} bytes")).into());
        }
        Ok(())
    }

    /// Move one direction over all its channels at once; returns the end time.
    fn move_split(&self, io: Io<'_>, card_addr: u64, deadline: &Deadline) -> Result<f64, EngineError> {
        let h2d = io.direction() == Direction::H2d;
        let channels = if h2d { &self.h2c } else { &self.c2h };
        let name = |k: u32| format!("{}_{}_{k}", self.prefix.display(), if h2d { "h2c" } else { "c2h" });
        let ranges = split(io.len(), channels.len(), self.info.alignment_bytes as usize);
        std::thread::scope(|scope| {
            let mut handles = Vec::new();
            let mut rest: Io<'_> = io;
            let mut consumed = 0;
            for (range, (k, file)) in ranges.iter().zip(channels) {
                let (piece, tail) = take(rest, range.end - consumed);
                rest = tail;
                consumed = range.end;
                let at = card_addr + range.start as u64;
                let what = name(*k);
                handles.push(scope.spawn(move || {
                    devfile::positional_all(file, piece, at, deadline, &what).map_err(|e| driver_timeout(e, deadline))?;
                    Ok::<f64, EngineError>(self.clock.now_ns())
                }));
            }
            let mut end = 0f64;
            for handle in handles {
                end = end.max(handle.join().expect("channel thread panicked")?);
            }
            Ok(end)
        })
    }

    /// Run the driver's performance measurement on one channel for `run_for`: the engine loops a
    /// descriptor of `transfer_bytes` over its own buffer (no host data, no verification) and
    /// counts clock and data cycles. Nodes that are not an XDMA driver answer ENOTTY.
    pub fn driver_perf(&self, direction: Direction, channel: usize, transfer_bytes: u32, run_for: Duration) -> Result<DriverPerf, EngineError> {
        let channels = if direction == Direction::H2d { &self.h2c } else { &self.c2h };
        let (k, file) = channels.get(channel).ok_or_else(|| InvalidInput::new(format!("no {} channel {channel} in use", direction.name())))?;
        let fd = file.as_raw_fd();
        let mut perf = PerfIoctl { version: IOCTL_XDMA_PERF_V1, transfer_size: transfer_bytes, ..Default::default() };
        let call = |request, perf: &mut PerfIoctl, what: &str| -> Result<(), EngineError> {
            // SAFETY: the driver reads/writes one struct xdma_performance_ioctl through the pointer.
            if unsafe { libc::ioctl(fd, request, perf as *mut PerfIoctl) } < 0 {
                let source = std::io::Error::last_os_error();
                let hint = if source.raw_os_error() == Some(libc::ENOTTY) { " (not an XDMA driver node)" } else { "" };
                return Err(EngineError::Io { what: format!("{what} on channel {k}{hint}"), source });
            }
            Ok(())
        };
        call(IOCTL_XDMA_PERF_START, &mut perf, "IOCTL_XDMA_PERF_START")?;
        std::thread::sleep(run_for);
        let measured = call(IOCTL_XDMA_PERF_GET, &mut perf, "IOCTL_XDMA_PERF_GET");
        let mut stop = perf;
        call(IOCTL_XDMA_PERF_STOP, &mut stop, "IOCTL_XDMA_PERF_STOP")?;
        measured?;
        Ok(DriverPerf {
            direction,
            channel: *k,
            transfer_bytes,
            iterations: perf.iterations,
            clock_cycles: perf.clock_cycle_count,
            data_cycles: perf.data_cycle_count,
            pending: perf.pending_count,
            axi_clock_hz: self.axi_clock_hz,
        })
    }

    /// Wait for user interrupt K (`/dev/xdmaN_events_K`): the driver's read() returns a 4-byte
    /// event count once the interrupt fired. Returns that count.
    pub fn wait_event(&self, index: u32, deadline: Duration) -> Result<u32, EngineError> {
        let path = self.prefix.with_file_name(format!("{}_events_{index}", self.prefix.file_name().unwrap_or_default().to_string_lossy()));
        let file = devfile::open_node(&path, Access::Read, libc::O_NONBLOCK, "the design has no user interrupt of that number", &WriteGuard::REFUSING)?;
        let deadline = Deadline::after(deadline);
        devfile::poll_until(file.as_raw_fd(), libc::POLLIN, &deadline, &format!("user interrupt {index} ({})", path.display()))?;
        let mut count = [0u8; 4];
        devfile::positional_all(&file, Io::D2h(&mut count), 0, &deadline, &path.display().to_string())?;
        Ok(u32::from_le_bytes(count))
    }
}

/// Split an `Io` at `at` bytes.
fn take(io: Io<'_>, at: usize) -> (Io<'_>, Io<'_>) {
    match io {
        Io::H2d(buf) => {
            let (a, b) = buf.split_at(at);
            (Io::H2d(a), Io::H2d(b))
        }
        Io::D2h(buf) => {
            let (a, b) = buf.split_at_mut(at);
            (Io::D2h(a), Io::D2h(b))
        }
    }
}

/// The driver gives up on a stuck transfer after its own timeout (module parameters
/// `h2c_timeout`/`c2h_timeout`, 10 s by default) with ETIMEDOUT: report that as a timeout.
fn driver_timeout(error: EngineError, deadline: &Deadline) -> EngineError {
    match error {
        EngineError::Io { what, source } if source.raw_os_error() == Some(libc::ETIMEDOUT) => {
            EngineError::Timeout { what: format!("{what}: the XDMA driver timed the transfer out"), after: deadline.total }
        }
        other => other,
    }
}

impl Engine for XdmaEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn transfer(&mut self, io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        let (direction, len) = (io.direction(), io.len());
        self.check(direction, len, device_offset)?;
        let deadline = Deadline::after(deadline);
        let start = self.clock.now_ns();
        let end = self.move_split(io, self.card_addr + device_offset, &deadline)?;
        Ok(Transfer { direction, bytes: len as u64, start_ns: start, end_ns: end.max(start), device: DeviceCounters::default(), copy_ns: None })
    }

    /// h2c writes and c2h reads the same card range at once (the contract: the procedure writes
    /// there the data the read expects, so the order of the two streams does not matter).
    fn transfer_both(&mut self, h2d: &[u8], d2h: &mut [u8], device_offset: u64, deadline: Duration) -> Result<(Transfer, Transfer), EngineError> {
        self.check(Direction::H2d, h2d.len(), device_offset)?;
        let read_offset = device_offset;
        self.check(Direction::D2h, d2h.len(), read_offset)?;
        let deadline = Deadline::after(deadline);
        let (h2d_len, d2h_len) = (h2d.len(), d2h.len());
        let start = self.clock.now_ns();
        let this = &*self;
        let (h2d_end, d2h_end) = std::thread::scope(|scope| {
            let writer = scope.spawn(|| this.move_split(Io::H2d(h2d), this.card_addr + device_offset, &deadline));
            let read = this.move_split(Io::D2h(d2h), this.card_addr + read_offset, &deadline);
            (writer.join().expect("h2c thread panicked"), read)
        });
        let record = |direction, bytes: usize, end: f64| Transfer { direction, bytes: bytes as u64, start_ns: start, end_ns: end.max(start), device: DeviceCounters::default(), copy_ns: None };
        Ok((record(Direction::H2d, h2d_len, h2d_end?), record(Direction::D2h, d2h_len, d2h_end?)))
    }

    fn now_ns(&self) -> f64 {
        self.clock.now_ns()
    }

    fn mmio(&mut self) -> Option<&mut dyn Mmio> {
        self.regs.as_mut().map(|r| r as &mut dyn Mmio)
    }

    fn streaming(&mut self) -> Option<&mut dyn Streaming> {
        Some(self)
    }
}

/// AXI-Stream designs (`msgstream`, packets): h2d writes one message per write() on the first
/// h2c channel (the driver ends each with TLAST); d2h reads the first c2h channel, where one
/// read returns at most one packet, with reads kept in flight. No loopback is assumed: a design
/// that loops h2c back to c2h is streamed d2h while another process writes, or as
/// `chardev:H2C,C2H`.
impl XdmaEngine {
    fn nodes(&self) -> msgstream::Nodes<'_> {
        let name = |direction: &str, k: u32| format!("{}_{direction}_{k}", self.prefix.display());
        msgstream::Nodes {
            write: self.h2c.first().map(|(k, file)| msgstream::Node { file, name: name("h2c", *k) }),
            read: self.c2h.first().map(|(k, file)| msgstream::Node { file, name: name("c2h", *k) }),
            write_refused: Some(self.h2c_refused.clone().unwrap_or_else(|| format!("{} has no h2c channel", self.prefix.display()))),
            loopback: false,
            framing: msgstream::Framing::Packets,
            flush_with_empty_write: false,
            clock: self.clock,
        }
    }
}

msgstream::streaming_on_nodes!(XdmaEngine);

/// `/dev/xdmaN_user`: the design's own registers (AXI-Lite through the user BAR), reached with
/// 4-byte pread/pwrite at the register offset, which the driver turns into one 32-bit access.
pub struct UserBar {
    file: File,
}

impl UserBar {
    fn check(bar: u8, offset: u64) -> Result<(), EngineError> {
        if bar != 0 {
            return Err(EngineError::Unsupported(format!("xdma exposes one register BAR (0 = /dev/xdmaN_user), not BAR {bar}")));
        }
        if !offset.is_multiple_of(4) {
            return Err(InvalidInput::new(format!("register offset {offset:#x} is not 4-byte aligned")).into());
        }
        Ok(())
    }
}

impl Mmio for UserBar {
    fn read32(&mut self, bar: u8, offset: u64) -> Result<u32, EngineError> {
        Self::check(bar, offset)?;
        let mut word = [0u8; 4];
        devfile::positional_all(&self.file, Io::D2h(&mut word), offset, &Deadline::after(Duration::from_secs(1)), "xdma user BAR read")?;
        Ok(u32::from_le_bytes(word))
    }

    fn write32(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError> {
        Self::check(bar, offset)?;
        devfile::positional_all(&self.file, Io::H2d(&value.to_le_bytes()), offset, &Deadline::after(Duration::from_secs(1)), "xdma user BAR write")
    }
}

/// XDMA cards on the machine: one candidate per `/dev/xdmaN` prefix with channel nodes.
fn detect(roots: &Roots) -> Vec<Candidate> {
    let (dev_dir, sys_dir, names) = (roots.dev, roots.sys, roots.names);
    let mut devices = std::collections::BTreeSet::new();
    for name in names {
        if let Some((device, _, _)) = parse_channel_name(name) {
            devices.insert(device);
        }
    }
    devices
        .into_iter()
        .map(|device| {
            let prefix = dev_dir.join(&device);
            let channels = discover_channels(&prefix);
            let nodes: Vec<PathBuf> = channels.all_paths();
            let (usable, access) = crate::engine::access::access_summary(&nodes, libc::R_OK | libc::W_OK);
            Candidate {
                target: format!("xdma:{}", prefix.display()),
                kind: "xdma".into(),
                pci_address: crate::pci::nodes::class_node_pci(sys_dir, &format!("{device}_user")),
                usable,
                reason: format!(
                    "Xilinx XDMA, {} h2c and {} c2h channel(s); {access}; h2c writes the card's memory at --card-addr \
                     (the test design's memory, never host or disk data)",
                    channels.h2c.len(),
                    channels.c2h.len()
                ),
            }
        })
        .collect()
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_addresses_parse_in_hex_and_decimal() {
        assert_eq!(parse_card_addr("0x8000_0000").unwrap(), 0x8000_0000);
        assert_eq!(parse_card_addr("4096").unwrap(), 4096);
        assert!(parse_card_addr("0xZZ").unwrap_err().to_string().contains("hex"));
        assert!(parse_card_addr("-1").is_err());
    }

    #[test]
    fn channel_names_parse() {
        assert_eq!(parse_channel_name("xdma0_h2c_1"), Some(("xdma0".into(), "h2c", 1)));
        assert_eq!(parse_channel_name("xdma12_c2h_3"), Some(("xdma12".into(), "c2h", 3)));
        assert_eq!(parse_channel_name("xdma0_user"), None);
        assert_eq!(parse_channel_name("xdma0_events_1"), None);
        assert_eq!(parse_channel_name("xdmax_h2c_0"), None);
    }

    #[test]
    fn ioctl_numbers_match_the_driver_header() {
        // _IOW('q', 1, void *) on 64-bit Linux, as `printf("%lx", IOCTL_XDMA_PERF_START)` prints.
        assert_eq!(IOCTL_XDMA_PERF_START, 0x4008_7101);
        assert_eq!(IOCTL_XDMA_PERF_STOP, 0x4008_7102);
        assert_eq!(IOCTL_XDMA_PERF_GET, 0x8008_7103);
        assert_eq!(std::mem::size_of::<PerfIoctl>(), 40);
    }

    #[test]
    fn split_covers_the_buffer_with_aligned_pieces() {
        assert_eq!(split(4096, 4, 1), vec![0..1024, 1024..2048, 2048..3072, 3072..4096]);
        assert_eq!(split(1000, 3, 64), vec![0..384, 384..768, 768..1000]);
        assert_eq!(split(100, 4, 64), vec![0..64, 64..100]);
        assert_eq!(split(10, 1, 1), vec![0..10]);
    }

    #[test]
    fn driver_perf_converts_cycles_with_the_axi_clock() {
        let perf = DriverPerf { direction: Direction::D2h, channel: 0, transfer_bytes: 1 << 20, iterations: 250, clock_cycles: 25_000_000, data_cycles: 20_000_000, pending: 0, axi_clock_hz: 250e6 };
        assert_eq!(perf.device_ns(), 100e6);
        assert!((perf.device_mbps().unwrap() - 2621.44).abs() < 1e-6);
    }
}
