//! `block:PATH` — device-initiated DMA through a block device or a file on one, with O_DIRECT.
//!
//! A read with O_DIRECT is a device→host DMA write into our buffer (d2h); a write is a
//! host→device DMA read (h2d). A transfer of N bytes is split into I/Os of `io_bytes`
//! (default 128 KiB; the last one may be shorter) kept `queue_depth` deep (default 8) on one
//! io_uring, like fio's `ioengine=io_uring direct=1 iodepth=QD bs=IO`. Where io_uring is missing
//! (old kernel, seccomp) the engine falls back to one synchronous pread/pwrite at a time and says
//! so in its description.
//!
//! Buffers: O_DIRECT needs page-aligned memory. A caller buffer that is page-aligned (e.g.
//! [`super::AlignedBuf`]) is used as is (zero copy); any other buffer goes through
//! 2 × `queue_depth` aligned bounce slots, cut from one buffer (reads are copied out after the
//! ring is refilled). Bounce copies overlap the I/Os in flight except the first (h2d) or the
//! last (d2h), which fall inside the measured time. Each I/O is issued as soon as it is queued,
//! as fio does. Once nothing is left to queue, one wait takes every I/O still in flight (fio's
//! `iodepth_batch_complete_min`), not a wake-up per completion.
//!
//! Stuck I/O: a transfer whose deadline passes (or that a signal ends) cancels what it has in
//! flight and gives the kernel [`CANCEL_GRACE`] to hand it back. Block I/O the kernel has
//! accepted cannot be cancelled, and a device whose queue is frozen (a failed AER recovery)
//! never completes it: such I/Os are left to the kernel with their memory (the engine's bounce
//! slots are never freed; the caller's pages under them are swapped for fresh ones, so it may
//! free its buffer), and the transfer ends with [`EngineError::Held`]. So that no thread of ours is ever stuck in the kernel (a thread in state D
//! would keep the process from exiting), I/Os on block devices go out with RWF_NOWAIT: a frozen
//! or full queue answers EAGAIN, and the I/O is issued again after another one completes or
//! after [`EAGAIN_BACKOFF`] — instead of the kernel parking it on a worker thread that would
//! wait uninterruptibly for the queue.
//!
//! Writes destroy data, on a block device and on a file alike: both are opened read-only unless
//! `OpenOptions::destructive` (`--destructive`), and reads are then checked for consistency only
//! (`DataModel::Opaque`). A file pcieperf made itself (`--scratch DIR`) is opened with consent.

use std::fs::File;
use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use super::guard;
use super::devfile::{self, is_page_aligned, AlignedBuf, Deadline, HostClock, NodeKind, PAGE_BYTES};
use super::{Candidate, EngineEntry, Roots, DataModel, DeviceCounters, Direction, Engine, EngineError, EngineInfo, Io, OpenOptions, Transfer};
use crate::error::InvalidInput;

pub const ENTRY: EngineEntry = EngineEntry {
    name: "block",
    argument: "PATH[,sync]",
    about: "a block device or a file with O_DIRECT on io_uring: reads are device→host DMA; writes need --destructive on devices",
    options: &["--destructive", "--queue-depth", "--io-size"],
    flags: &[],
    open: |o| Ok(Box::new(open(o.argument, o.options)?)),
    detect: Some(detect),
};

pub const DEFAULT_QUEUE_DEPTH: usize = 8;
pub const DEFAULT_IO_BYTES: usize = 128 * 1024;
/// io_uring read/write lengths are 32-bit; stay well below.
const MAX_IO_BYTES: usize = 64 << 20;
/// Largest I/O ever issued with RWF_NOWAIT: one bio (BIO_MAX_VECS = 256 pages). The kernel
/// answers EAGAIN to every direct I/O with RWF_NOWAIT it would have to split (over one bio, or
/// over the queue's limits, see [`nowait_limit_bytes`]), so those go out without it — and can
/// leave a kernel worker of ours waiting on a frozen queue (docs/safety.md).
const NOWAIT_MAX_BYTES: usize = 256 * PAGE_BYTES;
/// How long an I/O refused with EAGAIN waits before it is issued again, unless another I/O
/// completes first (a full queue frees a tag then).
const EAGAIN_BACKOFF: Duration = Duration::from_millis(1);
/// How long an abandoned transfer waits for the kernel to hand back its cancelled I/Os before
/// it leaves them to the kernel.
pub const CANCEL_GRACE: Duration = Duration::from_secs(1);
/// user_data of cancel requests (no I/O has it: slot and op index are never both all ones).
const CANCEL_USER_DATA: u64 = u64::MAX;

/// One I/O: `len` bytes at device `offset`, from/to `host` (the caller's buffer).
#[derive(Clone, Copy)]
struct Op {
    write: bool,
    host: *mut u8,
    len: usize,
    offset: u64,
}

/// `count` aligned bounce slots of `bytes` each in one buffer: one allocation, so from 2 MiB on
/// they share huge pages (few DMA segments, as for a caller's `AlignedBuf`).
struct Slots {
    memory: AlignedBuf,
    count: usize,
    bytes: usize,
}

impl Slots {
    fn new(count: usize, bytes: usize) -> Slots {
        Slots { memory: AlignedBuf::new(count * bytes), count, bytes }
    }

    /// Start of slot `i`; the memory lives as long as `self` (and is only written through
    /// these pointers or by the kernel).
    fn ptr(&self, i: usize) -> *mut u8 {
        assert!(i < self.count);
        // SAFETY: i < count, inside the buffer of count × bytes.
        unsafe { (self.memory.as_ptr() as *mut u8).add(i * self.bytes) }
    }
}

/// How I/Os are issued.
enum Submitter {
    Uring(Box<IoUring>),
    Sync,
}

