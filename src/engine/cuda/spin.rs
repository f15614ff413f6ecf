//! The spin kernel that holds a stream where the device has no stream memory operations
//! (`cuStreamWaitValue32` unsupported), as nvbandwidth holds its streams: one GPU thread
//! spinning on the host-mapped flag until the host sets it. It is PTX text, JIT-compiled by the
//! driver (`cuModuleLoadData`), so pcieperf needs no CUDA compiler to build.
//!
//! In the engine it has run only against the fake driver library (which parses nothing beyond
//! the entry's name and runs the spin as a thread). On an H100 (2026-11-27) the real driver
//! loaded this PTX and it spun on a mapped host flag until released, in a check outside the
//! engine (docs/engines.md).

use std::ffi::c_void;

use cudarc::driver::sys;

use super::driver::{check, Stream};
use crate::engine::EngineError;

/// `pcieperf_spin(const volatile unsigned *flag) { while (*flag == 0) {} }`: volatile loads
/// through the generic address the driver gave for the mapped host page, so every iteration
/// reads host memory again. sm_50 and PTX 6.0: JIT-compiled for any GPU a CUDA 10+ driver runs.
const PTX: &str = "\
.version 6.0
.target sm_50
.address_size 64

.visible .entry pcieperf_spin(.param .u64 flag)
{
    .reg .u64 %rd<1>;
    .reg .u32 %r<1>;
    .reg .pred %p<1>;
    ld.param.u64 %rd0, [flag];
WAIT:
    ld.volatile.u32 %r0, [%rd0];
    setp.eq.u32 %p0, %r0, 0;
    @%p0 bra WAIT;
    ret;
}
\0";

/// The loaded module and its kernel; unloaded when dropped (before the context).
pub struct SpinKernel {
    module: sys::CUmodule,
    function: sys::CUfunction,
}

// SAFETY: driver handles, valid from any thread with the context current (the engine makes
// it current before every call).
unsafe impl Send for SpinKernel {}

impl SpinKernel {
    pub fn load() -> Result<SpinKernel, EngineError> {
        let mut module = std::ptr::null_mut();
        // SAFETY: a NUL-terminated PTX image; the driver copies what it needs.
        check(unsafe { sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast()) }, "cuModuleLoadData")?;
        let mut function = std::ptr::null_mut();
        // SAFETY: the module just loaded; a NUL-terminated name.
        let found = check(unsafe { sys::cuModuleGetFunction(&mut function, module, c"pcieperf_spin".as_ptr()) }, "cuModuleGetFunction");
        let kernel = SpinKernel { module, function };
        found.map(|()| kernel)
    }

    /// Queue one spinning thread on `stream`, released when the u32 at `flag` (a device pointer
    /// to mapped host memory) is non-zero.
    pub fn launch(&self, stream: &Stream, flag: sys::CUdeviceptr) -> Result<(), EngineError> {
        let mut argument = flag;
        let mut params = [(&mut argument as *mut sys::CUdeviceptr).cast::<c_void>()];
        // SAFETY: one u64 parameter, as the entry declares; the driver copies it at launch.
        check(
            unsafe { sys::cuLaunchKernel(self.function, 1, 1, 1, 1, 1, 1, 0, stream.0, params.as_mut_ptr(), std::ptr::null_mut()) },
            "cuLaunchKernel",
        )
    }
}

impl Drop for SpinKernel {
    fn drop(&mut self) {
        // SAFETY: our module; no launch of it is pending once the engine drops it (the engine
        // leaks its state instead when a copy did not finish).
        unsafe { sys::cuModuleUnload(self.module) };
    }
}
