//! `--target cosim`: pcieperf drives the project's RTL (hdl/) in Icarus Verilog through the
//! cocotb testbench. Needs iverilog, python3 with cocotb, cocotbext-pcie and cocotbext-axi
//! (.ci/run installs them); without them each test prints "skipped: ..." and why.

use assert_cmd::Command;

/// Run pcieperf; None (after printing why) when the co-simulation prerequisites are missing.
fn run_cosim(args: &[&str]) -> Option<std::process::Output> {
    let output = Command::cargo_bin("pcieperf").unwrap().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && (stderr.contains("prerequisites missing") || stderr.contains("cosim needs python3")) {
        println!("skipped: {}", stderr.trim());
        return None;
    }
    assert!(output.status.success(), "pcieperf {args:?} failed: {stderr}");
    Some(output)
}

#[test]
fn demo_drives_the_rtl_and_reads_results_verification_and_status() {
    let Some(output) = run_cosim(&["demo", "--target", "cosim", "--json"]) else { return };
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["engine"]["kind"], "cosim");
    assert_eq!(json["simulated"], true, "co-simulated figures are never hardware");
    assert!(json["engine"]["description"].as_str().unwrap().starts_with("co-simulated"));
    assert!(json["notes"][0].as_str().unwrap().contains("block amount 8"));
    let demo = &json["demo"];
    assert_eq!(demo["version"], 0x0802_1600u32);
    assert_eq!(demo["bytes"], 8 * 0x2000);
    // Status word from the hard block's configuration outputs: MPS 256, MRRS 512, Gen3 x8.
    let status = &demo["status"];
    assert_eq!((status["max_payload_bytes"].as_u64(), status["max_read_request_bytes"].as_u64()), (Some(256), Some(512)));
    assert_eq!((status["link_speed_gts"].as_f64(), status["link_width"].as_u64()), (Some(8.0), Some(8)));
    let results = demo["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for result in results {
        let cycles = result["device_cycles"].as_u64().expect("the core's cycle counter");
        // 64 KiB over Gen3 x8 at 250 MHz: a few thousand cycles, and never faster than 8 GB/s raw.
        assert!((2048..20_000).contains(&cycles), "{result}");
        let mbps = result["MBps"].as_f64().unwrap();
        assert!(mbps > 1000.0 && mbps < 7877.0, "{result}");
        assert_eq!(result["rx_bit_errors"], 0, "{result}");
        assert_eq!(result["tx_bit_errors"], 0, "{result}");
        assert_eq!(result["stalls_over_threshold"], 0, "{result}");
    }
}

#[test]
fn demo_text_is_labelled_co_simulated() {
    let Some(output) = run_cosim(&["demo", "--target", "cosim:gen1x4", "--write", "--block-amount", "2"]) else { return };
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("usable bandwidth MB/s (co-simulated)"), "{text}");
    assert!(text.contains("Link width:    x4"), "{text}");
    assert!(text.contains("block amount 2 (16384 bytes per direction)"), "{text}");
}

#[test]
fn dma_both_directions_verifies_data() {
    // --duration is simulated time: 200 µs covers a warm-up and a few 64 KiB transfers in both
    // directions (each takes seconds of host time to co-simulate).
    let Some(output) = run_cosim(&["dma", "--target", "cosim", "--dir", "both", "--sizes", "4KiB,64KiB", "--duration", "200us", "--json"]) else {
        return;
    };
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["simulated"], true);
    let points = json["points"].as_array().expect("points");
    assert_eq!(points.len(), 2);
    for point in points {
        assert!(point["verification"]["passed"].as_u64().unwrap() > 0, "{point}");
        assert_eq!(point["verification"]["failed"], 0, "{point}");
    }
}

/// A wrong h2d byte on the co-simulated core: the engine reads the core's FIRST_ERROR register,
/// which holds the offset of the first byte that differs from the pattern.
#[test]
fn a_wrong_h2d_byte_is_reported_at_its_offset() {
    use pcieperf::engine::pattern::Pattern;
    use pcieperf::engine::{open, Io, OpenOptions};
    let seed = 7;
    let mut engine = match open("cosim", &OpenOptions { seed, ..OpenOptions::default() }) {
        Ok(engine) => engine,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let (size, wrong_at) = (4096usize, 1234usize);
    let mut sent = vec![0u8; size];
    Pattern::lfsr(seed).fill(0, &mut sent);
    let deadline = std::time::Duration::from_secs(1);
    let clean = engine.transfer(Io::H2d(&sent), 0, deadline).unwrap();
    assert_eq!(clean.device.first_error_offset, None);
    sent[wrong_at] ^= 0x01;
    let t = engine.transfer(Io::H2d(&sent), 0, deadline).unwrap();
    assert_eq!(t.device.first_error_offset, Some(wrong_at as u64));
}

/// `dma --target cosim` with its default options completes: on a co-simulated target the
/// defaults are a budget of simulated time that fits (64 KiB, 200 µs), and a point that runs
/// long on a loaded machine reports progress instead of failing.
#[test]
fn dma_with_default_options_completes() {
    let started = std::time::Instant::now();
    let Some(output) = run_cosim(&["dma", "--target", "cosim", "--json"]) else { return };
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["complete"], true, "{json}");
    let point = &json["points"][0];
    assert_eq!(point["size_bytes"], 65536, "{point}");
    assert!(point["samples"].as_array().unwrap().len() >= 10, "{point}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("co-simulation: 200 µs per point of simulated time at 64KiB"), "{}", String::from_utf8_lossy(&output.stderr));
    println!("dma --target cosim with default options: {:.1} s wall-clock", started.elapsed().as_secs_f64());
}
