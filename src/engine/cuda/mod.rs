//! `cuda:N` / `cuda:BDF` — host↔GPU copies through the CUDA driver, measured as nvbandwidth
//! measures them (see docs/engines.md#cuda): copy-engine `cuMemcpyHtoDAsync` /
//! `cuMemcpyDtoHAsync` from host buffers of a chosen kind, streams held on a host flag while
//! the warm-ups and the timed loop are queued, CUDA events timing the loop. One `transfer` is
//! one sample; its time is that of one copy (elapsed ÷ loops), as nvbandwidth's bandwidth is
//! bytes × loops ÷ elapsed. `both` runs the two directions on two streams at once.
//!
//! The driver library is loaded at run time (cudarc with dynamic loading), after
//! [`loader::probe`] found it: without CUDA the engine says why and the rest of pcieperf runs.
//! Device memory is addressable (`DataModel::Memory`), so the procedures verify h2d by reading
//! it back and d2h by writing the pattern first, outside the timed region.
//!
//! The engine names the GPU's PCI address, so the run's conditions (link along its path,
//! ceiling, AER) are read from there as for every real engine.

pub mod copy;
pub mod driver;
pub mod host_memory;
pub mod loader;
pub mod spin;

use std::path::{Path, PathBuf};
use std::time::Duration;

use self::copy::{Hold, Leg, Plan};
use self::driver::{Context, DeviceMemory, Event, Stream};
use self::host_memory::{HostBuffer, MemoryKind};
use crate::engine::numa::{self, Resolution};
use super::devfile::{Deadline, HostClock};
use super::{Candidate, DataModel, DeviceCounters, Direction, Engine, EngineEntry, EngineError, EngineFlag, EngineInfo, Io, OpenOptions, Roots, Transfer};
use crate::error::InvalidInput;

/// nvbandwidth's defaults (common.h and memcpy.cpp of NVIDIA/nvbandwidth, v0.8): copies per
/// sample timed, warm-up copies before them, samples per figure (its median), buffer size.
pub const NVBANDWIDTH_LOOPS: u32 = 16;
pub const NVBANDWIDTH_WARMUPS: u32 = 4;
pub const NVBANDWIDTH_SAMPLES: usize = 3;
pub const NVBANDWIDTH_BUFFER_BYTES: u64 = 512 << 20;

/// Largest copy: the procedures' host buffer limit.
const MAX_TRANSFER_BYTES: u64 = 4 << 30;

pub const ENTRY: EngineEntry = EngineEntry {
    name: "cuda",
    argument: "N|BDF",
    about: "NVIDIA GPU by ordinal or PCI address: copy-engine cuMemcpyAsync timed by CUDA events, as nvbandwidth (libcuda loaded at run time)",
    options: &[],
    flags: FLAGS,
    open: |o| Ok(Box::new(open(o.target, o.argument, o.options)?)),
    detect: Some(detect),
};

const FLAGS: &[EngineFlag] = &[
    EngineFlag {
        name: "cuda-memory",
        value_name: "KIND",
        help: "cuda: host memory: pageable, pinned (cuMemHostAlloc, portable), wc (write-combined pinned) or registered (cuMemHostRegister) [default: pinned]",
        check: |text| MemoryKind::parse(text).map(drop),
    },
    EngineFlag {
        name: "cuda-loops",
        value_name: "N",
        help: "cuda: timed copies per sample (nvbandwidth's loopCount) [default: 16]",
        check: |text| parse_count(text, 1).map(drop),
    },
    EngineFlag {
        name: "cuda-warmups",
        value_name: "N",
        help: "cuda: untimed copies queued before each sample's timed ones [default: 4, as nvbandwidth]",
        check: |text| parse_count(text, 0).map(drop),
    },
];

fn parse_count(text: &str, least: u32) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if n >= least && n <= 1_000_000 => Ok(n),
        _ => Err(format!("give a count from {least} to 1000000")),
    }
}

