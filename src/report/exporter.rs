//! What `pcieperf serve` answers a scrape with: link health read fresh from sysfs on every scrape
//! (a link that retrained or an AER counter that moved shows at once), and the newest results
//! document per target from a directory of runs. Encoded by the `prometheus-client` crate
//! (OpenMetrics text); the families are the ones `--metrics` files hold (docs/metrics.md).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use crate::pci::{self, InspectOptions, Source};

use super::dir_watch::{Changes, DirWatch};
use super::metrics::{self, Family, Kind, Sample};

/// Where a scrape reads from.
#[derive(Debug, Clone)]
pub struct Sources {
    pub sysfs_root: PathBuf,
    pub pci_ids: Option<PathBuf>,
    /// A directory of results documents (`*.json`), when given.
    pub results_dir: Option<PathBuf>,
}

/// A file of the results directory that is not a readable results document, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub path: PathBuf,
    pub reason: String,
}

/// What one results file gave when it was last read, and the file's identity then: a file is
/// parsed again only when its size, modification time or inode changed.
#[derive(Debug, Clone)]
struct Indexed {
    identity: (u64, u64, SystemTime),
    /// The run's target and families, or why the file is not a results document.
    read: Result<(String, Vec<Family>), String>,
}

/// The whole directory is listed and every file stat'ed at least this often, even with a
/// watch: inotify does not see changes made by another host on a network filesystem, nor to
/// the target of a symbolic link.
pub const FULL_SCAN_EVERY: Duration = Duration::from_secs(60);

/// The results directory as last read: one entry per `*.json` file. Between full scans it
/// follows the directory through an inotify watch, so a scrape stats only the files that
/// changed and costs the same with 1 or 3,000 stored runs.
#[derive(Debug, Default)]
pub struct ResultsIndex {
    /// By file name.
    files: HashMap<OsString, Indexed>,
    watch: Option<DirWatch>,
    last_full_scan: Option<Instant>,
    /// The newest readable file per target and the unreadable files, by name; `None` after a
    /// change, so a scrape with nothing changed does not walk the index either.
    answer: Option<(Vec<OsString>, Vec<OsString>)>,
    /// Files parsed so far (what the index saves shows in tests).
    pub parses: u64,
    /// Files stat'ed so far (what the watch saves shows in tests).
    pub stats: u64,
}

impl ResultsIndex {
    /// Bring the index up to date with `dir`: new and changed files read, vanished ones dropped.
    fn refresh(&mut self, dir: &Path) {
        let scan_due = self.last_full_scan.is_none_or(|at| at.elapsed() >= FULL_SCAN_EVERY);
        match self.watch.as_mut().map(DirWatch::changes) {
            Some(Changes::Names(names)) if !scan_due => {
                for name in names {
                    self.update(dir, name);
                }
            }
            // No watch yet, a lost one, or a full scan due: a fresh watch first, so that what
            // changes while the directory is listed is seen on the next scrape.
            _ => {
                self.watch = DirWatch::new(dir);
                self.full_scan(dir);
            }
        }
    }

    fn full_scan(&mut self, dir: &Path) {
        let mut seen = HashSet::new();
        for name in std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.file_name()) {
            if is_results_name(&name) {
                seen.insert(name.clone());
                self.update(dir, name);
            }
        }
        let before = self.files.len();
        self.files.retain(|name, _| seen.contains(name));
        if self.files.len() != before {
            self.answer = None;
        }
        self.last_full_scan = Some(Instant::now());
    }

    /// Read the file `name` again if it is new or changed; forget it if it is gone.
    fn update(&mut self, dir: &Path, name: OsString) {
        if !is_results_name(&name) {
            return;
        }
        self.stats += 1;
        let path = dir.join(&name);
        let Ok(meta) = std::fs::metadata(&path) else {
            if self.files.remove(&name).is_some() {
                self.answer = None;
            }
            return;
        };
        let identity = (meta.ino(), meta.len(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH));
        if self.files.get(&name).is_some_and(|f| f.identity == identity) {
            return;
        }
        self.parses += 1;
        let read = super::json::read(&path)
            .map(|results| (results.conditions.target.clone(), metrics::run_families(&results, identity.2)))
            .map_err(|e| format!("{e:#}"));
        self.files.insert(name, Indexed { identity, read });
        self.answer = None;
    }

    /// The families of the newest readable run per target, and the files that are not runs.
    fn newest(&mut self, dir: &Path) -> (Vec<&[Family]>, Vec<Unreadable>) {
        let files = &self.files;
        let (newest, unreadable) = self.answer.get_or_insert_with(|| {
            let mut newest: BTreeMap<&str, (SystemTime, &OsString)> = BTreeMap::new();
            let mut unreadable = Vec::new();
            for (name, file) in files {
                match &file.read {
                    Ok((target, _)) => {
                        if newest.get(target.as_str()).is_none_or(|(seen, _)| *seen < file.identity.2) {
                            newest.insert(target, (file.identity.2, name));
                        }
                    }
                    Err(_) => unreadable.push(name.clone()),
                }
            }
            unreadable.sort();
            (newest.into_values().map(|(_, name)| name.clone()).collect(), unreadable)
        });
        let runs = newest.iter().filter_map(|name| files[name].read.as_ref().ok()).map(|(_, families)| families.as_slice()).collect();
        let unreadable = unreadable
            .iter()
            .filter_map(|name| Some(Unreadable { path: dir.join(name), reason: files[name].read.as_ref().err()?.clone() }))
            .collect();
        (runs, unreadable)
    }
}