pub struct BlockEngine {
    info: EngineInfo,
    path: PathBuf,
    file: File,
    clock: HostClock,
    submitter: Submitter,
    queue_depth: usize,
    io_bytes: usize,
    writable: bool,
    /// Bounce slots of `io_bytes` each, cut from one buffer (huge pages once it reaches 2 MiB).
    /// Never freed once the kernel holds an I/O it would not give back (`held_ios`).
    slots: ManuallyDrop<Slots>,
    /// The slots are registered with the ring (IORING_REGISTER_BUFFERS): pinned once, so an I/O
    /// through a slot skips the per-I/O page pinning a plain read/write pays.
    fixed_slots: bool,
    /// Slots still owned by the kernel after a timed-out transfer.
    busy_slots: Vec<bool>,
    /// Transfer counter, in every user_data, so late completions of a timed-out transfer are
    /// recognised and only free their slot.
    epoch: u16,
    /// I/Os up to this size are issued with RWF_NOWAIT (block devices: a frozen queue then
    /// answers EAGAIN instead of parking the I/O on a kernel worker that waits
    /// uninterruptibly); 0: none.
    nowait_max_bytes: usize,
    /// I/Os of an abandoned transfer the kernel still holds: the engine is not used again and
    /// its memory is left allocated.
    held_ios: usize,
}

impl Drop for BlockEngine {
    fn drop(&mut self) {
        if self.held_ios == 0 && !self.busy_slots.iter().any(|busy| *busy) {
            // SAFETY: dropped once, here, and no I/O in the kernel uses the slots any more.
            unsafe { ManuallyDrop::drop(&mut self.slots) }
        }
        // Otherwise the slots are leaked on purpose: the kernel may still DMA into them.
    }
}

/// Target argument: `PATH[,sync]`.
pub fn open(argument: &str, options: &OpenOptions) -> Result<BlockEngine, EngineError> {
    let (path, force_sync) = match argument.strip_suffix(",sync") {
        Some(path) => (path, true),
        None => (argument, false),
    };
    if path.is_empty() {
        return Err(InvalidInput::new("block needs a path: block:/dev/nvme0n1 (read-only) or block:FILE").into());
    }
    let path = PathBuf::from(path);
    let (file, kind, writable) = open_file(&path, options)?;
    let (queue_depth, io_bytes) = queue_shape(options)?;
    let (submitter, how) = submitter(force_sync, queue_depth);
    let sync = matches!(submitter, Submitter::Sync);
    let capacity = capacity_bytes(&file, kind)?;
    let nowait_max_bytes = if kind == NodeKind::BlockDevice { nowait_limit_bytes(&file) } else { 0 };
    let pci = crate::pci::nodes::pci_address_of(&path, Path::new("/sys"));
    let what = if kind == NodeKind::Regular { "file" } else { "block device" };
    let info = EngineInfo {
        kind: "block".into(),
        target: format!("block:{argument}"),
        simulated: false,
        co_simulated: false,
        description: format!(
            "{what} {} with O_DIRECT, {how}, I/Os of {} KiB{}{}",
            path.display(),
            io_bytes / 1024,
            if writable { "" } else { ", read-only (no --destructive)" },
            pci.as_deref().map(|p| format!(", PCI {p}")).unwrap_or_default()
        ),
        pci_address: pci,
        in_flight: if sync { 1 } else { queue_depth as u32 },
        copies_per_transfer: 1,
        device_clock_hz: None,
        directions: if writable { vec![Direction::H2d, Direction::D2h] } else { vec![Direction::D2h] },
        concurrent: writable && !sync,
        alignment_bytes: PAGE_BYTES as u64,
        max_transfer_bytes: capacity.min(crate::units::MAX_SIZE_BYTES),
        capacity_bytes: Some(capacity),
        data_model: if writable { DataModel::Memory } else { DataModel::Opaque },
    };
    // Twice the depth: completed reads are copied out while new I/Os already use other slots.
    let slot_count = if sync { 1 } else { 2 * queue_depth };
    let mut engine = BlockEngine {
        info,
        path,
        file,
        clock: HostClock::start(),
        submitter,
        queue_depth: if sync { 1 } else { queue_depth },
        io_bytes,
        writable,
        slots: ManuallyDrop::new(Slots::new(slot_count, io_bytes)),
        busy_slots: vec![false; slot_count],
        fixed_slots: false,
        epoch: 0,
        nowait_max_bytes,
        held_ios: 0,
    };
    engine.fixed_slots = engine.register_slots();
    if !engine.fixed_slots && !sync {
        engine.info.description.push_str(", bounce slots not registered (RLIMIT_MEMLOCK?)");
    }
    Ok(engine)
}

/// The file or device, opened read-write only when the write guard allows it; its kind.
fn open_file(path: &Path, options: &OpenOptions) -> Result<(File, NodeKind, bool), EngineError> {
    let kind = devfile::node_kind(path)
        .map_err(|e| devfile::open_error(path, devfile::Access::Read, "create the file first, or name an existing block device", e))?;
    if !matches!(kind, NodeKind::Regular | NodeKind::BlockDevice) {
        return Err(InvalidInput::new(format!("{} is neither a block device nor a regular file", path.display())).into());
    }
    let guard = options.write_guard();
    let writable = guard.allows(path);
    let access = if writable { devfile::Access::ReadWrite } else { devfile::Access::Read };
    let file = devfile::open_node(path, access, libc::O_DIRECT, "", &guard).map_err(|e| match e {
        EngineError::Io { source, .. } if source.raw_os_error() == Some(libc::EINVAL) => EngineError::Unsupported(format!(
            "{} does not support O_DIRECT (tmpfs and some overlay filesystems do not): put the file on a disk filesystem",
            path.display()
        )),
        other => other,
    })?;
    Ok((file, kind, writable))
}

