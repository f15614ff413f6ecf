//! The device's path watched during a run, NVML's view of a GPU and the causes named from them,
//! against a fake sysfs tree the engine rewrites while it runs (a GPU idle at 2.5 GT/s that
//! trains up under load) and a fake libnvidia-ml (tests/fake_nvml) found through
//! LD_LIBRARY_PATH. The dynamic loader reads LD_LIBRARY_PATH when a process starts, so the run
//! happens in a child: this test binary again, running only `child_run`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use pcieperf::bench::dma::{measure, DmaOptions, Quiet};
use pcieperf::bench::results::{Mode, Results};
use pcieperf::engine::{DataModel, Engine, EngineError, EngineInfo, Io, Transfer};
use serde_json::Value;
use support::TestEngine;

const CHILD: &str = "PCIEPERF_GPU_PATH_CHILD";
const GPU: &str = "0000:01:00.0";
/// A node no test machine's measuring thread is on: the device is remote from it.
const DEVICE_NODE: u32 = 7;

/// Replace `dir/file` at once, as sysfs shows an attribute: a reader never sees it half written.
fn write_attribute(dir: &Path, file: &str, value: &str) {
    let staged = dir.join(format!(".{file}.new"));
    std::fs::write(&staged, value).unwrap();
    std::fs::rename(staged, dir.join(file)).unwrap();
}

/// A function's link attributes, 16 GT/s x16 capable.
fn write_link(dir: &Path, speed: &str, width: u8) {
    std::fs::create_dir_all(dir).unwrap();
    write_attribute(dir, "max_link_speed", "16.0 GT/s PCIe");
    write_attribute(dir, "max_link_width", "16");
    write_attribute(dir, "current_link_speed", speed);
    write_attribute(dir, "current_link_width", &width.to_string());
}

/// A GPU (NVIDIA's vendor ID, idle at 2.5 GT/s x16) under a Gen4 x16 root port, on NUMA node 7,
/// in IOMMU group 12 of a DMA-FQ (translated) domain.
fn sysfs(root: &Path) -> PathBuf {
    let port = root.join("devices/pci0000:00/0000:00:01.0");
    let gpu = port.join(GPU);
    write_link(&port, "16.0 GT/s PCIe", 16);
    write_link(&gpu, "2.5 GT/s PCIe", 16);
    std::fs::write(gpu.join("vendor"), "0x10de\n").unwrap();
    std::fs::write(gpu.join("numa_node"), format!("{DEVICE_NODE}\n")).unwrap();
    let node = root.join(format!("devices/system/node/node{DEVICE_NODE}"));
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("distance"), "32 32 32 32 32 32 32 10\n").unwrap();
    let group = root.join("kernel/iommu_groups/12");
    std::fs::create_dir_all(&group).unwrap();
    std::fs::write(group.join("type"), "DMA-FQ\n").unwrap();
    std::os::unix::fs::symlink(&group, gpu.join("iommu_group")).unwrap();
    std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
    std::os::unix::fs::symlink(&gpu, root.join("bus/pci/devices").join(GPU)).unwrap();
    gpu
}

/// The test engine behind a GPU's PCI address: each transfer takes 5 ms of wall time; the first
/// trains the link up to 16 GT/s, the last lets it fall back to 2.5 GT/s (idle).
struct TrainingGpu {
    inner: TestEngine,
    link_dir: PathBuf,
    last: usize,
}

impl TrainingGpu {
    fn step(&mut self) {
        if self.inner.transfers == 0 {
            write_attribute(&self.link_dir, "current_link_speed", "16.0 GT/s PCIe");
        }
        std::thread::sleep(Duration::from_millis(5));
    }

    fn after(&mut self) {
        if self.inner.transfers == self.last {
            write_attribute(&self.link_dir, "current_link_speed", "2.5 GT/s PCIe");
        }
    }
}

impl Engine for TrainingGpu {
    fn info(&self) -> &EngineInfo {
        &self.inner.info
    }
    fn conditions(&self) -> Option<pcieperf::model::Conditions> {
        self.inner.conditions.clone()
    }
    fn transfer(&mut self, io: Io<'_>, device_offset: u64, deadline: Duration) -> Result<Transfer, EngineError> {
        self.step();
        let transfer = self.inner.transfer(io, device_offset, deadline);
        self.after();
        transfer
    }
    fn now_ns(&self) -> f64 {
        self.inner.now_ns()
    }
}

