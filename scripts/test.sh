#!/usr/bin/env bash
# Runs every test of the package (unit tests beside the code, end-to-end tests in tests/) and ends
# with one summary line over all test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --release "$@" 2>&1 | tee "$log" || status=$?
passed=$(grep -oE '^test result: .* ([0-9]+) passed' "$log" | grep -oE '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -oE '[0-9]+ failed;' "$log" | awk '{s+=$1} END {print s+0}')
echo "tests: $passed passed, $failed failed"
exit "$status"
