//! The results document on disk: pretty JSON, written by the output rules, read back (within a
//! size limit) with its schema checked.

use std::path::Path;

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
    let mut value = value;
    strip_control_characters(&mut value);
    serde_json::from_value(value).map_err(|e| InvalidInput::new(format!("malformed {SCHEMA} document: {e}")))
}

/// Remove control characters from every string: a results file is data, and escape sequences
/// in it must not reach the terminal when a view prints them.
fn strip_control_characters(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) => text.retain(|c| !c.is_control()),
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_control_characters),
        serde_json::Value::Object(map) => map.values_mut().for_each(strip_control_characters),
        _ => {}
    }
}

/// Read a document from a file (`-`: standard input), within the size limit of a results
/// document.
pub fn read(path: &Path) -> anyhow::Result<Results> {
    let text = crate::bounded::read_to_string(path, crate::bounded::RESULTS)?;
    from_str(&text).with_context(|| path.display().to_string())
}

/// Write the document to `path` by the rules of [`super::output`].
pub fn write(path: &Path, results: &Results) -> anyhow::Result<()> {
    super::output::write(path, &to_string(results))
}
