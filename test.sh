#!/usr/bin/env bash
# The project's test command: every unit, property, differential (lspci) and CLI test.
set -euo pipefail
cd "$(dirname "$0")"
cargo test --all-targets --locked "$@"
