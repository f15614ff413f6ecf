//! The engines' own flags on the command line: one `--NAME VALUE` for every [`EngineFlag`] in
//! the engine table, checked by the engine's own parser when the command line is read. A new
//! engine with flags is one file plus one line in the table; this file never names an engine.
//!
//! [`EngineFlag`]: crate::engine::EngineFlag

use std::collections::BTreeMap;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use crate::engine::registry::ENGINES;

/// The values given for engine flags, by flag name.
#[derive(Debug, Clone, Default)]
pub struct EngineFlags(pub BTreeMap<&'static str, String>);

impl FromArgMatches for EngineFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = EngineFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for flag in ENGINES.iter().flat_map(|e| e.flags) {
            if let Ok(Some(value)) = matches.try_get_one::<String>(flag.name) {
                self.0.insert(flag.name, value.clone());
            }
        }
        Ok(())
    }
}

impl Args for EngineFlags {
    fn augment_args(command: Command) -> Command {
        ENGINES.iter().flat_map(|e| e.flags).fold(command, |command, flag| {
            let check = flag.check;
            command.arg(
                Arg::new(flag.name)
                    .long(flag.name)
                    .value_name(flag.value_name)
                    .help(flag.help)
                    .value_parser(move |text: &str| check(text).map(|()| text.to_string())),
            )
        })
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}
