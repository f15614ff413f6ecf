//! A fake `libnvidia-ml.so.1` for tests: it knows one GPU and reports what the environment says.
//!
//! - `FAKE_NVML_BUS_ID`: the PCI address it knows (default `0000:01:00.0`); others are not found.
//! - `FAKE_NVML_NAME`: the GPU's name (default `Fake GPU (fake libnvidia-ml)`).
//! - `FAKE_NVML_PSTATE`: the performance state, 0–15 (default 0).
//! - `FAKE_NVML_REPLAY_STEP`: how much the replay counter rises at each read (default 0).
//! - `FAKE_NVML_LINK`, `FAKE_NVML_MAX_LINK`: `GEN,WIDTH` (default `4,16`).
//! - `FAKE_NVML_INIT_FAIL`: set, nvmlInit fails as without a driver.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};

const SUCCESS: c_int = 0;
const ERROR_INVALID_ARGUMENT: c_int = 2;
const ERROR_NOT_FOUND: c_int = 6;
const ERROR_DRIVER_NOT_LOADED: c_int = 9;

/// The one device's handle: the address of this static.
static DEVICE: u8 = 0;
static REPLAYS: AtomicU32 = AtomicU32::new(0);

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn pair(name: &str) -> (c_uint, c_uint) {
    let text = env(name).unwrap_or_else(|| "4,16".into());
    let mut parts = text.split(',').map(|p| p.trim().parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn known(device: *mut c_void) -> bool {
    std::ptr::eq(device as *const u8, &DEVICE)
}

/// Write `value` through `out` for the known device.
unsafe fn answer(device: *mut c_void, out: *mut c_uint, value: c_uint) -> c_int {
    if !known(device) || out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    *out = value;
    SUCCESS
}

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> c_int {
    if env("FAKE_NVML_INIT_FAIL").is_some() { ERROR_DRIVER_NOT_LOADED } else { SUCCESS }
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> c_int {
    SUCCESS
}

#[no_mangle]
pub extern "C" fn nvmlErrorString(code: c_int) -> *const c_char {
    let text: &'static CStr = match code {
        SUCCESS => c"Success",
        ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        ERROR_NOT_FOUND => c"Not Found",
        ERROR_DRIVER_NOT_LOADED => c"Driver Not Loaded",
        _ => c"Unknown Error",
    };
    text.as_ptr()
}

/// # Safety
/// `bus_id` is NUL-terminated; `device` is writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(bus_id: *const c_char, device: *mut *mut c_void) -> c_int {
    if bus_id.is_null() || device.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let wanted = CStr::from_ptr(bus_id).to_string_lossy().to_ascii_lowercase();
    if wanted != env("FAKE_NVML_BUS_ID").unwrap_or_else(|| "0000:01:00.0".into()).to_ascii_lowercase() {
        return ERROR_NOT_FOUND;
    }
    *device = &DEVICE as *const u8 as *mut c_void;
    SUCCESS
}

/// # Safety
/// `name` has room for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(device: *mut c_void, name: *mut c_char, length: c_uint) -> c_int {
    if !known(device) || name.is_null() || length == 0 {
        return ERROR_INVALID_ARGUMENT;
    }
    let text = env("FAKE_NVML_NAME").unwrap_or_else(|| "Fake GPU (fake libnvidia-ml)".into());
    let bytes = &text.as_bytes()[..text.len().min(length as usize - 1)];
    std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, name, bytes.len());
    *name.add(bytes.len()) = 0;
    SUCCESS
}

/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPerformanceState(device: *mut c_void, out: *mut c_uint) -> c_int {
    answer(device, out, env("FAKE_NVML_PSTATE").and_then(|p| p.parse().ok()).unwrap_or(0))
}

/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieReplayCounter(device: *mut c_void, out: *mut c_uint) -> c_int {
    let step = env("FAKE_NVML_REPLAY_STEP").and_then(|s| s.parse().ok()).unwrap_or(0);
    answer(device, out, REPLAYS.fetch_add(step, Ordering::SeqCst))
}

/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkGeneration(device: *mut c_void, out: *mut c_uint) -> c_int {
    answer(device, out, pair("FAKE_NVML_LINK").0)
}

/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkWidth(device: *mut c_void, out: *mut c_uint) -> c_int {
    answer(device, out, pair("FAKE_NVML_LINK").1)
}

/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkGeneration(device: *mut c_void, out: *mut c_uint) -> c_int {
    answer(device, out, pair("FAKE_NVML_MAX_LINK").0)
}

/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkWidth(device: *mut c_void, out: *mut c_uint) -> c_int {
    answer(device, out, pair("FAKE_NVML_MAX_LINK").1)
}
