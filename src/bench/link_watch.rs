//! The link along the target's path to the root port, watched while the run measures: one
//! sample when the measurement starts, one every interval (~100 ms) from a thread while it
//! runs, one when it ends. A GPU trains its link down to 2.5 GT/s when idle and back up under
//! load, so a sample taken only before the run describes the idle link, not the one the bytes
//! crossed: the run's ceiling is computed for the state seen during the run ([`LinkPath::ceiling_hop`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::bench::nvml::{Gpu, GpuState};
use crate::model::{Conditions, Generation, Link};
use crate::pci::path_state::{self, HopState};

/// Default time between samples.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// The path at one moment: the device first, then each bridge up to the root port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathSample {
    /// Since the measurement started, in ms.
    pub at_ms: f64,
    pub hops: Vec<HopState>,
    /// NVML's view of the GPU at the same moment, for a GPU target NVML knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuState>,
}

impl PathSample {
    /// The hop that limits the path in this sample.
    pub fn narrowest(&self) -> Option<&HopState> {
        path_state::narrowest(&self.hops)
    }
}

/// The rate of a sample's narrowest hop in Mb/s (0 without a hop).
pub fn narrowest_mbits(sample: &PathSample) -> u32 {
    sample.narrowest().map_or(0, HopState::mbits)
}

/// Which state of the path the run's ceiling is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CeilingFrom {
    /// The narrowest hop at its fastest during the run.
    During,
    /// No sample fell inside the run (shorter than the first interval): the state read before.
    Before,
}

/// The path around and during a run (`conditions.link_path`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkPath {
    pub device: String,
    pub interval_ms: f64,
    pub before: Option<PathSample>,
    pub during: Vec<PathSample>,
    pub after: Option<PathSample>,
    pub ceiling_from: CeilingFrom,
}

impl LinkPath {
    /// The hop the run's ceiling is for: of each sample during the run its narrowest hop, and of
    /// those the fastest — a link that trains up under load is judged at the state it reached, so
    /// a figure is never called "near the ceiling" of a link slower than the one it crossed; a
    /// path that changed during the run is named by the findings. Without a sample during the
    /// run, the narrowest hop before it.
    pub fn ceiling_hop(&self) -> Option<&HopState> {
        self.ceiling_sample().and_then(PathSample::narrowest)
    }

    /// The sample [`LinkPath::ceiling_hop`] comes from (the first of equals).
    pub fn ceiling_sample(&self) -> Option<&PathSample> {
        match self.ceiling_from {
            CeilingFrom::During => self
                .during
                .iter()
                .filter(|s| s.narrowest().is_some())
                .fold(None, |best: Option<&PathSample>, s| match best {
                    Some(b) if narrowest_mbits(b) >= narrowest_mbits(s) => Some(b),
                    _ => Some(s),
                }),
            CeilingFrom::Before => self.before.as_ref(),
        }
    }

    /// `conditions` with the trained link replaced by the ceiling hop's, saying so in `source`;
    /// unchanged when the hop's link is unknown or the same.
    pub fn apply(&self, mut conditions: Conditions) -> Conditions {
        let Some(hop) = self.ceiling_hop() else { return conditions };
        let Some(link) = hop.speed_gts.and_then(Generation::from_gts).zip(hop.width).and_then(|(g, w)| Link::new(g, u32::from(w)).ok()) else {
            return conditions;
        };
        let when = match self.ceiling_from {
            CeilingFrom::During => format!("as sampled during the run ({} sample(s))", self.during.len()),
            CeilingFrom::Before => "as sampled before the run (no sample fell inside it)".to_string(),
        };
        if link != conditions.params.link {
            conditions.source = format!("{}; trained link {link} at {} {when}, not {} as read first", conditions.source, hop.bdf, conditions.params.link);
            conditions.params.link = link;
        } else {
            conditions.source = format!("{}; trained link {link} at {} {when}", conditions.source, hop.bdf);
        }
        conditions
    }
}

/// A running watch; [`Watch::finish`] stops it.
pub struct Watch {
    sys_root: PathBuf,
    device: String,
    interval: Duration,
    started: Instant,
    before: Option<PathSample>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<PathSample>>>,
    gpu: Option<Arc<Gpu>>,
}

fn sample(sys_root: &Path, device: &str, started: Instant, gpu: Option<&Gpu>) -> Option<PathSample> {
    let hops = path_state::read(sys_root, device)?;
    Some(PathSample { at_ms: started.elapsed().as_secs_f64() * 1e3, hops, gpu: gpu.map(Gpu::state) })
}

/// Start watching the path of PCI `device` under `sys_root` (with NVML's view of it when `gpu`
/// is given): the first sample now, then one every `interval` from a thread.
pub fn start(sys_root: &Path, device: &str, interval: Duration, gpu: Option<Arc<Gpu>>) -> Watch {
    let started = Instant::now();
    let before = sample(sys_root, device, started, gpu.as_deref());
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (sys_root, device, stop, gpu) = (sys_root.to_path_buf(), device.to_string(), stop.clone(), gpu.clone());
        std::thread::Builder::new()
            .name("pcieperf-link-watch".into())
            .spawn(move || {
                let mut samples = Vec::new();
                let mut next = started + interval;
                loop {
                    // Parked until the next sample is due; `finish` unparks it at once.
                    while let Some(wait) = next.checked_duration_since(Instant::now()).filter(|w| !w.is_zero()) {
                        if stop.load(Ordering::SeqCst) {
                            return samples;
                        }
                        std::thread::park_timeout(wait);
                    }
                    if stop.load(Ordering::SeqCst) {
                        return samples;
                    }
                    samples.extend(sample(&sys_root, &device, started, gpu.as_deref()));
                    next += interval;
                }
            })
            .ok()
    };
    Watch { sys_root: sys_root.to_path_buf(), device: device.to_string(), interval, started, before, stop, thread, gpu }
}

