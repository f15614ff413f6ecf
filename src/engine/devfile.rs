//! Host-side plumbing shared by the engines that move data through files and device nodes
//! (`block`, `xdma`, `chardev`, `xillybus`): the host clock, page-aligned buffers, opening nodes
//! with messages that name the missing privilege, and read/write loops that survive short
//! transfers, EINTR and EAGAIN but never loop forever (every wait is bounded by a deadline).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::guard::WriteGuard;
use super::EngineError;

/// CLOCK_MONOTONIC_RAW in ns since the engine opened: not slewed by NTP, the same clock for
/// `Transfer::start_ns`/`end_ns` and `Engine::now_ns`.
#[derive(Debug, Clone, Copy)]
pub struct HostClock {
    origin_ns: f64,
}

impl HostClock {
    pub fn start() -> Self {
        HostClock { origin_ns: raw_monotonic_ns() }
    }

    pub fn now_ns(&self) -> f64 {
        raw_monotonic_ns() - self.origin_ns
    }
}

fn raw_monotonic_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC_RAW exists on every Linux since 2.6.28.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// A zeroed, page-aligned (4096-byte) buffer, as O_DIRECT and DMA engines want.
/// Procedures that pass one of these to the `block` engine avoid its bounce copy.
///
/// Buffers of 2 MiB or more are fresh anonymous mappings advised to use transparent huge pages
/// (`MADV_HUGEPAGE`): physically contiguous 2 MiB pieces, so a large I/O is a few DMA segments
/// instead of one per 4 KiB page (a virtio disk takes at most `queue/max_segments` of them per
/// request and splits the rest) and fewer pages to pin — as DMA buffers usually are. Where THP
/// is off, the advice is ignored and the buffer is ordinary pages.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    /// Bytes of its own mapping, or 0 for memory from the allocator.
    mapped_bytes: usize,
}

// SAFETY: the buffer is uniquely owned memory, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

/// Alignment of [`AlignedBuf`] and of O_DIRECT offsets and sizes this crate assumes.
pub const PAGE_BYTES: usize = 4096;

/// Size of a transparent huge page on x86-64 and arm64 with 4 KiB pages.
const HUGE_PAGE_BYTES: usize = 2 << 20;

impl AlignedBuf {
    pub fn new(len: usize) -> Self {
        if len >= HUGE_PAGE_BYTES {
            if let Ok(buffer) = Self::map(len, None) {
                return buffer;
            }
        }
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (at least one page).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len, mapped_bytes: 0 }
    }

    /// A buffer whose pages come from NUMA node `node` where it has memory (`None`: as [`new`]).
    /// Always a mapping of its own, whatever its size: a policy set on the allocator's memory
    /// would move other allocations' pages and miss pages it already touched.
    ///
    /// [`new`]: AlignedBuf::new
    pub fn on_node(len: usize, node: Option<u32>) -> Result<Self, String> {
        match node {
            None => Ok(Self::new(len)),
            Some(_) => Self::map(len, node),
        }
    }

    /// A fresh zeroed mapping, huge pages advised (from 2 MiB) and the node's policy set before
    /// any page is touched.
    fn map(len: usize, node: Option<u32>) -> Result<Self, String> {
        // A multiple of 2 MiB: the kernel aligns such anonymous mappings to a huge page.
        let bytes = if len >= HUGE_PAGE_BYTES { len.next_multiple_of(HUGE_PAGE_BYTES) } else { len.max(1).next_multiple_of(PAGE_BYTES) };
        // SAFETY: a new private anonymous mapping, owned by the AlignedBuf until Drop.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!("mmap of {bytes} bytes: {}", std::io::Error::last_os_error()));
        }
        let buffer = AlignedBuf { ptr: ptr.cast(), len, mapped_bytes: bytes };
        if let Some(node) = node {
            crate::engine::numa::bind(buffer.ptr, bytes, node)?;
        }
        if bytes >= HUGE_PAGE_BYTES {
            // SAFETY: advice on our own mapping; failure (THP disabled) leaves ordinary pages.
            unsafe { libc::madvise(ptr, bytes, libc::MADV_HUGEPAGE) };
        }
        // Fault every page in now (Linux 5.14+; older kernels fault on first touch, under the
        // same policy): a big buffer's first touch costs the kernel seconds of zeroing, which
        // belongs to setup, not to the first timed transfer or its point's budget.
        // SAFETY: as above, our own mapping.
        unsafe { libc::madvise(ptr, bytes, libc::MADV_POPULATE_WRITE) };
        Ok(buffer)
    }

    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(1).next_multiple_of(PAGE_BYTES), PAGE_BYTES).expect("buffer size overflows")
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf").field("len", &self.len).field("mapped_bytes", &self.mapped_bytes).finish()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: made by mmap of `mapped_bytes` or by the allocator with this layout.
        unsafe {
            if self.mapped_bytes > 0 {
                libc::munmap(self.ptr.cast(), self.mapped_bytes);
            } else {
                std::alloc::dealloc(self.ptr, Self::layout(self.len))
            }
        }
    }
}