/// Queue depth and I/O size from the options (0: the defaults), checked.
fn queue_shape(options: &OpenOptions) -> Result<(usize, usize), EngineError> {
    let queue_depth = if options.queue_depth == 0 { DEFAULT_QUEUE_DEPTH } else { options.queue_depth };
    let io_bytes = if options.io_bytes == 0 { DEFAULT_IO_BYTES } else { options.io_bytes as usize };
    if !(1..=4096).contains(&queue_depth) {
        return Err(InvalidInput::new(format!("queue depth {queue_depth} out of range 1..=4096")).into());
    }
    if io_bytes % PAGE_BYTES != 0 || io_bytes > MAX_IO_BYTES {
        return Err(InvalidInput::new(format!("I/O size {io_bytes} must be a multiple of 4096 bytes and at most 64 MiB")).into());
    }
    Ok((queue_depth, io_bytes))
}

/// io_uring unless `,sync` was asked for or the kernel has none; how, for the description.
fn submitter(force_sync: bool, queue_depth: usize) -> (Submitter, String) {
    if force_sync {
        return (Submitter::Sync, "synchronous pread/pwrite (asked for with ,sync)".to_string());
    }
    match uring(queue_depth) {
        Ok(ring) => (Submitter::Uring(Box::new(ring)), format!("io_uring, queue depth {queue_depth}")),
        Err(why) => (Submitter::Sync, format!("synchronous pread/pwrite, queue depth 1 (io_uring unavailable: {why})")),
    }
}

/// A ring with room for every I/O in flight, or why there is none. Bounded waits need
/// IORING_FEAT_EXT_ARG (Linux 5.11); without it a stuck I/O could block forever.
pub(super) fn uring(queue_depth: usize) -> Result<IoUring, String> {
    let entries = queue_depth.next_power_of_two().max(8) as u32;
    // COOP_TASKRUN (Linux 5.19): completions are run when we enter the kernel anyway, instead of
    // interrupting us — we only ever look at completions after io_uring_enter. Older kernels
    // refuse the flag: build without it.
    let ring = IoUring::builder()
        .setup_coop_taskrun()
        .build(entries)
        .or_else(|_| IoUring::new(entries))
        .map_err(|e| e.to_string())?;
    if !ring.params().is_feature_ext_arg() {
        return Err("kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11) for waits with a deadline".into());
    }
    Ok(ring)
}

/// The largest direct I/O the block device behind `file` takes as one request without a split
/// (a split RWF_NOWAIT I/O fails with EAGAIN): its queue's max_sectors_kb and max_segments
/// (one page per segment at worst), at most one bio; 0 when sysfs does not say.
fn nowait_limit_bytes(file: &File) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(rdev) = file.metadata().map(|m| m.rdev()) else { return 0 };
    let node = PathBuf::from(format!("/sys/dev/block/{}:{}", libc::major(rdev), libc::minor(rdev)));
    // A partition's queue is its disk's.
    let queue = [node.join("queue"), node.join("../queue")].into_iter().find(|q| q.exists());
    let read = |name: &str| -> Option<usize> { std::fs::read_to_string(queue.as_ref()?.join(name)).ok()?.trim().parse().ok() };
    let (Some(max_kb), Some(segments)) = (read("max_sectors_kb"), read("max_segments")) else { return 0 };
    let limit = (max_kb * 1024).min(segments * PAGE_BYTES).min(NOWAIT_MAX_BYTES);
    limit - limit % PAGE_BYTES
}

fn capacity_bytes(file: &File, kind: NodeKind) -> Result<u64, EngineError> {
    if kind == NodeKind::Regular {
        return file.metadata().map(|m| m.len()).map_err(|source| EngineError::Io { what: "stat".into(), source });
    }
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272; // _IOR(0x12, 114, size_t)
    let mut bytes: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64.
    if unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut bytes) } < 0 {
        return Err(EngineError::Io { what: "BLKGETSIZE64".into(), source: std::io::Error::last_os_error() });
    }
    Ok(bytes)
}

const DIRECT: u16 = u16::MAX;

/// Progress of one transfer on the ring.
struct Flight {
    /// Ops left to issue, as (op index, bytes already done): a short I/O is resumed from there.
    queue: std::collections::VecDeque<(usize, usize)>,
    /// (op index, slot, bytes done before this I/O).
    in_flight: Vec<(usize, u16, usize)>,
    done_ops: usize,
    /// Completion time of the last h2d [1] and d2h [0] op.
    ends: [f64; 2],
    failure: Option<EngineError>,
    /// An I/O was refused with EAGAIN: nothing is issued before this instant unless another I/O
    /// completes first.
    not_before: Option<Instant>,
}

fn user_data(epoch: u16, slot: u16, op: usize) -> u64 {
    (epoch as u64) << 48 | (slot as u64) << 32 | op as u64
}

fn split_user_data(data: u64) -> (u16, u16, usize) {
    ((data >> 48) as u16, (data >> 32) as u16, (data & 0xFFFF_FFFF) as usize)
}

impl BlockEngine {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Move `device_bytes` at `device_offset` through `io`'s buffer used cyclically: I/O k uses
    /// the buffer's bytes at `k·io_bytes mod len`. This is how fio (and a vendor's DMA loop)
    /// drives a device: `queue_depth × io_bytes` of host memory that stays in the CPU caches,
    /// instead of a distinct page for every byte moved. A d2h transfer leaves in each part of
    /// the buffer the last I/O read into it. `device_bytes == len` is [`Engine::transfer`].
    ///
    /// A buffer shorter than `device_bytes` must hold a whole number of I/Os (so no I/O wraps
    /// around its end), and at least `queue_depth` of them for I/Os in flight not to share
    /// memory; a longer one is used from its start.
    pub fn transfer_reusing(&mut self, io: Io<'_>, device_offset: u64, device_bytes: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        let direction = io.direction();
        let (write, host, host_len) = match io {
            Io::H2d(buf) => (true, buf.as_ptr() as *mut u8, buf.len()),
            Io::D2h(buf) => (false, buf.as_mut_ptr(), buf.len()),
        };
        let len = usize::try_from(device_bytes).map_err(|_| InvalidInput::new(format!("{device_bytes} bytes do not fit in memory")))?;
        if host_len < len && (host_len < self.io_bytes || host_len % self.io_bytes != 0) {
            return Err(InvalidInput::new(format!(
                "a reused buffer must hold a whole number of I/Os of {} bytes (got {host_len} bytes for {len})",
                self.io_bytes
            ))
            .into());
        }
        self.check(write, len, device_offset)?;
        let mut ops = Vec::new();
        self.plan(&mut ops, write, host, host_len, len, device_offset);
        let deadline = Deadline::after(deadline);
        let start = self.clock.now_ns();
        let ends = self.run(&ops, &deadline)?;
        Ok(self.transfer_record(direction, len, start, ends[write as usize].max(start)))
    }

