#!/usr/bin/env bash
# Runs every test of the package (unit tests beside the code, end-to-end tests in tests/).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release "$@"