/// The run the parent asks for: one d2h point of 8 transfers (2 warm-up, 6 timed: a transfer of 0.5 ms or more needs a count of samples, not a time) on the
/// training GPU, its conditions read first at Gen1 x16 as an idle GPU's would be.
fn run_on_fake_gpu() -> (Results, String) {
    let root = tempfile::tempdir().unwrap();
    let link_dir = sysfs(root.path());
    let mut inner = TestEngine::new(DataModel::Generator, 7);
    inner.info.pci_address = Some(GPU.into());
    inner.conditions = Some(support::link("gen1x16", 256));
    let mut engine = TrainingGpu { inner, link_dir, last: 8 };
    let mut options = DmaOptions::new(vec![Mode::D2h], vec![1 << 20]);
    options.sysfs_root = root.path().to_path_buf();
    options.link_sample_interval = Duration::from_millis(10);
    options.seed = 7;
    let results = measure(&mut engine, &options, &AtomicBool::new(false), &mut Quiet).unwrap();
    assert_eq!(engine.inner.transfers, 8, "the engine's last transfer is not the one that idles the link");
    let text = pcieperf::report::text::render(&results);
    (results, text)
}

/// Runs only inside the child the tests below start; prints the results and the text report.
#[test]
fn child_run() {
    if std::env::var_os(CHILD).is_none() {
        println!("skipped: runs only as the child of the other tests in this file ({CHILD} unset)");
        return;
    }
    let (results, text) = run_on_fake_gpu();
    println!("@@JSON {}", serde_json::to_string(&results).unwrap());
    println!("@@TEXT-BEGIN\n{text}\n@@TEXT-END");
}

/// Build tests/fake_nvml and put it where the loader finds it as libnvidia-ml.so.1.
fn fake_nvml(dir: &Path) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = manifest.join("target/fake_nvml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--manifest-path"])
        .arg(manifest.join("tests/fake_nvml/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building tests/fake_nvml failed");
    std::fs::copy(target.join("debug/libnvidia_ml.so"), dir.join("libnvidia-ml.so.1")).unwrap();
}

/// Run `child_run` in a child with `env`; its results document and text report.
fn child(env: &[(&str, &str)], library_dir: Option<&Path>) -> (Value, String) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(["--exact", "child_run", "--nocapture", "--test-threads", "1"]).env(CHILD, "1").env_remove("LD_LIBRARY_PATH");
    if let Some(dir) = library_dir {
        command.env("LD_LIBRARY_PATH", dir);
    }
    command.envs(env.iter().copied());
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "child failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let json = stdout.lines().find_map(|l| l.split_once("@@JSON ").map(|(_, json)| json)).unwrap_or_else(|| panic!("no results from the child:\n{stdout}"));
    let text = stdout.split("@@TEXT-BEGIN\n").nth(1).and_then(|t| t.split("\n@@TEXT-END").next()).unwrap_or_default().to_string();
    (serde_json::from_str(json).unwrap(), text)
}

fn causes(results: &Value) -> Vec<String> {
    results["findings"].as_array().unwrap().iter().map(|f| f["cause"].as_str().unwrap().to_string()).collect()
}

fn message<'a>(results: &'a Value, cause: &str) -> &'a str {
    let found = results["findings"].as_array().unwrap().iter().find(|f| f["cause"] == cause);
    found.and_then(|f| f["message"].as_str()).unwrap_or_else(|| panic!("no {cause} finding in {:?}", causes(results)))
}