    /// Register the bounce slots with the ring; false (plain I/O) when the kernel refuses, e.g.
    /// over RLIMIT_MEMLOCK.
    fn register_slots(&mut self) -> bool {
        let Submitter::Uring(ring) = &self.submitter else { return false };
        let iovecs: Vec<libc::iovec> =
            (0..self.slots.count).map(|i| libc::iovec { iov_base: self.slots.ptr(i).cast(), iov_len: self.slots.bytes }).collect();
        // SAFETY: the slots live as long as the engine, which owns the ring.
        unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok()
    }

    fn check(&self, write: bool, len: usize, offset: u64) -> Result<(), EngineError> {
        if write && !self.writable {
            return Err(guard::refusal(&self.path, guard::user_data(&self.path, None).unwrap_or("a regular file")));
        }
        let align = self.info.alignment_bytes;
        if !(len as u64).is_multiple_of(align) || !offset.is_multiple_of(align) {
            return Err(InvalidInput::new(format!(
                "O_DIRECT needs sizes and offsets in multiples of {align} bytes (got {len} bytes at offset {offset})"
            ))
            .into());
        }
        let capacity = self.info.capacity_bytes.unwrap_or(u64::MAX);
        if offset + len as u64 > capacity {
            return Err(InvalidInput::new(format!(
                "{} bytes at offset {offset} run past the end of {} ({capacity} bytes)",
                len,
                self.path.display()
            ))
            .into());
        }
        Ok(())
    }

    /// Split `[offset, offset+len)` of the device into I/Os. I/O k uses the host bytes at
    /// `k·io_bytes mod host_len`: the host buffer (`host_len` ≥ one I/O, a multiple of
    /// `io_bytes` when shorter than `len`) is reused cyclically; `host_len == len` maps the
    /// buffer one to one.
    fn plan(&self, ops: &mut Vec<Op>, write: bool, host: *mut u8, host_len: usize, len: usize, offset: u64) {
        let mut done = 0;
        while done < len {
            let take = self.io_bytes.min(len - done);
            // SAFETY: done % host_len + take ≤ host_len (see above), inside the caller's buffer.
            ops.push(Op { write, host: unsafe { host.add(done % host_len) }, len: take, offset: offset + done as u64 });
            done += take;
        }
    }

    /// Run every op; returns the completion time (engine clock) of the last op of each direction.
    fn run(&mut self, ops: &[Op], deadline: &Deadline) -> Result<[f64; 2], EngineError> {
        if self.held_ios > 0 {
            let message = format!("{}: not used again", self.held_statement());
            return Err(EngineError::Held { message, interrupted: false });
        }
        self.reclaim_slots(deadline)?;
        let result = match self.submitter {
            Submitter::Sync => self.run_sync(ops, deadline),
            Submitter::Uring(_) => self.run_uring(ops, deadline),
        };
        result.map_err(|error| self.name_a_vanished_device(error))
    }

    /// A removed disk reads as empty (the kernel sets its capacity to zero) or fails with I/O
    /// errors; say that the device went away, naming it, rather than "end of device".
    fn name_a_vanished_device(&self, error: EngineError) -> EngineError {
        if !matches!(error, EngineError::Short { .. } | EngineError::Io { .. }) {
            return error;
        }
        let kind = if self.info.description.starts_with("file") { NodeKind::Regular } else { NodeKind::BlockDevice };
        let was = self.info.capacity_bytes.unwrap_or(0);
        let now = capacity_bytes(&self.file, kind).unwrap_or(0);
        let pci_gone = self.info.pci_address.as_deref().is_some_and(|p| !Path::new("/sys/bus/pci/devices").join(p).exists());
        if now >= was && !pci_gone {
            return error;
        }
        let pci = self.info.pci_address.as_deref().map(|p| format!(" (PCI {p})")).unwrap_or_default();
        EngineError::Gone(format!(
            "{}{pci} went away during the transfer: it now holds {now} of the {was} bytes it had when opened \
             (removed, hot-unplugged or shrunk){}; the transfer failed with: {error}",
            self.path.display(),
            if pci_gone { ", and its PCI function has left sysfs" } else { "" }
        ))
    }

