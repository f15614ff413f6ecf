//! Closed sets of names users type (directions, header formats, verification kinds, …).
//!
//! Lower layers describe their choices with [`Named`]; only the command line turns them into
//! parsers (`cli::values`), so the model, engines and procedures stay free of clap.

/// A value chosen from a fixed list of names.
pub trait Named: Sized + Copy + Send + Sync + 'static {
    /// Every value, in the order help lists them.
    const ALL: &'static [Self];

    /// The name a user types and outputs print.
    fn name(self) -> &'static str;

    /// Other accepted spellings.
    fn aliases(self) -> &'static [&'static str] {
        &[]
    }

    /// The value a user's text names (case-insensitive), if any.
    fn from_name(text: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.name().eq_ignore_ascii_case(text) || v.aliases().iter().any(|a| a.eq_ignore_ascii_case(text)))
    }

    /// "a, b or c", for messages.
    fn choices() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}
