//! A GPU's own view of itself from NVIDIA's management library (NVML, `libnvidia-ml.so.1`),
//! opened at run time so pcieperf builds and runs where there is none: its name, performance
//! state (P0 busy … P8 idle), PCIe replay counter and link generation and width, current and
//! maximum. The library is checked for before any call; a machine without it gets a reason,
//! never an error. Only the few functions below are used, each looked up by name.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

use serde::{Deserialize, Serialize};

/// NVML's name for success (`NVML_SUCCESS`).
const SUCCESS: c_int = 0;

/// The library names tried, in order (the versioned name is what the driver installs).
pub const LIBRARY_NAMES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

type Device = *mut c_void;
type Init = unsafe extern "C" fn() -> c_int;
type ErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type HandleByBusId = unsafe extern "C" fn(*const c_char, *mut Device) -> c_int;
type Name = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> c_int;
type Value = unsafe extern "C" fn(Device, *mut c_uint) -> c_int;

/// What NVML said about the GPU at one moment; a value NVML would not give is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuState {
    /// Performance state: 0 (P0, full clocks) … 15; idle GPUs sit in P8 or deeper.
    pub pstate: Option<u32>,
    /// PCIe replays the GPU counted since the driver loaded.
    pub replay_counter: Option<u32>,
    pub link_generation: Option<u32>,
    pub link_width: Option<u32>,
    pub max_link_generation: Option<u32>,
    pub max_link_width: Option<u32>,
}

/// NVML around a run (`conditions.nvml`): present for a GPU target only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlRecord {
    pub available: bool,
    /// Why NVML could not describe the device, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<GpuState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<GpuState>,
}

impl NvmlRecord {
    pub fn unavailable(reason: String) -> Self {
        NvmlRecord { available: false, reason: Some(reason), name: None, before: None, after: None }
    }

    /// Replays counted between before and after, when both were read.
    pub fn replays_during(&self) -> Option<(u32, u32)> {
        let before = self.before.as_ref()?.replay_counter?;
        let after = self.after.as_ref()?.replay_counter?;
        (after > before).then_some((before, after))
    }
}

/// One GPU opened through NVML. NVML is thread-safe: the link sampler reads it from its thread.
pub struct Gpu {
    // Kept loaded for as long as the function pointers below are used.
    _library: libloading::Library,
    shutdown: Init,
    name: Name,
    pstate: Value,
    replay_counter: Value,
    link_generation: Value,
    link_width: Value,
    max_link_generation: Value,
    max_link_width: Value,
    device: Device,
}

// SAFETY: NVML's functions may be called from any thread (its documentation says so); the
// device handle is an opaque token NVML owns.
unsafe impl Send for Gpu {}
unsafe impl Sync for Gpu {}

/// Look a function up by name; the library must outlive the pointer.
fn symbol<T: Copy>(library: &libloading::Library, name: &str) -> Result<T, String> {
    // SAFETY: the caller names the function's C type in T; the pointer is used only while the
    // library stays loaded (it is kept in `Gpu`).
    unsafe { library.get::<T>(name.as_bytes()).map(|s| *s).map_err(|e| format!("{name} missing from the NVML library: {e}")) }
}

/// Open the GPU at PCI address `bdf` (`0000:01:00.0`): why not, when the library is missing,
/// does not start, or knows no such device.
pub fn open(bdf: &str) -> Result<Gpu, String> {
    let library = load()?;
    let init: Init = symbol(&library, "nvmlInit_v2")?;
    let error_string: ErrorString = symbol(&library, "nvmlErrorString")?;
    let explain = |code: c_int| {
        // SAFETY: nvmlErrorString returns a static string for any code.
        let text = unsafe { error_string(code) };
        if text.is_null() { format!("error {code}") } else { unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned() }
    };
    let handle: HandleByBusId = symbol(&library, "nvmlDeviceGetHandleByPciBusId_v2")?;
    let shutdown: Init = symbol(&library, "nvmlShutdown")?;
    let gpu_functions = (
        symbol::<Name>(&library, "nvmlDeviceGetName")?,
        symbol::<Value>(&library, "nvmlDeviceGetPerformanceState")?,
        symbol::<Value>(&library, "nvmlDeviceGetPcieReplayCounter")?,
        symbol::<Value>(&library, "nvmlDeviceGetCurrPcieLinkGeneration")?,
        symbol::<Value>(&library, "nvmlDeviceGetCurrPcieLinkWidth")?,
        symbol::<Value>(&library, "nvmlDeviceGetMaxPcieLinkGeneration")?,
        symbol::<Value>(&library, "nvmlDeviceGetMaxPcieLinkWidth")?,
    );
    // SAFETY: nvmlInit_v2 takes no arguments.
    let code = unsafe { init() };
    if code != SUCCESS {
        return Err(format!("nvmlInit failed: {}", explain(code)));
    }
    let bus_id = CString::new(bdf).map_err(|_| format!("'{bdf}' is not a PCI address"))?;
    let mut device: Device = std::ptr::null_mut();
    // SAFETY: a NUL-terminated bus ID and a place for the handle.
    let code = unsafe { handle(bus_id.as_ptr(), &mut device) };
    if code != SUCCESS {
        // SAFETY: balances the successful nvmlInit above.
        unsafe { shutdown() };
        return Err(format!("NVML does not know PCI {bdf}: {}", explain(code)));
    }
    let (name, pstate, replay_counter, link_generation, link_width, max_link_generation, max_link_width) = gpu_functions;
    Ok(Gpu { _library: library, shutdown, name, pstate, replay_counter, link_generation, link_width, max_link_generation, max_link_width, device })
}

