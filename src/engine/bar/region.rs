//! One mapped BAR: exact-width volatile loads and stores, bounds-checked.
//!
//! The mapping is the kernel's (sysfs `resourceN`, `/dev/uioN`, a VFIO region); this module only
//! turns an offset and a width into one load or store instruction. `read_volatile` and
//! `write_volatile` of a naturally aligned `u8`/`u16`/`u32`/`u64` compile to one `mov` of that
//! size on x86_64 (and one `ldr`/`str` on aarch64): the compiler may neither merge, split nor
//! elide them, so each becomes exactly one TLP.

use std::fs::File;

use memmap2::{MmapOptions, MmapRaw};

use crate::engine::{check_access, EngineError, Width};

/// A BAR (or a regular file standing in for one) mapped into this process.
pub struct Region {
    map: MmapRaw,
    bar: u8,
    size_bytes: u64,
    /// Mapped write-combining (`resourceN_wc`): stores may merge in 64-byte buffers.
    pub write_combining: bool,
    /// Where the mapping came from, for messages (`/sys/.../resource0`, `VFIO region 0`).
    pub source: String,
}

impl Region {
    /// Map `size_bytes` of `file` from `file_offset` (0 for sysfs, the region offset for VFIO).
    pub fn map(file: &File, file_offset: u64, size_bytes: u64, bar: u8, source: String, write_combining: bool) -> Result<Region, EngineError> {
        if size_bytes == 0 {
            return Err(EngineError::Unsupported(format!("{source}: BAR{bar} has size 0 (not implemented by the device)")));
        }
        let map = MmapOptions::new()
            .offset(file_offset)
            .len(size_bytes as usize)
            .map_raw(file)
            .map_err(|e| EngineError::Io { what: format!("cannot map {source} ({size_bytes} bytes)"), source: e })?;
        Ok(Region { map, bar, size_bytes, write_combining, source })
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn at(&self, offset: u64, bytes: u64) -> Result<*mut u8, EngineError> {
        check_access(self.bar, offset, bytes, self.size_bytes)?;
        // SAFETY: check_access proved offset + bytes <= size_bytes, the mapping's length.
        Ok(unsafe { self.map.as_mut_ptr().add(offset as usize) })
    }

    /// One load of exactly `width` bytes.
    pub fn read(&self, offset: u64, width: Width) -> Result<u64, EngineError> {
        let p = self.at(offset, width.bytes())?;
        // SAFETY: `p` is inside the mapping and naturally aligned (check_access); the mapping
        // lives as long as `self`. Device memory may change under us, hence volatile.
        Ok(unsafe {
            match width {
                Width::B1 => std::ptr::read_volatile(p).into(),
                Width::B2 => std::ptr::read_volatile(p as *const u16).into(),
                Width::B4 => std::ptr::read_volatile(p as *const u32).into(),
                Width::B8 => std::ptr::read_volatile(p as *const u64),
            }
        })
    }

    /// One store of exactly `width` bytes (the low bytes of `value`).
    pub fn write(&self, offset: u64, width: Width, value: u64) -> Result<(), EngineError> {
        let p = self.at(offset, width.bytes())?;
        // SAFETY: as in `read`; the region is mapped writable.
        unsafe {
            match width {
                Width::B1 => std::ptr::write_volatile(p, value as u8),
                Width::B2 => std::ptr::write_volatile(p as *mut u16, value as u16),
                Width::B4 => std::ptr::write_volatile(p as *mut u32, value as u32),
                Width::B8 => std::ptr::write_volatile(p as *mut u64, value),
            }
        }
        Ok(())
    }

    /// Sequential one-byte stores, then a store fence that evicts partly filled write-combining
    /// buffers (document 000 Test 14; Intel SDM Vol. 3 §11.3.1).
    pub fn write_combined(&self, offset: u64, data: &[u8]) -> Result<(), EngineError> {
        let p = self.at(offset, data.len() as u64)?;
        for (i, &byte) in data.iter().enumerate() {
            // SAFETY: offset + i < offset + data.len() <= size_bytes.
            unsafe { std::ptr::write_volatile(p.add(i), byte) };
        }
        store_fence();
        Ok(())
    }
}

/// Make every earlier store globally visible (drains write-combining buffers).
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE has no preconditions on x86_64 (SSE is baseline).
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}