    fn run_sync(&mut self, ops: &[Op], deadline: &Deadline) -> Result<[f64; 2], EngineError> {
        let mut ends = [0.0; 2];
        for op in ops {
            let direct = is_page_aligned(op.host);
            let slot = self.slots.ptr(0);
            let buf = if direct { op.host } else { slot };
            // SAFETY: op.host points into the caller's buffer for op.len bytes; slot holds io_bytes ≥ op.len.
            unsafe {
                if op.write && !direct {
                    std::ptr::copy_nonoverlapping(op.host, slot, op.len);
                }
                let io = || match op.write {
                    true => Io::H2d(std::slice::from_raw_parts(buf, op.len)),
                    false => Io::D2h(std::slice::from_raw_parts_mut(buf, op.len)),
                };
                let flags = if op.len <= self.nowait_max_bytes { libc::RWF_NOWAIT } else { 0 };
                let mut moved = devfile::positional_all_flags(&self.file, io(), op.offset, deadline, &self.info.target, flags);
                if flags != 0 && matches!(&moved, Err(EngineError::Io { source, .. }) if source.raw_os_error() == Some(libc::EOPNOTSUPP)) {
                    self.nowait_max_bytes = 0; // a queue without RWF_NOWAIT support: go without, from now on
                    moved = devfile::positional_all_flags(&self.file, io(), op.offset, deadline, &self.info.target, 0);
                }
                moved?;
                if !op.write && !direct {
                    std::ptr::copy_nonoverlapping(slot, op.host, op.len);
                }
            }
            ends[op.write as usize] = self.clock.now_ns();
        }
        Ok(ends)
    }

    fn run_uring(&mut self, ops: &[Op], deadline: &Deadline) -> Result<[f64; 2], EngineError> {
        self.epoch = self.epoch.wrapping_add(1);
        let mut state = Flight {
            queue: (0..ops.len()).map(|i| (i, 0)).collect(),
            in_flight: Vec::new(),
            done_ops: 0,
            ends: [0.0; 2],
            failure: None,
            not_before: None,
        };
        while state.done_ops < ops.len() {
            self.fill(ops, &mut state);
            if state.in_flight.is_empty() && (state.failure.is_some() || state.queue.is_empty()) {
                break;
            }
            let what = if state.in_flight.is_empty() {
                format!("{} refused I/O (EAGAIN: its queue is frozen or full)", self.info.target)
            } else {
                format!("I/O of {} still in flight", self.info.target)
            };
            // Nothing left to queue: every completion before the last would wake us for nothing
            // (under CPU contention each wake-up costs a scheduling delay), so wait for them all,
            // as fio does with `iodepth_batch_complete_min` = the queue depth.
            let wanted = if state.queue.is_empty() { state.in_flight.len().max(1) } else { 1 };
            if let Err(error) = self.wait_for(wanted, deadline, state.not_before, &what) {
                return Err(self.abandon(ops, &state.in_flight, error));
            }
            let completions: Vec<(u64, i32)> = {
                let Submitter::Uring(ring) = &mut self.submitter else { unreachable!() };
                ring.completion().map(|cqe| (cqe.user_data(), cqe.result())).collect()
            };
            // Bounced reads to copy out once the ring is busy again.
            let mut copies: Vec<(u16, *mut u8, usize, bool)> = Vec::new();
            for (data, result) in completions {
                self.complete(ops, &mut state, data, result, &mut copies);
            }
            if !copies.is_empty() {
                // Refill and submit before copying, so the device is not idle during the copies.
                self.fill(ops, &mut state);
                let Submitter::Uring(ring) = &mut self.submitter else { unreachable!() };
                ring.submit().map_err(|source| EngineError::Io { what: "io_uring_enter".into(), source })?;
                for (slot, dst, len, last) in copies {
                    // SAFETY: the slot holds `len` bytes read for this op; dst is inside the caller's buffer.
                    unsafe { std::ptr::copy_nonoverlapping(self.slots.ptr(slot as usize), dst, len) };
                    self.busy_slots[slot as usize] = false;
                    if last {
                        state.ends[0] = self.clock.now_ns();
                    }
                }
            }
        }
        match state.failure {
            Some(error) => Err(error),
            None => Ok(state.ends),
        }
    }

    /// Queue I/Os until `queue_depth` are in flight (none once an op failed: then only drain).
    fn fill(&mut self, ops: &[Op], state: &mut Flight) {
        let fd = types::Fd(self.file.as_raw_fd());
        let mut first = true;
        if state.not_before.is_some_and(|at| Instant::now() < at) {
            return;
        }
        state.not_before = None;
        while state.failure.is_none() && state.in_flight.len() < self.queue_depth {
            let Some(&(index, skip)) = state.queue.front() else { break };
            let op = ops[index];
            // A reused buffer: the I/O that used these bytes last may still be in flight (they
            // can complete out of order); wait for it, so I/Os in flight never share memory.
            if state.in_flight.iter().any(|&(other, _, _)| ops[other].host == op.host) {
                break;
            }
            state.queue.pop_front();
            let direct = is_page_aligned(op.host) && skip == 0;
            let slot = if direct { DIRECT } else { self.free_slot() };
            // SAFETY: slots hold io_bytes ≥ op.len; op.host is valid for op.len bytes.
            let buf = unsafe {
                if slot == DIRECT {
                    op.host
                } else {
                    let slot_ptr = self.slots.ptr(slot as usize);
                    if op.write {
                        std::ptr::copy_nonoverlapping(op.host.add(skip), slot_ptr, op.len - skip);
                    }
                    slot_ptr
                }
            };
            let (len, offset) = ((op.len - skip) as u32, op.offset + skip as u64);
            let flags = if len as usize <= self.nowait_max_bytes { libc::RWF_NOWAIT } else { 0 };
            let entry = match (op.write, self.fixed_slots && slot != DIRECT) {
                (true, false) => opcode::Write::new(fd, buf, len).offset(offset).rw_flags(flags).build(),
                (false, false) => opcode::Read::new(fd, buf, len).offset(offset).rw_flags(flags).build(),
                (true, true) => opcode::WriteFixed::new(fd, buf, len, slot).offset(offset).rw_flags(flags).build(),
                (false, true) => opcode::ReadFixed::new(fd, buf, len, slot).offset(offset).rw_flags(flags).build(),
            };
            let Submitter::Uring(ring) = &mut self.submitter else { unreachable!() };
            // SAFETY: the buffer stays valid until the completion is reaped (caller buffers: the
            // transfer does not return while they are in flight; slots: owned by self).
            unsafe { ring.submission().push(&entry.user_data(user_data(self.epoch, slot, index))) }
                .expect("ring has an entry per I/O in flight");
            // Issue the first I/O of a refill at once: a batch of SQEs reaches the device only
            // when the whole batch is prepared (the block layer plugs it), so a drained device
            // would idle while the later I/Os' pages are pinned. The rest go in one call with
            // the next wait (one call per I/O, as fio makes, costs small I/Os ~30 %). A failed
            // submit leaves the entry queued; the next wait submits it and reports the error.
            if first {
                let _ = ring.submit();
                first = false;
            }
            if slot != DIRECT {
                self.busy_slots[slot as usize] = true;
            }
            state.in_flight.push((index, slot, skip));
        }
    }

