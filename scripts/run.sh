#!/usr/bin/env bash
# The main job: the whole loop over ROS 2 on the built-in simulator. Sets up the ROS 2 runtime,
# builds pucl with `colcon build` in a workspace of its own (target/ros_ws), starts the 'learn'
# graph with `ros2 launch pucl learn.launch.py` (scripts/run_graph.py where no ros2 command exists),
# records expert demonstrations over topics, learns the constraint with the learner action, serves
# it, then drives the simulator through the safety filter with a controller that ignores the
# obstacle, and prints IoU, the unsafe rate and whether the filtered runs stayed feasible.
# Options go to scripts/loop.py (--task, --demos, --jitter, --runs, --shift, --learn-config,
# --workdir; default out/ros).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bash scripts/setup_ros.sh
# shellcheck disable=SC1091
source .ros/env.sh
export PATH=$ROOT/.ros/venv/bin:$PATH
WS=$ROOT/target/ros_ws
mkdir -p "$WS/src"
ln -sfn "$ROOT" "$WS/src/pucl"
# Cargo's folder outlives the workspace, so a second run builds incrementally.
(cd "$WS" && CARGO_TARGET_DIR=$ROOT/target/colcon colcon build)
set +u  # colcon's setup scripts read unset variables
# shellcheck disable=SC1091
source "$WS/install/setup.bash"
set -u
exec python scripts/loop.py "$@"
