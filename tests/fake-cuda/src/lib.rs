//! A fake CUDA driver library for pcieperf's `cuda` engine tests (no GPU, no NVIDIA driver).
//!
//! It exports the subset of the driver API the engine calls. Device memory is host memory; a
//! stream is a thread running its queue in order; a copy is a memcpy that books the stream's fake
//! link for a fixed cost (`PCIEPERF_FAKE_CUDA_LATENCY_US`, 2 µs) plus bytes ÷ rate
//! (`PCIEPERF_FAKE_CUDA_MBPS`, MB/s = 10^6 B/s, per stream); an event
//! completes, at that clock, when the copies before it have left the link (the host sees it
//! done once that time has come). It reports itself through `pcieperf_fake_cuda`, so
//! every figure taken through it is labelled as coming from this library.
//!
//! Faults on request (environment, read at each call):
//! - `PCIEPERF_FAKE_CUDA_FAIL=NAME`: the call NAME (e.g. `cuMemcpyHtoDAsync_v2`) fails with
//!   CUDA_ERROR_UNKNOWN;
//! - `PCIEPERF_FAKE_CUDA_INIT=CODE`: cuInit returns CODE (100: no device);
//! - `PCIEPERF_FAKE_CUDA_HANG_BYTES=N`: copies of N bytes or more never finish;
//! - `PCIEPERF_FAKE_CUDA_CORRUPT=OFFSET`: host→device copies flip the byte at OFFSET;
//! - `PCIEPERF_FAKE_CUDA_NO_WAIT_VALUE=1`: cuStreamWaitValue32 is unsupported (as on devices
//!   without stream memory operations);
//! - `PCIEPERF_FAKE_CUDA_NO_MODULE=1`: cuModuleLoadData fails (as a driver that cannot JIT the
//!   PTX would);
//! - `PCIEPERF_FAKE_CUDA_SPIN_LOG=FILE`: each spin kernel appends, when the flag releases it,
//!   how long it waited and how many operations were queued behind it on its stream.
//!
//! The spin kernel (cuModuleLoadData + cuModuleGetFunction + cuLaunchKernel) is not executed:
//! the module must be PTX with a `.entry pcieperf_spin`, and a launch of it is an operation on
//! the stream that waits, as the kernel would, until the u32 its first parameter points to is
//! non-zero.
//! - `PCIEPERF_FAKE_CUDA_BDF=DDDD:BB:DD.F`: the device's PCI address (default 0000:65:00.0).

#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

type CUresult = c_int;
const SUCCESS: CUresult = 0;
const INVALID_VALUE: CUresult = 1;
const OUT_OF_MEMORY: CUresult = 2;
const INVALID_DEVICE: CUresult = 101;
const NOT_READY: CUresult = 600;
const NOT_SUPPORTED: CUresult = 801;
const UNKNOWN: CUresult = 999;

/// Marks this library as the fake: the engine looks for this symbol.
#[no_mangle]
pub static pcieperf_fake_cuda: u32 = 1;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The call fails when the test asked for it.
fn failing(call: &str) -> bool {
    env("PCIEPERF_FAKE_CUDA_FAIL").is_some_and(|f| f == call)
}

macro_rules! fail_if_asked {
    ($call:literal) => {
        if failing($call) {
            return UNKNOWN;
        }
    };
}

fn rate_bytes_per_s() -> f64 {
    env("PCIEPERF_FAKE_CUDA_MBPS").and_then(|v| v.parse::<f64>().ok()).filter(|r| *r > 0.0).unwrap_or(10_000.0) * 1e6
}

/// Fixed cost of every copy on the fake link, so a sweep has an m to fit (default 2 µs).
fn latency_s() -> f64 {
    env("PCIEPERF_FAKE_CUDA_LATENCY_US").and_then(|v| v.parse::<f64>().ok()).filter(|l| *l >= 0.0).unwrap_or(2.0) * 1e-6
}

fn bdf() -> (c_int, c_int, c_int) {
    let text = env("PCIEPERF_FAKE_CUDA_BDF").unwrap_or_else(|| "0000:65:00.0".into());
    let parts: Vec<&str> = text.split([':', '.']).collect();
    let hex = |i: usize| parts.get(i).and_then(|p| c_int::from_str_radix(p, 16).ok()).unwrap_or(0);
    (hex(0), hex(1), hex(2))
}

/// Host memory handed out as device or pinned memory, by address, with its layout.
fn allocations() -> &'static Mutex<HashMap<usize, std::alloc::Layout>> {
    static MAP: OnceLock<Mutex<HashMap<usize, std::alloc::Layout>>> = OnceLock::new();
    MAP.get_or_init(Default::default)
}

