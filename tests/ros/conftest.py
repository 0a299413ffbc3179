"""Fixtures for the ROS 2 end-to-end tests: the real node executables with the parameter files from
config/, driven by rclpy (an independent ROS 2 client) on an isolated domain."""
import json
import os
import pathlib
import random
import signal
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = ROOT / "target" / "release"
CONFIG = ROOT / "config"

# Isolation: a domain of our own, localhost-only discovery, a private ROS_HOME (set before rclpy loads).
os.environ["ROS_DOMAIN_ID"] = str(random.Random(os.getpid() ^ int(time.time())).randint(30, 99))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_LOCALHOST_ONLY", None)


@pytest.fixture(scope="session", autouse=True)
def ros(tmp_path_factory):
    os.environ["ROS_HOME"] = str(tmp_path_factory.mktemp("roshome"))
    import rclpy

    rclpy.init()
    yield rclpy
    rclpy.shutdown()


def pucl(*args):
    out = subprocess.run([str(BIN / "pucl"), *map(str, args)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def learn(path, seed):
    pucl("learn", "--task", "reach_obstacle_3d", "--demos", ROOT / "data/demos/reach_obstacle_3d_ds.csv",
         "--seed", seed, "--out", path)
    return path


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Two models of the cylinder task (seeds 1 and 2)."""
    d = tmp_path_factory.mktemp("models")
    return learn(d / "a.json", 1), learn(d / "b.json", 2)


def query_cli(model, states):
    return json.loads(pucl("query", "--model", model, "--json", *states))


class Node:
    """A node executable started as `ros2 run` would, with its parameter file from config/."""

    def __init__(self, name, params_file, overrides=(), log=None, node_name=None, remaps=()):
        args = [str(BIN / name), "--ros-args", "--params-file", str(CONFIG / params_file)]
        if node_name:  # a second instance (its file's parameters are keyed by the default name)
            args += ["-r", f"__node:={node_name}"]
        for src, dst in remaps:  # as a launch file's remappings, e.g. a namespace's ("__ns", "/arm1")
            args += ["-r", f"{src}:={dst}"]
        for k, v in overrides:
            args += ["-p", f"{k}:={v}"]
        self.log = open(log, "w") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def alive(self):
        return self.proc.poll() is None


@pytest.fixture(autouse=True)
def destroy_test_nodes(ros):
    """rclpy nodes a test creates are destroyed after it, so later discovery stays quick."""
    import rclpy.node

    created = []
    original = rclpy.node.Node.__init__

    def tracking(self, *args, **kwargs):
        original(self, *args, **kwargs)
        created.append(self)

    rclpy.node.Node.__init__ = tracking
    yield
    rclpy.node.Node.__init__ = original
    for n in created:
        try:
            n.destroy_node()
        except Exception:  # noqa: BLE001 - already destroyed
            pass


@pytest.fixture
def start_node(tmp_path):
    started = []

    def start(name, params_file, node_name=None, remaps=(), **overrides):
        n = Node(name, params_file, overrides.items(), log=tmp_path / f"{node_name or name}.log", node_name=node_name,
                 remaps=remaps)
        started.append(n)
        return n

    yield start
    for n in started:
        n.stop()


def call(node, client, request, timeout=10.0):
    import rclpy

    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=timeout)
    assert future.done(), "no response"
    return future.result()


def call_answered(node, client, request, timeout=10.0, attempt=2.0):
    """`call`, asking again when no answer comes within `attempt` s; for requests that are safe to
    repeat. Fast DDS drops a service's response when the client's response reader has not matched
    within 100 ms (ros2/rmw_fastrtps#390): on a busy machine the first call after wait_for_service can
    go unanswered. Returns (response, whether an earlier attempt went unanswered)."""
    import rclpy

    end = time.monotonic() + timeout
    lost = False
    while True:
        future = client.call_async(request)
        rclpy.spin_until_future_complete(node, future, timeout_sec=min(attempt, max(end - time.monotonic(), 0.0)))
        if future.done():
            return future.result(), lost
        client.remove_pending_request(future)
        assert time.monotonic() < end, "no response"
        lost = True


def call_repeatable(node, client, request, timeout=10.0):
    """The response to a request that is safe to repeat (a query, a reset to a given pose, a reload),
    asked again if an answer is lost (`call_answered`)."""
    return call_answered(node, client, request, timeout)[0]


def wait_for(node, predicate, timeout=10.0):
    """Spin until predicate() is true (discovery, messages): no fixed sleeps."""
    import rclpy

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        rclpy.spin_once(node, timeout_sec=0.02)
    return predicate()