    /// Account for one completion; bounced reads are left in `copies` with their slot still busy.
    fn complete(&mut self, ops: &[Op], state: &mut Flight, data: u64, result: i32, copies: &mut Vec<(u16, *mut u8, usize, bool)>) {
        let (cqe_epoch, slot, index) = split_user_data(data);
        if cqe_epoch != self.epoch {
            if slot != DIRECT {
                self.busy_slots[slot as usize] = false; // a late completion of an abandoned transfer
            }
            return;
        }
        let Some(at) = state.in_flight.iter().position(|&(i, _, _)| i == index) else { return };
        let (_, _, skip) = state.in_flight.swap_remove(at);
        let op = ops[index];
        let bounced_read = !op.write && slot != DIRECT && result > 0;
        if slot != DIRECT && !bounced_read {
            self.busy_slots[slot as usize] = false;
        }
        let what = || format!("{} {} bytes at offset {} of {}", if op.write { "write" } else { "read" }, op.len, op.offset, self.path.display());
        match result {
            r if r == -libc::EOPNOTSUPP && self.nowait_max_bytes > 0 => {
                // A queue without RWF_NOWAIT support: issue it again, and every I/O after, without.
                self.nowait_max_bytes = 0;
                state.queue.push_front((index, skip));
            }
            r if r == -libc::EAGAIN => {
                // RWF_NOWAIT: the queue is frozen or full. Issue it again later (see fill).
                state.queue.push_front((index, skip));
                state.not_before = Some(Instant::now() + EAGAIN_BACKOFF);
            }
            r if r < 0 => {
                let source = std::io::Error::from_raw_os_error(-r);
                let what = if -r == libc::ENOSPC { format!("{}: no space left (ENOSPC)", what()) } else { what() };
                state.failure.get_or_insert(EngineError::Io { what, source });
                state.done_ops += 1;
            }
            0 => {
                state.failure.get_or_insert(EngineError::Short {
                    done: skip as u64,
                    wanted: op.len as u64,
                    why: format!("end of {} at offset {}", self.path.display(), op.offset + skip as u64),
                });
                state.done_ops += 1;
            }
            r => {
                state.not_before = None; // a completion: a full queue has room again
                let moved = skip + r as usize;
                let last = moved == op.len;
                if bounced_read {
                    // SAFETY: skip < op.len, inside the caller's buffer.
                    copies.push((slot, unsafe { op.host.add(skip) }, r as usize, last));
                }
                if !last {
                    state.queue.push_front((index, moved)); // short I/O: issue the rest
                } else {
                    state.done_ops += 1;
                    state.ends[op.write as usize] = self.clock.now_ns();
                }
            }
        }
    }

    fn free_slot(&self) -> u16 {
        self.busy_slots.iter().position(|busy| !busy).expect("a free slot per I/O in flight") as u16
    }

