//! The engine table: every engine this build knows, in one place, as fio's ioengine list.
//!
//! A new engine is one file with an [`EngineEntry`] plus one line in [`ENGINES`]: opening a
//! target, `--help`, the message for an unknown target and detection all read this table. Its
//! order is the order of preference when `pcieperf run` chooses a target itself.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use super::{bar, block, cosim, cuda, fault, sim, stream, vfio, xdma, Candidate, Engine, EngineEntry, EngineError, OpenOptions, Opening, Roots};

/// Every engine, most preferred first for `run`'s own choice.
pub const ENGINES: &[EngineEntry] = &[
    xdma::ENTRY,
    stream::XILLYBUS_ENTRY,
    block::ENTRY,
    cuda::ENTRY,
    stream::CHARDEV_ENTRY,
    vfio::dma::ENTRY,
    bar::ENTRY,
    sim::ENTRY,
    cosim::ENTRY,
    fault::ENTRY,
];

/// Target used when no usable device is found.
pub const FALLBACK_TARGET: &str = "sim";

/// The entry named `name`.
pub fn entry(name: &str) -> Option<&'static EngineEntry> {
    ENGINES.iter().find(|e| e.name == name)
}

/// `NAME:ARGUMENT` for every engine, for messages.
pub fn target_help() -> String {
    ENGINES.iter().map(|e| format!("{}:{}", e.name, e.argument)).collect::<Vec<_>>().join(", ")
}

/// One line per engine with its argument, what it is and the flags it reads, for `--help`.
pub fn engines_help() -> String {
    ENGINES
        .iter()
        .map(|e| {
            let own = e.flags.iter().map(|f| format!("--{}", f.name));
            let read: Vec<String> = e.options.iter().map(|o| o.to_string()).chain(own).collect();
            let flags = if read.is_empty() { String::new() } else { format!(" [{}]", read.join(" ")) };
            format!("  {}:{} — {}{flags}", e.name, e.argument, e.about)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Open a target written `ENGINE[:ARGUMENT]`.
pub fn open(target: &str, options: &OpenOptions) -> Result<Box<dyn Engine>, EngineError> {
    let (name, argument) = target.split_once(':').unwrap_or((target, ""));
    match entry(name) {
        Some(engine) => (engine.open)(&Opening { target, argument, options, open }),
        None => Err(EngineError::UnknownTarget(target.to_string(), format!("no engine named '{name}'; known: {}", target_help()))),
    }
}

/// Targets found on this machine (device nodes of the engines that have hardware to find),
/// most preferred first.
pub fn detect() -> Vec<Candidate> {
    detect_in(Path::new("/dev"), Path::new("/sys"))
}

/// Targets under a given device and sysfs root, so tests can build a fake tree.
pub fn detect_in(dev: &Path, sys: &Path) -> Vec<Candidate> {
    let names: BTreeSet<String> = fs::read_dir(dev)
        .map(|entries| entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let roots = Roots { dev, sys, names: &names };
    ENGINES.iter().filter_map(|e| e.detect).flat_map(|detect| detect(&roots)).collect()
}

/// The target a command measures, and why: the one the user gave, else the first usable
/// candidate (never a destructive one: detection offers block devices read-only), else the
/// simulated endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub target: String,
    pub why: String,
}

/// Choose the target: the one place that decides.
pub fn choose(given: Option<&str>, candidates: &[Candidate]) -> Choice {
    if let Some(target) = given {
        return Choice { target: target.to_string(), why: "given with --target".into() };
    }
    match candidates.iter().find(|c| c.usable) {
        Some(c) => Choice { target: c.target.clone(), why: "the first usable device found on this machine".into() },
        None => Choice {
            target: FALLBACK_TARGET.into(),
            why: "no usable device found on this machine: using the simulated endpoint".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(target: &str, usable: bool) -> Candidate {
        Candidate { target: target.into(), kind: "block".into(), pci_address: None, usable, reason: String::new() }
    }

    #[test]
    fn choice_is_given_else_first_usable_else_sim() {
        assert_eq!(choose(Some("sim:doc001"), &[candidate("block:/dev/sda", true)]).target, "sim:doc001");
        assert_eq!(choose(None, &[]).target, "sim");
        assert_eq!(choose(None, &[candidate("block:/dev/sda", false)]).target, "sim");
        let both = [candidate("block:/dev/sda", false), candidate("xdma:/dev/xdma0", true)];
        assert_eq!(choose(None, &both).target, "xdma:/dev/xdma0");
    }

    #[test]
    fn engine_flags_are_named_once_and_check_what_they_parse() {
        let flags: Vec<&str> = ENGINES.iter().flat_map(|e| e.flags).map(|f| f.name).collect();
        assert_eq!(flags.iter().collect::<BTreeSet<_>>().len(), flags.len(), "{flags:?}");
        let xdma = entry("xdma").unwrap();
        let check = |name: &str, value: &str| (xdma.flags.iter().find(|f| f.name == name).unwrap().check)(value);
        assert!(check("card-addr", "0x8000_0000").is_ok() && check("card-addr", "zz").is_err());
        assert!(check("channels", "2").is_ok() && check("channels", "0").is_err());
        assert!(check("device-clock", "125e6").is_ok() && check("device-clock", "-1").is_err());
        let options = OpenOptions::default().with_flag("channels", "x");
        assert!(options.flag("channels", |t| t.parse::<u8>().map_err(|e| e.to_string())).unwrap_err().0.contains("--channels x"));
    }

    #[test]
    fn every_engine_is_named_once_and_unknown_names_list_them() {
        let names: BTreeSet<&str> = ENGINES.iter().map(|e| e.name).collect();
        assert_eq!(names.len(), ENGINES.len());
        let error = open("nosuch:x", &OpenOptions::default()).err().unwrap().to_string();
        for engine in ENGINES {
            assert!(error.contains(&format!("{}:", engine.name)), "{error}");
        }
    }
}