/// Which GPU: `cuda:0` (ordinal), `cuda:0000:01:00.0` or `cuda:01:00.0` (PCI address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    Ordinal(i32),
    PciAddress(String),
}

pub fn parse_which(argument: &str) -> Result<Which, InvalidInput> {
    let argument = argument.trim();
    if argument.is_empty() {
        return Ok(Which::Ordinal(0));
    }
    if argument.contains(':') {
        let bdf: crate::pci::address::Bdf = argument.parse()?;
        return Ok(Which::PciAddress(bdf.to_string()));
    }
    argument
        .parse::<u16>()
        .map(|n| Which::Ordinal(i32::from(n)))
        .map_err(|_| InvalidInput::new(format!("cuda:{argument}: give a device ordinal (cuda:0) or a PCI address (cuda:0000:01:00.0)")))
}

/// Everything the driver handed out. Fields drop in order: buffers and handles before the
/// context they belong to.
struct State {
    h2d_host: Option<HostBuffer>,
    d2h_host: Option<HostBuffer>,
    device: Option<DeviceMemory>,
    events: [Event; 4],
    streams: [Stream; 2],
    flag: copy::Flag,
    context: Context,
}

pub struct CudaEngine {
    info: EngineInfo,
    clock: HostClock,
    kind: MemoryKind,
    plan: Plan,
    hold: Hold,
    /// None once a copy timed out: the driver may still use the buffers, so they are leaked.
    state: Option<State>,
}

pub fn open(target: &str, argument: &str, options: &OpenOptions) -> Result<CudaEngine, EngineError> {
    let which = parse_which(argument)?;
    let kind = options.flag("cuda-memory", MemoryKind::parse)?.unwrap_or(MemoryKind::Pinned);
    let loops = options.flag("cuda-loops", |t| parse_count(t, 1))?.unwrap_or(NVBANDWIDTH_LOOPS);
    let warmups = options.flag("cuda-warmups", |t| parse_count(t, 0))?.unwrap_or(NVBANDWIDTH_WARMUPS);
    let library = loader::probe().map_err(|why| InvalidInput::new(format!("{target}: {why}")))?;
    let version = driver::init().map_err(|e| in_target(target, e))?;
    let device = match &which {
        Which::Ordinal(n) => {
            let count = driver::device_count()?;
            if *n >= count {
                return Err(InvalidInput::new(format!("{target}: the CUDA driver sees {count} device(s) (cuda:0 to cuda:{})", count - 1)).into());
            }
            driver::device_by_ordinal(*n)?
        }
        Which::PciAddress(bdf) => driver::device_by_pci_address(bdf).map_err(|e| InvalidInput::new(format!("{target}: no CUDA device at {bdf} ({e})")))?,
    };
    let name = driver::device_name(device)?;
    let bdf = driver::pci_address(device)?;
    let sysfs_root = options.sysfs_root.clone().unwrap_or_else(crate::pci::sysfs::default_root);
    // The thread goes to the node before anything is allocated, so the driver's pinned
    // buffers follow it; the procedure checks where they landed (`own_host_buffers`).
    place_thread(options.numa, &sysfs_root, &bdf)?;
    let context = Context::primary(device)?;
    let mut flag = copy::Flag::new()?;
    let streams = [Stream::new()?, Stream::new()?];
    let events = [Event::new()?, Event::new()?, Event::new()?, Event::new()?];
    let (hold, no_spin_kernel) = if kind == MemoryKind::Pageable { (Hold::Unheld, None) } else { copy::choose_hold(&streams[0], &mut flag)? };
    let hold_text = match no_spin_kernel {
        Some(why) => format!("{} (spin kernel not usable: {why})", hold.describe()),
        None => hold.describe().to_string(),
    };
    // A first buffer now, allocated by the pinned thread; its pages are faulted in here, where
    // the thread's node puts them.
    let first = HostBuffer::new(kind, 2 << 20)?;
    // SAFETY: writing our own buffer once faults its pages in.
    unsafe { std::ptr::write_bytes(first.as_ptr(), 0, first.len()) };
    let description = format!(
        "{} {}.{}: {name} at {bdf}; {}; {}; {warmups} warm-up + {loops} timed copies per sample, CUDA events",
        library.label(),
        version / 1000,
        version % 1000 / 10,
        kind.describe(),
        hold_text
    );
    let info = EngineInfo {
        kind: "cuda".into(),
        target: target.to_string(),
        simulated: false,
        co_simulated: false,
        description,
        pci_address: Some(bdf),
        in_flight: 1,
        copies_per_transfer: loops,
        device_clock_hz: None,
        directions: vec![Direction::H2d, Direction::D2h],
        concurrent: true,
        alignment_bytes: 1,
        max_transfer_bytes: MAX_TRANSFER_BYTES,
        capacity_bytes: None,
        data_model: DataModel::Memory,
    };
    let state = State { h2d_host: Some(first), d2h_host: None, device: None, events, streams, flag, context };
    Ok(CudaEngine { info, clock: HostClock::start(), kind, plan: Plan { warmups, loops }, hold, state: Some(state) })
}

