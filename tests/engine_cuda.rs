//! The `cuda` engine against the fake driver library (tests/fake-cuda, built here once): opening,
//! rates, verification, driver errors, hangs, memory kinds, NUMA placement, the sweep and the
//! `--nvbandwidth` preset; and, without any driver, the one line that says so. Every figure here
//! comes from the fake library's clock, not from a GPU. A real GPU is used only by the last test,
//! where a driver is installed.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use assert_cmd::Command;
use serde_json::Value;

/// Build the fake library once and put it where LD_LIBRARY_PATH will find it under both names.
fn fake_library_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let target = root.join("target/fake-cuda");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--quiet", "--release", "--manifest-path"])
            .arg(root.join("tests/fake-cuda/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building tests/fake-cuda failed");
        let dir = target.join("lib");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["libcuda.so", "libcuda.so.1"] {
            let _ = std::fs::remove_file(dir.join(name));
            std::fs::copy(target.join("release/libcuda.so"), dir.join(name)).unwrap();
        }
        dir
    })
}

/// `pcieperf ARGS` with the fake library and its settings.
fn with_fake(args: &[&str], settings: &[(&str, &str)]) -> Output {
    let mut command = Command::cargo_bin("pcieperf").unwrap();
    command.env("LD_LIBRARY_PATH", fake_library_dir()).args(args).timeout(std::time::Duration::from_secs(120));
    for (name, value) in settings {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn median_mbps(results: &Value, point: usize) -> f64 {
    results["points"][point]["summary"]["median_MBps"].as_f64().unwrap_or_else(|| panic!("no median: {}", results["points"][point]))
}

fn description(results: &Value) -> String {
    results["conditions"]["engine"]["description"].as_str().unwrap().to_string()
}

const RATE: &str = "1000";

#[test]
fn h2d_and_d2h_run_at_the_fake_link_rate_and_are_labelled_as_the_fake() {
    for dir in ["h2d", "d2h"] {
        let output = with_fake(&["dma", "--target", "cuda:0", "--dir", dir, "--sizes", "4MiB", "--duration", "1s", "--json"], &[("PCIEPERF_FAKE_CUDA_MBPS", RATE)]);
        assert!(output.status.success(), "{}", stderr(&output));
        let results = json(&output);
        let rate = median_mbps(&results, 0);
        assert!((rate - 1000.0).abs() < 30.0, "{dir}: {rate} MB/s, the fake runs at 1000");
        // A sample times 16 copies: the sustained rate counts all of them, so it is the rate
        // less the warm-up copies and verification between samples, not a sixteenth of it.
        let sustained = results["points"][0]["summary"]["sustained_MBps"].as_f64().unwrap();
        assert!(sustained > 0.5 * rate && sustained <= 1.02 * rate, "{dir}: sustained {sustained} MB/s beside {rate}");
        let text = description(&results);
        assert!(text.starts_with("fake CUDA driver library (tests)"), "{text}");
        assert!(text.contains("cuStreamWaitValue32") && text.contains("4 warm-up + 16 timed copies"), "{text}");
        assert_eq!(results["conditions"]["engine"]["pci_address"], "0000:65:00.0");
        assert_eq!(results["verification"]["failed"], 0);
        assert!(results["verification"]["passed"].as_u64().unwrap() > 0);
    }
}

#[test]
fn both_directions_at_once_add_up() {
    let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "both", "--sizes", "4MiB", "--duration", "1s", "--json"], &[("PCIEPERF_FAKE_CUDA_MBPS", RATE)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let rate = median_mbps(&json(&output), 0);
    // Two streams, each on its own fake link: twice the rate (less what a busy machine's memcpy
    // of both streams at once costs).
    assert!(rate > 1800.0 && rate < 2030.0, "{rate} MB/s for two links of 1000");
}

#[test]
fn verification_finds_the_corrupted_byte() {
    let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "h2d", "--sizes", "1MiB", "--duration", "300ms", "--json"], &[("PCIEPERF_FAKE_CUDA_CORRUPT", "12345")]);
    let results = json(&output);
    assert!(results["verification"]["failed"].as_u64().unwrap() > 0, "{}", results["verification"]);
    assert_eq!(results["verification"]["first_failure"]["offset"], 12345, "{}", results["verification"]);
}

#[test]
fn a_failing_driver_call_is_one_clear_line() {
    let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "d2h", "--sizes", "1MiB", "--duration", "300ms"], &[("PCIEPERF_FAKE_CUDA_FAIL", "cuMemcpyDtoHAsync_v2")]);
    assert!(!output.status.success());
    let all = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
    assert!(all.contains("cuMemcpyDtoHAsync: CUDA_ERROR_UNKNOWN (999): unknown error"), "{all}");
    assert!(!all.contains("panicked"), "{all}");

    let output = with_fake(&["dma", "--target", "cuda:0", "--sizes", "1MiB"], &[("PCIEPERF_FAKE_CUDA_INIT", "100")]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let text = stderr(&output);
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    assert!(text.contains("cuda:0: the CUDA driver did not start") && text.contains("no CUDA-capable device"), "{text}");
}

