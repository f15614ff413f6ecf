//! Parsers for values users type (the lower layers' [`Named`] sets, sizes): the only place they meet clap.

use clap::builder::{PossibleValue, TypedValueParser};

use crate::named::Named;

/// A size as users type it (`4KiB`, `1MB`, `128`), for clap.
pub fn size(text: &str) -> Result<u64, String> {
    crate::units::parse_size(text).map_err(|e| e.0)
}

/// A clap value parser for any [`Named`] set, listing its names in help and errors.
#[derive(Clone)]
pub struct NamedParser<T>(std::marker::PhantomData<T>);

pub fn named<T: Named>() -> NamedParser<T> {
    NamedParser(std::marker::PhantomData)
}

impl<T: Named> TypedValueParser for NamedParser<T> {
    type Value = T;

    fn parse_ref(&self, cmd: &clap::Command, arg: Option<&clap::Arg>, value: &std::ffi::OsStr) -> Result<T, clap::Error> {
        let text = value.to_string_lossy();
        T::from_name(&text).ok_or_else(|| {
            let mut error = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
            use clap::error::{ContextKind, ContextValue};
            if let Some(arg) = arg {
                error.insert(ContextKind::InvalidArg, ContextValue::String(arg.to_string()));
            }
            error.insert(ContextKind::InvalidValue, ContextValue::String(text.into_owned()));
            error.insert(ContextKind::ValidValue, ContextValue::Strings(T::ALL.iter().map(|v| v.name().to_string()).collect()));
            error
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(T::ALL.iter().map(|v| PossibleValue::new(v.name()).aliases(v.aliases().iter().copied()))))
    }
}
