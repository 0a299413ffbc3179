"""The real ros2 tools against launched nodes: `ros2 launch pucl learn.launch.py`, `ros2 service call`,
`ros2 action send_goal --feedback`. The package is laid out as colcon-ros-cargo installs it (the ament
index marker, share/pucl/{package.xml,launch,config}, lib/pucl/<executables>) in a temporary prefix."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
from rcl_interfaces.srv import GetParameters

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


@contextlib.contextmanager
def launched(env, launch_file, work):
    """`ros2 launch pucl <launch_file> workdir:=<work>` for the duration of the block."""
    launch = subprocess.Popen([str(ROS2), "launch", "pucl", launch_file, f"workdir:={work}"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        yield launch
    finally:
        os.killpg(launch.pid, signal.SIGINT)
        try:
            launch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()


def ros2(env, *args, timeout=120):
    out = subprocess.run([str(ROS2), *args], capture_output=True, text=True, timeout=timeout, env=env)
    return out.stdout + out.stderr


def test_ros2_launch_starts_the_learn_graph_and_service_and_action_calls_answer(models, tmp_path):
    prefix = install_prefix(tmp_path)
    env = dict(os.environ, AMENT_PREFIX_PATH=f"{prefix}:{os.environ.get('AMENT_PREFIX_PATH', '')}")
    work = tmp_path / "work"
    work.mkdir()
    node = rclpy.create_node(f"launch_test_{os.getpid()}")
    with launched(env, "learn.launch.py", work):
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


@pytest.mark.parametrize("graph", ["learn", "filter", "sim"])
def test_each_launch_file_starts_the_nodes_and_remaps_that_run_graph_starts(graph, tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import run_graph

    prefix = install_prefix(tmp_path)
    env = dict(os.environ, AMENT_PREFIX_PATH=f"{prefix}:{os.environ.get('AMENT_PREFIX_PATH', '')}")
    work = tmp_path / "work"
    expected = run_graph.commands(graph, work, "reach_obstacle_3d")
    node = rclpy.create_node(f"launch_graph_test_{os.getpid()}_{graph}")
    with launched(env, f"{graph}.launch.py", work):
        names = {n for n, _ in expected}
        assert wait_for(node, lambda: names <= set(node.get_node_names()), 60), node.get_node_names()
        # Exactly run_graph's nodes of pucl (other tests' client nodes may still be in the graph).
        assert names == set(node.get_node_names()) & NODES, "exactly run_graph's nodes"
        for name, cmd in expected:
            remaps = [cmd[i + 1].split(":=") for i, a in enumerate(cmd) if a == "-r"]

            def topics():
                subs = node.get_subscriber_names_and_types_by_node(name, "/")
                pubs = node.get_publisher_names_and_types_by_node(name, "/")
                return {t for t, _ in subs + pubs}

            for src, dst in remaps:
                assert wait_for(node, lambda: f"/{dst}" in topics(), 10), f"{name}: {src} not remapped to {dst}"
            # Every parameter run_graph sets has that value in the launched node (its parameter service).
            sets = dict(cmd[i + 1].split(":=", 1) for i, a in enumerate(cmd) if a == "-p")
            client = node.create_client(GetParameters, f"/{name}/get_parameters")
            assert client.wait_for_service(timeout_sec=10), name
            future = client.call_async(GetParameters.Request(names=list(sets)))
            rclpy.spin_until_future_complete(node, future, timeout_sec=10)
            got = [v.string_value for v in future.result().values]
            assert got == list(sets.values()), (name, got, sets)
