//! Engines: one adapter per way of moving data through a device, behind one small contract.
//!
//! Like fio's ioengines, every procedure in [`crate::bench`] drives every engine through the
//! [`Engine`] trait and never asks which one it has. An engine
//! - describes itself ([`EngineInfo`]: kind, simulated or not, link, clocks, limits),
//! - moves N bytes host→device ([`Direction::H2d`]) or device→host ([`Direction::D2h`]),
//!   or both at once, returning host-side and (when it has one) device-side time and counters,
//! - optionally exposes MMIO registers ([`Mmio`]) for register-level procedures.
//!
//! Targets are written `ENGINE[:ARGUMENT]` and opened by [`open`].
//!
//! Direction names: `h2d` = host→device = document 001 "Read" (the device reads host memory) =
//! document 000 "Mem→FPGA" = XDMA H2C. `d2h` = device→host = 001 "Write" (DMA write) = 000
//! "FPGA→Mem" = XDMA C2H.

pub mod access;
pub mod bar;
pub mod block;
pub mod cosim;
pub mod cuda;
pub mod devfile;
pub mod fault;
pub mod guard;
pub mod msgstream;
pub mod numa;
pub mod pattern;
pub mod registry;
pub mod ring;
pub mod scratch;
pub mod slice_alarm;
pub mod sim;
pub mod stream;
pub mod vfio;
pub mod xdma;

pub use devfile::AlignedBuf;
pub use registry::{choose, detect, open, Choice, ENGINES};

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Which way data moves: the model's type, which the whole crate shares (`model::direction`).
pub use crate::model::Direction;
use crate::model::Conditions;

/// How the host can check data that went through the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataModel {
    /// The device generates the seeded pattern for d2h and reports the CRC32 of h2d data
    /// (document 000 §5.1): the simulator, pattern-generator FPGA designs.
    Generator,
    /// Addressable memory or file: reading an offset returns what was last written there.
    Memory,
    /// A stream: d2h returns the h2d bytes in order (Xillybus-style loopback).
    Loopback,
    /// Contents are unknown and may not be written (a block device without consent): data can
    /// only be checked for consistency between reads.
    Opaque,
}

/// An engine's description of itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// Engine name: `sim`, `block`, `xdma`, `chardev`, `bar`, `cuda`, …
    pub kind: String,
    /// The target as the user wrote it.
    pub target: String,
    /// True when no hardware is involved; every output must then say "simulated".
    pub simulated: bool,
    /// The endpoint is RTL in a logic simulator (`cosim`): its figures are "co-simulated", and
    /// simulated time costs wall-clock time for every byte moved (~50 KB/s), so procedures
    /// default to small amounts of data.
    #[serde(default)]
    pub co_simulated: bool,
    /// One line for humans, e.g. "simulated endpoint, Gen3 x8, MPS 256".
    pub description: String,
    /// PCI address (domain:bus:device.function) of the device behind the target, when known:
    /// the pci layer reads the link's conditions from it (`pci::conditions`).
    pub pci_address: Option<String>,
    /// Transfers the engine keeps outstanding at once (block queue depth, DMA channels): the
    /// model's ceiling is for that many in flight.
    #[serde(default = "one")]
    pub in_flight: u32,
    /// Timed copies one transfer stands for: a `cuda` sample times `--cuda-loops` copies and
    /// reports one copy's time, so a point's sustained rate counts this many per sample.
    #[serde(default = "one")]
    pub copies_per_transfer: u32,
    /// Frequency of the device's own counter, when it has one (document 000 §5.2).
    pub device_clock_hz: Option<f64>,
    /// Directions this engine can move data in.
    pub directions: Vec<Direction>,
    /// Whether both directions can run at once.
    pub concurrent: bool,
    /// Sizes and device offsets must be multiples of this.
    pub alignment_bytes: u64,
    /// Largest single transfer.
    pub max_transfer_bytes: u64,
    /// Device address space available for transfers (memory, file size), when bounded.
    pub capacity_bytes: Option<u64>,
    pub data_model: DataModel,
}

fn one() -> u32 {
    1
}

