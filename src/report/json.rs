//! The results document on disk: pretty JSON, written by the output rules, read back (within a
//! size limit) with its schema checked.

use std::path::Path;

use anyhow::Context;

use crate::bench::results::{Results, PREVIOUS_SCHEMA, SCHEMA};
use crate::error::InvalidInput;

/// The document as pretty JSON, ending in a newline; compact when pretty would pass the size
/// limit every reader applies ([`crate::bounded::RESULTS`]), and an error when even that does,
/// so pcieperf never writes a document it cannot read back.
pub fn to_string(results: &Results) -> Result<String, InvalidInput> {
    let limit = crate::bounded::RESULTS;
    let mut text = serde_json::to_string_pretty(results).expect("results serialise: plain data");
    if text.len() as u64 >= limit.bytes {
        text = serde_json::to_string(results).expect("results serialise: plain data");
    }
    if text.len() as u64 >= limit.bytes {
        return Err(InvalidInput::new(format!(
            "the results document would be {} bytes, over the {} limit of a {} that every reader applies: measure fewer points",
            text.len(),
            crate::units::format_size(limit.bytes),
            limit.what
        )));
    }
    text.push('\n');
    Ok(text)
}

/// The `schema` member of a JSON text, found without building the rest of the document.
pub fn schema_of(text: &str) -> Result<Option<String>, InvalidInput> {
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<serde_json::Value>,
    }
    let head: Head = serde_json::from_str(text).map_err(|e| InvalidInput::new(format!("not a JSON document: {e}")))?;
    Ok(head.schema.and_then(|s| s.as_str().map(str::to_string)))
}

/// Parse `text` straight into `T` (no intermediate JSON tree: memory is the typed values), and
/// name the member a type error is in.
pub fn typed<T: serde::de::DeserializeOwned>(text: &str, schema: &str) -> Result<T, InvalidInput> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        InvalidInput::new(format!("malformed {schema} document at `{path}`: {}", e.into_inner()))
    })
}

/// Parse a document, refusing other schemas with a clear message; a document of the previous
/// version is read and becomes one of this version.
pub fn from_str(text: &str) -> Result<Results, InvalidInput> {
    match schema_of(text)?.as_deref() {
        Some(SCHEMA | PREVIOUS_SCHEMA) => {}
        Some("pcieperf.results/1") => {
            return Err(InvalidInput::new(format!(
                "results schema 'pcieperf.results/1' was written by an older pcieperf (its link conditions had another shape): \
                 this pcieperf reads '{SCHEMA}'; measure again or use the pcieperf that wrote it"
            )))
        }
        Some(other) => return Err(InvalidInput::new(format!("unsupported results schema '{other}': this pcieperf reads '{SCHEMA}'"))),
        None => return Err(InvalidInput::new(format!("not a pcieperf results document: no \"schema\": \"{SCHEMA}\""))),
    }
    let mut results: Results = typed(text, SCHEMA)?;
    results.schema = SCHEMA.into();
    Ok(results)
}

/// Read a JSON text from a file (`-`: standard input) within the size limit of a results
/// document, with control characters removed from its strings: a results file is data, and
/// escape sequences in it must not reach the terminal when a view prints them.
pub fn read_text(path: &Path) -> Result<String, InvalidInput> {
    let mut bytes = crate::bounded::read(path, crate::bounded::RESULTS)?;
    strip_control_characters(&mut bytes);
    crate::bounded::into_text(path, bytes)
}

/// Remove control characters (Unicode Cc: U+0000–U+001F, U+007F–U+009F) from the strings of a
/// JSON text, in place: escaped (`\n`, `\u001b`) or raw (DEL, UTF-8 C1). Whole escapes and
/// whole characters go, so the text stays valid JSON and UTF-8; structure is untouched.
pub fn strip_control_characters(text: &mut Vec<u8>) {
    let (mut read, mut write, mut in_string) = (0, 0, false);
    while read < text.len() {
        let rest = &text[read..];
        let (span, keep) = match rest[0] {
            b'"' => {
                in_string = !in_string;
                (1, true)
            }
            b'\\' if in_string => (escape_span(rest), !escapes_control(rest)),
            0x7f if in_string => (1, false),
            0xc2 if in_string && matches!(rest.get(1), Some(0x80..=0x9f)) => (2, false),
            _ => (1, true),
        };
        if keep {
            text.copy_within(read..read + span, write);
            write += span;
        }
        read += span;
    }
    text.truncate(write);
}

/// Bytes an escape spans (2, or 6 for `\uXXXX`), clipped to the text.
fn escape_span(escape: &[u8]) -> usize {
    let span = if escape.get(1) == Some(&b'u') { 6 } else { 2 };
    span.min(escape.len())
}

/// Whether an escape encodes a control character.
fn escapes_control(escape: &[u8]) -> bool {
    match escape.get(1) {
        Some(b'b' | b'f' | b'n' | b'r' | b't') => true,
        Some(b'u') => escape
            .get(2..6)
            .and_then(|hex| u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok())
            .and_then(char::from_u32)
            .is_some_and(char::is_control),
        _ => false,
    }
}

/// Read a document from a file (`-`: standard input), within the size limit of a results
/// document.
pub fn read(path: &Path) -> anyhow::Result<Results> {
    let text = read_text(path)?;
    from_str(&text).with_context(|| path.display().to_string())
}

/// Write the document to `path` by the rules of [`super::output`].
pub fn write(path: &Path, results: &Results) -> anyhow::Result<()> {
    super::output::write(path, &to_string(results)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripped(text: &str) -> String {
        let mut bytes = text.as_bytes().to_vec();
        strip_control_characters(&mut bytes);
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn control_characters_leave_strings_and_nothing_else() {
        let text = "{\"a\": \"x\\u001b[31my\\n\\t\\\"q\\\"\u{7f}\u{85}é\\u00e9\\ud83d\\ude00\", \"n\": [1, 2]}\n";
        assert_eq!(stripped(text), "{\"a\": \"x[31my\\\"q\\\"é\\u00e9\\ud83d\\ude00\", \"n\": [1, 2]}\n");
        let value: serde_json::Value = serde_json::from_str(&stripped(text)).unwrap();
        assert!(!value["a"].as_str().unwrap().chars().any(char::is_control));
    }

    proptest::proptest! {
        /// Whatever the strings hold, the result parses to the same document with the control
        /// characters gone.
        #[test]
        fn stripping_equals_removing_after_parsing(strings in proptest::collection::vec(proptest::prelude::any::<String>(), 0..4)) {
            let text = serde_json::to_string(&strings).unwrap();
            let back: Vec<String> = serde_json::from_str(&stripped(&text)).unwrap();
            let expected: Vec<String> = strings.iter().map(|s| s.chars().filter(|c| !c.is_control()).collect()).collect();
            proptest::prop_assert_eq!(back, expected);
        }
    }
}
