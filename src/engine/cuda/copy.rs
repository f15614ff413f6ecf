//! One sample, as nvbandwidth takes it: every stream is held by a wait on a host flag while the
//! warm-up copies, the start event, the timed copies and the end event are queued; then the flag
//! is released, so the copies run back to back whatever it cost the host to queue them, and the
//! GPU's events time them. The result is the time of one copy (elapsed / loops).
//!
//! nvbandwidth holds its streams with a spin kernel on the flag; pcieperf uses
//! `cuStreamWaitValue32` (a stream memory operation: no kernel, no PTX); where the device does
//! not support stream memory operations, nvbandwidth's spin kernel (`spin.rs`: PTX the driver
//! JIT-compiles); and where that cannot be loaded either, a host function that waits on the
//! flag (`cuLaunchHostFunc`): the hold is then released from a driver thread, which costs a few
//! µs before the first warm-up copy, outside the timed region.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cudarc::driver::sys;

use super::driver::{check, Event, Stream};
use super::host_memory::{HostBuffer, MemoryKind};
use super::spin::SpinKernel;
use crate::engine::devfile::Deadline;
use crate::engine::{Direction, EngineError};

/// How streams are held until everything is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    WaitValue,
    SpinKernel,
    HostFunction,
    /// Pageable memory: the driver stages each copy through its own pinned buffer from the
    /// calling thread, waiting for the stream first, so a held stream would never start.
    Unheld,
}

impl Hold {
    pub fn describe(self) -> &'static str {
        match self {
            Hold::WaitValue => "streams held by cuStreamWaitValue32 on a host flag",
            Hold::SpinKernel => "streams held by a spin kernel on a host flag (PTX via cuModuleLoadData; no stream memory operations)",
            Hold::HostFunction => "streams held by a host function waiting on a flag (no stream memory operations)",
            Hold::Unheld => "streams not held (pageable copies are staged by the calling thread, which waits for the stream)",
        }
    }
}

/// The host flag every stream waits on: pinned, mapped for the device.
pub struct Flag {
    memory: HostBuffer,
    device_pointer: sys::CUdeviceptr,
    /// The kernel that spins on it, where streams are held that way.
    spin: Option<SpinKernel>,
}

impl Flag {
    pub fn new() -> Result<Flag, EngineError> {
        let memory = HostBuffer::new(MemoryKind::Pinned, 4096)?;
        let mut device_pointer = 0;
        // SAFETY: pinned memory from cuMemHostAlloc (portable: mapped in every context with UVA).
        check(unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_pointer, memory.as_ptr().cast(), 0) }, "cuMemHostGetDevicePointer")?;
        let flag = Flag { memory, device_pointer, spin: None };
        flag.word().store(0, Ordering::SeqCst);
        Ok(flag)
    }

    fn word(&self) -> &AtomicU32 {
        // SAFETY: a page of pinned memory, 4-byte aligned, alive as long as `self`.
        unsafe { &*(self.memory.as_ptr() as *const AtomicU32) }
    }
}

/// Waits on the flag from a driver thread (the host-function hold).
unsafe extern "C" fn wait_for_flag(word: *mut c_void) {
    // SAFETY: the engine keeps the flag alive until the stream passed this function.
    let word = unsafe { &*(word as *const AtomicU32) };
    while word.load(Ordering::Acquire) == 0 {
        std::thread::sleep(Duration::from_micros(10));
    }
}

/// One direction of a sample: its stream, events, and the memory it copies between.
pub struct Leg<'a> {
    pub direction: Direction,
    pub stream: &'a Stream,
    pub start: &'a Event,
    pub end: &'a Event,
    pub host: *mut u8,
    pub device: sys::CUdeviceptr,
    pub bytes: usize,
}

/// Copies per sample: warm-ups (untimed) then the timed loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub warmups: u32,
    pub loops: u32,
}

/// Releases the flag when dropped, so an error while queueing never leaves a stream held.
struct Release<'a>(&'a Flag);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.word().store(1, Ordering::Release);
    }
}

