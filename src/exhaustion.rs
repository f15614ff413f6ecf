//! Running out of memory is a message and exit code 1, not Rust's abort (SIGABRT, maybe a core
//! file, and no word of why). The binary installs [`ExitOnExhaustion`] as its global allocator:
//! the system allocator, which on a failed allocation writes one line to standard error (without
//! allocating) and exits. Inputs are bounded (`bounded.rs`), so this is the last line of defence
//! under a tight `ulimit -v` or cgroup limit, not the way limits are enforced.

use std::alloc::{GlobalAlloc, Layout, System};

pub struct ExitOnExhaustion;

// SAFETY: every call is forwarded to the system allocator unchanged; only a null result, which
// the caller would turn into an abort, is turned into an exit instead.
unsafe impl GlobalAlloc for ExitOnExhaustion {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        or_exit(System.alloc(layout), layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        or_exit(System.alloc_zeroed(layout), layout.size())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        or_exit(System.realloc(ptr, layout, new_size), new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

fn or_exit(ptr: *mut u8, bytes: usize) -> *mut u8 {
    if ptr.is_null() {
        let mut line = [0u8; 200];
        let len = message(bytes, &mut line);
        // SAFETY: writing our own stack buffer to fd 2, then ending the process without running
        // anything that might allocate.
        unsafe {
            libc::write(2, line.as_ptr().cast(), len);
            libc::_exit(1);
        }
    }
    ptr
}

/// "pcieperf: out of memory: …" with the size, into `line` without allocating; its length.
fn message(bytes: usize, line: &mut [u8; 200]) -> usize {
    const HEAD: &[u8] = b"pcieperf: out of memory: an allocation of ";
    const TAIL: &[u8] = b" bytes failed (the input is larger than this process's memory limit allows: see ulimit -v or the cgroup's memory.max)\n";
    let mut digits = [0u8; 20];
    let mut n = bytes;
    let mut count = 0;
    loop {
        digits[19 - count] = b'0' + (n % 10) as u8;
        count += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let parts: [&[u8]; 3] = [HEAD, &digits[20 - count..], TAIL];
    let mut at = 0;
    for part in parts {
        let take = part.len().min(line.len() - at);
        line[at..at + take].copy_from_slice(&part[..take]);
        at += take;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_size_and_ends_the_line() {
        let mut line = [0u8; 200];
        let len = message(268_435_456, &mut line);
        let text = std::str::from_utf8(&line[..len]).unwrap();
        assert!(text.starts_with("pcieperf: out of memory: an allocation of 268435456 bytes failed"), "{text}");
        assert!(text.ends_with('\n'));
        let len = message(0, &mut line);
        assert!(std::str::from_utf8(&line[..len]).unwrap().contains(" of 0 bytes"));
    }
}
