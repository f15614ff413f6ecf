//! Control characters (Unicode Cc: U+0000–U+001F, U+007F–U+009F) removed from the strings of a
//! JSON text as it streams by: a results file is data, and escape sequences in it must not reach
//! the terminal when a view prints them. Escaped (`\n`, `\u001b`) or raw (DEL, UTF-8 C1), whole
//! escapes and whole characters go, so the text stays valid JSON and UTF-8; structure is
//! untouched. The state (inside a string or not, an escape cut by a read) carries from one piece
//! to the next, so the result is the same however the input is cut.

use std::io::Read;

/// The scanner: whether the bytes so far end inside a string.
#[derive(Debug, Default, Clone, Copy)]
struct Scanner {
    in_string: bool,
}

impl Scanner {
    /// Append the kept bytes of `input` to `out`; returns how many bytes were consumed. Unless
    /// `at_end`, an escape or a two-byte character cut at the end of `input` is left for the
    /// next call.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>, at_end: bool) -> usize {
        let mut read = 0;
        while read < input.len() {
            let rest = &input[read..];
            let (span, keep) = match rest[0] {
                b'"' => {
                    self.in_string = !self.in_string;
                    (1, true)
                }
                b'\\' if self.in_string => {
                    let span = escape_span(rest);
                    if span > rest.len() && !at_end {
                        break;
                    }
                    (span.min(rest.len()), !escapes_control(rest))
                }
                0x7f if self.in_string => (1, false),
                0xc2 if self.in_string && rest.len() == 1 && !at_end => break,
                0xc2 if self.in_string && matches!(rest.get(1), Some(0x80..=0x9f)) => (2, false),
                _ => (1, true),
            };
            if keep {
                out.extend_from_slice(&rest[..span]);
            }
            read += span;
        }
        read
    }
}

/// Bytes an escape spans: 2, or 6 for `\uXXXX`.
fn escape_span(escape: &[u8]) -> usize {
    if escape.get(1) == Some(&b'u') {
        6
    } else {
        2
    }
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

/// A reader that yields its input without control characters in strings, piece by piece (wrap
/// it in a `BufReader` for byte-at-a-time parsers).
pub struct WithoutControlCharacters<R> {
    inner: R,
    scanner: Scanner,
    /// Input not yet scanned (at most an escape cut by the last read).
    raw: Vec<u8>,
    /// Scanned output not yet handed out, from `given`.
    out: Vec<u8>,
    given: usize,
    ended: bool,
}

/// Bytes read from the inner reader at a time.
const PIECE_BYTES: usize = 64 * 1024;

impl<R: Read> WithoutControlCharacters<R> {
    pub fn new(inner: R) -> Self {
        WithoutControlCharacters { inner, scanner: Scanner::default(), raw: Vec::with_capacity(PIECE_BYTES + 8), out: Vec::with_capacity(PIECE_BYTES + 8), given: 0, ended: false }
    }

    /// Scan the next piece of input into `out`; false at the end of the input.
    fn refill(&mut self) -> std::io::Result<bool> {
        self.out.clear();
        self.given = 0;
        while self.out.is_empty() && !self.ended {
            let kept = self.raw.len();
            self.raw.resize(kept + PIECE_BYTES, 0);
            let n = loop {
                match self.inner.read(&mut self.raw[kept..]) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    other => break other,
                }
            };
            let n = n.inspect_err(|_| self.raw.truncate(kept))?;
            self.raw.truncate(kept + n);
            self.ended = n == 0;
            let consumed = self.scanner.feed(&self.raw, &mut self.out, self.ended);
            self.raw.drain(..consumed);
        }
        Ok(!self.out.is_empty())
    }
}

impl<R: Read> Read for WithoutControlCharacters<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.given == self.out.len() && !self.refill()? {
            return Ok(0);
        }
        let n = buf.len().min(self.out.len() - self.given);
        buf[..n].copy_from_slice(&self.out[self.given..self.given + n]);
        self.given += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripped(text: &str) -> String {
        let mut out = Vec::new();
        Scanner::default().feed(text.as_bytes(), &mut out, true);
        String::from_utf8(out).unwrap()
    }

    /// The streaming reader, fed `piece` bytes per read.
    fn streamed(text: &str, piece: usize) -> String {
        struct Pieces<'a>(&'a [u8], usize);
        impl Read for Pieces<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut out = String::new();
        WithoutControlCharacters::new(Pieces(text.as_bytes(), piece)).read_to_string(&mut out).unwrap();
        out
    }

    const TEXT: &str = "{\"a\": \"x\\u001b[31my\\n\\t\\\"q\\\"\u{7f}\u{85}é\\u00e9\\ud83d\\ude00\", \"n\": [1, 2]}\n";
    const EXPECTED: &str = "{\"a\": \"x[31my\\\"q\\\"é\\u00e9\\ud83d\\ude00\", \"n\": [1, 2]}\n";

    #[test]
    fn control_characters_leave_strings_and_nothing_else() {
        assert_eq!(stripped(TEXT), EXPECTED);
        let value: serde_json::Value = serde_json::from_str(&stripped(TEXT)).unwrap();
        assert!(!value["a"].as_str().unwrap().chars().any(char::is_control));
    }

    #[test]
    fn however_the_input_is_cut_the_stream_strips_the_same() {
        for piece in 1..=TEXT.len() {
            assert_eq!(streamed(TEXT, piece), EXPECTED, "pieces of {piece} bytes");
        }
    }

    proptest::proptest! {
        /// Whatever the strings hold, the result parses to the same document with the control
        /// characters gone, whole or streamed in pieces.
        #[test]
        fn stripping_equals_removing_after_parsing(strings in proptest::collection::vec(proptest::prelude::any::<String>(), 0..4), piece in 1usize..9) {
            let text = serde_json::to_string(&strings).unwrap();
            let expected: Vec<String> = strings.iter().map(|s| s.chars().filter(|c| !c.is_control()).collect()).collect();
            let back: Vec<String> = serde_json::from_str(&stripped(&text)).unwrap();
            proptest::prop_assert_eq!(&back, &expected);
            let back: Vec<String> = serde_json::from_str(&streamed(&text, piece)).unwrap();
            proptest::prop_assert_eq!(back, expected);
        }
    }
}