    /// Submit what is queued and wait for `wanted` completions (at least one), bounded by the
    /// deadline; returns earlier with fewer when a wait slice ends with some, and at `wake_at`
    /// (an I/O refused with EAGAIN is due again).
    fn wait_for(&mut self, wanted: usize, deadline: &Deadline, wake_at: Option<Instant>, what: &str) -> Result<(), EngineError> {
        let Submitter::Uring(ring) = &mut self.submitter else { unreachable!() };
        loop {
            let mut left = deadline.slice().ok_or_else(|| deadline.timeout(what))?;
            if let Some(at) = wake_at {
                match at.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) {
                    Some(until_due) => left = left.min(until_due),
                    None => return Ok(()),
                }
            }
            let ts = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&ts);
            match ring.submitter().submit_with_args(wanted.max(1), &args) {
                Ok(_) => return Ok(()),
                // A slice ended (or the deadline): look at completions, the deadline and the signal flag.
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                    if !ring.completion().is_empty() {
                        return Ok(());
                    }
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {}
                Err(source) => return Err(EngineError::Io { what: "io_uring_enter".into(), source }),
            }
        }
    }

    /// Give up on a transfer whose deadline passed or that a signal ended: ask the kernel to
    /// cancel every I/O in flight and give it [`CANCEL_GRACE`] to hand them back (a pipe's read
    /// comes back at once). What it still holds then — block I/O it accepted on a frozen queue
    /// or a hung driver, which nothing cancels — is left to it: the caller's buffer and the
    /// slots must then never be freed, which [`EngineError::Held`] says, and the caller's pages
    /// under those I/Os are swapped for fresh ones ([`swap_out_pages`]).
    fn abandon(&mut self, ops: &[Op], in_flight: &[(usize, u16, usize)], error: EngineError) -> EngineError {
        let epoch = self.epoch;
        let Submitter::Uring(ring) = &mut self.submitter else { unreachable!() };
        let mut waiting: Vec<u64> = in_flight.iter().map(|&(index, slot, _)| user_data(epoch, slot, index)).collect();
        for &data in &waiting {
            let cancel = opcode::AsyncCancel::new(data).build().user_data(CANCEL_USER_DATA);
            // SAFETY: a cancel request references no buffer.
            let _ = unsafe { ring.submission().push(&cancel) };
        }
        // Not the transfer's Deadline: a signal must not cut the grace short (the kernel may
        // still be writing into the caller's buffer).
        let grace_end = Instant::now() + CANCEL_GRACE;
        while !waiting.is_empty() {
            let Some(left) = grace_end.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else { break };
            let ts = types::Timespec::from(left);
            // ETIME, EINTR: look at what came back, then at the time left.
            let _ = ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
            for cqe in ring.completion() {
                let data = cqe.user_data();
                if data == CANCEL_USER_DATA {
                    continue;
                }
                waiting.retain(|&w| w != data);
                let (_, slot, _) = split_user_data(data);
                if slot != DIRECT {
                    self.busy_slots[slot as usize] = false;
                }
            }
        }
        if waiting.is_empty() {
            return error;
        }
        for &data in &waiting {
            let (_, slot, index) = split_user_data(data);
            if slot == DIRECT {
                swap_out_pages(ops[index].host, ops[index].len);
            }
        }
        self.held_ios = waiting.len();
        let interrupted = matches!(error, EngineError::Interrupted);
        EngineError::Held { message: format!("{error}; {}", self.held_statement()), interrupted }
    }

    /// What an abandoned transfer left behind, naming the device.
    fn held_statement(&self) -> String {
        let pci = self.info.pci_address.as_deref().map(|p| format!(" (PCI {p})")).unwrap_or_default();
        format!(
            "{} I/O(s) of {}{pci} still held by the kernel after {} s of cancelling (uninterruptible: a frozen queue \
             or a hung driver); their buffers were left allocated",
            self.held_ios,
            self.info.target,
            CANCEL_GRACE.as_secs()
        )
    }

    /// Before a transfer: collect late completions of an abandoned one so its slots are free.
    fn reclaim_slots(&mut self, deadline: &Deadline) -> Result<(), EngineError> {
        while self.busy_slots.iter().any(|b| *b) {
            let Submitter::Uring(ring) = &mut self.submitter else { return Ok(()) };
            for cqe in ring.completion() {
                let (_, slot, _) = split_user_data(cqe.user_data());
                if slot != DIRECT && cqe.user_data() != CANCEL_USER_DATA {
                    self.busy_slots[slot as usize] = false;
                }
            }
            if self.busy_slots.iter().any(|b| *b) {
                self.wait_for(1, deadline, None, "").map_err(|_| deadline.timeout("I/Os of an earlier timed-out transfer are still in flight"))?;
            }
        }
        Ok(())
    }

    fn transfer_record(&self, direction: Direction, bytes: usize, start_ns: f64, end_ns: f64) -> Transfer {
        Transfer { direction, bytes: bytes as u64, start_ns, end_ns, device: DeviceCounters::default(), copy_ns: None }
    }
}

impl Engine for BlockEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn transfer(&mut self, io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        let len = io.len();
        self.transfer_reusing(io, device_offset, len as u64, deadline)
    }

    /// Writes `h2d` and reads `d2h` at `device_offset`, the I/Os of both interleaved on one ring.
    fn transfer_both(&mut self, h2d: &[u8], d2h: &mut [u8], device_offset: u64, deadline: Duration) -> Result<(Transfer, Transfer), EngineError> {
        if !self.info.concurrent {
            return Err(EngineError::Unsupported(format!(
                "block engine on {} cannot move data both ways at once ({})",
                self.path.display(),
                if self.writable { "synchronous fallback" } else { "read-only" }
            )));
        }
        // Both legs use the same range (the contract): the procedure writes identical data there,
        // so the order in which the concurrent reads and writes land does not matter.
        let read_offset = device_offset;
        self.check(true, h2d.len(), device_offset)?;
        self.check(false, d2h.len(), read_offset)?;
        let (mut writes, mut reads) = (Vec::new(), Vec::new());
        self.plan(&mut writes, true, h2d.as_ptr() as *mut u8, h2d.len(), h2d.len(), device_offset);
        self.plan(&mut reads, false, d2h.as_mut_ptr(), d2h.len(), d2h.len(), read_offset);
        let mut ops = Vec::with_capacity(writes.len() + reads.len());
        let mut reads_iter = reads.into_iter();
        for write in writes {
            ops.push(write);
            ops.extend(reads_iter.next());
        }
        ops.extend(reads_iter);
        let deadline = Deadline::after(deadline);
        let start = self.clock.now_ns();
        let ends = self.run(&ops, &deadline)?;
        Ok((
            self.transfer_record(Direction::H2d, h2d.len(), start, ends[1].max(start)),
            self.transfer_record(Direction::D2h, d2h.len(), start, ends[0].max(start)),
        ))
    }

    fn now_ns(&self) -> f64 {
        self.clock.now_ns()
    }
}

