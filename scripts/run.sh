#!/usr/bin/env bash
# The main job: the whole loop over ROS 2 on the built-in simulator. Sets up the ROS 2 runtime,
# builds the nodes, starts the 'learn' graph (launch/graph.yaml, what learn.launch.py starts),
# records expert demonstrations over topics, learns the constraint with the learner action, serves
# it, then drives the simulator through the safety filter with a controller that ignores the
# obstacle, and prints IoU, the unsafe rate and whether the filtered runs stayed feasible.
# Options go to scripts/loop.py (--task, --demos, --jitter, --runs, --shift, --learn-config,
# --workdir; default out/ros).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_ros.sh
# shellcheck disable=SC1091
source .ros/env.sh
cargo build --release --features ros --bins --quiet
exec .ros/venv/bin/python scripts/loop.py "$@"
