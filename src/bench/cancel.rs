//! Ctrl-C: stop cleanly between transfers and keep what was measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static CANCELLED: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Install the Ctrl-C handler (once per process) and return the flag procedures check between
/// transfers. If a handler cannot be installed, Ctrl-C keeps its default effect.
pub fn on_ctrl_c() -> &'static AtomicBool {
    INSTALLED.get_or_init(|| ctrlc::set_handler(|| CANCELLED.store(true, Ordering::SeqCst)).is_ok());
    &CANCELLED
}

/// Exit code for a run stopped by Ctrl-C (128 + SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;
