//! Ctrl-C, SIGTERM, SIGHUP: stop cleanly between transfers and keep what was measured. The flag
//! and its handler live in the leaf module [`crate::cancel`] so engines' waits can poll it too.

use std::sync::atomic::AtomicBool;

pub use crate::cancel::EXIT_INTERRUPTED;

/// Install the handler (once per process; `main` already did) and return the flag procedures
/// check between transfers.
pub fn on_ctrl_c() -> &'static AtomicBool {
    crate::cancel::install();
    crate::cancel::flag()
}
