//! Host buffers of the kind the user asked for, as nvbandwidth and CUDA programs allocate them:
//! pageable (pcieperf's own page-aligned memory: the driver stages it through a pinned bounce
//! buffer), pinned (`cuMemHostAlloc`, portable, not write-combined), write-combined pinned
//! (reads by the CPU are slow; the GPU reads it without snooping the CPU caches) and registered
//! (`cuMemHostRegister` on pcieperf's own buffer: pinned in place).

use std::ffi::c_void;

use cudarc::driver::sys;

use super::driver::check;
use crate::engine::{AlignedBuf, EngineError};

/// `CU_MEMHOSTALLOC_PORTABLE`, `CU_MEMHOSTALLOC_WRITECOMBINED`, `CU_MEMHOSTREGISTER_PORTABLE`.
const HOSTALLOC_PORTABLE: u32 = 0x1;
const HOSTALLOC_WRITECOMBINED: u32 = 0x4;
const HOSTREGISTER_PORTABLE: u32 = 0x1;

/// The engine's own name for the run-wide kind ([`crate::engine::HostMemory`], which the
/// conditions record and the findings read).
pub use crate::engine::HostMemory as MemoryKind;

impl MemoryKind {
    pub const ALL: [MemoryKind; 4] = [MemoryKind::Pageable, MemoryKind::Pinned, MemoryKind::WriteCombined, MemoryKind::Registered];

    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Pageable => "pageable",
            MemoryKind::Pinned => "pinned",
            MemoryKind::WriteCombined => "wc",
            MemoryKind::Registered => "registered",
        }
    }

    /// For `--cuda-memory`.
    pub fn parse(text: &str) -> Result<MemoryKind, String> {
        Self::ALL.into_iter().find(|k| k.name() == text.trim()).ok_or_else(|| "give pageable, pinned, wc or registered".into())
    }

    /// How the description says it.
    pub fn describe(self) -> &'static str {
        match self {
            MemoryKind::Pageable => "pageable host memory",
            MemoryKind::Pinned => "pinned host memory (cuMemHostAlloc, portable)",
            MemoryKind::WriteCombined => "write-combined pinned host memory (cuMemHostAlloc)",
            MemoryKind::Registered => "registered host memory (cuMemHostRegister)",
        }
    }
}

/// One host buffer of a kind; freed (or unregistered) when dropped.
pub struct HostBuffer {
    kind: MemoryKind,
    pointer: *mut u8,
    bytes: usize,
    /// Pageable and registered buffers are pcieperf's own memory.
    own: Option<AlignedBuf>,
}

// SAFETY: uniquely owned memory, like AlignedBuf.
unsafe impl Send for HostBuffer {}

impl HostBuffer {
    pub fn new(kind: MemoryKind, bytes: usize) -> Result<HostBuffer, EngineError> {
        let bytes = bytes.max(1);
        match kind {
            MemoryKind::Pageable | MemoryKind::Registered => {
                let mut own = AlignedBuf::new(bytes);
                let pointer = own.as_mut_ptr();
                if kind == MemoryKind::Registered {
                    // SAFETY: our own live buffer of `bytes`; unregistered in Drop before it is freed.
                    check(unsafe { sys::cuMemHostRegister_v2(pointer.cast(), bytes, HOSTREGISTER_PORTABLE) }, "cuMemHostRegister")?;
                }
                Ok(HostBuffer { kind, pointer, bytes, own: Some(own) })
            }
            MemoryKind::Pinned | MemoryKind::WriteCombined => {
                let flags = if kind == MemoryKind::WriteCombined { HOSTALLOC_PORTABLE | HOSTALLOC_WRITECOMBINED } else { HOSTALLOC_PORTABLE };
                let mut pointer: *mut c_void = std::ptr::null_mut();
                // SAFETY: valid out-pointer.
                check(unsafe { sys::cuMemHostAlloc(&mut pointer, bytes, flags) }, "cuMemHostAlloc")?;
                Ok(HostBuffer { kind, pointer: pointer.cast(), bytes, own: None })
            }
        }
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.pointer
    }

    pub fn slice(&self, len: usize) -> &[u8] {
        // SAFETY: `len` <= bytes (checked by the caller through `len()`), memory we own.
        unsafe { std::slice::from_raw_parts(self.pointer, len.min(self.bytes)) }
    }

    pub fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes it unique.
        unsafe { std::slice::from_raw_parts_mut(self.pointer, len.min(self.bytes)) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: our allocation or registration; no copy uses it any more (the engine leaks
        // buffers a timed-out copy may still use instead of dropping them).
        unsafe {
            match self.kind {
                MemoryKind::Registered => {
                    sys::cuMemHostUnregister(self.pointer.cast());
                }
                MemoryKind::Pinned | MemoryKind::WriteCombined => {
                    sys::cuMemFreeHost(self.pointer.cast());
                }
                MemoryKind::Pageable => {}
            }
        }
        drop(self.own.take());
    }
}
