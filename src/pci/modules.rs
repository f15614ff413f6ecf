//! The kernel modules that can drive a device, as `lspci -k` names them on its
//! `Kernel modules:` line: the device's sysfs `modalias` matched against the `alias <glob>
//! <module>` lines of `modules.alias` in the running kernel's module directory.
//!
//! lspci asks libkmod, which looks the modalias up in `modules.alias.bin` (the same lines,
//! written by depmod) with `fnmatch(3)` globs and returns the matching modules in depmod's
//! module order, which is the text file's order. lspci then drops a name equal to the one
//! before it. Not read here (libkmod reads them too): `alias` lines in `/etc/modprobe.d` and
//! built-in modules' aliases (`modules.builtin.alias.bin`); on the common PCI drivers, which are
//! loadable modules, the answer is the same.

use std::path::{Path, PathBuf};

use crate::bounded::{self, Limit};

/// Overrides the module directory (for tests: a fake `modules.alias`).
pub const DIR_ENV: &str = "PCIEPERF_MODULES_DIR";

/// modules.alias: about 1.5 MB on a distribution kernel.
const MODULES_ALIAS: Limit = Limit { bytes: 64 << 20, what: "modules.alias file" };

/// `$PCIEPERF_MODULES_DIR`, else `/lib/modules/<running kernel's release>`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    Some(Path::new("/lib/modules").join(release.trim()))
}

/// The `alias` lines of one `modules.alias`, in file order.
#[derive(Debug, Clone, Default)]
pub struct Aliases {
    entries: Vec<(String, String)>,
}

impl Aliases {
    /// `<dir>/modules.alias`; the error says which file could not be read and why.
    pub fn load(dir: &Path) -> Result<Aliases, String> {
        let path = dir.join("modules.alias");
        let text = bounded::read_to_string(&path, MODULES_ALIAS).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Aliases::parse(&text))
    }

    /// Lines `alias PATTERN MODULE`; comments and other lines are skipped, as depmod's own
    /// readers skip them.
    pub fn parse(text: &str) -> Aliases {
        let entries = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                match (words.next(), words.next(), words.next()) {
                    (Some("alias"), Some(pattern), Some(module)) => Some((pattern.to_string(), module.to_string())),
                    _ => None,
                }
            })
            .collect();
        Aliases { entries }
    }

    /// The modules whose pattern matches `modalias`, each once, in file order.
    pub fn modules_for(&self, modalias: &str) -> Vec<String> {
        let mut modules: Vec<String> = Vec::new();
        for (pattern, module) in &self.entries {
            if glob_matches(pattern.as_bytes(), modalias.as_bytes()) && !modules.contains(module) {
                modules.push(module.clone());
            }
        }
        modules
    }
}

/// lspci's line: `Kernel modules: a, b` (without the leading tab), or None when nothing matched.
pub fn line(modules: &[String]) -> Option<String> {
    (!modules.is_empty()).then(|| format!("Kernel modules: {}", modules.join(", ")))
}

/// `fnmatch(pattern, text, 0)`: `*` any run (including `/`), `?` one byte, `[...]` a set with
/// ranges and `!`/`^` negation, `\` quoting the next byte; an unclosed `[` is a plain `[`.
pub fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    // One backtrack point suffices: a later `*` subsumes any earlier one's choices.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => match bracket(&pattern[p..], text[t]) {
                Some((matched, len)) => matched.then_some(len),
                None => (text[t] == b'[').then_some(1),
            },
            Some(b'\\') if p + 1 < pattern.len() => (pattern[p + 1] == text[t]).then_some(2),
            Some(&c) => (c == text[t]).then_some(1),
            None => None,
        };
        match (step, star) {
            (Some(len), _) => {
                p += len;
                t += 1;
            }
            (None, Some((star_p, star_t))) => {
                star = Some((star_p, star_t + 1));
                (p, t) = (star_p, star_t + 1);
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// A `[...]` set at the start of `pattern`: whether `c` is in it and the set's length, or None
/// when the set is not closed.
fn bracket(pattern: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(pattern.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let low = match pattern.get(i)? {
            b']' if !first => return Some((matched != negate, i + 1)),
            b'\\' => {
                i += 1;
                *pattern.get(i)?
            }
            &other => other,
        };
        first = false;
        i += 1;
        if pattern.get(i) == Some(&b'-') && pattern.get(i + 1).is_some_and(|&h| h != b']') {
            let high = if pattern[i + 1] == b'\\' { *pattern.get(i + 2)? } else { pattern[i + 1] };
            i += if pattern[i + 1] == b'\\' { 3 } else { 2 };
            matched |= (low..=high).contains(&c);
        } else {
            matched |= low == c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_fnmatch() {
        let m = |p: &str, t: &str| glob_matches(p.as_bytes(), t.as_bytes());
        assert!(m("pci:v00008086d*sv*sd*bc02sc00i*", "pci:v00008086d000010D3sv00008086sd0000A01Fbc02sc00i00"));
        assert!(!m("pci:v00008086d*sv*sd*bc03sc00i*", "pci:v00008086d000010D3sv00008086sd0000A01Fbc02sc00i00"));
        assert!(m("a?c", "abc") && !m("a?c", "ac"));
        assert!(m("*", "") && m("a*", "a") && !m("a", "ab") && !m("ab", "a"));
        assert!(m("*b*b", "abxbb") && !m("*b*b", "abxba"));
        assert!(m("[0-9A-F]x", "Cx") && !m("[0-9A-F]x", "cx"));
        assert!(m("[!0-9]", "a") && !m("[!0-9]", "5") && m("[^a]", "b"));
        assert!(m("[]]", "]") && m("[!]]", "a") && !m("[!]]", "]"));
        assert!(m("[a-]", "-") && m("[a-]", "a"));
        assert!(m("[ab", "[ab") && !m("[ab", "a"));
        assert!(m("a\\*", "a*") && !m("a\\*", "ab"));
        assert!(m("a*/b", "a/x/b"));
    }

    #[test]
    fn modules_once_each_in_file_order() {
        let aliases = Aliases::parse(
            "# Aliases extracted from modules themselves.\n\
             alias pci:v00008086d000010D3sv*sd*bc*sc*i* e1000e\n\
             alias pci:v00008086d*sv*sd*bc02sc00i* igb_like\n\
             alias pci:v00001AF4d*sv*sd*bc*sc*i* virtio_pci\n\
             alias pci:v0000808[0-9]d000010D?sv*sd*bc*sc*i* e1000e\n\
             alias usb:v*p* usbcore\n",
        );
        let id = "pci:v00008086d000010D3sv00008086sd0000A01Fbc02sc00i00";
        assert_eq!(aliases.modules_for(id), ["e1000e", "igb_like"]);
        assert_eq!(line(&aliases.modules_for(id)).unwrap(), "Kernel modules: e1000e, igb_like");
        assert!(aliases.modules_for("pci:v000010DEd00000001sv*").is_empty());
        assert_eq!(line(&[]), None);
    }
}