/// True when `ptr` is page-aligned (O_DIRECT can DMA straight into it).
pub fn is_page_aligned(ptr: *const u8) -> bool {
    (ptr as usize).is_multiple_of(PAGE_BYTES)
}

/// How a node is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

/// Open `path` with `flags` (O_DIRECT, O_NONBLOCK, …), turning the usual failures into messages
/// that say what to do: a missing node names the driver, a refusal names the privilege. Opening
/// for writing passes the write guard first: a user's file or block device needs consent.
pub fn open_node(path: &Path, access: Access, flags: i32, driver_hint: &str, guard: &WriteGuard) -> Result<File, EngineError> {
    if access != Access::Read {
        guard.check(path)?;
    }
    let mut options = std::fs::OpenOptions::new();
    match access {
        Access::Read => options.read(true),
        Access::Write => options.write(true),
        Access::ReadWrite => options.read(true).write(true),
    };
    options.custom_flags(flags | libc::O_CLOEXEC).open(path).map_err(|error| open_error(path, access, driver_hint, error))
}

pub fn open_error(path: &Path, access: Access, driver_hint: &str, error: io::Error) -> EngineError {
    let shown = path.display().to_string();
    match error.kind() {
        io::ErrorKind::PermissionDenied => {
            let what = match access {
                Access::Read => "read",
                Access::Write => "write",
                Access::ReadWrite => "read and write",
            };
            // SAFETY: geteuid has no preconditions.
            let needed = if unsafe { libc::geteuid() } == 0 {
                format!(
                    "{what} access to {shown} is refused even to root: a container's device cgroup or a security \
                     module (SELinux, AppArmor) forbids it; run on the host or allow the device for this container"
                )
            } else {
                format!(
                    "{what} access to {shown} is needed: run as root, or add your user to the group owning the node \
                     (`ls -l {shown}`) or give it a udev rule"
                )
            };
            EngineError::PermissionDenied { needed, path: shown }
        }
        // A target that names nothing is the user's input to fix (exit code 2), not a device fault.
        io::ErrorKind::NotFound => EngineError::InvalidInput(crate::error::InvalidInput::new(format!(
            "{shown} does not exist{}",
            if driver_hint.is_empty() { String::new() } else { format!(" ({driver_hint})") }
        ))),
        _ => EngineError::Io { what: format!("cannot open {shown}"), source: error },
    }
}

/// The time left before a deadline; `None` once it has passed.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    end: Instant,
    pub total: Duration,
}

impl Deadline {
    pub fn after(total: Duration) -> Self {
        Deadline { end: Instant::now() + total, total }
    }

