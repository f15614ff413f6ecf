//! The results document on disk: pretty JSON, written atomically, read back with its schema
//! checked.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::bench::results::{Results, SCHEMA};
use crate::error::InvalidInput;

/// The document as pretty JSON, ending in a newline.
pub fn to_string(results: &Results) -> String {
    let mut text = serde_json::to_string_pretty(results).expect("results serialise: plain data");
    text.push('\n');
    text
}

/// Parse a document, refusing other schemas with a clear message.
pub fn from_str(text: &str) -> Result<Results, InvalidInput> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| InvalidInput::new(format!("not a JSON document: {e}")))?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some("pcieperf.results/1") => {
            return Err(InvalidInput::new(format!(
                "results schema 'pcieperf.results/1' was written by an older pcieperf (its link conditions had another shape): \
                 this pcieperf reads '{SCHEMA}'; measure again or use the pcieperf that wrote it"
            )))
        }
        Some(other) => return Err(InvalidInput::new(format!("unsupported results schema '{other}': this pcieperf reads '{SCHEMA}'"))),
        None => return Err(InvalidInput::new(format!("not a pcieperf results document: no \"schema\": \"{SCHEMA}\""))),
    }
    serde_json::from_value(value).map_err(|e| InvalidInput::new(format!("malformed {SCHEMA} document: {e}")))
}

/// Read a document from a file.
pub fn read(path: &Path) -> anyhow::Result<Results> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(|e| anyhow::Error::new(InvalidInput::new(format!("{e:#}"))))?;
    from_str(&text).with_context(|| path.display().to_string())
}

/// Write `text` to `path` atomically: a temporary file in the same directory, flushed to disk,
/// then renamed over the target. A reader sees the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().with_context(|| format!("{} is not a file name", path.display()))?;
    let temp: PathBuf = dir.join(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

/// Write the document to `path` atomically.
pub fn write(path: &Path, results: &Results) -> anyhow::Result<()> {
    write_atomic(path, &to_string(results))
}