/// Results documents are the directory's `*.json` files.
fn is_results_name(name: &OsStr) -> bool {
    Path::new(name).extension().is_some_and(|x| x == "json")
}

/// One scrape read: its families, and the results files it could not read.
#[derive(Debug)]
pub struct Scrape {
    pub families: Vec<Family>,
    pub unreadable: Vec<Unreadable>,
}

/// Read every family of one scrape, the results directory through `index`.
pub fn read(sources: &Sources, index: &mut ResultsIndex) -> anyhow::Result<Scrape> {
    let options = InspectOptions { source: Source::Sysfs(sources.sysfs_root.clone()), pci_ids: sources.pci_ids.clone(), ..InspectOptions::default() };
    let inspection = pci::inspect(&options)?;
    let mut families = metrics::inspection_families(&inspection, SystemTime::now());
    let mut unreadable = Vec::new();
    if let Some(dir) = &sources.results_dir {
        index.refresh(dir);
        let runs;
        (runs, unreadable) = index.newest(dir);
        // Families of several runs merge by name: one HELP/TYPE, the samples of every target.
        for run in runs {
            for family in run {
                match families.iter_mut().find(|f| f.name == family.name) {
                    Some(existing) => existing.samples.extend(family.samples.iter().cloned()),
                    None => families.push(family.clone()),
                }
            }
        }
        let labels = vec![("dir", dir.display().to_string())];
        families.push(Family {
            name: "pcieperf_exporter_unreadable_results_files",
            kind: Kind::Gauge,
            help: "Files ending in .json in the results directory that are not results documents.",
            samples: vec![Sample { labels, value: unreadable.len() as f64 }],
        });
    }
    Ok(Scrape { families, unreadable })
}

/// Every family of one scrape.
pub fn families(sources: &Sources) -> anyhow::Result<Vec<Family>> {
    Ok(read(sources, &mut ResultsIndex::default())?.families)
}

/// One scrape's answer body (OpenMetrics text).
pub fn scrape(sources: &Sources) -> anyhow::Result<String> {
    Ok(metrics::openmetrics(families(sources)?)?)
}

/// A scrape result read at most this long ago answers a new request without reading again.
pub const REUSE_WITHIN: Duration = Duration::from_millis(100);

/// One scrape's answer as served: its body in both exposition formats (a scraper picks one by
/// its `Accept` header), or the error's one-line description. Shared by every request that
/// coalesced on it.
pub type Answer = Result<Arc<Bodies>, Arc<str>>;

/// One scrape, encoded once per format.
#[derive(Debug)]
pub struct Bodies {
    pub text: Arc<[u8]>,
    pub openmetrics: Arc<[u8]>,
}

impl Bodies {
    pub fn get(&self, format: metrics::Exposition) -> Arc<[u8]> {
        match format {
            metrics::Exposition::Text => self.text.clone(),
            metrics::Exposition::OpenMetrics => self.openmetrics.clone(),
        }
    }
}

/// The scrapes of `pcieperf serve`. Scrapes are expensive (a sysfs walk), so concurrent
/// requests share them: one that arrives while a scrape is being read waits for that scrape,
/// and one that arrives within [`REUSE_WITHIN`] of a scrape's start gets that scrape.
/// Unreadable results files are named on standard error once each (again only after they were
/// readable or gone in between), not on every scrape.
pub struct Exporter {
    sources: Sources,
    shared: Mutex<Latest>,
    finished: Condvar,
    named_unreadable: Mutex<BTreeSet<PathBuf>>,
    /// Only one scrape reads at a time (the others share its answer), so one index serves all.
    index: Mutex<ResultsIndex>,
    /// Scrapes read so far (what sharing saves shows in tests).
    reads: AtomicU64,
}