fn allocate(bytes: usize) -> Option<*mut u8> {
    let layout = std::alloc::Layout::from_size_align(bytes.max(1), 4096).ok()?;
    // SAFETY: non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    allocations().lock().unwrap().insert(ptr as usize, layout);
    Some(ptr)
}

fn release(ptr: usize) -> CUresult {
    match allocations().lock().unwrap().remove(&ptr) {
        // SAFETY: allocated by `allocate` with this layout.
        Some(layout) => unsafe {
            std::alloc::dealloc(ptr as *mut u8, layout);
            SUCCESS
        },
        None => INVALID_VALUE,
    }
}

type Op = Box<dyn FnOnce() + Send>;

/// A stream: a thread that runs its operations in order.
struct Stream {
    queue: Mutex<Sender<Op>>,
    /// When the stream's fake link is next free (copies queue behind each other).
    link_free: Arc<Mutex<Option<Instant>>>,
    /// Operations ever queued, so a spin kernel can tell how many waited behind it (the stream
    /// runs in order: none behind it has run while it spins).
    queued: Arc<AtomicU32>,
}

impl Stream {
    fn push(&self, op: Op) {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let _ = self.queue.lock().unwrap().send(op);
    }
}

#[derive(Default)]
struct Event {
    at: Mutex<Option<Instant>>,
}

struct SendPtr(usize);

