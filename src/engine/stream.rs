//! DMA through stream device files: one node written (h2d) and one read (d2h), or one node both
//! written and read — the engine behind `chardev:` and `xillybus:`.
//!
//! Every wait goes through poll() with the transfer's deadline, so a peer that stops reading or
//! writing is reported as a timeout naming how far the transfer got, never waited on forever.
//! Short reads and writes are resumed, EINTR retried, EAGAIN waited on, EOF and EPIPE (the peer
//! closed its end) and ENOSPC reported.
//!
//! Loopbacks: a device that returns what it was sent holds only a small buffer, so writing a
//! large h2d transfer without reading would stall. While writing, the engine therefore also
//! drains whatever comes back and keeps it (in order) for the next d2h transfer; that d2h
//! transfer then times only the bytes still to come. `transfer_both` writes and reads at once.

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::guard::WriteGuard;
use super::devfile::{self, Access, Deadline, HostClock, Step};
use super::msgstream;
use super::ring::Streaming;
use super::{Candidate, EngineEntry, Roots, DataModel, DeviceCounters, Direction, Engine, EngineError, EngineInfo, Io, Transfer};

/// How the two directions map onto nodes.
pub struct StreamSpec {
    pub kind: &'static str,
    pub target: String,
    pub write_path: PathBuf,
    /// `None`: read from the written node (dma_buf-style, document 000 §5.3).
    pub read_path: Option<PathBuf>,
    pub data_model: DataModel,
    pub driver_hint: &'static str,
    /// Issue a zero-length write after each h2d transfer: Xillybus flushes a partly filled DMA
    /// buffer on it instead of waiting for its own timer.
    pub flush_with_empty_write: bool,
    /// Map this many bytes of the node (the driver's DMA buffer, document 000 §5.5) and use the
    /// mapping as read()/write()'s buffer; `Some(0)`: the node's size from fstat.
    pub mmap_bytes: Option<u64>,
    /// Consent to write a node that holds a user's data (a regular file, a block device).
    pub guard: WriteGuard,
}

pub struct StreamEngine {
    info: EngineInfo,
    spec: StreamSpec,
    write: File,
    /// `None` when the written node is also read.
    read: Option<File>,
    clock: HostClock,
    /// Bytes the loopback returned while an h2d transfer was running, not yet handed out.
    returned: VecDeque<u8>,
    /// The read node reported end of stream while draining: stop listening to it.
    read_closed: bool,
    /// The driver's DMA buffer mapped into this process, when the target asked for it.
    dma_map: Option<memmap2::MmapMut>,
}

/// Time allowed for the other end of a FIFO-like node to appear when opening.
const OPEN_WAIT: Duration = Duration::from_secs(5);

pub const CHARDEV_ENTRY: EngineEntry = EngineEntry {
    name: "chardev",
    argument: "WRITE_PATH[,READ_PATH][,mmap[=SIZE]]",
    about: "read()/write() DMA drivers (dma_buf style, 000 §5), or an h2c/c2h stream pair used as a loopback",
    options: &[],
    flags: &[],
    open: |o| Ok(Box::new(open_chardev(o.argument, o.options.write_guard())?)),
    detect: None,
};

pub const XILLYBUS_ENTRY: EngineEntry = EngineEntry {
    name: "xillybus",
    argument: "NAME|/dev/xillybus_write_NAME",
    about: "Xillybus stream pair /dev/xillybus_write_NAME → /dev/xillybus_read_NAME as a loopback",
    options: &[],
    flags: &[],
    open: |o| Ok(Box::new(open_xillybus(o.argument, o.options.write_guard())?)),
    detect: Some(detect_xillybus),
};

