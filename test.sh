#!/usr/bin/env bash
# The project's test command: every unit, property, differential (lspci), CLI and engine test,
# plus one quick pass of each benchmark (as `cargo test --all-targets` runs them).
set -euo pipefail
cd "$(dirname "$0")"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --all-targets --locked "$@" 2>&1 | tee "$log"
# One closing line for the whole run: the benchmarks' smoke passes print no "test result" line.
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