#[test]
fn a_hung_copy_ends_at_the_deadline_with_the_results_so_far() {
    let started = std::time::Instant::now();
    let output = with_fake(
        &["dma", "--target", "cuda:0", "--dir", "h2d", "--sizes", "1MiB,2MiB", "--duration", "300ms", "--deadline", "1s", "--json"],
        &[("PCIEPERF_FAKE_CUDA_HANG_BYTES", "2097152")],
    );
    assert!(started.elapsed().as_secs() < 20, "took {:?}", started.elapsed());
    assert!(!output.status.success());
    let results = json(&output);
    assert!(median_mbps(&results, 0) > 0.0, "the 1MiB point is kept");
    let stopped = results["stopped"].to_string();
    assert!(stopped.contains("did not answer within 1s") && stopped.contains("2MiB"), "{stopped}");
}

#[test]
fn without_stream_memory_operations_a_spin_kernel_holds_the_streams_until_everything_is_queued() {
    let log = tempfile::tempdir().unwrap();
    let log = log.path().join("spins");
    let settings = [("PCIEPERF_FAKE_CUDA_MBPS", RATE), ("PCIEPERF_FAKE_CUDA_NO_WAIT_VALUE", "1"), ("PCIEPERF_FAKE_CUDA_SPIN_LOG", log.to_str().unwrap())];
    let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "both", "--sizes", "4MiB", "--duration", "1s", "--cuda-loops", "8", "--json"], &settings);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = json(&output);
    assert!(description(&results).contains("held by a spin kernel on a host flag (PTX via cuModuleLoadData"), "{}", description(&results));
    assert_eq!(results["verification"]["failed"], 0);
    // Every kernel (the probe at open aside) was released only once the sample's 4 warm-up
    // copies, its start event, 8 timed copies and end event were queued behind it: the timed
    // copies start after the flag, back to back.
    let spins = std::fs::read_to_string(&log).unwrap();
    let behind: Vec<u32> = spins.lines().filter_map(|l| l.split("behind=").nth(1)?.parse().ok()).collect();
    assert!(behind.len() >= 3, "the probe and at least one sample on each of the two streams: {spins}");
    assert!(behind[0] <= 1, "the probe at open (flag already set) has only its synchronize behind it: {spins}");
    assert!(behind[1..].iter().all(|&b| b >= 4 + 1 + 8 + 1), "a kernel released before its sample was queued: {spins}");
    let rate = median_mbps(&results, 0);
    assert!(rate > 1800.0 && rate < 2030.0, "{rate} MB/s for two links of 1000");
}

#[test]
fn without_stream_memory_operations_or_a_loadable_spin_kernel_a_host_function_holds_the_streams() {
    let settings = [("PCIEPERF_FAKE_CUDA_MBPS", RATE), ("PCIEPERF_FAKE_CUDA_NO_WAIT_VALUE", "1"), ("PCIEPERF_FAKE_CUDA_NO_MODULE", "1")];
    let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "h2d", "--sizes", "4MiB", "--duration", "1s", "--json"], &settings);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = json(&output);
    let text = description(&results);
    assert!(text.contains("held by a host function") && text.contains("spin kernel not usable: ") && text.contains("cuModuleLoadData"), "{text}");
    let rate = median_mbps(&results, 0);
    assert!((rate - 1000.0).abs() < 30.0, "{rate}");
}

