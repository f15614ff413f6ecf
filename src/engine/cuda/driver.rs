//! The driver calls the engine makes, through cudarc's raw bindings (`cudarc::driver::sys`,
//! loaded at run time): each result checked into one line naming the call, and the handles
//! (context, stream, event, device memory) released when dropped.
//!
//! Only call these after [`super::loader::probe`] found a library: cudarc panics otherwise.

use std::ffi::{c_char, c_int, CStr, CString};

use cudarc::driver::sys::{self, CUresult};

use crate::engine::EngineError;
use crate::error::InvalidInput;

/// `Ok` for CUDA_SUCCESS, else the call's name, the error's name and the driver's text.
pub fn check(result: CUresult, call: &str) -> Result<(), EngineError> {
    if result == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: the driver points `text` at a static string, or leaves it null.
    let described = unsafe { sys::cuGetErrorString(result, &mut text) } == CUresult::CUDA_SUCCESS && !text.is_null();
    // SAFETY: a static NUL-terminated string from the driver.
    let why = if described { unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned() } else { "no description".into() };
    let message = format!("{call}: {result:?} ({}): {why}", result as i32);
    Err(match result {
        CUresult::CUDA_ERROR_NOT_SUPPORTED => EngineError::Unsupported(message),
        _ => EngineError::Io { what: "CUDA driver".into(), source: std::io::Error::other(message) },
    })
}

/// cuInit and the driver's version (e.g. 12040 for 12.4); a driver that does not start is bad
/// input for an explicit target (no usable device), as a missing library is.
pub fn init() -> Result<i32, EngineError> {
    // SAFETY: plain driver calls with valid out-pointers.
    unsafe {
        check(sys::cuInit(0), "cuInit").map_err(|e| InvalidInput::new(format!("the CUDA driver did not start: {e}")))?;
        let mut version = 0;
        check(sys::cuDriverGetVersion(&mut version), "cuDriverGetVersion")?;
        Ok(version)
    }
}

pub fn device_count() -> Result<i32, EngineError> {
    let mut count = 0;
    // SAFETY: valid out-pointer.
    check(unsafe { sys::cuDeviceGetCount(&mut count) }, "cuDeviceGetCount")?;
    Ok(count)
}

pub fn device_by_ordinal(ordinal: i32) -> Result<sys::CUdevice, EngineError> {
    let mut device = 0;
    // SAFETY: valid out-pointer.
    check(unsafe { sys::cuDeviceGet(&mut device, ordinal) }, "cuDeviceGet")?;
    Ok(device)
}

pub fn device_by_pci_address(bdf: &str) -> Result<sys::CUdevice, EngineError> {
    let text = CString::new(bdf).map_err(|_| InvalidInput::new(format!("invalid PCI address '{bdf}'")))?;
    let mut device = 0;
    // SAFETY: valid out-pointer and NUL-terminated string.
    check(unsafe { sys::cuDeviceGetByPCIBusId(&mut device, text.as_ptr()) }, "cuDeviceGetByPCIBusId")?;
    Ok(device)
}

pub fn device_name(device: sys::CUdevice) -> Result<String, EngineError> {
    let mut name = [0 as c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated.
    check(unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as c_int, device) }, "cuDeviceGetName")?;
    // SAFETY: NUL-terminated within the array.
    Ok(unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned())
}

/// The device's PCI address as sysfs writes it, `0000:65:00.0`.
pub fn pci_address(device: sys::CUdevice) -> Result<String, EngineError> {
    use sys::CUdevice_attribute::*;
    let attribute = |which| -> Result<c_int, EngineError> {
        let mut value = 0;
        // SAFETY: valid out-pointer.
        check(unsafe { sys::cuDeviceGetAttribute(&mut value, which, device) }, "cuDeviceGetAttribute")?;
        Ok(value)
    };
    let (domain, bus, slot) = (attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?, attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?, attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?);
    Ok(format!("{domain:04x}:{bus:02x}:{slot:02x}.0"))
}

/// The device's primary context, current on the calling thread while it lives.
pub struct Context {
    device: sys::CUdevice,
    context: sys::CUcontext,
}

// SAFETY: a CUDA context may be made current on any thread; the engine does so before its calls.
unsafe impl Send for Context {}

impl Context {
    pub fn primary(device: sys::CUdevice) -> Result<Context, EngineError> {
        let mut context = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, device) }, "cuDevicePrimaryCtxRetain")?;
        let this = Context { device, context };
        this.make_current()?;
        Ok(this)
    }

    pub fn make_current(&self) -> Result<(), EngineError> {
        // SAFETY: a context retained by this value.
        check(unsafe { sys::cuCtxSetCurrent(self.context) }, "cuCtxSetCurrent")
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: releases the retain of `primary`.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}

/// A stream that does not synchronise with the legacy default stream.
pub struct Stream(pub sys::CUstream);

// SAFETY: stream handles may be used from any thread with the context current.
unsafe impl Send for Stream {}

impl Stream {
    pub fn new() -> Result<Stream, EngineError> {
        let mut stream = std::ptr::null_mut();
        // SAFETY: valid out-pointer; flag 1 = CU_STREAM_NON_BLOCKING.
        check(unsafe { sys::cuStreamCreate(&mut stream, 1) }, "cuStreamCreate")?;
        Ok(Stream(stream))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: our stream; the engine only drops it once its work finished.
        unsafe { sys::cuStreamDestroy_v2(self.0) };
    }
}

/// An event with timing enabled (flags 0 = CU_EVENT_DEFAULT), as nvbandwidth creates them.
pub struct Event(pub sys::CUevent);

// SAFETY: as for streams.
unsafe impl Send for Event {}

impl Event {
    pub fn new() -> Result<Event, EngineError> {
        let mut event = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { sys::cuEventCreate(&mut event, 0) }, "cuEventCreate")?;
        Ok(Event(event))
    }

    pub fn record(&self, stream: &Stream) -> Result<(), EngineError> {
        // SAFETY: our event and stream.
        check(unsafe { sys::cuEventRecord(self.0, stream.0) }, "cuEventRecord")
    }

    /// Whether the work before the record has completed.
    pub fn done(&self) -> Result<bool, EngineError> {
        // SAFETY: our event.
        match unsafe { sys::cuEventQuery(self.0) } {
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            result => check(result, "cuEventQuery").map(|()| true),
        }
    }

    /// Time from `start` to this event by the GPU's clock, in ns.
    pub fn since_ns(&self, start: &Event) -> Result<f64, EngineError> {
        let mut milliseconds = 0f32;
        // SAFETY: valid out-pointer, both events recorded and complete.
        check(unsafe { sys::cuEventElapsedTime(&mut milliseconds, start.0, self.0) }, "cuEventElapsedTime")?;
        Ok(f64::from(milliseconds) * 1e6)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: our event.
        unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

/// Device memory.
pub struct DeviceMemory {
    pub pointer: sys::CUdeviceptr,
    pub bytes: usize,
}

impl DeviceMemory {
    pub fn new(bytes: usize) -> Result<DeviceMemory, EngineError> {
        let mut pointer = 0;
        // SAFETY: valid out-pointer.
        check(unsafe { sys::cuMemAlloc_v2(&mut pointer, bytes.max(1)) }, "cuMemAlloc")?;
        Ok(DeviceMemory { pointer, bytes })
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: our allocation; no copy uses it any more.
        unsafe { sys::cuMemFree_v2(self.pointer) };
    }
}
