#!/usr/bin/env bash
# Benchmarks of the ROS 2 nodes through DDS on loopback (latency of safety_filter, throughput of
# constraint_server), with the real executables and the parameter files from config/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_ros.sh
# shellcheck disable=SC1091
source .ros/env.sh
cargo build --release --features ros --bins --quiet
.ros/venv/bin/python benches/ros_bench.py
