"""The real ros2 tools against launched nodes: `ros2 launch pucl learn.launch.py`, `ros2 service call`,
`ros2 action send_goal --feedback`. The package is laid out as colcon-ros-cargo installs it (the ament
index marker, share/pucl/{package.xml,launch,config}, lib/pucl/<executables>) in a temporary prefix."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy

from conftest import BIN, ROOT, wait_for

ROS2 = Path(sys.executable).parent / "ros2"
NODES = {"kinematic_sim", "demo_recorder", "learner", "constraint_server", "safety_filter"}

pytestmark = pytest.mark.skipif(
    not ROS2.exists(), reason="the real ros2 CLI is not installed (scripts/setup_ros.sh installs it from ../shared)")


def install_prefix(tmp_path):
    prefix = tmp_path / "install"
    (prefix / "share/ament_index/resource_index/packages").mkdir(parents=True)
    (prefix / "share/ament_index/resource_index/packages/pucl").touch()
    share = prefix / "share/pucl"
    share.mkdir()
    shutil.copy(ROOT / "package.xml", share)
    for d in ("launch", "config"):
        shutil.copytree(ROOT / d, share / d, ignore=shutil.ignore_patterns("__pycache__"))
    (prefix / "lib/pucl").mkdir(parents=True)
    for n in NODES:
        (prefix / "lib/pucl" / n).symlink_to(BIN / n)
    return prefix


def ros2(env, *args, timeout=120):
    out = subprocess.run([str(ROS2), *args], capture_output=True, text=True, timeout=timeout, env=env)
    return out.stdout + out.stderr


def test_ros2_launch_starts_the_learn_graph_and_service_and_action_calls_answer(models, tmp_path):
    prefix = install_prefix(tmp_path)
    env = dict(os.environ, AMENT_PREFIX_PATH=f"{prefix}:{os.environ.get('AMENT_PREFIX_PATH', '')}")
    work = tmp_path / "work"
    work.mkdir()
    launch = subprocess.Popen([str(ROS2), "launch", "pucl", "learn.launch.py", f"workdir:={work}"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    node = rclpy.create_node(f"launch_test_{os.getpid()}")
    try:
        assert wait_for(node, lambda: NODES <= set(node.get_node_names()), 60), node.get_node_names()
        # The server watches workdir/model.json: give it a model, then ask it as a user would.
        shutil.copy(models[0], work / "model.json")
        deadline, out = time.monotonic() + 30, ""
        while "feasible=[True]" not in out and time.monotonic() < deadline:
            out = ros2(env, "service", "call", "/constraint_server/query_feasibility",
                       "pucl_interfaces/srv/QueryFeasibility", "{states: [0.35, -0.09, 0.05]}")
            time.sleep(0.5)
        assert "feasible=[True]" in out and "error=''" in out, out
        # Learning through the action, with feedback per iteration.
        model = tmp_path / "learned.json"
        goal = f"{{demos: '{ROOT / 'data/demos/reach_obstacle_3d_ds.csv'}', output: '{model}', seed: 1}}"
        out = ros2(env, "action", "send_goal", "--feedback", "/learner/learn",
                   "pucl_interfaces/action/LearnConstraint", goal, timeout=300)
        assert "Goal finished with status: SUCCEEDED" in out, out
        assert "reliable_infeasible" in out, "no feedback printed"
        assert model.exists()
    finally:
        os.killpg(launch.pid, signal.SIGINT)
        try:
            launch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