    /// Time left; `None` once the deadline passed or a signal asked the run to stop.
    pub fn remaining(&self) -> Option<Duration> {
        if crate::cancel::requested() {
            return None;
        }
        self.end.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())
    }

    /// The next wait: at most [`crate::cancel::POLL_SLICE`], so a signal is seen within it.
    pub fn slice(&self) -> Option<Duration> {
        self.remaining().map(crate::cancel::slice)
    }

    /// The error for a wait that ended: a timeout, or `Interrupted` when a signal ended it.
    pub fn timeout(&self, what: impl Into<String>) -> EngineError {
        if crate::cancel::requested() {
            return EngineError::Interrupted;
        }
        EngineError::Timeout { what: what.into(), after: self.total }
    }
}

/// Wait until `fd` is ready for `events` (POLLIN/POLLOUT) or the deadline passes.
/// Returns the revents; a hang-up or error on the fd is reported in them, not hidden.
pub fn poll_until(fd: RawFd, events: i16, deadline: &Deadline, what: &str) -> Result<i16, EngineError> {
    loop {
        let left = deadline.slice().ok_or_else(|| deadline.timeout(what.to_string()))?;
        let mut pfd = libc::pollfd { fd, events, revents: 0 };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(EngineError::Io { what: format!("poll on {what}"), source: error });
        }
        if ready > 0 {
            return Ok(pfd.revents);
        }
        // Nothing yet: the loop looks at the deadline and the signal flag again.
    }
}

/// Outcome of one read or write system call, with the retryable cases separated.
pub enum Step {
    Moved(usize),
    /// EAGAIN/EWOULDBLOCK: wait for readiness, then retry.
    WouldBlock,
    /// read() returned 0: the peer closed its end (EOF).
    Eof,
}

/// Run one syscall returning a byte count; EINTR is retried here, EAGAIN becomes `WouldBlock`.
pub fn syscall_step(what: &str, mut call: impl FnMut() -> isize) -> Result<Step, EngineError> {
    loop {
        if let Some(step) = interruptible_step(what, &mut call)? {
            return Ok(step);
        }
    }
}

/// One syscall as [`syscall_step`], but EINTR comes back as None: a blocking call woken by a
/// [`super::slice_alarm::SliceAlarm`] tick lets its caller look at the signal flag, the
/// deadline and a stalled peer before calling again.
pub fn interruptible_step(what: &str, mut call: impl FnMut() -> isize) -> Result<Option<Step>, EngineError> {
    let result = call();
    if result > 0 {
        return Ok(Some(Step::Moved(result as usize)));
    }
    if result == 0 {
        return Ok(Some(Step::Eof));
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EINTR) => Ok(None),
        Some(code) if code == libc::EAGAIN || code == libc::EWOULDBLOCK => Ok(Some(Step::WouldBlock)),
        Some(libc::ENOSPC) => Err(EngineError::Io { what: format!("{what}: the device or file has no space left (ENOSPC)"), source: error }),
        _ => Err(EngineError::Io { what: what.to_string(), source: error }),
    }
}

/// pread/pwrite all of `len` bytes at `offset`, resuming after short transfers.
/// A positional read that hits EOF is reported as short (the file or card window ended).
pub fn positional_all(file: &File, io: super::Io<'_>, offset: u64, deadline: &Deadline, what: &str) -> Result<(), EngineError> {
    positional_all_flags(file, io, offset, deadline, what, 0)
}