/// Replace the pages of `[host, host + len)` (whole pages: direct I/O only) with fresh zeroed
/// ones. The kernel keeps the pages it pinned for an I/O it still holds, and DMAs into those if
/// the device ever answers; the caller's buffer no longer maps them, so it can be freed and its
/// memory reused safely, whoever owns it. Best effort: on failure the caller's own leak (the
/// dma procedure leaks its buffers) is what protects the memory.
fn swap_out_pages(host: *mut u8, len: usize) {
    debug_assert!(is_page_aligned(host) && len.is_multiple_of(PAGE_BYTES));
    // SAFETY: the range is whole pages inside the caller's buffer, which stays mapped readable
    // and writable; only its contents change (to zeros), as a failed read leaves them undefined.
    unsafe {
        libc::mmap(host.cast(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED, -1, 0);
    }
}

/// Whole disks with a PCI device behind them (loop, zram, RAM disks and partitions are skipped:
/// they measure no link).
fn detect(roots: &Roots) -> Vec<Candidate> {
    let (dev_dir, sys_dir) = (roots.dev, roots.sys);
    let Ok(entries) = std::fs::read_dir(sys_dir.join("class/block")) else { return Vec::new() };
    let mut disks: Vec<(String, String)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().join("partition").exists() {
                return None;
            }
            let pci = crate::pci::nodes::pci_address_in_path(&std::fs::canonicalize(entry.path()).ok()?)?;
            Some((name, pci))
        })
        .collect();
    // NVMe first: it is the DMA engine most machines have, and the fastest.
    disks.sort_by_key(|(name, _)| (!name.starts_with("nvme"), name.clone()));
    disks
        .into_iter()
        .map(|(name, pci)| {
            let node = dev_dir.join(&name);
            let (usable, access) = match crate::engine::access::access_summary(std::slice::from_ref(&node), libc::R_OK) {
                (true, _) => crate::engine::access::opens_for_reading(&node),
                refused => refused,
            };
            let link = crate::pci::conditions::live(sys_dir, &pci).map(|c| format!(", link {}", c.params.link)).unwrap_or_default();
            Candidate {
                target: format!("block:{}", node.display()),
                kind: "block".into(),
                pci_address: Some(pci.clone()),
                usable,
                reason: format!("block device on PCI {pci}{link}: read-only (device→host DMA); writes need --destructive; {access}"),
            }
        })
        .collect()
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_opens_read_only_without_consent_and_refuses_writes() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("disk");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let mut engine = open(path.to_str().unwrap(), &OpenOptions::default()).unwrap();
        assert_eq!(engine.info().directions, vec![Direction::D2h]);
        let buf = AlignedBuf::new(4096);
        // SAFETY: a 4096-byte buffer.
        let data = unsafe { std::slice::from_raw_parts(buf.as_ptr(), 4096) };
        let err = engine.transfer(Io::H2d(data), 0, Duration::from_secs(1)).unwrap_err().to_string();
        assert!(err.contains("--destructive") && err.contains("a regular file"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 8192]);
    }

    /// An engine reading a FIFO through the ring: a read waits until someone writes, which is
    /// how a stuck device looks to the engine (block devices cannot be made to hang here).
    fn engine_on_fifo(dir: &Path) -> (BlockEngine, File) {
        let path = dir.join("stuck");
        let c = devfile::c_path(&path);
        // SAFETY: valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Read-write opens of a FIFO do not wait for a peer.
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let feeder = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let info = EngineInfo {
            kind: "block".into(),
            target: "test".into(),
            simulated: false,
            co_simulated: false,
            description: String::new(),
            pci_address: None,
            in_flight: 1,
            copies_per_transfer: 1,
            device_clock_hz: None,
            directions: vec![Direction::D2h],
            concurrent: false,
            alignment_bytes: 4096,
            max_transfer_bytes: 1 << 20,
            capacity_bytes: Some(1 << 20),
            data_model: DataModel::Opaque,
        };
        let engine = BlockEngine {
            info,
            path,
            file,
            clock: HostClock::start(),
            submitter: Submitter::Uring(Box::new(uring(4).unwrap())),
            queue_depth: 4,
            io_bytes: 4096,
            writable: false,
            slots: ManuallyDrop::new(Slots::new(8, 4096)),
            busy_slots: vec![false; 8],
            fixed_slots: false,
            epoch: 0,
            nowait_max_bytes: 0,
            held_ios: 0,
        };
        (engine, feeder)
    }

    #[test]
    fn a_stuck_io_through_a_bounce_slot_is_cancelled_and_its_slot_freed() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let (mut engine, mut feeder) = engine_on_fifo(dir.path());
        let mut buf = vec![0u8; 4096 + 16];
        let unaligned = if is_page_aligned(buf.as_ptr()) { 16 } else { 0 };
        let err = engine.transfer(Io::D2h(&mut buf[unaligned..unaligned + 4096]), 0, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
        assert!(engine.busy_slots.iter().all(|b| !b), "the cancelled read gave its slot back");
        // The cancelled read took nothing: the next transfer reads the first block.
        feeder.write_all(&[1u8; 4096]).unwrap();
        engine.transfer(Io::D2h(&mut buf[unaligned..unaligned + 4096]), 0, Duration::from_secs(5)).unwrap();
        assert!(buf[unaligned..unaligned + 4096].iter().all(|b| *b == 1));
        assert_eq!(engine.held_ios, 0);
    }

    #[test]
    fn a_stuck_io_into_the_callers_buffer_is_cancelled_before_returning() {
        let dir = tempfile::tempdir().unwrap();
        let (mut engine, _feeder) = engine_on_fifo(dir.path());
        let mut buf = AlignedBuf::new(4096);
        let started = std::time::Instant::now();
        let err = engine.transfer(Io::D2h(&mut buf), 0, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "cancellation must not hang on a pipe");
        drop(buf); // safe: the kernel no longer holds it
        assert!(engine.busy_slots.iter().all(|b| !b));
    }

    /// The caller's buffer under a held I/O gets fresh pages: still its memory (readable,
    /// writable, freed as usual), no longer the pages the kernel pinned.
    #[test]
    fn swapped_out_pages_are_fresh_and_stay_usable() {
        for len in [3 * PAGE_BYTES, 4 << 20] {
            let mut buf = AlignedBuf::new(len);
            buf.fill(0xA5);
            let part = &mut buf[PAGE_BYTES..];
            swap_out_pages(part.as_mut_ptr(), part.len());
            assert!(buf[..PAGE_BYTES].iter().all(|b| *b == 0xA5), "{len}: the page before is untouched");
            assert!(buf[PAGE_BYTES..].iter().all(|b| *b == 0), "{len}");
            buf.fill(7);
            assert!(buf.iter().all(|b| *b == 7));
        }
    }

    #[test]
    fn user_data_round_trips() {
        assert_eq!(split_user_data(user_data(7, 3, 12345)), (7, 3, 12345));
        assert_eq!(split_user_data(user_data(u16::MAX, DIRECT, 0)), (u16::MAX, DIRECT, 0));
    }
}
