//! What `pcieperf serve` answers a scrape with: link health read fresh from sysfs on every scrape
//! (a link that retrained or an AER counter that moved shows at once), and the newest results
//! document per target from a directory of runs. Encoded by the `prometheus-client` crate
//! (OpenMetrics text); the families are the ones `--metrics` files hold (docs/metrics.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::bench::results::Results;
use crate::pci::{self, InspectOptions, Source};

use super::metrics::{self, Family, Kind, Sample};

/// Where a scrape reads from.
#[derive(Debug, Clone)]
pub struct Sources {
    pub sysfs_root: PathBuf,
    pub pci_ids: Option<PathBuf>,
    /// A directory of results documents (`*.json`), when given.
    pub results_dir: Option<PathBuf>,
}

/// The newest readable results document per target in `dir`, and how many files could not be
/// read as results.
fn newest_results(dir: &Path) -> (Vec<(Results, SystemTime)>, usize) {
    let mut newest: BTreeMap<String, (Results, SystemTime)> = BTreeMap::new();
    let mut unreadable = 0;
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    for path in entries.map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")) {
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
        match super::json::read(&path) {
            Ok(results) => {
                let target = results.conditions.target.clone();
                if newest.get(&target).is_none_or(|(_, seen)| *seen < modified) {
                    newest.insert(target, (results, modified));
                }
            }
            Err(_) => unreadable += 1,
        }
    }
    (newest.into_values().collect(), unreadable)
}

/// Every family of one scrape.
pub fn families(sources: &Sources) -> anyhow::Result<Vec<Family>> {
    let options = InspectOptions { source: Source::Sysfs(sources.sysfs_root.clone()), pci_ids: sources.pci_ids.clone(), ..InspectOptions::default() };
    let inspection = pci::inspect(&options)?;
    let mut families = metrics::inspection_families(&inspection, SystemTime::now());
    if let Some(dir) = &sources.results_dir {
        let (runs, unreadable) = newest_results(dir);
        // Families of several runs merge by name: one HELP/TYPE, the samples of every target.
        for (results, written) in &runs {
            for family in metrics::run_families(results, *written) {
                match families.iter_mut().find(|f| f.name == family.name) {
                    Some(existing) => existing.samples.extend(family.samples),
                    None => families.push(family),
                }
            }
        }
        let labels = vec![("dir", dir.display().to_string())];
        families.push(Family {
            name: "pcieperf_exporter_unreadable_results_files",
            kind: Kind::Gauge,
            help: "Files ending in .json in the results directory that are not results documents.",
            samples: vec![Sample { labels, value: unreadable as f64 }],
        });
    }
    Ok(families)
}

/// One scrape's answer body (OpenMetrics text).
pub fn scrape(sources: &Sources) -> anyhow::Result<String> {
    Ok(metrics::openmetrics(families(sources)?)?)
}
