//! Packaging: the HDL tests' Python packages are pinned in one file and installed into a virtual
//! environment of their own, never into the system's Python.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_hdl_python_package_is_pinned_to_one_version() {
    let requirements = read("hdl/requirements.txt");
    let packages: Vec<&str> = requirements.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    for needed in ["cocotb", "cocotbext-pcie", "cocotbext-axi", "systemrdl-compiler"] {
        assert!(packages.iter().any(|p| p.split("==").next() == Some(needed)), "{needed} missing from hdl/requirements.txt");
    }
    for package in packages {
        let (name, version) = package.split_once("==").unwrap_or_else(|| panic!("{package:?} is not pinned with =="));
        assert!(!name.is_empty() && version.split('.').all(|part| part.parse::<u32>().is_ok()), "{package:?}: not name==X.Y.Z");
    }
}

#[test]
fn ci_installs_them_into_the_virtual_environment_the_tests_use() {
    let ci = read(".ci/run");
    assert!(ci.contains("python3 -m venv hdl/.venv"), ".ci/run does not create hdl/.venv");
    assert!(ci.contains("hdl/.venv/bin/python3 -m pip install") && ci.contains("-r hdl/requirements.txt"), ".ci/run does not install hdl/requirements.txt into hdl/.venv");
    assert!(!ci.contains("--break-system-packages"), ".ci/run still installs into the system's Python");
    assert!(read("test.sh").contains("hdl/.venv/bin/python3"), "test.sh does not use hdl/.venv");
    assert!(read(".gitignore").lines().any(|l| l == "/hdl/.venv/"), "hdl/.venv is not ignored by git");
}

#[test]
fn the_testbench_python_is_the_one_named_else_the_virtual_environment() {
    let chosen = pcieperf::engine::cosim::hdl_python();
    match std::env::var_os("PCIEPERF_PYTHON") {
        Some(named) => assert_eq!(chosen.as_os_str(), named),
        None if Path::new(env!("CARGO_MANIFEST_DIR")).join("hdl/.venv/bin/python3").exists() => {
            assert!(chosen.ends_with("hdl/.venv/bin/python3"), "{chosen:?}")
        }
        None => assert_eq!(chosen, Path::new("python3")),
    }
}

#[test]
fn a_missing_testbench_python_is_one_clear_line_naming_it() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pcieperf"))
        .args(["dma", "--target", "cosim", "--sizes", "4KiB", "--dir", "d2h"])
        .env("PCIEPERF_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "an engine that cannot start is exit 1 (engine error): {stderr}");
    assert!(stderr.contains("/nonexistent/python3") && stderr.contains("cocotb"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
