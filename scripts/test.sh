#!/usr/bin/env bash
# Runs every test: the library's unit tests, the CLI's end-to-end tests, the MuJoCo half-cheetah, and
# the ROS 2 nodes driven by rclpy (sets up MuJoCo and the ROS 2 runtime first: scripts/setup_mujoco.sh,
# scripts/setup_ros.sh). Ends with one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_mujoco.sh
bash scripts/setup_ros.sh
# shellcheck disable=SC1091
source .mujoco/env.sh
# shellcheck disable=SC1091
source .ros/env.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# The tasks without the mujoco feature: a MuJoCo task is a clear error, the others load.
cargo test --release --lib task:: 2>&1 | tee "$log" || status=$?
if [ "$status" -eq 0 ]; then
  cargo test --release --no-fail-fast --features ros,mujoco "$@" 2>&1 | tee -a "$log" || status=$?
fi
if [ "$status" -eq 0 ]; then
  cargo build --release --features ros,mujoco --bins
  .ros/venv/bin/python -m pytest tests/ros -q -p no:cacheprovider 2>&1 | tee -a "$log" || status=$?
fi
passed=$(grep -oE '^test result: .* ([0-9]+) passed' "$log" | grep -oE '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -oE '[0-9]+ failed;' "$log" | awk '{s+=$1} END {print s+0}')
py_passed=$(grep -oE '^[0-9]+ passed' "$log" | tail -1 | awk '{print $1+0}')
py_failed=$(grep -oE '[0-9]+ failed' "$log" | grep -v ';' | tail -1 | awk '{print $1+0}')
echo "tests: $((passed + ${py_passed:-0})) passed, $((failed + ${py_failed:-0})) failed"
exit "$status"
