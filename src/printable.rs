//! Text from outside (a target string, a pci.ids name, a file name) shown on a terminal: control
//! characters are written as escapes (`\x1b`, `\r`), so no input can move the cursor, recolour
//! the screen or hide a line. Newlines and tabs, which pcieperf's own output uses, stay.

use std::borrow::Cow;

/// `text` with every control character but `\n` and `\t` escaped.
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden_control) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\r' => shown.push_str("\\r"),
            c if is_hidden_control(c) => shown.push_str(&format!("\\x{:02x}", c as u32)),
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

/// `escaped` for text that must stay on one line: newlines and tabs escaped too.
pub fn one_line(text: &str) -> String {
    escaped(text).replace('\n', "\\n").replace('\t', "\\t")
}

fn is_hidden_control(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_obeyed() {
        assert_eq!(escaped("plain\ttext\n"), "plain\ttext\n");
        assert!(matches!(escaped("plain"), Cow::Borrowed(_)));
        assert_eq!(escaped("sim\u{1b}[31mred\r\u{7}\u{85}"), "sim\\x1b[31mred\\r\\x07\\x85");
        assert_eq!(one_line("a\nb\tc\u{1b}"), "a\\nb\\tc\\x1b");
    }
}