#[test]
fn every_host_memory_kind_moves_verified_data() {
    for (kind, said) in [("pageable", "pageable host memory"), ("pinned", "pinned host memory"), ("wc", "write-combined"), ("registered", "cuMemHostRegister")] {
        let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "both", "--sizes", "256KiB", "--duration", "200ms", "--cuda-memory", kind, "--json"], &[]);
        assert!(output.status.success(), "{kind}: {}", stderr(&output));
        let results = json(&output);
        assert!(description(&results).contains(said), "{kind}: {}", description(&results));
        assert_eq!(results["verification"]["failed"], 0, "{kind}");
        assert!(results["verification"]["passed"].as_u64().unwrap() > 0, "{kind}");
    }
    let output = with_fake(&["dma", "--target", "cuda:0", "--cuda-memory", "huge"], &[]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn buffers_are_placed_on_the_numa_node_asked_and_checked() {
    if !Path::new("/sys/devices/system/node/node0/cpulist").exists() {
        eprintln!("skipped: no NUMA node 0 in sysfs");
        return;
    }
    let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "both", "--sizes", "1MiB", "--duration", "200ms", "--numa", "0", "--json"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let numa = json(&output)["conditions"]["numa"].clone();
    assert_eq!((numa["node"].as_u64(), numa["held"].as_bool(), numa["thread_node"].as_u64()), (Some(0), Some(true), Some(0)), "{numa}");
    // The engine's own pinned buffers are checked (2 MiB allocated when opened, 1 MiB for d2h),
    // not the procedure's.
    assert_eq!(numa["buffer_pages"]["buffers"], 2, "{numa}");
    assert_eq!(numa["buffer_pages"]["by_node"]["0"], 128, "{numa}");
    let output = with_fake(&["dma", "--target", "cuda:0", "--sizes", "1MiB", "--duration", "200ms", "--numa", "off", "--json"], &[]);
    assert_eq!(json(&output)["conditions"]["numa"]["note"], "off (--numa off)");
    // The fake GPU's address is not in this machine's sysfs: auto cannot place.
    let output = with_fake(&["dma", "--target", "cuda:0", "--sizes", "1MiB", "--duration", "200ms", "--json"], &[]);
    assert_eq!(json(&output)["conditions"]["numa"]["note"], "not applicable: 0000:65:00.0 has no NUMA node in sysfs");
    let output = with_fake(&["dma", "--target", "cuda:0", "--sizes", "1MiB", "--numa", "999"], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr(&output).trim().lines().count(), 1, "{}", stderr(&output));
}

#[test]
fn targets_by_pci_address_and_bad_targets() {
    let output = with_fake(&["dma", "--target", "cuda:0000:65:00.0", "--sizes", "1MiB", "--duration", "200ms", "--json"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    for (target, said) in [("cuda:0000:66:00.0", "no CUDA device at 0000:66:00.0"), ("cuda:3", "sees 1 device(s)"), ("cuda:gpu", "give a device ordinal")] {
        let output = with_fake(&["dma", "--target", target, "--sizes", "1MiB"], &[]);
        assert_eq!(output.status.code(), Some(2), "{target}");
        let text = stderr(&output);
        assert!(text.contains(said) && text.trim().lines().count() == 1, "{target}: {text}");
    }
}

#[test]
fn a_size_sweep_is_fitted_as_for_every_engine() {
    let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "h2d", "--sizes", "64KiB..1MiB", "--duration", "200ms", "--cuda-loops", "4", "--json"], &[("PCIEPERF_FAKE_CUDA_MBPS", RATE)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = json(&output);
    assert_eq!(results["points"].as_array().unwrap().len(), 5);
    assert!(results["conditions"]["engine"]["description"].as_str().unwrap().contains("4 timed copies"));
    // The fake link: 2 µs per copy plus bytes at 1000 MB/s; the fit finds its m.
    let fit = &results["fits"][0];
    assert_eq!(fit["mode"], "h2d", "{}", results["fits"]);
    let m_us = fit["m_us"].as_f64().unwrap();
    assert!((m_us - 2.0).abs() < 0.3, "m = {m_us} µs: {fit}");
}

#[test]
fn the_nvbandwidth_preset_takes_its_buffer_size_and_three_samples() {
    // One timed copy per sample keeps the test short (the fake's memcpy of 512 MiB is slow).
    let output = with_fake(&["dma", "--target", "cuda:0", "--dir", "h2d", "--nvbandwidth", "--cuda-loops", "1", "--cuda-warmups", "0", "--json"], &[("PCIEPERF_FAKE_CUDA_MBPS", "100000")]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = json(&output);
    let point = &results["points"][0];
    assert_eq!(point["size_bytes"], 512u64 << 20);
    assert_eq!(point["samples"].as_array().unwrap().len(), 3);
    assert_eq!(point["warmup"], 0);
    assert!(description(&results).contains("0 warm-up + 1 timed copies"));
    let output = with_fake(&["dma", "--target", "sim", "--nvbandwidth"], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("give a cuda target"));
}

#[test]
fn without_a_driver_library_the_target_says_why_in_one_line() {
    if ["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/lib/libcuda.so.1"].iter().any(|p| Path::new(p).exists()) {
        eprintln!("skipped: this machine has a CUDA driver library");
        return;
    }
    let output = Command::cargo_bin("pcieperf").unwrap().env_remove("LD_LIBRARY_PATH").args(["dma", "--target", "cuda:0"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    assert!(text.contains("cuda:0: no CUDA driver library") && text.contains("libcuda.so.1"), "{text}");
    let inspect = Command::cargo_bin("pcieperf").unwrap().env_remove("LD_LIBRARY_PATH").args(["inspect"]).output().unwrap();
    let listing = String::from_utf8_lossy(&inspect.stdout);
    assert!(listing.contains("cuda:0 [not usable]: no CUDA driver library"), "{listing}");
}

#[test]
fn a_real_gpu_copies_through_the_driver() {
    match pcieperf::engine::cuda::loader::probe() {
        Err(why) => eprintln!("skipped: {why}"),
        Ok(library) if library.fake => eprintln!("skipped: LD_LIBRARY_PATH points at the fake library, not a driver"),
        Ok(_) => {
            let output = Command::cargo_bin("pcieperf").unwrap().args(["dma", "--target", "cuda:0", "--dir", "both", "--sizes", "64MiB", "--duration", "2s", "--json"]).output().unwrap();
            assert!(output.status.success(), "{}", stderr(&output));
            let results = json(&output);
            assert!(median_mbps(&results, 0) > 0.0);
            assert_eq!(results["verification"]["failed"], 0);
        }
    }
}
