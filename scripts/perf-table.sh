#!/usr/bin/env bash
# Run the benchmarks that compare pcieperf with its peers (fio, memcpy, lspci, real time) and
# print their Markdown rows: the source of the tables in docs/performance.md and the README.
# Takes several minutes; BLOCK_VS_FIO_ONLY=region skips block_vs_fio's long 256 MiB table.
set -euo pipefail
cd "$(dirname "$0")/.."
export BLOCK_VS_FIO_ONLY="${BLOCK_VS_FIO_ONLY:-region}"
for bench in block_vs_fio stop_rule verify procedure inspect_vs_lspci stream_fifo; do
  echo "## $bench"
  cargo bench --quiet --bench "$bench" 2>/dev/null | grep -E '^\| '
done
