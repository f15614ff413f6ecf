//! Verification must not limit the rate: the host-side work the DMA procedure does per d2h
//! transfer (poison the buffer, then check it) and the pattern generator and CRC32 underneath,
//! against memcpy of the same buffer in the same run.
//! Run: `cargo bench --bench verify`; compare the throughputs criterion prints.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pcieperf::bench::verify::{Check, Verifier, VerifyKind, POISON};
use pcieperf::engine::pattern::{crc32, Pattern};
use pcieperf::engine::DataModel;

const SIZES: [usize; 2] = [64 << 10, 4 << 20];

fn verify_against_memcpy(c: &mut Criterion) {
    let mut group = c.benchmark_group("verify");
    for size in SIZES {
        let lfsr = Pattern::lfsr(1);
        let mut data = vec![0u8; size];
        lfsr.fill(0, &mut data);
        let mut copy = vec![0u8; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("memcpy", size), &data, |b, data| {
            b.iter(|| copy.copy_from_slice(black_box(data)))
        });
        // What the procedure does per d2h transfer of a generator device: poison, (the device
        // fills the buffer: modelled by a copy), check against the cached expected pattern.
        let mut verifier = Verifier::new(VerifyKind::Lfsr, 1, DataModel::Generator);
        group.bench_with_input(BenchmarkId::new("procedure_d2h_poison_copy_check", size), &data, |b, data| {
            b.iter(|| {
                copy.fill(POISON);
                copy.copy_from_slice(black_box(data));
                assert_eq!(verifier.after_d2h(black_box(&copy)), Check::Passed);
            })
        });
        group.bench_with_input(BenchmarkId::new("crc32", size), &data, |b, data| b.iter(|| crc32(black_box(data))));
        // Regenerating the LFSR on every check (what the cache avoids): serial, about 1 GB/s.
        group.bench_with_input(BenchmarkId::new("lfsr_regenerate_and_check", size), &data, |b, data| {
            b.iter(|| assert!(lfsr.check(0, black_box(data)).is_none()))
        });
    }
    group.finish();
}

criterion_group!(benches, verify_against_memcpy);
criterion_main!(benches);