/// The kind of host memory an engine copies from and to, where the kind decides the rate (a
/// GPU's copy engines reach full speed only from page-locked memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostMemory {
    /// Ordinary memory: the driver stages each copy through a pinned buffer of its own.
    Pageable,
    /// Page-locked memory the driver allocated (`cuMemHostAlloc`).
    Pinned,
    /// Page-locked and write-combined: fast for the device to read, slow for the CPU to read.
    WriteCombined,
    /// The run's own memory page-locked in place (`cuMemHostRegister`).
    Registered,
}

impl EngineInfo {
    /// The word every human output carries beside this engine's figures: "co-simulated" (the
    /// project's RTL in a simulator, `cosim`), "simulated" or "measured". JSON keeps
    /// `simulated: true` for both kinds of simulation; `co_simulated` tells them apart.
    pub fn label(&self) -> &'static str {
        match (self.co_simulated, self.simulated) {
            (true, _) => cosim::LABEL,
            (false, true) => "simulated",
            (false, false) => "measured",
        }
    }
}

/// What the device itself reported about one transfer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceCounters {
    /// Duration by the device's own clock, in ns.
    pub device_ns: Option<f64>,
    /// Longest time with no data moving, in ns.
    pub max_stall_ns: Option<f64>,
    /// Stalls longer than the engine's threshold.
    pub stalls_over_threshold: Option<u64>,
    /// CRC32 of the h2d data as the device received it (`DataModel::Generator`).
    pub crc32: Option<u32>,
    /// Link retries / bit errors seen by the device.
    pub errors: Option<u64>,
    /// h2d: offset of the first byte that differed from the device's own LFSR pattern, as the
    /// device found it (the core's FIRST_ERROR register); None when every byte matched or the
    /// device cannot tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error_offset: Option<u64>,
}

/// One completed transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transfer {
    pub direction: Direction,
    pub bytes: u64,
    /// Start and end on the engine's host clock, in ns (virtual time for simulated engines).
    pub start_ns: f64,
    pub end_ns: f64,
    pub device: DeviceCounters,
    /// The copy to user space when the engine models it on its own clock (the simulator's
    /// `copy_mbps`), in ns, included in `end_ns`: a simulated run's copy stays on the
    /// simulation's clock instead of mixing in the host's. `None` when it models none.
    #[serde(default)]
    pub copy_ns: Option<f64>,
}

impl Transfer {
    pub fn host_ns(&self) -> f64 {
        self.end_ns - self.start_ns
    }
}

/// A request to move data. The buffer is the host side of the transfer.
pub enum Io<'a> {
    /// Send these bytes to the device.
    H2d(&'a [u8]),
    /// Fill this buffer from the device.
    D2h(&'a mut [u8]),
}

impl Io<'_> {
    pub fn direction(&self) -> Direction {
        match self {
            Io::H2d(_) => Direction::H2d,
            Io::D2h(_) => Direction::D2h,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Io::H2d(buf) => buf.len(),
            Io::D2h(buf) => buf.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Errors engines report. Procedures turn them into clear messages and keep partial results.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error("unknown target '{0}': {1}")]
    UnknownTarget(String, String),
    #[error("{0}")]
    Unsupported(String),
    #[error("{path}: permission denied: {needed}")]
    PermissionDenied { path: String, needed: String },
    #[error("device did not answer within {after:?} ({what})")]
    Timeout { what: String, after: Duration },
    #[error("short transfer: {done} of {wanted} bytes ({why})")]
    Short { done: u64, wanted: u64, why: String },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// The device was removed (hot-unplugged, `device_del`) or shrank while in use.
    #[error("device gone: {0}")]
    Gone(String),
    #[error(transparent)]
    InvalidInput(#[from] crate::error::InvalidInput),
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) ended the wait; what was in flight was cancelled.
    #[error("interrupted")]
    Interrupted,
    /// A transfer abandoned (deadline or signal) while the kernel still holds some of its I/Os
    /// and ignores the cancel (a frozen queue, a hung driver): the memory those I/Os use must
    /// never be freed or reused, so whoever owns it leaks it. `interrupted`: a signal ended it.
    #[error("{message}")]
    Held { message: String, interrupted: bool },
}

/// Width of one CPU-initiated access: one load or store instruction, one TLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum Width {
    B1,
    B2,
    B4,
    B8,
}

