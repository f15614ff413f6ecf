//! The results document on disk: pretty JSON, written by the output rules, read back as it
//! streams ([`super::saved`]) with its schema checked.

use std::path::Path;

use anyhow::Context;

use crate::bench::results::Results;
use crate::error::InvalidInput;

use super::saved::{self, Accept};
use super::view::Document;

/// The document as pretty JSON, ending in a newline. Any size: a file is read back whatever its
/// size, in memory bounded by its typed values.
pub fn to_string(results: &Results) -> String {
    serde_json::to_string_pretty(results).expect("results serialise: plain data") + "\n"
}

/// Parse a results document, refusing other schemas with a clear message; a document of the
/// previous version is read and becomes one of this version.
pub fn from_str(text: &str) -> Result<Results, InvalidInput> {
    only_results(saved::from_reader(text.as_bytes(), Accept::Results)?)
}

fn only_results(document: Document) -> Result<Results, InvalidInput> {
    match document {
        Document::Results(results) => Ok(results),
        other => Err(InvalidInput::new(format!("not a results document but a {} document", other.kind()))),
    }
}

/// Read a results document from a file (`-`: standard input), streamed, with control
/// characters removed from its strings.
pub fn read(path: &Path) -> anyhow::Result<Results> {
    saved::read_file(path, Accept::Results).and_then(only_results).with_context(|| path.display().to_string())
}

/// Write the document to `path` by the rules of [`super::output`].
pub fn write(path: &Path, results: &Results) -> anyhow::Result<()> {
    super::output::write(path, &to_string(results))
}
