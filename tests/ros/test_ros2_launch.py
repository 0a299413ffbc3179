"""The ROS 2 user's path with the real tools: a plain `colcon build` of this repository in a fresh
workspace, `source install/setup.bash`, then `ros2 launch pucl ...`, `ros2 service call`, `ros2 action
send_goal --feedback`, `ros2 topic echo`, and the filter's launch file included by a user's launch file
that remaps its topics onto a controller and an arm."""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
from geometry_msgs.msg import PoseStamped, TwistStamped
from rcl_interfaces.srv import GetParameters

from conftest import ROOT, wait_for

VENV_BIN = Path(sys.executable).parent
ROS2, COLCON = VENV_BIN / "ros2", VENV_BIN / "colcon"
NODES = {"kinematic_sim", "demo_recorder", "learner", "constraint_server", "safety_filter"}

pytestmark = pytest.mark.skipif(
    not ROS2.exists() or not COLCON.exists(),
    reason="the real ros2 CLI or colcon is not installed (scripts/setup_ros.sh installs them; the CLI from ../shared)")


@pytest.fixture(scope="session")
def install(tmp_path_factory):
    """`colcon build` with no arguments in a fresh workspace holding this repository under src/;
    returns the environment of `source install/setup.bash`."""
    ws = tmp_path_factory.mktemp("ws")
    (ws / "src").mkdir()
    (ws / "src/pucl").symlink_to(ROOT)
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}",
               # Cargo's cache only (the workspace is new): a second test run builds incrementally.
               CARGO_TARGET_DIR=str(ROOT / "target/colcon"))
    env.pop("IDL_PACKAGE_FILTER", None)  # as on a ROS install: the package derives it from package.xml
    started = time.monotonic()
    out = subprocess.run([str(COLCON), "build"], cwd=ws, env=env, capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    print(f"\ncolcon build: {time.monotonic() - started:.0f} s")
    sourced = subprocess.run(["bash", "-c", f"set +u; source {ws}/install/setup.bash >/dev/null && env -0"],
                             env=env, capture_output=True, check=True).stdout.decode()
    return dict(line.split("=", 1) for line in sourced.split("\0") if "=" in line)


@contextlib.contextmanager
def launched(env, node, *args):
    """`ros2 launch pucl <args>` for the duration of the block. It starts once the graph `node` sees
    holds none of pucl's nodes: a node an earlier test stopped can linger there (its departure not yet
    discovered) without its topics, and be taken for the one launched here."""
    assert wait_for(node, lambda: not NODES & set(node.get_node_names()), 60), node.get_node_names()
    launch = subprocess.Popen([str(ROS2), "launch", *args], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
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


def test_colcon_build_installs_the_nodes_the_cli_and_the_interfaces_from_msg(install):
    prefix = Path(install["AMENT_PREFIX_PATH"].split(":")[0])
    assert prefix.name == "pucl", prefix
    executables = ros2(install, "pkg", "executables", "pucl").splitlines()
    assert {line.split()[-1] for line in executables if line.startswith("pucl ")} == NODES, executables
    assert (prefix / "bin/pucl").exists() and shutil.which("pucl", path=install["PATH"])
    shown = ros2(install, "interface", "show", "pucl_interfaces/srv/QueryFeasibility")
    assert "float64[] states" in shown, shown
    # The definitions installed are msg/'s, the one source.
    assert (prefix / "share/pucl_interfaces/srv/QueryFeasibility.srv").read_text() == \
        (ROOT / "msg/srv/QueryFeasibility.srv").read_text()


def test_ros2_launch_starts_the_learn_graph_and_service_and_action_calls_answer(install, models, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    node = rclpy.create_node(f"launch_test_{os.getpid()}")
    with launched(install, node, "pucl", "learn.launch.py", f"workdir:={work}"):
        assert wait_for(node, lambda: NODES <= set(node.get_node_names()), 60), node.get_node_names()
        # The server watches workdir/model.json: give it a model, then ask it as a user would.
        shutil.copy(models[0], work / "model.json")
        deadline, out = time.monotonic() + 30, ""
        while "feasible=[True]" not in out and time.monotonic() < deadline:
            out = ros2(install, "service", "call", "/constraint_server/query_feasibility",
                       "pucl_interfaces/srv/QueryFeasibility", "{states: [0.35, -0.09, 0.05]}")
            time.sleep(0.5)
        assert "feasible=[True]" in out and "error=''" in out, out
        # Learning through the action, with feedback per iteration.
        model = tmp_path / "learned.json"
        goal = f"{{demos: '{ROOT / 'data/demos/reach_obstacle_3d_ds.csv'}', output: '{model}', seed: 1}}"
        out = ros2(install, "action", "send_goal", "--feedback", "/learner/learn",
                   "pucl_interfaces/action/LearnConstraint", goal, timeout=300)
        assert "Goal finished with status: SUCCEEDED" in out, out
        assert "reliable_infeasible" in out, "no feedback printed"
        assert model.exists()


@pytest.mark.parametrize("graph", ["learn", "filter", "sim"])
def test_each_launch_file_starts_the_nodes_and_remaps_that_run_graph_starts(install, graph, tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import run_graph

    work = tmp_path / "work"
    params = tmp_path / "overrides.yaml"
    params.write_text("safety_filter:\n  ros__parameters: {lookahead_time: 0.2}\n"
                      "/**:\n  ros__parameters: {watch_period: 0.25}\n")
    expected = run_graph.commands(graph, work, "reach_obstacle_3d", params_file=params)
    node = rclpy.create_node(f"launch_graph_test_{os.getpid()}_{graph}")
    with launched(install, node, "pucl", f"{graph}.launch.py", f"workdir:={work}", f"params_file:={params}"):
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
                assert wait_for(node, lambda: f"/{dst}" in topics(), 30), f"{name}: {src} not remapped to {dst}"
            # Every parameter run_graph sets (the params_file's included) has that value in the
            # launched node (its parameter service).
            sets = dict(cmd[i + 1].split(":=", 1) for i, a in enumerate(cmd) if a == "-p")
            client = node.create_client(GetParameters, f"/{name}/get_parameters")
            assert client.wait_for_service(timeout_sec=10), name
            future = client.call_async(GetParameters.Request(names=list(sets)))
            rclpy.spin_until_future_complete(node, future, timeout_sec=10)
            got = [str(v.string_value or v.double_value) for v in future.result().values]
            want = [v if not v.replace(".", "").isdigit() else str(float(v)) for v in sets.values()]
            assert got == want, (name, got, sets)


USER_LAUNCH = '''
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import GroupAction, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch_ros.actions import SetRemap


def generate_launch_description():
    filter_launch = get_package_share_directory("pucl") + "/launch/filter.launch.py"
    return LaunchDescription([GroupAction([
        SetRemap(src="cmd_vel_in", dst="/controller/cmd_vel"),
        SetRemap(src="cmd_vel_out", dst="/arm/cmd_vel"),
        SetRemap(src="ee_pose", dst="/arm/ee_pose"),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(filter_launch),
                                 launch_arguments={"workdir": "WORKDIR"}.items()),
    ])])
'''


def test_filter_launch_put_in_front_of_a_controller_with_remaps_filters_its_commands(install, models, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(models[0], work / "model.json")
    user = tmp_path / "arm_with_filter.launch.py"
    user.write_text(USER_LAUNCH.replace("WORKDIR", str(work)))
    node = rclpy.create_node(f"controller_{os.getpid()}")
    pose_pub = node.create_publisher(PoseStamped, "/arm/ee_pose", 10)
    cmd_pub = node.create_publisher(TwistStamped, "/controller/cmd_vel", 10)
    with launched(install, node, str(user)):
        assert wait_for(node, lambda: pose_pub.get_subscription_count() and cmd_pub.get_subscription_count(), 60)
        # ros2 topic echo on the arm's topic while the controller commands 10 cm/s in free space.
        echo = subprocess.Popen([str(ROS2), "topic", "echo", "--once", "/arm/cmd_vel",
                                 "geometry_msgs/msg/TwistStamped", "--filter", "m.twist.linear.x > 0.05"],
                                env=install, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while echo.poll() is None and time.monotonic() < deadline:
            pose, cmd = PoseStamped(), TwistStamped()
            pose.header.stamp = cmd.header.stamp = node.get_clock().now().to_msg()
            pose.header.frame_id = cmd.header.frame_id = "base_link"
            pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = 0.35, -0.09, 0.05
            cmd.twist.linear.x = 0.1
            pose_pub.publish(pose)
            cmd_pub.publish(cmd)
            rclpy.spin_once(node, timeout_sec=0.02)
        if echo.poll() is None:
            echo.kill()
        out = echo.communicate()[0]
        # 16 cm from the learned cylinder the command passes almost unchanged.
        x = re.search(r"linear:\s*x: ([0-9.e-]+)", out)
        assert x and abs(float(x.group(1)) - 0.1) < 0.01, out
