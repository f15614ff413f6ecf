//! Errors shared by every layer.
//!
//! Only one distinction matters to the command line: bad input from the user (exit code 2, one
//! clear line naming what is allowed) versus everything else (exit code 1). Layers keep their own
//! `thiserror` enums for the rest; they wrap user mistakes in [`InvalidInput`] so the CLI can tell.

use thiserror::Error;

/// The user asked for something that cannot be: a width of x3, Gen 9, a malformed dump.
/// The message names the allowed values.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

impl InvalidInput {
    pub fn new(message: impl Into<String>) -> Self {
        InvalidInput(message.into())
    }
}

/// Shorthand for returning an [`InvalidInput`] inside an `anyhow::Result`.
pub fn invalid<T>(message: impl Into<String>) -> anyhow::Result<T> {
    Err(InvalidInput::new(message).into())
}