impl Width {
    pub const ALL: [Width; 4] = [Width::B1, Width::B2, Width::B4, Width::B8];

    pub fn bytes(self) -> u64 {
        match self {
            Width::B1 => 1,
            Width::B2 => 2,
            Width::B4 => 4,
            Width::B8 => 8,
        }
    }

    pub fn from_bytes(bytes: u64) -> Option<Width> {
        Width::ALL.into_iter().find(|w| w.bytes() == bytes)
    }

    /// The largest value an access of this width carries.
    pub fn mask(self) -> u64 {
        u64::MAX >> (64 - 8 * self.bytes())
    }
}

impl From<Width> for u8 {
    fn from(width: Width) -> u8 {
        width.bytes() as u8
    }
}

impl TryFrom<u8> for Width {
    type Error = String;
    fn try_from(bytes: u8) -> Result<Width, String> {
        Width::from_bytes(bytes as u64).ok_or_else(|| format!("access width {bytes}: allowed 1, 2, 4 or 8 bytes"))
    }
}

/// Check that an access of `bytes` at `offset` lies inside a region of `size_bytes` and is
/// naturally aligned (an unaligned access would be split into two TLPs, or fault).
pub fn check_access(bar: u8, offset: u64, bytes: u64, size_bytes: u64) -> Result<(), EngineError> {
    let inside = offset.checked_add(bytes).is_some_and(|end| end <= size_bytes);
    if !inside {
        return Err(crate::error::InvalidInput::new(format!(
            "BAR{bar}+{offset:#x}: a {bytes}-byte access does not fit in the BAR ({size_bytes:#x} bytes)"
        ))
        .into());
    }
    if bytes <= 8 && !offset.is_multiple_of(bytes) {
        return Err(crate::error::InvalidInput::new(format!("BAR{bar}+{offset:#x}: a {bytes}-byte access must be {bytes}-byte aligned")).into());
    }
    Ok(())
}

/// CPU-initiated access to a device's registers (a memory BAR, or the simulator's).
///
/// Every access is exactly the width asked: one volatile load or store, never widened or split.
/// Engines that reach registers only 32 bits at a time (`xdma`'s user BAR) implement `read32` and
/// `write32` and refuse other widths.
pub trait Mmio {
    fn read32(&mut self, bar: u8, offset: u64) -> Result<u32, EngineError>;
    fn write32(&mut self, bar: u8, offset: u64, value: u32) -> Result<(), EngineError>;
    /// Wait, in the engine's time, e.g. while polling a register: real time for hardware,
    /// ended early by a signal (the caller looks at [`crate::cancel::requested`]); simulated
    /// engines advance their own clock instead.
    fn sleep(&mut self, duration: Duration) {
        crate::cancel::sleep(duration);
    }

    /// One read of exactly `width` bytes, zero-extended.
    fn read(&mut self, bar: u8, offset: u64, width: Width) -> Result<u64, EngineError> {
        match width {
            Width::B4 => self.read32(bar, offset).map(u64::from),
            _ => Err(EngineError::Unsupported(format!("this target reaches registers 32 bits at a time, not {} bytes", width.bytes()))),
        }
    }

    /// One write of exactly `width` bytes (the low bytes of `value`).
    fn write(&mut self, bar: u8, offset: u64, width: Width, value: u64) -> Result<(), EngineError> {
        match width {
            Width::B4 => self.write32(bar, offset, value as u32),
            _ => Err(EngineError::Unsupported(format!("this target reaches registers 32 bits at a time, not {} bytes", width.bytes()))),
        }
    }

    /// `data.len()` sequential one-byte stores from `offset`, then a store fence (document 000
    /// Test 14). On a write-combining mapping the CPU merges them in 64-byte buffers: a full buffer
    /// leaves as one 64-byte TLP, the rest in 8-byte chunks (`model::write_combining`).
    fn write_combined(&mut self, bar: u8, offset: u64, data: &[u8]) -> Result<(), EngineError> {
        let _ = (bar, offset, data);
        Err(EngineError::Unsupported("this target has no write-combining mapping (bar:BDF,wc on a prefetchable BAR)".into()))
    }

