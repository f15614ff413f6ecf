//! A read or write that waits in the kernel, as `dd`'s does, and still ends within [`POLL_SLICE`].
//!
//! Non-blocking I/O waits in poll() and then reads: two system calls per wake-up where a
//! blocking read makes one, and a pipe that was ever polled wakes its readers on every write
//! (msgstream's `KernelWait`). A blocking read, though, would not see Ctrl-C (the handler is
//! installed with SA_RESTART), a deadline or a stalled peer. So while a [`SliceAlarm`] lives, a
//! ticker thread sends the thread that started it a signal every [`POLL_SLICE`]; the signal's
//! handler does nothing and is installed without SA_RESTART, so a read waiting in the kernel
//! returns EINTR (or the bytes it has) and the caller looks at its flag, deadline and stall.

use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;

use crate::cancel::POLL_SLICE;

extern "C" fn do_nothing(_signal: libc::c_int) {}

/// A real-time signal the process does not otherwise use (glibc keeps the first ones).
fn tick_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

/// Install the do-nothing handler once per process; false when it could not be.
fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask; no SA_RESTART, so
        // a blocking system call interrupted by the tick returns EINTR.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = do_nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(tick_signal(), &action, std::ptr::null_mut()) == 0
        }
    })
}

/// Interrupts the thread that started it every [`POLL_SLICE`] until dropped (on that thread:
/// it is neither `Send` nor `Sync`). After the drop no tick comes.
pub struct SliceAlarm {
    stopped: Arc<(Mutex<bool>, Condvar)>,
    ticker: Option<JoinHandle<()>>,
    _this_thread_only: PhantomData<*const ()>,
}

impl SliceAlarm {
    /// None when the handler or the ticker thread could not be set up (the caller polls).
    pub fn start() -> Option<SliceAlarm> {
        if !install() {
            return None;
        }
        // SAFETY: pthread_self has no preconditions.
        let target = unsafe { libc::pthread_self() };
        let stopped = Arc::new((Mutex::new(false), Condvar::new()));
        let theirs = Arc::clone(&stopped);
        let ticker = std::thread::Builder::new()
            .name("slice-alarm".into())
            .spawn(move || {
                let (lock, wake) = &*theirs;
                let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
                while !*done {
                    let (guard, waited) = wake.wait_timeout(done, POLL_SLICE).unwrap_or_else(|e| e.into_inner());
                    done = guard;
                    if !*done && waited.timed_out() {
                        // SAFETY: the target thread lives until the alarm is dropped on it, and
                        // the drop waits for this lock, so it is alive here.
                        unsafe { libc::pthread_kill(target, tick_signal()) };
                    }
                }
            })
            .ok()?;
        Some(SliceAlarm { stopped, ticker: Some(ticker), _this_thread_only: PhantomData })
    }
}

impl Drop for SliceAlarm {
    fn drop(&mut self) {
        let (lock, wake) = &*self.stopped;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_one();
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_blocking_read_returns_within_a_slice_or_two() {
        let mut fds = [0; 2];
        // SAFETY: a valid array of two ints for pipe().
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let alarm = SliceAlarm::start().expect("the alarm starts");
        let start = Instant::now();
        let mut byte = 0u8;
        // SAFETY: one byte into a valid local; the write end stays open, so only a signal ends it.
        let n = unsafe { libc::read(fds[0], (&mut byte as *mut u8).cast(), 1) };
        let error = std::io::Error::last_os_error();
        let waited = start.elapsed();
        drop(alarm);
        // SAFETY: closing the two fds pipe() gave.
        unsafe { libc::close(fds[0]) };
        unsafe { libc::close(fds[1]) };
        assert_eq!((n, error.raw_os_error()), (-1, Some(libc::EINTR)));
        assert!(waited < POLL_SLICE * 3, "interrupted after {waited:?}");
        assert!(waited >= POLL_SLICE / 2, "interrupted too early: {waited:?}");
        // After the drop, no tick: a sleep runs its whole length.
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(120));
        assert!(start.elapsed() >= Duration::from_millis(120));
    }
}
