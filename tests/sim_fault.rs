//! Every fault the wrapper injects is caught by the pattern check (d2h) or the CRC32 (h2d).

use std::time::{Duration, Instant};

use pcieperf::engine::fault::{Fault, FaultEngine, FaultSpec};
use pcieperf::engine::pattern::{crc32, Pattern};
use pcieperf::engine::{open, Engine, EngineError, Io, OpenOptions};

const SEED: u64 = 11;
const DEADLINE: Duration = Duration::from_secs(10);

fn engine(target: &str) -> Box<dyn Engine> {
    open(target, &OpenOptions { seed: SEED, ..OpenOptions::default() }).unwrap()
}

fn host_data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 131 % 251) as u8).collect()
}

#[test]
fn every_data_fault_is_detected_in_both_directions() {
    for kind in ["bitflip", "drop", "dup", "reorder"] {
        for size in [8usize, 4096, 64 * 1024, 1 << 20] {
            let mut e = engine(&format!("fault:{kind}:sim:doc001"));
            let mut buf = vec![0u8; size];
            e.transfer(Io::D2h(&mut buf), 4096, DEADLINE).unwrap();
            let mismatch = Pattern::lfsr(SEED).check(4096, &buf);
            assert!(mismatch.is_some(), "{kind} on {size} d2h bytes went unnoticed");
            let m = mismatch.unwrap();
            assert!(m.offset >= 4096 && m.offset < 4096 + size as u64 && m.expected != m.actual);

            let sent = host_data(size);
            let t = e.transfer(Io::H2d(&sent), 0, DEADLINE).unwrap();
            assert_ne!(t.device.crc32, Some(crc32(&sent)), "{kind} on {size} h2d bytes went unnoticed");

            let mut back = vec![0u8; size];
            let (to_device, _) = e.transfer_both(&sent, &mut back, 0, DEADLINE).unwrap();
            assert_ne!(to_device.device.crc32, Some(crc32(&sent)));
            assert!(Pattern::lfsr(SEED).check(0, &back).is_some());
        }
    }
}

#[test]
fn clean_transfers_pass_and_skip_delays_the_faults() {
    let mut e = engine("fault:drop,reorder,skip=2:sim");
    let mut buf = vec![0u8; 65536];
    for _ in 0..2 {
        e.transfer(Io::D2h(&mut buf), 0, DEADLINE).unwrap();
        assert_eq!(Pattern::lfsr(SEED).check(0, &buf), None, "skipped transfers are untouched");
    }
    e.transfer(Io::D2h(&mut buf), 0, DEADLINE).unwrap();
    assert!(Pattern::lfsr(SEED).check(0, &buf).is_some());
}

#[test]
fn hang_times_out_at_the_deadline_on_the_engine_clock() {
    let mut e = engine("fault:hang:sim:gen5x16");
    let before = e.now_ns();
    let wall = Instant::now();
    let mut buf = vec![0u8; 4096];
    let deadline = Duration::from_secs(5);
    let err = e.transfer(Io::D2h(&mut buf), 0, deadline).unwrap_err();
    assert!(matches!(err, EngineError::Timeout { after, .. } if after == deadline), "{err}");
    assert!(err.to_string().contains("hang"));
    assert_eq!(e.now_ns() - before, 5e9, "a simulated hang costs virtual time, not wall time");
    assert!(wall.elapsed() < Duration::from_secs(2));
    assert!(matches!(e.transfer_both(&buf.clone(), &mut buf, 0, deadline).unwrap_err(), EngineError::Timeout { .. }));
}

#[test]
fn transfers_after_a_hang_stay_on_the_wrappers_clock() {
    let mut e = engine("fault:hang,skip=1:sim");
    let mut buf = vec![0u8; 4096];
    let first = e.transfer(Io::D2h(&mut buf), 0, DEADLINE).unwrap();
    assert_eq!(first.end_ns, e.now_ns());
    assert!(e.transfer(Io::D2h(&mut buf), 0, DEADLINE).is_err());
    assert_eq!(e.now_ns(), first.end_ns + DEADLINE.as_nanos() as f64);
}

#[test]
fn info_says_what_is_injected_and_bad_specs_are_refused() {
    let e = engine("fault:bitflip,dup:sim:doc001");
    let info = e.info();
    assert_eq!(info.kind, "fault");
    assert!(info.simulated && info.description.contains("simulated"));
    assert!(info.description.contains("flipped bit") && info.description.contains("duplicated chunk"), "{}", info.description);
    for target in ["fault:melt:sim", "fault:drop", "fault:drop:sim:doc999", "fault:drop,chunk=3:sim", "fault::sim"] {
        let err = open(target, &OpenOptions::default()).err().unwrap_or_else(|| panic!("{target} opened"));
        assert!(matches!(err, EngineError::InvalidInput(_)), "{target}: {err}");
    }
    let wrapped = FaultEngine::wrap("test", engine("sim"), FaultSpec { faults: vec![Fault::Reorder], skip: 0, chunk_bytes: 8 }, 1);
    assert_eq!(wrapped.spec().chunk_bytes, 8);
}

/// A wrong h2d byte is located: the simulated device reports the first byte that differs from
/// its pattern (the core's FIRST_ERROR register), alone and beside a d2h leg, and the
/// verification names that offset.
#[test]
fn a_wrong_h2d_byte_is_reported_at_its_offset() {
    let mut e = engine("sim:doc001");
    let (device_offset, size, wrong_at) = (8192u64, 64 * 1024, 12_345usize);
    let mut sent = vec![0u8; size];
    Pattern::lfsr(SEED).fill(device_offset, &mut sent);
    let clean = e.transfer(Io::H2d(&sent), device_offset, DEADLINE).unwrap();
    assert_eq!(clean.device.first_error_offset, None);
    sent[wrong_at] ^= 0x10;
    let t = e.transfer(Io::H2d(&sent), device_offset, DEADLINE).unwrap();
    assert_eq!(t.device.first_error_offset, Some(device_offset + wrong_at as u64));
    let mut back = vec![0u8; size];
    let (to_device, _) = e.transfer_both(&sent, &mut back, device_offset, DEADLINE).unwrap();
    assert_eq!(to_device.device.first_error_offset, Some(device_offset + wrong_at as u64));
}

/// Through `dma`: a flipped h2d bit fails the CRC with the offset the device found.
#[test]
fn dma_names_the_offset_of_a_wrong_h2d_byte() {
    let out = assert_cmd::Command::cargo_bin("pcieperf")
        .unwrap()
        .args(["dma", "--target", "fault:bitflip:sim:doc001", "--dir", "h2d", "--sizes", "64KiB", "--duration", "20ms"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("h2d crc check failed at offset "), "{text}");
}