/// [`positional_all`] with preadv2/pwritev2 flags. With `RWF_NOWAIT` (block devices) a queue
/// that would make the call wait — frozen, or full — answers EAGAIN instead of leaving this
/// thread waiting uninterruptibly in the kernel; the call is then repeated every millisecond
/// until the deadline (poll() says nothing about block devices).
pub fn positional_all_flags(file: &File, io: super::Io<'_>, offset: u64, deadline: &Deadline, what: &str, rw_flags: i32) -> Result<(), EngineError> {
    let fd = file.as_raw_fd();
    let wanted = io.len();
    let mut done = 0usize;
    let (read_ptr, write_ptr): (*mut u8, *const u8) = match io {
        super::Io::D2h(buf) => (buf.as_mut_ptr(), std::ptr::null()),
        super::Io::H2d(buf) => (std::ptr::null_mut(), buf.as_ptr()),
    };
    while done < wanted {
        let at = (offset + done as u64) as libc::off_t;
        let left = wanted - done;
        // SAFETY: the pointers come from slices of `wanted` bytes that outlive this call.
        let step = syscall_step(what, || unsafe {
            let iov = libc::iovec { iov_base: if read_ptr.is_null() { write_ptr.add(done) as *mut _ } else { read_ptr.add(done).cast() }, iov_len: left };
            match (read_ptr.is_null(), rw_flags) {
                (true, 0) => libc::pwrite(fd, write_ptr.add(done).cast(), left, at),
                (false, 0) => libc::pread(fd, read_ptr.add(done).cast(), left, at),
                (true, flags) => libc::pwritev2(fd, &iov, 1, at, flags),
                (false, flags) => libc::preadv2(fd, &iov, 1, at, flags),
            }
        })?;
        match step {
            Step::Moved(n) => done += n,
            Step::WouldBlock if rw_flags & libc::RWF_NOWAIT != 0 => {
                if deadline.remaining().is_none() {
                    return Err(deadline.timeout(format!("{what} refused I/O (EAGAIN: its queue is frozen or full)")));
                }
                std::thread::sleep(Duration::from_millis(1));
                continue; // the deadline is looked at above, with the EAGAIN named
            }
            Step::WouldBlock => {
                let events = if read_ptr.is_null() { libc::POLLOUT } else { libc::POLLIN };
                poll_until(fd, events, deadline, what)?;
            }
            Step::Eof => {
                return Err(EngineError::Short { done: done as u64, wanted: wanted as u64, why: format!("{what}: end of file or device window") })
            }
        }
        if done < wanted && deadline.remaining().is_none() {
            return Err(deadline.timeout(format!("{what}: {done} of {wanted} bytes moved")));
        }
    }
    Ok(())
}

/// Set O_NONBLOCK so stream waits go through poll() and a deadline.
pub fn set_nonblocking(file: &File) -> Result<(), EngineError> {
    set_blocking(file, false).map_err(|source| EngineError::Io { what: "cannot make the device file non-blocking".into(), source })
}

/// Set (`blocking`: clear) O_NONBLOCK on the file's open description.
pub fn set_blocking(file: &File, blocking: bool) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on an fd we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    let wanted = if blocking { flags & !libc::O_NONBLOCK } else { flags | libc::O_NONBLOCK };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, wanted) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `stat()` file type of a path, separated so decisions that depend on it can be tested with
/// any classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Regular,
    BlockDevice,
    CharDevice,
    Fifo,
    Other,
}

pub fn node_kind(path: &Path) -> io::Result<NodeKind> {
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::metadata(path)?.file_type();
    Ok(if kind.is_file() {
        NodeKind::Regular
    } else if kind.is_block_device() {
        NodeKind::BlockDevice
    } else if kind.is_char_device() {
        NodeKind::CharDevice
    } else if kind.is_fifo() {
        NodeKind::Fifo
    } else {
        NodeKind::Other
    })
}

/// A path as a C string for the few raw calls that need one.
pub fn c_path(path: &Path) -> CString {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small buffers come from the allocator, large ones are mappings of their own; both are
    /// zeroed, page-aligned, writable to their last byte, and freed the way they were made.
    #[test]
    fn aligned_buffers_small_and_huge() {
        for len in [2, 4096, 5000, HUGE_PAGE_BYTES, 3 * HUGE_PAGE_BYTES + 4096] {
            let mut buf = AlignedBuf::new(len);
            assert_eq!(buf.len(), len);
            assert!(is_page_aligned(buf.as_ptr()), "{len}");
            assert_eq!(buf.mapped_bytes > 0, len >= HUGE_PAGE_BYTES, "{len}");
            assert!(buf.iter().all(|b| *b == 0), "{len}");
            buf[len - 1] = 7;
            buf[0] = 9;
            assert_eq!((buf[0], buf[len - 1]), (9, 7));
        }
    }
}