pub fn open(spec: StreamSpec) -> Result<StreamEngine, EngineError> {
    // The read side first: a FIFO's writer can only open once a reader exists.
    let read = match &spec.read_path {
        Some(path) => Some(devfile::open_node(path, Access::Read, libc::O_NONBLOCK, spec.driver_hint, &spec.guard)?),
        None => None,
    };
    // A single node holding a user's data, without consent, is only read (d2h), as `block` does.
    let read_only = read.is_none() && !spec.guard.allows(&spec.write_path);
    let access = match (&read, read_only) {
        (Some(_), _) => Access::Write,
        (None, true) => Access::Read,
        (None, false) => Access::ReadWrite,
    };
    let write = open_writer(&spec.write_path, access, spec.driver_hint, &spec.guard)?;
    let loopback = spec.data_model == DataModel::Loopback;
    let description = match &spec.read_path {
        Some(read) => format!("stream {} → device → {}", spec.write_path.display(), read.display()),
        None if read_only => format!("file {} (read() of whole buffers), read-only: writing it needs --destructive", spec.write_path.display()),
        None => format!("device file {} (write() and read() of whole buffers)", spec.write_path.display()),
    };
    let dma_map = match spec.mmap_bytes {
        Some(bytes) => Some(map_dma_buffer(&write, &spec.write_path, bytes, read_only)?),
        None => None,
    };
    let description = match &dma_map {
        Some(map) => format!("{description}, through its mapped DMA buffer ({} bytes)", map.len()),
        None => description,
    };
    let info = EngineInfo {
        kind: spec.kind.into(),
        target: spec.target.clone(),
        simulated: false,
        co_simulated: false,
        description,
        pci_address: None,
        in_flight: 1,
        copies_per_transfer: 1,
        device_clock_hz: None,
        directions: if read_only { vec![Direction::D2h] } else { vec![Direction::H2d, Direction::D2h] },
        concurrent: loopback && read.is_some(),
        alignment_bytes: 1,
        max_transfer_bytes: dma_map.as_ref().map_or(crate::units::MAX_SIZE_BYTES, |m| m.len() as u64),
        capacity_bytes: None,
        data_model: spec.data_model,
    };
    Ok(StreamEngine { info, spec, write, read, clock: HostClock::start(), returned: VecDeque::new(), read_closed: false, dma_map })
}

/// Map `bytes` of a device file read-write (0: its size from fstat), as document 000's dma-demo
/// maps `/dev/dma_buf`; `private`: a copy-on-write mapping of a file opened read-only, whose
/// stores never reach the file.
fn map_dma_buffer(file: &File, path: &Path, bytes: u64, private: bool) -> Result<memmap2::MmapMut, EngineError> {
    let bytes = match bytes {
        0 => file.metadata().map_err(|source| EngineError::Io { what: format!("stat {}", path.display()), source })?.len(),
        n => n,
    };
    if bytes == 0 {
        return Err(crate::error::InvalidInput::new(format!(
            "{} reports no size: give the DMA buffer's size as mmap=SIZE",
            path.display()
        ))
        .into());
    }
    // SAFETY: the mapping is private to this engine; the device (or file) may change its bytes
    // underneath, which is what a DMA buffer is for, and the engine only copies them out.
    let options = memmap2::MmapOptions::new().len(bytes as usize).to_owned();
    let mapped = if private { unsafe { options.map_copy(file) } } else { unsafe { options.map_mut(file) } };
    mapped.map_err(|source| EngineError::Io {
        what: format!("cannot map {} bytes of {} (does the driver offer mmap?)", bytes, path.display()),
        source,
    })
}