#[derive(Default)]
struct Latest {
    /// The last scrape's start and answer.
    answer: Option<(Instant, Answer)>,
    reading: bool,
    /// Scrapes finished so far: a waiter knows its scrape is done when this moves.
    finished_count: u64,
}

impl Exporter {
    pub fn new(sources: Sources) -> Exporter {
        Exporter { sources, shared: Mutex::default(), finished: Condvar::new(), named_unreadable: Mutex::default(), index: Mutex::default(), reads: AtomicU64::new(0) }
    }

    /// The answer to one scrape request: shared, fresh or read now.
    pub fn answer(&self) -> Answer {
        let mut latest = lock(&self.shared);
        if latest.reading {
            // Arrived while a scrape is being read: that scrape is the answer.
            let awaited = latest.finished_count + 1;
            while latest.finished_count < awaited {
                latest = self.finished.wait(latest).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if let Some((_, answer)) = &latest.answer {
                return answer.clone();
            }
        }
        if let Some((started, answer)) = &latest.answer {
            if started.elapsed() <= REUSE_WITHIN {
                return answer.clone();
            }
        }
        latest.reading = true;
        drop(latest);
        let started = Instant::now();
        // A panic in a scrape must not leave the waiters waiting for ever.
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.read_now())).unwrap_or_else(|_| Err(Arc::from("the scrape failed unexpectedly")));
        let mut latest = lock(&self.shared);
        latest.answer = Some((started, answer.clone()));
        latest.reading = false;
        latest.finished_count += 1;
        self.finished.notify_all();
        answer
    }

    fn read_now(&self) -> Answer {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let scrape = read(&self.sources, &mut lock(&self.index)).map_err(|e| Arc::<str>::from(format!("{e:#}")))?;
        self.name_unreadable(&scrape.unreadable);
        let text = metrics::text(&scrape.families);
        let openmetrics = metrics::openmetrics(scrape.families).map_err(|e| Arc::<str>::from(format!("encoding the metrics: {e}")))?;
        Ok(Arc::new(Bodies { text: Arc::from(text.into_bytes()), openmetrics: Arc::from(openmetrics.into_bytes()) }))
    }

    /// Name on standard error each unreadable file not named since it last became unreadable.
    fn name_unreadable(&self, unreadable: &[Unreadable]) {
        let mut named = lock(&self.named_unreadable);
        for file in unreadable.iter().filter(|f| !named.contains(&f.path)) {
            log(&format!("pcieperf: warning: {}: not a readable results document, left out of the metrics: {}", file.path.display(), file.reason));
        }
        *named = unreadable.iter().map(|f| f.path.clone()).collect();
    }
}