/// A driver that answers "no device" to an explicit target is bad input, as a missing library is.
fn in_target(target: &str, error: EngineError) -> EngineError {
    match error {
        EngineError::InvalidInput(e) => InvalidInput::new(format!("{target}: {}", e.0)).into(),
        other => other,
    }
}

/// Pin the thread to the node `--numa` means for the GPU, before the driver allocates; a pin
/// that fails is left to the procedure, which pins again and reports why it did not hold.
fn place_thread(request: numa::Request, sysfs_root: &Path, bdf: &str) -> Result<(), EngineError> {
    if let Resolution::Place(target) = numa::resolve(request, sysfs_root, numa::node_of(sysfs_root, bdf), bdf)? {
        let _ = numa::pin_thread(&target.cpus);
    }
    Ok(())
}

/// Make sure `slot` holds a buffer of at least `len` bytes.
fn ensure_host(slot: &mut Option<HostBuffer>, kind: MemoryKind, len: usize) -> Result<(), EngineError> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        *slot = None;
        *slot = Some(HostBuffer::new(kind, len)?);
    }
    Ok(())
}

fn ensure_device(slot: &mut Option<DeviceMemory>, len: usize) -> Result<u64, EngineError> {
    if slot.as_ref().is_none_or(|m| m.bytes < len) {
        *slot = None;
        *slot = Some(DeviceMemory::new(len)?);
    }
    Ok(slot.as_ref().map_or(0, |m| m.pointer))
}

impl CudaEngine {
    fn state(&mut self) -> Result<&mut State, EngineError> {
        let state = self.state.as_mut().ok_or_else(|| EngineError::Unsupported("cuda: an earlier copy did not finish; the engine takes no more work".into()))?;
        state.context.make_current()?;
        Ok(state)
    }

    fn check_range(offset: u64, len: usize) -> Result<usize, EngineError> {
        usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(len))
            .ok_or_else(|| InvalidInput::new(format!("cuda: device offset {offset} + {len} bytes is out of range")).into())
    }

    /// A sample's outcome: a copy that did not finish leaves every buffer to the driver for
    /// good (the state is forgotten, never freed), and the engine takes no more work.
    fn settle(&mut self, result: Result<Vec<f64>, EngineError>) -> Result<Vec<f64>, EngineError> {
        if matches!(result, Err(EngineError::Timeout { .. } | EngineError::Interrupted)) {
            std::mem::forget(self.state.take());
        }
        result
    }

    /// One copy's time is the GPU's (its events): the engine clock and the device clock agree.
    fn record(direction: Direction, bytes: usize, start_ns: f64, copy_ns: f64) -> Transfer {
        let device = DeviceCounters { device_ns: Some(copy_ns), ..DeviceCounters::default() };
        Transfer { direction, bytes: bytes as u64, start_ns, end_ns: start_ns + copy_ns, device, copy_ns: None }
    }
}

