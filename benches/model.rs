//! How fast the model answers: a full size-table row (write, read, both) versus a peer that
//! walks the transfer TLP by TLP. The model cuts transfers in closed form, so its cost does not
//! grow with the transfer size; the ratio printed by criterion shows by how much that matters.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pcieperf::model::{bidirectional_throughput, read_throughput, write_throughput, LinkParams};

/// Peer: the naive way, one TLP at a time (what a spreadsheet or a simple script does).
fn per_tlp_write_mbps(params: &LinkParams, size_bytes: u64) -> f64 {
    let overhead = params.header.bytes() + params.framing_bytes();
    let mut wire = 0u64;
    let mut left = size_bytes;
    while left > 0 {
        let payload = left.min(params.mps_bytes);
        wire += payload.div_ceil(4) * 4 + overhead;
        left -= payload;
    }
    size_bytes as f64 / (wire as f64 / params.link.encoded_mbps())
}

fn bench(c: &mut Criterion) {
    let params = LinkParams::typical("gen4x16".parse().unwrap());
    let size = 64 << 20;
    let mut group = c.benchmark_group("64MiB transfer");
    group.bench_function("model write (closed form, SKP, DLLP)", |b| b.iter(|| write_throughput(black_box(&params), black_box(size))));
    group.bench_function("peer write (per-TLP loop, no SKP/DLLP)", |b| b.iter(|| per_tlp_write_mbps(black_box(&params), black_box(size))));
    group.bench_function("model table row (write + read + both)", |b| {
        b.iter(|| {
            let p = black_box(&params);
            (write_throughput(p, size), read_throughput(p, size), bidirectional_throughput(p, size))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