    /// Size of BAR `bar` in bytes, when the engine knows it.
    fn bar_bytes(&mut self, bar: u8) -> Option<u64> {
        let _ = bar;
        None
    }

    /// The BAR CPU-access tests use unless told otherwise (the simulator: its RAM BAR).
    fn default_bar(&self) -> u8 {
        0
    }

    /// Whether writing `bytes` at `offset` destroys nothing: a device profile names it scratch
    /// (QEMU edu's liveness register, an ivshmem RAM BAR), or the device is simulated.
    /// Other writes need the user's consent (`--destructive`).
    fn is_scratch(&self, bar: u8, offset: u64, bytes: u64) -> bool {
        let _ = (bar, offset, bytes);
        false
    }

    /// Engines in virtual time (the simulator) read their clock here, charging what reading a
    /// stopwatch costs on the host they simulate; real engines return None and procedures time
    /// them with the host clock.
    fn virtual_clock_ns(&mut self) -> Option<f64> {
        None
    }

    /// Interrupts the engine counts itself, cumulative since it opened: the simulator's host timer,
    /// the device's own through UIO or VFIO. None when it cannot count (read between tests, not
    /// per access: for real devices it is a system call).
    fn interrupts(&mut self) -> Option<u64> {
        None
    }
}

/// The contract every engine implements.
pub trait Engine: Send {
    fn info(&self) -> &EngineInfo;

    /// The full conditions of a modelled device (the simulator's configuration); real engines
    /// name their PCI address in [`EngineInfo::pci_address`] instead, and the pci layer reads
    /// the conditions from there.
    fn conditions(&self) -> Option<Conditions> {
        None
    }

    /// What every run on this target must say besides its figures (a simulator preset that does
    /// not reproduce its document), one line each.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// The host buffers data moves through when they are the engine's own rather than the
    /// procedure's (`cuda` copies through memory the driver pinned): the buffers whose NUMA
    /// placement is checked. None: the procedure's buffers are the DMA buffers.
    fn own_host_buffers(&self) -> Option<Vec<(*const u8, usize)>> {
        None
    }

    /// The kind of host memory the engine's transfers use, for engines where it decides the rate
    /// (`cuda`); recorded in the run's conditions and read by the findings (pageable staging).
    fn host_memory(&self) -> Option<HostMemory> {
        None
    }

    /// Move `io.len()` bytes at `device_offset` (ignored by stream engines) within `deadline`.
    fn transfer(&mut self, io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError>;

    /// Move data in both directions at once; engines without `info().concurrent` refuse.
    /// Addressable engines use the same device range for both legs: procedures write there the
    /// same data the d2h leg expects, so the order in which the two legs land does not matter.
    fn transfer_both(
        &mut self,
        h2d: &[u8],
        d2h: &mut [u8],
        device_offset: u64,
        deadline: Duration,
    ) -> Result<(Transfer, Transfer), EngineError> {
        let _ = (h2d, d2h, device_offset, deadline);
        Err(EngineError::Unsupported(format!("{} cannot move data in both directions at once", self.info().kind)))
    }

    /// The engine's clock in ns: the same clock as [`Transfer::start_ns`].
    fn now_ns(&self) -> f64;

    /// Who, when the engine's link model sends no SKP ordered sets and no DLLPs (the
    /// co-simulation's cocotbext-pcie link): a result up to their share above the model's
    /// ceiling is then no mystery, and the findings name them.
    fn link_omits_skp_and_dllps(&self) -> Option<&'static str> {
        None
    }

    /// Register access, for engines that have it.
    fn mmio(&mut self) -> Option<&mut dyn Mmio> {
        None
    }

    /// Message streaming through ring buffers (`pcieperf stream`), for engines that have it.
    fn streaming(&mut self) -> Option<&mut dyn ring::Streaming> {
        None
    }
}

