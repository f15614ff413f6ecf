//! Host-side work of verification against its peer on the same page-aligned buffer, in the same
//! run: generating the LFSR pattern (`Pattern::fill`, against memset: both only write the
//! buffer), checking it (`Pattern::check`, against memcpy: both read it; memcpy writes too),
//! both, the CRC32, and what the DMA procedure does per d2h transfer of a generator device (the device's
//! write, modelled by a copy; the check, which poisons the buffer for the next transfer in
//! the same pass). The memcpy baseline copies
//! between two page-aligned buffers, as the DMA buffers are.
//!
//! `cargo bench --bench verify` prints one Markdown row per figure: ratio = our rate / the peer's
//! rate, median and min–max over interleaved repeats. Each side of a repeat is timed as the
//! fastest of many single calls (about 20 ms of calls), not their mean: on a machine shared with
//! other work a mean counts the time other processes held the core, and the fastest call of
//! each side is the one that ran alone (on this 2-core VM at load 10, means swung 0.1–5×).
//! Under `cargo test` it runs once on small buffers as a smoke test.

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{compare_rate, full, header, repeats};

use pcieperf::bench::verify::{Check, Verifier, VerifyKind};
use pcieperf::engine::pattern::{crc32, Pattern};
use pcieperf::engine::sim::SimEngine;
use pcieperf::engine::{AlignedBuf, DataModel, OpenOptions};

fn main() {
    let sizes: &[usize] = if full() { &[64 << 10, 1 << 20, 16 << 20] } else { &[64 << 10] };
    let repeats = repeats(9);
    let lfsr = Pattern::lfsr(1);
    let mut sim = SimEngine::open("sim", &OpenOptions::default()).expect("sim");
    println!("verification work vs memset / memcpy of the same page-aligned buffer (GB/s = 10^9 B/s)");
    header();
    for &size in sizes {
        let mut source = AlignedBuf::new(size);
        let mut target = AlignedBuf::new(size);
        lfsr.fill(0, &mut source);
        target.copy_from_slice(&source);
        let name = pcieperf::units::format_size(size as u64);
        let memcpy = |target: &mut AlignedBuf, source: &AlignedBuf| target.copy_from_slice(black_box(source));
        let mut fill_buf = AlignedBuf::new(size);
        let mut memset_buf = AlignedBuf::new(size);
        let mut memset = || black_box(&mut memset_buf).fill(black_box(0x5a));
        compare_rate(&format!("LFSR generate {name}"), "memset", size as u64, repeats, &mut || lfsr.fill(0, black_box(&mut fill_buf)), &mut memset, "≥ 0.5").print();
        compare_rate(&format!("LFSR check {name}"), "memcpy", size as u64, repeats, &mut || assert!(lfsr.check(0, black_box(&source)).is_none()), &mut || memcpy(&mut target, &source), "≥ 0.8").print();
        compare_rate(
            &format!("LFSR generate + check {name}"),
            "memcpy",
            size as u64,
            repeats,
            &mut || {
                lfsr.fill(0, black_box(&mut fill_buf));
                assert!(lfsr.check(0, black_box(&fill_buf)).is_none());
            },
            &mut || memcpy(&mut target, &source),
            "≥ 0.25 (two passes, 0.5 each)",
        )
        .print();
        compare_rate(&format!("CRC32 {name}"), "memcpy", size as u64, repeats, &mut || { black_box(crc32(black_box(&source))); }, &mut || memcpy(&mut target, &source), "").print();
        // Per d2h transfer of a generator device: the procedure's preparation (poisoning, unless
        // the last check did), the device's write (a copy), the check (which poisons).
        let mut verifier = Verifier::new(VerifyKind::Lfsr, 1, DataModel::Generator);
        let mut d2h = AlignedBuf::new(size);
        compare_rate(
            &format!("d2h step: copy + check, poisoning in the check's pass {name}"),
            "memcpy",
            size as u64,
            repeats,
            &mut || {
                verifier.before_d2h(&mut sim, &mut d2h, Duration::from_secs(1)).expect("a generator needs no priming");
                d2h.copy_from_slice(black_box(&source));
                assert_eq!(verifier.after_d2h(black_box(&mut d2h)), Check::Passed);
            },
            &mut || memcpy(&mut target, &source),
            "≥ 0.3",
        )
        .print();
    }
}