#[test]
fn the_path_is_sampled_during_the_run_and_the_ceiling_is_for_what_was_seen_then() {
    let dir = tempfile::tempdir().unwrap();
    fake_nvml(dir.path());
    let env = [("FAKE_NVML_BUS_ID", GPU), ("FAKE_NVML_PSTATE", "8"), ("FAKE_NVML_REPLAY_STEP", "3"), ("FAKE_NVML_LINK", "1,16")];
    let (r, text) = child(&env, Some(dir.path()));
    let c = &r["conditions"];
    let path = &c["link_path"];
    assert_eq!(path["before"]["hops"][0]["speed_gts"], 2.5, "{path}");
    assert_eq!(path["after"]["hops"][0]["speed_gts"], 2.5, "{path}");
    let during = path["during"].as_array().unwrap();
    assert!(!during.is_empty(), "no sample during a 60 ms run at a 10 ms interval");
    assert!(during.iter().any(|s| s["hops"][0]["speed_gts"] == 16.0), "{during:?}");
    assert_eq!(path["ceiling_from"], "during");
    assert_eq!(path["before"]["hops"][1]["bdf"], "0000:00:01.0", "the root port is the second hop");
    // The ceiling is for Gen4 x16 as seen during the run, not the Gen1 x16 read first.
    assert_eq!(c["link"]["params"]["link"]["generation"], "gen4", "{}", c["link"]);
    assert!(c["link"]["source"].as_str().unwrap().contains("as sampled during the run"), "{}", c["link"]["source"]);
    let ceiling = r["points"][0]["ceiling"]["MBps"].as_f64().unwrap();
    assert!(ceiling > 20_000.0, "a Gen4 x16 ceiling, not Gen1 x16's 4 GB/s: {ceiling}");
    assert!(message(&r, "idle_downshift").contains("2.5 GT/s x16 at 0000:01:00.0 before"), "{}", message(&r, "idle_downshift"));

    // NVML: the fake's name, P8, Gen1 x16, a replay counter that rose.
    let nvml = &c["nvml"];
    assert_eq!(nvml["available"], true, "{nvml}");
    assert_eq!(nvml["name"], "Fake GPU (fake libnvidia-ml)");
    assert_eq!((nvml["before"]["pstate"].as_u64(), nvml["before"]["link_generation"].as_u64()), (Some(8), Some(1)));
    assert!(nvml["after"]["replay_counter"].as_u64() > nvml["before"]["replay_counter"].as_u64(), "{nvml}");
    assert!(message(&r, "replays").starts_with("replays during the run: NVML replay counter"));
    assert!(message(&r, "gpu_power_state").starts_with("GPU power state: NVML reported P8 during the copy ("), "{}", message(&r, "gpu_power_state"));
    assert!(text.contains("NVML:        Fake GPU (fake libnvidia-ml): before P8, Gen1 x16"), "{text}");
    assert!(text.contains("ceiling for: the narrowest hop as sampled during the run: 16 GT/s x16"), "{text}");

    // IOMMU: the group and its domain type, in the conditions and the text.
    assert_eq!((c["iommu"]["group"].as_u64(), c["iommu"]["domain_type"].as_str()), (Some(12), Some("DMA-FQ")), "{}", c["iommu"]);
    assert!(text.contains("IOMMU:       group 12, domain DMA-FQ (translated, invalidations batched in a flush queue)"), "{text}");

    // NUMA: the device on node 7, the thread and buffers on this machine's node.
    if pcieperf::bench::numa::thread_node().is_some() {
        assert_eq!(c["numa"]["device_node"], DEVICE_NODE);
        assert!(message(&r, "remote_numa").contains(&format!("the device on node {DEVICE_NODE} (distance 32, local 10)")), "{}", message(&r, "remote_numa"));
    } else {
        println!("skipped (NUMA part): this kernel does not say which node a thread runs on");
    }
}

#[test]
fn without_nvml_the_report_says_why_once_and_the_run_goes_on() {
    let (r, text) = child(&[], None);
    let nvml = &r["conditions"]["nvml"];
    assert_eq!(nvml["available"], false);
    assert!(!causes(&r).contains(&"replays".to_string()), "{:?}", causes(&r));
    assert!(!causes(&r).contains(&"gpu_power_state".to_string()), "no NVML, no power state: {:?}", causes(&r));
    assert_eq!(text.matches("NVML:        not available (").count(), 1, "{text}");
    // The path was still sampled.
    assert_eq!(r["conditions"]["link_path"]["ceiling_from"], "during");
    // A library that does not know the GPU is a reason too.
    let dir = tempfile::tempdir().unwrap();
    fake_nvml(dir.path());
    let (r, _) = child(&[("FAKE_NVML_BUS_ID", "0000:09:00.0")], Some(dir.path()));
    let reason = r["conditions"]["nvml"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("NVML does not know PCI 0000:01:00.0"), "{reason}");
    let (r, _) = child(&[("FAKE_NVML_INIT_FAIL", "1")], Some(dir.path()));
    assert_eq!(r["conditions"]["nvml"]["reason"], "nvmlInit failed: Driver Not Loaded");
}

#[test]
fn a_simulated_target_says_it_has_no_path_to_sample() {
    let output = assert_cmd::Command::cargo_bin("pcieperf")
        .unwrap()
        .args(["dma", "--target", "sim:gen3x8", "--dir", "d2h", "--sizes", "64KiB", "--duration", "20ms", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let r: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(r["conditions"]["link_path_unknown"], "target sim:gen3x8 names no PCI device: no path to sample");
    assert!(r["conditions"].get("link_path").is_none() && r["conditions"].get("nvml").is_none() && r["conditions"].get("iommu").is_none());
    let text = assert_cmd::Command::cargo_bin("pcieperf")
        .unwrap()
        .args(["dma", "--target", "sim:gen3x8", "--dir", "d2h", "--sizes", "64KiB", "--duration", "20ms"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("link path:   not sampled: target sim:gen3x8 names no PCI device"), "{text}");
}