/// Open the write side without blocking; a FIFO with no reader yet (ENXIO) is retried briefly.
fn open_writer(path: &Path, access: Access, hint: &str, guard: &WriteGuard) -> Result<File, EngineError> {
    let deadline = Deadline::after(OPEN_WAIT);
    loop {
        match devfile::open_node(path, access, libc::O_NONBLOCK, hint, guard) {
            Err(EngineError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENXIO) => {
                if deadline.remaining().is_none() {
                    return Err(EngineError::Timeout {
                        what: format!("nothing reads {} (no device or peer on the other end)", path.display()),
                        after: OPEN_WAIT,
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Progress of one direction inside a poll loop.
struct Side<'a> {
    h2d: Option<&'a [u8]>,
    d2h: Option<&'a mut [u8]>,
    written: usize,
    read: usize,
    h2d_end_ns: f64,
    d2h_end_ns: f64,
}

impl StreamEngine {
    fn read_file(&self) -> &File {
        self.read.as_ref().unwrap_or(&self.write)
    }

    fn name(&self, write: bool) -> String {
        match &self.spec.read_path {
            Some(read) if !write => read.display().to_string(),
            _ => self.spec.write_path.display().to_string(),
        }
    }

    /// Move `side.h2d` out and fill `side.d2h`, whichever are present, until both are done.
    /// With a separate read node and a loopback, data that comes back while only writing is kept.
    fn pump(&mut self, side: &mut Side<'_>, deadline: &Deadline) -> Result<(), EngineError> {
        if let Some(buf) = side.d2h.as_deref_mut() {
            let take = buf.len().min(self.returned.len());
            for (dst, src) in buf[..take].iter_mut().zip(self.returned.drain(..take)) {
                *dst = src;
            }
            side.read = take;
        }
        let drain_loopback = self.read.is_some() && self.info.data_model == DataModel::Loopback && !self.read_closed;
        let mut scratch = Vec::new();
        loop {
            let writing = side.h2d.is_some_and(|b| side.written < b.len());
            let reading = side.d2h.as_ref().is_some_and(|b| side.read < b.len());
            if !writing && !reading {
                if side.d2h.as_ref().is_some_and(|b| b.is_empty() || side.read == b.len()) && side.d2h_end_ns == 0.0 {
                    side.d2h_end_ns = self.clock.now_ns();
                }
                return Ok(());
            }
            let read_fd = self.read_file().as_raw_fd();
            let write_fd = self.write.as_raw_fd();
            let listen = reading || (writing && drain_loopback && !self.read_closed);
            let mut fds = Vec::with_capacity(2);
            if writing {
                fds.push(libc::pollfd { fd: write_fd, events: libc::POLLOUT, revents: 0 });
            }
            if listen && (read_fd != write_fd || !writing) {
                fds.push(libc::pollfd { fd: read_fd, events: libc::POLLIN, revents: 0 });
            }
            let ready = poll_many(&mut fds, deadline).map_err(|e| match e {
                EngineError::Timeout { after, .. } => EngineError::Timeout { what: self.stall(side), after },
                other => other,
            })?;
            for fd in ready {
                if fd.fd == write_fd && fd.events == libc::POLLOUT {
                    self.write_some(side)?;
                } else if reading {
                    self.read_some(side)?;
                } else {
                    self.drain_some(&mut scratch)?;
                }
            }
        }
    }

    /// Where the transfer stopped, for a timeout message.
    fn stall(&self, side: &Side<'_>) -> String {
        let mut parts = Vec::new();
        if let Some(buf) = side.h2d {
            if side.written < buf.len() {
                parts.push(format!("the device stopped accepting data: {} of {} bytes written to {}", side.written, buf.len(), self.name(true)));
            }
        }
        if let Some(buf) = side.d2h.as_ref() {
            if side.read < buf.len() {
                parts.push(format!("the device stopped sending data: {} of {} bytes read from {}", side.read, buf.len(), self.name(false)));
            }
        }
        parts.join("; ")
    }

    fn write_some(&mut self, side: &mut Side<'_>) -> Result<(), EngineError> {
        let buf = side.h2d.expect("writing");
        let rest = &buf[side.written..];
        let fd = self.write.as_raw_fd();
        let what = format!("write to {}", self.name(true));
        // SAFETY: `rest` is a valid slice.
        let step = devfile::syscall_step(&what, || unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) }).map_err(|e| peer_closed(e, &what))?;
        match step {
            Step::Moved(n) => {
                side.written += n;
                if side.written == buf.len() {
                    side.h2d_end_ns = self.clock.now_ns();
                    if self.spec.flush_with_empty_write {
                        // SAFETY: a zero-length write reads nothing.
                        unsafe { libc::write(fd, rest.as_ptr().cast(), 0) };
                    }
                }
            }
            Step::WouldBlock | Step::Eof => {}
        }
        Ok(())
    }

    fn read_some(&mut self, side: &mut Side<'_>) -> Result<(), EngineError> {
        let buf = side.d2h.as_deref_mut().expect("reading");
        let wanted = buf.len();
        let rest = &mut buf[side.read..];
        let fd = self.read_file().as_raw_fd();
        let what = format!("read from {}", self.name(false));
        // SAFETY: `rest` is a valid mutable slice.
        match devfile::syscall_step(&what, || unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) })? {
            Step::Moved(n) => {
                side.read += n;
                if side.read == wanted {
                    side.d2h_end_ns = self.clock.now_ns();
                }
                Ok(())
            }
            Step::WouldBlock => Ok(()),
            Step::Eof => Err(EngineError::Short { done: side.read as u64, wanted: wanted as u64, why: format!("{what}: end of stream (the peer closed its end)") }),
        }
    }

    /// Keep what a loopback returns while we are only writing.
    fn drain_some(&mut self, scratch: &mut Vec<u8>) -> Result<(), EngineError> {
        scratch.resize(64 * 1024, 0);
        let fd = self.read_file().as_raw_fd();
        let what = format!("read from {}", self.name(false));
        // SAFETY: `scratch` is a valid mutable buffer.
        match devfile::syscall_step(&what, || unsafe { libc::read(fd, scratch.as_mut_ptr().cast(), scratch.len()) })? {
            Step::Moved(n) => self.returned.extend(&scratch[..n]),
            Step::WouldBlock => {}
            // The loopback's far end closed; the d2h transfer that wants the data will say so.
            Step::Eof => self.read_closed = true,
        }
        Ok(())
    }

    fn record(direction: Direction, bytes: usize, start_ns: f64, end_ns: f64) -> Transfer {
        Transfer { direction, bytes: bytes as u64, start_ns, end_ns: end_ns.max(start_ns), device: DeviceCounters::default(), copy_ns: None }
    }
}

/// A write that fails because nothing reads the node any more.
fn peer_closed(error: EngineError, what: &str) -> EngineError {
    match error {
        EngineError::Io { source, .. } if source.raw_os_error() == Some(libc::EPIPE) => {
            EngineError::Io { what: format!("{what}: the peer closed its end (EPIPE)"), source }
        }
        other => other,
    }
}

/// poll() several fds until one is ready or the deadline passes; returns the ready ones, with
/// `events` narrowed to what fired (a hang-up counts as ready so read/write reports it).
fn poll_many(fds: &mut [libc::pollfd], deadline: &Deadline) -> Result<Vec<libc::pollfd>, EngineError> {
    loop {
        let left = deadline.slice().ok_or_else(|| deadline.timeout(String::new()))?;
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(EngineError::Io { what: "poll".into(), source: error });
        }
        if n > 0 {
            return Ok(fds.iter().filter(|fd| fd.revents != 0).copied().collect());
        }
    }
}

impl StreamEngine {
    /// Through the mapped DMA buffer: read()/write() use the mapping as their buffer, as the
    /// dma-demo of document 000 §5.5 does. Staging the caller's bytes into the mapping (h2d) or
    /// out of it (d2h) happens outside the timed interval; the copy is the caller's business.
    fn transfer_mapped(&mut self, map: &mut [u8], io: Io<'_>, deadline: Duration) -> Result<Transfer, EngineError> {
        let len = io.len();
        if len > map.len() {
            return Err(crate::error::InvalidInput::new(format!(
                "a transfer of {len} bytes does not fit the mapped DMA buffer of {} bytes",
                map.len()
            ))
            .into());
        }
        let deadline = Deadline::after(deadline);
        match io {
            Io::H2d(buf) => {
                map[..len].copy_from_slice(buf);
                let start = self.clock.now_ns();
                let mut side = Side { h2d: Some(&map[..len]), d2h: None, written: 0, read: 0, h2d_end_ns: 0.0, d2h_end_ns: 0.0 };
                self.pump(&mut side, &deadline)?;
                Ok(Self::record(Direction::H2d, len, start, side.h2d_end_ns))
            }
            Io::D2h(buf) => {
                let start = self.clock.now_ns();
                let mut side = Side { h2d: None, d2h: Some(&mut map[..len]), written: 0, read: 0, h2d_end_ns: 0.0, d2h_end_ns: 0.0 };
                self.pump(&mut side, &deadline)?;
                let transfer = Self::record(Direction::D2h, len, start, side.d2h_end_ns);
                buf.copy_from_slice(&map[..len]);
                Ok(transfer)
            }
        }
    }
}

impl Engine for StreamEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    /// `device_offset` is ignored: a stream has no addresses.
    fn transfer(&mut self, io: Io<'_>, _device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        if let Some(mut map) = self.dma_map.take() {
            let result = self.transfer_mapped(&mut map, io, deadline);
            self.dma_map = Some(map);
            return result;
        }
        let deadline = Deadline::after(deadline);
        let start = self.clock.now_ns();
        let direction = io.direction();
        let len = io.len();
        let mut side = match io {
            Io::H2d(buf) => Side { h2d: Some(buf), d2h: None, written: 0, read: 0, h2d_end_ns: 0.0, d2h_end_ns: 0.0 },
            Io::D2h(buf) => Side { h2d: None, d2h: Some(buf), written: 0, read: 0, h2d_end_ns: 0.0, d2h_end_ns: 0.0 },
        };
        self.pump(&mut side, &deadline)?;
        let end = if direction == Direction::H2d { side.h2d_end_ns } else { side.d2h_end_ns };
        Ok(Self::record(direction, len, start, end))
    }

    fn transfer_both(&mut self, h2d: &[u8], d2h: &mut [u8], _device_offset: u64, deadline: Duration) -> Result<(Transfer, Transfer), EngineError> {
        if !self.info.concurrent {
            return Err(EngineError::Unsupported(format!("{} cannot move data both ways at once on one device file", self.info.kind)));
        }
        let deadline = Deadline::after(deadline);
        let start = self.clock.now_ns();
        let (h2d_len, d2h_len) = (h2d.len(), d2h.len());
        let mut side = Side { h2d: Some(h2d), d2h: Some(d2h), written: 0, read: 0, h2d_end_ns: 0.0, d2h_end_ns: 0.0 };
        self.pump(&mut side, &deadline)?;
        Ok((Self::record(Direction::H2d, h2d_len, start, side.h2d_end_ns), Self::record(Direction::D2h, d2h_len, start, side.d2h_end_ns)))
    }

    fn now_ns(&self) -> f64 {
        self.clock.now_ns()
    }

    fn streaming(&mut self) -> Option<&mut dyn Streaming> {
        Some(self)
    }
}