/// Options that apply when opening any target.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Seed for simulated behaviour and test patterns.
    pub seed: u64,
    /// The user allowed writes that destroy data on a device (block devices).
    pub destructive: bool,
    /// I/Os kept in flight (`block`); 0 = the engine's default (8).
    pub queue_depth: usize,
    /// Bytes per I/O a transfer is split into (`block`); 0 = the engine's default (128 KiB).
    pub io_bytes: u64,
    /// Values of the engines' own flags ([`EngineFlag`]), by flag name, as the user typed them.
    pub flags: std::collections::BTreeMap<&'static str, String>,
    /// Nobody reads the d2h data (`--verify none`): a simulated engine need not produce it.
    pub data_unread: bool,
    /// Where sysfs is (`bar`, `vfio`); None = `/sys`.
    pub sysfs_root: Option<std::path::PathBuf>,
    /// NUMA placement (`--numa`), for engines that allocate host buffers of their own when
    /// opened (`cuda`); the procedures place their own buffers.
    pub numa: numa::Request,
}

impl OpenOptions {
    /// These options with an engine flag set (tests and callers without a command line).
    pub fn with_flag(mut self, name: &'static str, value: impl ToString) -> Self {
        self.flags.insert(name, value.to_string());
        self
    }

    /// An engine flag's value read by `parse` (the flag's own parser); None when not given.
    pub fn flag<T>(&self, name: &str, parse: fn(&str) -> Result<T, String>) -> Result<Option<T>, crate::error::InvalidInput> {
        self.flags.get(name).map(|text| parse(text).map_err(|why| crate::error::InvalidInput::new(format!("--{name} {text}: {why}")))).transpose()
    }

    /// The write guard these options give: consent from `--destructive` (or `--scratch`).
    pub fn write_guard(&self) -> guard::WriteGuard {
        guard::WriteGuard { consent: self.destructive, device_tree: self.sysfs_root.clone() }
    }
}

/// A target found on this machine, and whether `pcieperf run` may use it unasked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Target string to pass to [`open`], e.g. `block:/dev/nvme0n1`.
    pub target: String,
    pub kind: String,
    pub pci_address: Option<String>,
    /// True when it can be measured without destructive writes and with the current privileges.
    pub usable: bool,
    /// Why it is or is not usable, for humans.
    pub reason: String,
}

/// What opening one target needs.
pub struct Opening<'a> {
    /// The target as the user wrote it, `NAME:ARGUMENT`.
    pub target: &'a str,
    /// What follows `NAME:` (empty when nothing does).
    pub argument: &'a str,
    pub options: &'a OpenOptions,
    /// Opens any target, for engines that wrap another (`fault`).
    pub open: fn(&str, &OpenOptions) -> Result<Box<dyn Engine>, EngineError>,
}

impl Opening<'_> {
    /// Open another target (for engines that wrap one, such as `fault`).
    pub fn open_inner(&self, target: &str) -> Result<Box<dyn Engine>, EngineError> {
        (self.open)(target, self.options)
    }
}

/// Where detection looks: the device directory, sysfs, and the names in the device directory.
pub struct Roots<'a> {
    pub dev: &'a std::path::Path,
    pub sys: &'a std::path::Path,
    pub names: &'a std::collections::BTreeSet<String>,
}

/// A flag an engine declares for itself, as fio's engines declare their option tables: `dma`
/// and `run` offer `--NAME VALUE` for every flag in the table, check the value with `check`
/// when the command line is read (bad input: exit 2 before anything opens), and hand the text
/// to the engine in [`OpenOptions::flags`], which parses it with the same function.
pub struct EngineFlag {
    /// The long flag without dashes, e.g. `channels`.
    pub name: &'static str,
    pub value_name: &'static str,
    /// One line of help, with the default.
    pub help: &'static str,
    /// Why a value cannot be used, or Ok.
    pub check: fn(&str) -> Result<(), String>,
}

/// One engine.
pub struct EngineEntry {
    pub name: &'static str,
    /// What follows `NAME:`, e.g. `PATH[,sync]`.
    pub argument: &'static str,
    /// One line for help.
    pub about: &'static str,
    /// The shared `dma`/`run` flags this engine reads; the others do not apply to it.
    pub options: &'static [&'static str],
    /// Flags of its own, which the command line offers because the engine declares them.
    pub flags: &'static [EngineFlag],
    pub open: fn(&Opening) -> Result<Box<dyn Engine>, EngineError>,
    /// Devices of this kind on the machine, when the engine has hardware to find.
    pub detect: Option<fn(&Roots) -> Vec<Candidate>>,
}