impl Engine for CudaEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn host_memory(&self) -> Option<crate::engine::HostMemory> {
        Some(self.kind)
    }

    fn own_host_buffers(&self) -> Option<Vec<(*const u8, usize)>> {
        let state = self.state.as_ref()?;
        Some([&state.h2d_host, &state.d2h_host].into_iter().flatten().map(|b| (b.as_ptr().cast_const(), b.len())).collect())
    }

    fn transfer(&mut self, io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        let (direction, len) = (io.direction(), io.len());
        let end = Self::check_range(device_offset, len)?;
        let (kind, plan, hold, clock) = (self.kind, self.plan, self.hold, self.clock);
        let start_ns = clock.now_ns();
        let sampled = {
            let state = self.state()?;
            let device = ensure_device(&mut state.device, end)? + device_offset;
            let slot = if direction == Direction::H2d { &mut state.h2d_host } else { &mut state.d2h_host };
            ensure_host(slot, kind, len)?;
            let host = slot.as_mut().expect("ensured");
            if let Io::H2d(data) = &io {
                host.slice_mut(len).copy_from_slice(data);
            }
            let leg = Leg { direction, stream: &state.streams[0], start: &state.events[0], end: &state.events[1], host: host.as_ptr(), device, bytes: len };
            copy::sample(&[leg], &state.flag, hold, plan, &Deadline::after(deadline))
        };
        let times = self.settle(sampled)?;
        if let Io::D2h(out) = io {
            let state = self.state()?;
            out.copy_from_slice(state.d2h_host.as_ref().expect("ensured").slice(len));
        }
        Ok(Self::record(direction, len, start_ns, times[0]))
    }

    fn transfer_both(&mut self, h2d: &[u8], d2h: &mut [u8], device_offset: u64, deadline: Duration) -> Result<(Transfer, Transfer), EngineError> {
        let end = Self::check_range(device_offset, h2d.len().max(d2h.len()))?;
        let (kind, plan, hold, clock) = (self.kind, self.plan, self.hold, self.clock);
        let start_ns = clock.now_ns();
        let sampled = {
            let state = self.state()?;
            let device = ensure_device(&mut state.device, end)? + device_offset;
            ensure_host(&mut state.h2d_host, kind, h2d.len())?;
            ensure_host(&mut state.d2h_host, kind, d2h.len())?;
            let h2d_host = state.h2d_host.as_mut().expect("ensured");
            h2d_host.slice_mut(h2d.len()).copy_from_slice(h2d);
            let d2h_host = state.d2h_host.as_ref().expect("ensured");
            let legs = [
                Leg { direction: Direction::H2d, stream: &state.streams[0], start: &state.events[0], end: &state.events[1], host: h2d_host.as_ptr(), device, bytes: h2d.len() },
                Leg { direction: Direction::D2h, stream: &state.streams[1], start: &state.events[2], end: &state.events[3], host: d2h_host.as_ptr(), device, bytes: d2h.len() },
            ];
            copy::sample(&legs, &state.flag, hold, plan, &Deadline::after(deadline))
        };
        let times = self.settle(sampled)?;
        let state = self.state()?;
        d2h.copy_from_slice(state.d2h_host.as_ref().expect("ensured").slice(d2h.len()));
        Ok((Self::record(Direction::H2d, h2d.len(), start_ns, times[0]), Self::record(Direction::D2h, d2h.len(), start_ns, times[1])))
    }

    fn now_ns(&self) -> f64 {
        self.clock.now_ns()
    }
}