fn queue_copy(leg: &Leg) -> Result<(), EngineError> {
    // SAFETY: host and device ranges of `bytes` that the engine keeps alive until the end event.
    unsafe {
        match leg.direction {
            Direction::H2d => check(sys::cuMemcpyHtoDAsync_v2(leg.device, leg.host as *const c_void, leg.bytes, leg.stream.0), "cuMemcpyHtoDAsync"),
            Direction::D2h => check(sys::cuMemcpyDtoHAsync_v2(leg.host.cast(), leg.device, leg.bytes, leg.stream.0), "cuMemcpyDtoHAsync"),
        }
    }
}

fn hold(stream: &Stream, flag: &Flag, how: Hold) -> Result<(), EngineError> {
    // SAFETY: the flag outlives the sample (the engine owns it); 0 = CU_STREAM_WAIT_VALUE_GEQ.
    unsafe {
        match how {
            Hold::WaitValue => check(sys::cuStreamWaitValue32_v2(stream.0, flag.device_pointer, 1, 0), "cuStreamWaitValue32"),
            Hold::SpinKernel => match &flag.spin {
                Some(kernel) => kernel.launch(stream, flag.device_pointer),
                None => Err(EngineError::Unsupported("cuda: no spin kernel loaded".into())),
            },
            Hold::HostFunction => check(sys::cuLaunchHostFunc(stream.0, Some(wait_for_flag), flag.memory.as_ptr().cast()), "cuLaunchHostFunc"),
            Hold::Unheld => Ok(()),
        }
    }
}

/// Which hold this device supports: the wait on a value where the driver takes it, else the
/// spin kernel where its PTX loads and launches, else a host function. With the hold, why the
/// spin kernel was not used when it was tried and failed.
pub fn choose_hold(stream: &Stream, flag: &mut Flag) -> Result<(Hold, Option<String>), EngineError> {
    flag.word().store(1, Ordering::SeqCst);
    let chosen = match hold(stream, flag, Hold::WaitValue) {
        Ok(()) => (Hold::WaitValue, None),
        Err(EngineError::Unsupported(_)) => match SpinKernel::load() {
            Ok(kernel) => {
                flag.spin = Some(kernel);
                match hold(stream, flag, Hold::SpinKernel) {
                    Ok(()) => (Hold::SpinKernel, None),
                    Err(why) => {
                        flag.spin = None;
                        (Hold::HostFunction, Some(why.to_string()))
                    }
                }
            }
            Err(why) => (Hold::HostFunction, Some(why.to_string())),
        },
        Err(other) => return Err(other),
    };
    // SAFETY: our stream; the flag is already set, so the probe's wait passes at once.
    check(unsafe { sys::cuStreamSynchronize(stream.0) }, "cuStreamSynchronize")?;
    flag.word().store(0, Ordering::SeqCst);
    Ok(chosen)
}

/// Run one sample over `legs` at once; returns each leg's time per copy in ns, in order.
/// On a timeout the copies may still run: the caller must keep every buffer alive for good.
pub fn sample(legs: &[Leg], flag: &Flag, how: Hold, plan: Plan, deadline: &Deadline) -> Result<Vec<f64>, EngineError> {
    flag.word().store(0, Ordering::SeqCst);
    {
        let _release = Release(flag);
        for leg in legs {
            hold(leg.stream, flag, how)?;
        }
        for leg in legs {
            for _ in 0..plan.warmups {
                queue_copy(leg)?;
            }
            leg.start.record(leg.stream)?;
            for _ in 0..plan.loops {
                queue_copy(leg)?;
            }
            leg.end.record(leg.stream)?;
        }
    }
    for leg in legs {
        while !leg.end.done()? {
            let Some(wait) = deadline.slice() else {
                return Err(deadline.timeout(format!("CUDA {} copies of {} bytes", leg.direction.name(), leg.bytes)));
            };
            std::thread::sleep(wait.min(Duration::from_micros(50)));
        }
    }
    legs.iter().map(|leg| Ok(leg.end.since_ns(leg.start)? / f64::from(plan.loops.max(1)))).collect()
}