#[no_mangle]
pub unsafe extern "C" fn cuInit(_flags: c_uint) -> CUresult {
    fail_if_asked!("cuInit");
    env("PCIEPERF_FAKE_CUDA_INIT").and_then(|c| c.parse().ok()).unwrap_or(SUCCESS)
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    *version = 12000;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(error: CUresult, text: *mut *const c_char) -> CUresult {
    let message: &'static CStr = match error {
        SUCCESS => c"no error",
        INVALID_VALUE => c"invalid argument",
        OUT_OF_MEMORY => c"out of memory",
        100 => c"no CUDA-capable device is detected",
        INVALID_DEVICE => c"invalid device ordinal",
        NOT_READY => c"device not ready",
        NOT_SUPPORTED => c"operation not supported",
        218 => c"a PTX JIT compilation failed",
        500 => c"named symbol not found",
        UNKNOWN => c"unknown error",
        _ => return INVALID_VALUE,
    };
    *text = message.as_ptr();
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    *count = 1;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CUresult {
    if ordinal != 0 {
        return INVALID_DEVICE;
    }
    *device = 0;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetByPCIBusId(device: *mut c_int, bus_id: *const c_char) -> CUresult {
    let (domain, bus, dev) = bdf();
    let wanted = format!("{domain:04x}:{bus:02x}:{dev:02x}.0");
    let given = CStr::from_ptr(bus_id).to_string_lossy().to_ascii_lowercase();
    if given != wanted {
        return INVALID_DEVICE;
    }
    *device = 0;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, _device: c_int) -> CUresult {
    let text = b"pcieperf fake GPU\0";
    if (len as usize) < text.len() {
        return INVALID_VALUE;
    }
    std::ptr::copy_nonoverlapping(text.as_ptr().cast(), name, text.len());
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(value: *mut c_int, attribute: c_int, _device: c_int) -> CUresult {
    let (domain, bus, dev) = bdf();
    *value = match attribute {
        33 => bus,
        34 => dev,
        50 => domain,
        _ => 0,
    };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(context: *mut *mut c_void, _device: c_int) -> CUresult {
    fail_if_asked!("cuDevicePrimaryCtxRetain");
    *context = 0x1000 as *mut c_void;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(_device: c_int) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(_context: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(pointer: *mut u64, bytes: usize) -> CUresult {
    fail_if_asked!("cuMemAlloc_v2");
    match allocate(bytes) {
        Some(p) => {
            *pointer = p as u64;
            SUCCESS
        }
        None => OUT_OF_MEMORY,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(pointer: u64) -> CUresult {
    release(pointer as usize)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(pointer: *mut *mut c_void, bytes: usize, _flags: c_uint) -> CUresult {
    fail_if_asked!("cuMemHostAlloc");
    match allocate(bytes) {
        Some(p) => {
            *pointer = p.cast();
            SUCCESS
        }
        None => OUT_OF_MEMORY,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(pointer: *mut c_void) -> CUresult {
    release(pointer as usize)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister_v2(pointer: *mut c_void, _bytes: usize, _flags: c_uint) -> CUresult {
    fail_if_asked!("cuMemHostRegister_v2");
    if pointer.is_null() { INVALID_VALUE } else { SUCCESS }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostUnregister(_pointer: *mut c_void) -> CUresult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(device: *mut u64, host: *mut c_void, _flags: c_uint) -> CUresult {
    *device = host as u64;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(stream: *mut *mut c_void, _flags: c_uint) -> CUresult {
    fail_if_asked!("cuStreamCreate");
    let (sender, receiver) = channel::<Op>();
    std::thread::spawn(move || {
        while let Ok(op) = receiver.recv() {
            op();
        }
    });
    let boxed = Box::new(Stream { queue: Mutex::new(sender), link_free: Arc::default(), queued: Arc::default() });
    *stream = Box::into_raw(boxed).cast();
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(stream: *mut c_void) -> CUresult {
    drop(Box::from_raw(stream.cast::<Stream>()));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamSynchronize(stream: *mut c_void) -> CUresult {
    let (done, wait) = channel::<()>();
    (*stream.cast::<Stream>()).push(Box::new(move || {
        let _ = done.send(());
    }));
    let _ = wait.recv();
    let free = *(*stream.cast::<Stream>()).link_free.lock().unwrap();
    if let Some(left) = free.and_then(|f| f.checked_duration_since(Instant::now())) {
        std::thread::sleep(left);
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitValue32_v2(stream: *mut c_void, address: u64, value: u32, flags: c_uint) -> CUresult {
    fail_if_asked!("cuStreamWaitValue32_v2");
    if env("PCIEPERF_FAKE_CUDA_NO_WAIT_VALUE").is_some() {
        return NOT_SUPPORTED;
    }
    let flag = SendPtr(address as usize);
    (*stream.cast::<Stream>()).push(Box::new(move || {
        let flag = &flag;
        // SAFETY: the engine keeps the flag alive until the stream passed it.
        let word = unsafe { &*(flag.0 as *const AtomicU32) };
        loop {
            let now = word.load(Ordering::Acquire);
            let released = match flags & 0x3 {
                1 => now == value,
                2 => now & value != 0,
                3 => !(now | value) != 0,
                _ => now as i32 - value as i32 >= 0,
            };
            if released {
                break;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuLaunchHostFunc(stream: *mut c_void, function: Option<unsafe extern "C" fn(*mut c_void)>, data: *mut c_void) -> CUresult {
    fail_if_asked!("cuLaunchHostFunc");
    let Some(function) = function else { return INVALID_VALUE };
    let data = SendPtr(data as usize);
    (*stream.cast::<Stream>()).push(Box::new(move || {
        let data = &data;
        // SAFETY: as the driver does, call the function with its data on the stream's thread.
        unsafe { function(data.0 as *mut c_void) }
    }));
    SUCCESS
}

/// A loaded module: the PTX text it was given.
struct Module {
    _ptx: String,
}

/// The spin kernel's handle (one function per module, all alike).
struct Function;

#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadData(module: *mut *mut c_void, image: *const c_void) -> CUresult {
    fail_if_asked!("cuModuleLoadData");
    if env("PCIEPERF_FAKE_CUDA_NO_MODULE").is_some() || image.is_null() {
        return NOT_SUPPORTED;
    }
    let ptx = CStr::from_ptr(image.cast()).to_string_lossy().into_owned();
    // What a real JIT would refuse: not PTX, or no entry of that name.
    if !ptx.contains(".version") || !ptx.contains(".entry pcieperf_spin") {
        return 218; // CUDA_ERROR_INVALID_PTX
    }
    *module = Box::into_raw(Box::new(Module { _ptx: ptx })).cast();
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleUnload(module: *mut c_void) -> CUresult {
    drop(Box::from_raw(module.cast::<Module>()));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(function: *mut *mut c_void, _module: *mut c_void, name: *const c_char) -> CUresult {
    if CStr::from_ptr(name).to_bytes() != b"pcieperf_spin" {
        return 500; // CUDA_ERROR_NOT_FOUND
    }
    *function = std::ptr::addr_of!(SPIN).cast_mut().cast();
    SUCCESS
}

static SPIN: Function = Function;

/// Launch the spin "kernel": an operation on the stream that waits until the flag its first
/// parameter points to is non-zero (the real kernel spins on the GPU; here the stream's thread
/// does), then logs how long it waited and what was queued behind it.
#[no_mangle]
pub unsafe extern "C" fn cuLaunchKernel(
    function: *mut c_void,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    _shared_bytes: c_uint,
    stream: *mut c_void,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    fail_if_asked!("cuLaunchKernel");
    if function != std::ptr::addr_of!(SPIN).cast_mut().cast() || params.is_null() || (*params).is_null() {
        return INVALID_VALUE;
    }
    if [grid_x, grid_y, grid_z, block_x, block_y, block_z] != [1; 6] {
        return INVALID_VALUE; // one thread spins: anything else would be a bug in the engine
    }
    let flag = SendPtr(*(*params as *const u64) as usize);
    let stream = &*stream.cast::<Stream>();
    let queued = stream.queued.clone();
    let mine = stream.queued.load(Ordering::SeqCst) + 1;
    stream.push(Box::new(move || {
        let flag = &flag;
        // SAFETY: the engine keeps the flag alive until the stream passed it.
        let word = unsafe { &*(flag.0 as *const AtomicU32) };
        let started = Instant::now();
        while word.load(Ordering::Acquire) == 0 {
            std::thread::sleep(Duration::from_micros(20));
        }
        if let Some(path) = env("PCIEPERF_FAKE_CUDA_SPIN_LOG") {
            use std::io::Write;
            let behind = queued.load(Ordering::SeqCst) - mine;
            if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
                let _ = writeln!(file, "waited_us={} behind={behind}", started.elapsed().as_micros());
            }
        }
    }));
    SUCCESS
}

/// Queue one copy: memcpy, then wait until the fake link, free from `link_free`, would be done.
unsafe fn copy(stream: *mut c_void, dst: usize, src: usize, bytes: usize, to_device: bool) -> CUresult {
    let stream = &*stream.cast::<Stream>();
    let link_free = stream.link_free.clone();
    let hang = env("PCIEPERF_FAKE_CUDA_HANG_BYTES").and_then(|v| v.parse::<usize>().ok()).is_some_and(|h| bytes >= h);
    let corrupt = env("PCIEPERF_FAKE_CUDA_CORRUPT").and_then(|v| v.parse::<usize>().ok()).filter(|&o| to_device && o < bytes);
    let seconds = latency_s() + bytes as f64 / rate_bytes_per_s();
    stream.push(Box::new(move || {
        if hang {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        // The link is busy from when it is free until the bytes would have crossed it; the
        // memcpy happens in that time, so its cost hides behind the fake link's.
        let mut free = link_free.lock().unwrap();
        let start = free.map_or_else(Instant::now, |f| f.max(Instant::now()));
        let end = start + Duration::from_secs_f64(seconds);
        *free = Some(end);
        drop(free);
        // SAFETY: the engine keeps both buffers alive until the stream finished.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
        if let Some(offset) = corrupt {
            // SAFETY: offset < bytes, inside the destination.
            unsafe { *(dst as *mut u8).add(offset) ^= 0x5a };
        }
    }));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(dst: u64, src: *const c_void, bytes: usize, stream: *mut c_void) -> CUresult {
    fail_if_asked!("cuMemcpyHtoDAsync_v2");
    copy(stream, dst as usize, src as usize, bytes, true)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: u64, bytes: usize, stream: *mut c_void) -> CUresult {
    fail_if_asked!("cuMemcpyDtoHAsync_v2");
    copy(stream, dst as usize, src as usize, bytes, false)
}

#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(event: *mut *mut c_void, _flags: c_uint) -> CUresult {
    *event = Arc::into_raw(Arc::new(Event::default())) as *mut c_void;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(event: *mut c_void) -> CUresult {
    drop(Arc::from_raw(event as *const Event));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(event: *mut c_void, stream: *mut c_void) -> CUresult {
    Arc::increment_strong_count(event as *const Event);
    let event = Arc::from_raw(event as *const Event);
    *event.at.lock().unwrap() = None;
    let stream = &*stream.cast::<Stream>();
    let link_free = stream.link_free.clone();
    stream.push(Box::new(move || {
        // The event completes when the copies before it have left the fake link. Copies and
        // events only book the link (nothing sleeps on the stream), so a late wake-up never
        // delays the next copy; the host sees the event done once that time has come.
        let at = link_free.lock().unwrap().map_or_else(Instant::now, |f| f.max(Instant::now()));
        *event.at.lock().unwrap() = Some(at);
    }));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(event: *mut c_void) -> CUresult {
    let event = &*(event as *const Event);
    match *event.at.lock().unwrap() {
        Some(at) if Instant::now() >= at => SUCCESS,
        _ => NOT_READY,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime(milliseconds: *mut f32, start: *mut c_void, end: *mut c_void) -> CUresult {
    let (start, end) = (&*(start as *const Event), &*(end as *const Event));
    match (*start.at.lock().unwrap(), *end.at.lock().unwrap()) {
        (Some(s), Some(e)) => {
            *milliseconds = e.saturating_duration_since(s).as_secs_f64() as f32 * 1e3;
            SUCCESS
        }
        _ => NOT_READY,
    }
}