/// Messages through the nodes as byte streams (`msgstream`): h2d writes the write node (and,
/// with a read node, reads the messages back as a loopback); d2h reads the read node (or the one
/// node), whatever writes into it producing.
impl StreamEngine {
    fn nodes(&self) -> msgstream::Nodes<'_> {
        let writable = self.read.is_some() || self.info.directions.contains(&Direction::H2d);
        msgstream::Nodes {
            write: writable.then(|| msgstream::Node { file: &self.write, name: self.name(true) }),
            read: Some(msgstream::Node { file: self.read_file(), name: self.name(false) }),
            write_refused: (!writable).then(|| self.spec.guard.check(&self.spec.write_path).err().map(|e| e.to_string())).flatten(),
            loopback: self.info.data_model == DataModel::Loopback,
            framing: msgstream::Framing::ByteStream,
            flush_with_empty_write: self.spec.flush_with_empty_write,
            clock: self.clock,
        }
    }
}

msgstream::streaming_on_nodes!(StreamEngine);

/// `chardev:WRITE_PATH[,READ_PATH][,mmap[=SIZE]]`: one node → dma_buf-style (document 000 §5.3),
/// contents the device's own (Opaque); two nodes → a loopback (what is written comes back, in
/// order). `mmap` maps the node's DMA buffer and moves data through it (one node only).
pub fn open_chardev(argument: &str, guard: WriteGuard) -> Result<StreamEngine, EngineError> {
    let mut mmap_bytes = None;
    let mut items = Vec::new();
    for item in argument.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match item.strip_prefix("mmap") {
            Some("") => mmap_bytes = Some(0),
            Some(size) if size.starts_with('=') => mmap_bytes = Some(crate::units::parse_size(&size[1..])?),
            _ => items.push(item),
        }
    }
    let mut paths = items.into_iter();
    let write = paths.next().ok_or_else(|| crate::error::InvalidInput::new("chardev needs a device file: chardev:WRITE_PATH[,READ_PATH]"))?;
    let read = paths.next();
    if paths.next().is_some() {
        return Err(crate::error::InvalidInput::new(format!("chardev takes at most two paths, got '{argument}'")).into());
    }
    if read.is_some() && mmap_bytes.is_some() {
        return Err(crate::error::InvalidInput::new("chardev: mmap applies to a single dma_buf-style node, not a stream pair").into());
    }
    open(StreamSpec {
        kind: "chardev",
        target: format!("chardev:{argument}"),
        write_path: write.into(),
        read_path: read.map(PathBuf::from),
        data_model: if read.is_some() { DataModel::Loopback } else { DataModel::Opaque },
        driver_hint: "is the driver loaded?",
        flush_with_empty_write: false,
        mmap_bytes,
        guard,
    })
}