impl Watch {
    /// Stop the thread, take the last sample and say which state the ceiling is for.
    pub fn finish(mut self) -> LinkPath {
        self.stop.store(true, Ordering::SeqCst);
        let during = match self.thread.take() {
            Some(thread) => {
                thread.thread().unpark();
                thread.join().unwrap_or_default()
            }
            None => Vec::new(),
        };
        let after = sample(&self.sys_root, &self.device, self.started, self.gpu.as_deref());
        let ceiling_from = if during.iter().any(|s| s.narrowest().is_some()) { CeilingFrom::During } else { CeilingFrom::Before };
        LinkPath { device: self.device.clone(), interval_ms: self.interval.as_secs_f64() * 1e3, before: self.before.take(), during, after, ceiling_from }
    }

    /// NVML's view of the GPU, when the watch has one.
    pub fn gpu(&self) -> Option<&Gpu> {
        self.gpu.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_hop(dir: &Path, speed: &str, width: u8, max_speed: &str, max_width: u8) {
        std::fs::create_dir_all(dir).unwrap();
        for (file, value) in [("current_link_speed", speed.to_string()), ("current_link_width", width.to_string()), ("max_link_speed", max_speed.into()), ("max_link_width", max_width.to_string())] {
            std::fs::write(dir.join(file), value).unwrap();
        }
    }

    /// A GPU (idle at 2.5 GT/s) below a Gen4 x16 root port.
    fn gpu_tree() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let port = root.path().join("devices/pci0000:00/0000:00:01.0");
        let gpu = port.join("0000:01:00.0");
        write_hop(&port, "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
        write_hop(&gpu, "2.5 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
        std::fs::create_dir_all(root.path().join("bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(&gpu, root.path().join("bus/pci/devices/0000:01:00.0")).unwrap();
        (root, gpu)
    }

    #[test]
    fn samples_while_running_and_the_ceiling_follows_the_state_seen_then() {
        let (root, gpu) = gpu_tree();
        let watch = start(root.path(), "0000:01:00.0", Duration::from_millis(5), None);
        // Under load the GPU trains up; the watch must see it between its first and last sample.
        // Each value is renamed into place: sysfs never shows an attribute half written.
        let set_speed = |speed: &str| {
            std::fs::write(gpu.join("speed.new"), speed).unwrap();
            std::fs::rename(gpu.join("speed.new"), gpu.join("current_link_speed")).unwrap();
        };
        set_speed("16.0 GT/s PCIe");
        std::thread::sleep(Duration::from_millis(60));
        set_speed("2.5 GT/s PCIe");
        let path = watch.finish();
        assert_eq!(path.before.as_ref().unwrap().hops[0].speed_gts, Some(2.5));
        assert_eq!(path.after.as_ref().unwrap().hops[0].speed_gts, Some(2.5));
        assert!(!path.during.is_empty(), "no sample in 60 ms at a 5 ms interval");
        assert!(path.during.iter().any(|s| s.hops[0].speed_gts == Some(16.0)), "{:?}", path.during);
        assert_eq!(path.ceiling_from, CeilingFrom::During);
        let hop = path.ceiling_hop().unwrap();
        assert_eq!((hop.speed_gts, hop.width), (Some(16.0), Some(16)));
        let conditions = Conditions {
            params: crate::model::LinkParams::typical("gen1x16".parse().unwrap()),
            capable: Some("gen4x16".parse().unwrap()),
            source: "PCI 0000:01:00.0".into(),
            assumed: vec![],
            credits: None,
        };
        let applied = path.apply(conditions);
        assert_eq!(applied.params.link, "gen4x16".parse().unwrap());
        assert!(applied.source.contains("as sampled during the run") && applied.source.contains("not Gen1 x16"), "{}", applied.source);
    }

    #[test]
    fn a_run_shorter_than_the_interval_falls_back_to_the_state_before_and_says_so() {
        let (root, _gpu) = gpu_tree();
        let started = Instant::now();
        let path = start(root.path(), "0000:01:00.0", Duration::from_secs(10), None).finish();
        assert!(started.elapsed() < Duration::from_secs(1), "finish waited for the interval");
        assert!(path.during.is_empty());
        assert_eq!(path.ceiling_from, CeilingFrom::Before);
        assert_eq!(path.ceiling_hop().unwrap().speed_gts, Some(2.5));
        let applied = path.apply(Conditions {
            params: crate::model::LinkParams::typical("gen1x16".parse().unwrap()),
            capable: None,
            source: "s".into(),
            assumed: vec![],
            credits: None,
        });
        assert!(applied.source.contains("before the run (no sample fell inside it)"), "{}", applied.source);
    }
}