/// GPUs on the machine: every CUDA device the driver lists, usable; without a driver, one line
/// saying why, for each NVIDIA display device in sysfs (or for `cuda:0` when there is none).
fn detect(roots: &Roots) -> Vec<Candidate> {
    let unusable = |target: String, pci_address: Option<String>, reason: String| Candidate { target, kind: "cuda".into(), pci_address, usable: false, reason };
    let library = match loader::probe() {
        Ok(library) => library,
        Err(why) => {
            let gpus = nvidia_gpus(roots.sys);
            if gpus.is_empty() {
                return vec![unusable("cuda:0".into(), None, why)];
            }
            return gpus.into_iter().map(|bdf| unusable(format!("cuda:{bdf}"), Some(bdf), why.clone())).collect();
        }
    };
    let listed = driver::init().and_then(|_| {
        (0..driver::device_count()?)
            .map(|n| {
                let device = driver::device_by_ordinal(n)?;
                Ok((n, driver::device_name(device)?, driver::pci_address(device)?))
            })
            .collect::<Result<Vec<_>, EngineError>>()
    });
    match listed {
        Ok(devices) => devices
            .into_iter()
            .map(|(n, name, bdf)| Candidate {
                target: format!("cuda:{n}"),
                kind: "cuda".into(),
                pci_address: Some(bdf.clone()),
                usable: true,
                reason: format!("{name} at {bdf} through the {}; copies to and from its own memory (nothing of yours is written)", library.label()),
            })
            .collect(),
        Err(error) => vec![unusable("cuda:0".into(), None, format!("{}: {error}", library.name))],
    }
}

/// PCI addresses of NVIDIA display controllers (vendor 0x10de, class 0x03) under `sys`.
fn nvidia_gpus(sys: &Path) -> Vec<String> {
    let devices: PathBuf = sys.join("bus/pci/devices");
    let read = |dir: &Path, name: &str| std::fs::read_to_string(dir.join(name)).map(|t| t.trim().to_string()).unwrap_or_default();
    let mut found: Vec<String> = std::fs::read_dir(&devices)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| read(&e.path(), "vendor") == "0x10de" && read(&e.path(), "class").starts_with("0x03"))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_ordinals_or_pci_addresses() {
        assert_eq!(parse_which(""), Ok(Which::Ordinal(0)));
        assert_eq!(parse_which("1"), Ok(Which::Ordinal(1)));
        assert_eq!(parse_which("01:00.0"), Ok(Which::PciAddress("0000:01:00.0".into())));
        assert_eq!(parse_which("0000:65:00.0"), Ok(Which::PciAddress("0000:65:00.0".into())));
        assert!(parse_which("gpu").unwrap_err().0.contains("ordinal"));
        assert!(parse_which("00:zz.0").is_err());
    }

    #[test]
    fn flags_check_what_open_reads() {
        let check = |name: &str, value: &str| (FLAGS.iter().find(|f| f.name == name).unwrap().check)(value);
        assert!(check("cuda-memory", "wc").is_ok() && check("cuda-memory", "huge").is_err());
        assert!(check("cuda-loops", "16").is_ok() && check("cuda-loops", "0").is_err());
        assert!(check("cuda-warmups", "0").is_ok() && check("cuda-warmups", "-1").is_err());
    }

    #[test]
    fn nvidia_display_devices_are_found_in_sysfs() {
        let root = tempfile::tempdir().unwrap();
        let add = |bdf: &str, vendor: &str, class: &str| {
            let dir = root.path().join("bus/pci/devices").join(bdf);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(dir.join("class"), format!("{class}\n")).unwrap();
        };
        add("0000:65:00.0", "0x10de", "0x030200");
        add("0000:65:00.1", "0x10de", "0x040300"); // its audio function
        add("0000:01:00.0", "0x8086", "0x030000");
        assert_eq!(nvidia_gpus(root.path()), vec!["0000:65:00.0".to_string()]);
    }
}