/// `xillybus[:NAME|:PATH]`: `xillybus:32` → `/dev/xillybus_write_32` and `/dev/xillybus_read_32`;
/// a path to a `xillybus_write_*` node reads back from the `xillybus_read_*` node beside it.
pub fn open_xillybus(argument: &str, guard: WriteGuard) -> Result<StreamEngine, EngineError> {
    let bad = || crate::error::InvalidInput::new(format!(
        "invalid xillybus target '{argument}': use xillybus:NAME (e.g. xillybus:32 for /dev/xillybus_write_32 → /dev/xillybus_read_32) \
         or xillybus:/dev/xillybus_write_NAME"
    ));
    let write_path = if argument.contains('/') { PathBuf::from(argument) } else if argument.is_empty() { return Err(bad().into()) } else { PathBuf::from(format!("/dev/xillybus_write_{argument}")) };
    let file_name = write_path.file_name().and_then(|n| n.to_str()).ok_or_else(bad)?;
    let suffix = file_name.strip_prefix("xillybus_write_").ok_or_else(bad)?;
    let read_path = write_path.with_file_name(format!("xillybus_read_{suffix}"));
    open(StreamSpec {
        kind: "xillybus",
        target: format!("xillybus:{argument}"),
        write_path,
        read_path: Some(read_path),
        data_model: DataModel::Loopback,
        driver_hint: "is the xillybus driver loaded and the FPGA's loopback design configured?",
        flush_with_empty_write: true,
        mmap_bytes: None,
        guard,
    })
}

/// Xillybus write/read node pairs on the machine, each a loopback candidate.
fn detect_xillybus(roots: &Roots) -> Vec<Candidate> {
    let (dev_dir, sys_dir, names) = (roots.dev, roots.sys, roots.names);
    names
        .iter()
        .filter_map(|name| {
            let suffix = name.strip_prefix("xillybus_write_")?;
            let read = format!("xillybus_read_{suffix}");
            let paired = names.contains(&read);
            let nodes = [dev_dir.join(name), dev_dir.join(&read)];
            let (accessible, access) = crate::engine::access::access_summary(&nodes[..if paired { 2 } else { 1 }], libc::R_OK | libc::W_OK);
            Some(Candidate {
                target: format!("xillybus:{}", dev_dir.join(name).display()),
                kind: "xillybus".into(),
                pci_address: crate::pci::nodes::class_node_pci(sys_dir, name),
                usable: paired && accessible,
                reason: if paired {
                    format!("Xillybus stream pair {name} → {read}, used as a loopback (write, read back, verify); {access}")
                } else {
                    format!("{name} has no {read} to read the loopback from")
                },
            })
        })
        .collect()
}

