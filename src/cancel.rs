//! Ctrl-C, SIGTERM and SIGHUP: one flag that every wait in the crate polls.
//!
//! The handler is installed first thing in `main` and only sets the flag: a signal never kills
//! the process halfway through writing a file. Procedures stop between transfers; engines'
//! waits (poll, io_uring, simulated hangs) wake at least every [`POLL_SLICE`] to look at the
//! flag, cancel what is in flight and return [`crate::engine::EngineError::Interrupted`]. A job
//! scheduler's stop (SIGTERM) and a closed SSH session (SIGHUP) are treated as Ctrl-C, so the
//! partial results are written. A leaf module: every layer may look at the flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static CANCELLED: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Exit code for a run stopped by a signal (128 + SIGINT, whichever of the three came).
pub const EXIT_INTERRUPTED: i32 = 130;

/// Longest a wait sleeps before looking at the flag again: Ctrl-C returns well within 0.5 s.
pub const POLL_SLICE: Duration = Duration::from_millis(50);

/// Install the handler for SIGINT, SIGTERM and SIGHUP (once per process); false when it could
/// not be installed (the signals then keep their default effect).
pub fn install() -> bool {
    *INSTALLED.get_or_init(|| ctrlc::set_handler(|| CANCELLED.store(true, Ordering::SeqCst)).is_ok())
}

/// The flag procedures check between transfers.
pub fn flag() -> &'static AtomicBool {
    &CANCELLED
}

/// True once a signal asked the run to stop.
pub fn requested() -> bool {
    CANCELLED.load(Ordering::SeqCst)
}

/// The next slice to wait: at most [`POLL_SLICE`], at most `left`.
pub fn slice(left: Duration) -> Duration {
    left.min(POLL_SLICE)
}

/// Sleep for `duration` unless a signal comes first; true when it did.
pub fn sleep(duration: Duration) -> bool {
    let end = Instant::now() + duration;
    loop {
        if requested() {
            return true;
        }
        let Some(left) = end.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) else { return false };
        std::thread::sleep(slice(left));
    }
}

/// Run `work` on a thread of its own and wait for it in [`POLL_SLICE`]s; None when a signal
/// came first. A long computation (a simulated link run of a terabyte) then cannot hold the
/// signal up: its thread is left to finish on its own and its result is dropped, while the
/// process goes on to write what it has and exit. A panic in `work` is this thread's panic.
pub fn compute<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    use std::sync::mpsc::RecvTimeoutError;
    if requested() {
        return None;
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    loop {
        match receiver.recv_timeout(POLL_SLICE) {
            Ok(value) => return Some(value),
            Err(RecvTimeoutError::Timeout) if requested() => return None,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                let payload = worker.join().err().unwrap_or_else(|| Box::new("a computation ended without its result"));
                std::panic::resume_unwind(payload)
            }
        }
    }
}