/// The first of [`LIBRARY_NAMES`] that loads.
fn load() -> Result<libloading::Library, String> {
    let mut errors = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: loading runs the library's initialisers; NVML's (and the test fake's) have no
        // preconditions.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return Ok(library),
            Err(e) => errors.push(e.to_string()),
        }
    }
    // The versioned name's error says what is missing: "libnvidia-ml.so.1: cannot open shared object file".
    Err(errors.swap_remove(0))
}

impl Gpu {
    fn value(&self, function: Value) -> Option<u32> {
        let mut value: c_uint = 0;
        // SAFETY: a handle NVML gave and a place for one unsigned int.
        (unsafe { function(self.device, &mut value) } == SUCCESS).then_some(value)
    }

    /// The GPU's marketing name.
    pub fn name(&self) -> Option<String> {
        let mut buffer = [0 as c_char; 96];
        // SAFETY: NVML writes at most `len` bytes, NUL-terminated.
        if unsafe { (self.name)(self.device, buffer.as_mut_ptr(), buffer.len() as c_uint) } != SUCCESS {
            return None;
        }
        buffer[buffer.len() - 1] = 0;
        // SAFETY: NUL-terminated just above at the latest.
        Some(unsafe { CStr::from_ptr(buffer.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// The state now. An NVML P-state outside 0–15 (32 = unknown) counts as not given.
    pub fn state(&self) -> GpuState {
        GpuState {
            pstate: self.value(self.pstate).filter(|&p| p <= 15),
            replay_counter: self.value(self.replay_counter),
            link_generation: self.value(self.link_generation),
            link_width: self.value(self.link_width),
            max_link_generation: self.value(self.max_link_generation),
            max_link_width: self.value(self.max_link_width),
        }
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: balances the nvmlInit of `open`.
        unsafe { (self.shutdown)() };
    }
}

/// "P0, Gen4 x16 (max Gen4 x16), 0 replays" for a report line.
pub fn describe(state: &GpuState) -> String {
    let or_q = |v: Option<u32>| v.map_or("?".to_string(), |v| v.to_string());
    let pstate = state.pstate.map_or("P?".to_string(), |p| format!("P{p}"));
    format!(
        "{pstate}, Gen{} x{} (max Gen{} x{}), replay counter {}",
        or_q(state.link_generation),
        or_q(state.link_width),
        or_q(state.max_link_generation),
        or_q(state.max_link_width),
        or_q(state.replay_counter)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_count_only_when_the_counter_rose() {
        let state = |replays| Some(GpuState { replay_counter: Some(replays), ..GpuState::default() });
        let mut record = NvmlRecord { available: true, reason: None, name: None, before: state(3), after: state(3) };
        assert_eq!(record.replays_during(), None);
        record.after = state(7);
        assert_eq!(record.replays_during(), Some((3, 7)));
        record.before = None;
        assert_eq!(record.replays_during(), None);
    }

    #[test]
    fn describe_names_what_nvml_did_not_give() {
        let state = GpuState { pstate: Some(8), link_generation: Some(1), link_width: Some(16), ..GpuState::default() };
        assert_eq!(describe(&state), "P8, Gen1 x16 (max Gen? x?), replay counter ?");
    }
}