/// A lock whose holder panicked is still usable: the data it guards is replaced whole.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_sysfs() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("bus/pci/devices")).unwrap();
        root
    }

    /// A results document of a short simulated run, written to `path`.
    fn write_run(path: &Path, target: &str) {
        let mut engine = crate::engine::registry::open(target, &crate::engine::OpenOptions::default()).unwrap();
        let mut options = crate::bench::dma::DmaOptions::new(vec![crate::bench::results::Mode::D2h], vec![4096]);
        options.duration = Duration::from_millis(5);
        let results = crate::bench::dma::measure(engine.as_mut(), &options, &std::sync::atomic::AtomicBool::new(false), &mut crate::bench::dma::Quiet).unwrap();
        std::fs::write(path, crate::report::json::to_string(&results)).unwrap();
    }

    #[test]
    fn the_results_index_parses_a_file_once_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        write_run(&dir.path().join("a.json"), "sim:doc001");
        write_run(&dir.path().join("b.json"), "sim:gen3x8");
        std::fs::write(dir.path().join("broken.json"), "{").unwrap();
        let mut index = ResultsIndex::default();
        for _ in 0..5 {
            index.refresh(dir.path());
        }
        assert_eq!(index.parses, 3, "three files, each parsed once over five scrapes");
        let (runs, unreadable) = index.newest(dir.path());
        assert_eq!((runs.len(), unreadable.len()), (2, 1));
        // A rewritten file is read again; a removed one leaves the answer.
        write_run(&dir.path().join("a.json"), "sim:gen4x16");
        std::fs::remove_file(dir.path().join("broken.json")).unwrap();
        index.refresh(dir.path());
        assert_eq!(index.parses, 4);
        let (runs, unreadable) = index.newest(dir.path());
        assert_eq!((runs.len(), unreadable.len()), (2, 0));
        let targets: BTreeSet<String> = runs.iter().flat_map(|families| families[0].samples[0].labels.iter().filter(|(k, _)| *k == "target").map(|(_, v)| v.clone())).collect();
        assert_eq!(targets, BTreeSet::from(["sim:gen3x8".to_string(), "sim:gen4x16".to_string()]));
    }

    fn targets(index: &mut ResultsIndex, dir: &Path) -> BTreeSet<String> {
        let (runs, _) = index.newest(dir);
        runs.iter().flat_map(|families| families[0].samples[0].labels.iter().filter(|(k, _)| *k == "target").map(|(_, v)| v.clone())).collect()
    }

    #[test]
    fn with_a_watch_a_scrape_stats_only_the_files_that_changed() {
        let dir = tempfile::tempdir().unwrap();
        write_run(&dir.path().join("a.json"), "sim:doc001");
        for i in 0..20 {
            std::fs::copy(dir.path().join("a.json"), dir.path().join(format!("run{i}.json"))).unwrap();
        }
        let mut index = ResultsIndex::default();
        index.refresh(dir.path());
        if index.watch.is_none() {
            println!("skipped: inotify is unavailable here");
            return;
        }
        assert_eq!((index.stats, index.parses), (21, 21));
        for _ in 0..5 {
            index.refresh(dir.path());
        }
        assert_eq!(index.stats, 21, "nothing changed: no file stat'ed");
        // Rewritten in place (the directory does not change), written atomically, removed.
        write_run(&dir.path().join("a.json"), "sim:gen4x16");
        write_run(&dir.path().join("b.tmp"), "sim:gen3x8");
        std::fs::rename(dir.path().join("b.tmp"), dir.path().join("b.json")).unwrap();
        for i in 0..20 {
            std::fs::remove_file(dir.path().join(format!("run{i}.json"))).unwrap();
        }
        index.refresh(dir.path());
        assert_eq!((index.stats, index.parses), (21 + 22, 21 + 2), "the changed files only, each once");
        assert_eq!(targets(&mut index, dir.path()), BTreeSet::from(["sim:gen3x8".to_string(), "sim:gen4x16".to_string()]));
    }

    #[test]
    fn without_a_watch_every_scrape_scans_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        write_run(&dir.path().join("a.json"), "sim:doc001");
        let mut index = ResultsIndex::default();
        index.refresh(dir.path());
        // As when inotify is unavailable, or another host wrote the file on a network filesystem.
        std::fs::write(dir.path().join("a.json"), "{").unwrap();
        index.watch = None;
        index.refresh(dir.path());
        let (runs, unreadable) = index.newest(dir.path());
        assert_eq!((runs.len(), unreadable.len()), (0, 1));
        assert_eq!(index.parses, 2);
    }

    #[test]
    fn concurrent_requests_share_one_scrape_and_a_later_one_reads_again() {
        let root = empty_sysfs();
        let sources = Sources { sysfs_root: root.path().to_path_buf(), pci_ids: Some("/nonexistent".into()), results_dir: None };
        let exporter = Exporter::new(sources);
        let start = std::sync::Barrier::new(8);
        let answers: Vec<Answer> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..8).map(|_| scope.spawn(|| {
                start.wait();
                exporter.answer()
            })).collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let bodies = answers[0].clone().unwrap();
        assert!(String::from_utf8_lossy(&bodies.openmetrics).ends_with("# EOF\n"));
        assert!(!String::from_utf8_lossy(&bodies.text).contains("# EOF"));
        assert!(answers.iter().all(|a| a.is_ok()), "{answers:?}");
        let shared_reads = exporter.reads.load(Ordering::Relaxed);
        // Eight at once: one read, a second at most when a thread came after the reuse window.
        assert!(shared_reads <= 2, "8 concurrent requests read {shared_reads} times");
        std::thread::sleep(REUSE_WITHIN + Duration::from_millis(50));
        exporter.answer().unwrap();
        assert_eq!(exporter.reads.load(Ordering::Relaxed), shared_reads + 1, "a request after the reuse window must read again");
    }
}

/// One line on standard error that never ends the exporter: `eprintln!` panics when standard
/// error is a pipe whose reader went away (a log collector restarted), and a service outlives
/// its log reader.
pub fn log(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
