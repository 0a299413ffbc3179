"""Faults with the simulator downstream of the safety filter: the filter killed (SIGKILL, SIGTERM)
while it drives the arm at the cylinder, and NaN or extreme values on its inputs. Prints a table
(pytest -s)."""
import math
import os
import random
import signal
import time

import pytest
import rclpy
from geometry_msgs.msg import PoseStamped, TwistStamped
from pucl_interfaces.srv import Reset

from conftest import call_repeatable, wait_for

AXIS, RADIUS = (0.55, 0.0), 0.04  # reach_obstacle_3d's true cylinder
SPEED = 0.3  # m/s, as the experiment drove it
ROWS = []


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    print("\n| fault | kill at x (m) | travel after the fault (m) | closest to the axis (m) | inside the true cylinder |")
    print("|---|---|---|---|---|")
    for r in ROWS:
        print("| " + " | ".join(r) + " |")


class Graph:
    """kinematic_sim driven by safety_filter (its output remapped to the simulator's input)."""

    def __init__(self, start_node, model):
        self.start_node, self.model = start_node, model
        start_node("kinematic_sim", "kinematic_sim.yaml")
        self.node = rclpy.create_node(f"fault_test_{os.getpid()}_{random.randint(0, 1 << 30)}")
        self.poses = []
        self.node.create_subscription(PoseStamped, "/ee_pose", lambda m: self.poses.append((time.monotonic(), m)), 10000)
        self.cmd = self.node.create_publisher(TwistStamped, "/cmd_vel_in", 10)
        self.reset = self.node.create_client(Reset, "/kinematic_sim/reset")
        assert self.reset.wait_for_service(timeout_sec=20)

    def filter_endpoints(self):
        """The graph's endpoints (GIDs) of the filter's command input and output."""
        ins = self.node.get_subscriptions_info_by_topic("/cmd_vel_in")
        outs = self.node.get_publishers_info_by_topic("/cmd_vel")
        return {bytes(i.endpoint_gid) for i in ins}, {bytes(i.endpoint_gid) for i in outs}

    def start_filter(self):
        """Start a filter and wait until the graph shows its own input and output. A filter killed by
        SIGKILL stays in the graph until its lease ends, so a count alone cannot tell the new one."""
        old_in, old_out = self.filter_endpoints()
        self.filter = self.start_node("safety_filter", "safety_filter.yaml", model_path=self.model,
                                      cmd_vel_out_topic="cmd_vel")

        def new_filter_seen():
            ins, outs = self.filter_endpoints()
            return bool(ins - old_in) and bool(outs - old_out)

        assert wait_for(self.node, new_filter_seen, 20)

    def position(self):
        p = self.poses[-1][1].pose.position
        return [p.x, p.y, p.z]

    def drive_until(self, x_kill, velocity=(SPEED, 0.0, 0.0), timeout=10.0):
        """Command `velocity` at 50 Hz until the arm passes x_kill (or the time runs out)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            m = TwistStamped()
            m.header.frame_id = "base_link"
            m.twist.linear.x, m.twist.linear.y, m.twist.linear.z = velocity
            self.cmd.publish(m)
            wait_for(self.node, lambda: False, timeout=0.02)
            if self.poses and self.position()[0] >= x_kill:
                return True
        return False


def radial(p):
    return math.hypot(p[0] - AXIS[0], p[1] - AXIS[1])


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_filter_killed_while_driving_at_the_cylinder_never_lets_the_arm_into_it(start_node, models, sig):
    g = Graph(start_node, models[0])
    for x_kill in (0.38, 0.40, 0.42, 0.44):
        assert call_repeatable(g.node, g.reset, Reset.Request(position=[0.35, 0.01, 0.05])).success
        g.start_filter()
        assert g.drive_until(x_kill), f"the arm never reached x = {x_kill}"
        g.filter.proc.send_signal(sig)
        killed, at = time.monotonic(), g.position()
        g.filter.proc.wait(timeout=5)
        # The simulator holds the last command for its cmd_timeout (0.1 s), then stops.
        wait_for(g.node, lambda: False, timeout=0.5)
        after = [m.pose.position for t, m in g.poses if t >= killed]
        path = [[p.x, p.y, p.z] for p in after] or [at]
        travel = max(math.dist(at, p) for p in path)
        closest = min(radial(p) for p in path)
        ROWS.append((sig.name, f"{x_kill:.2f}", f"{travel:.4f}", f"{closest:.4f}", str(closest <= RADIUS)))
        assert closest > RADIUS, f"{sig.name} at x = {x_kill}: the arm entered the true cylinder"
        # At most the 0.1 s timeout (plus a tick or two) of the last command.
        assert travel <= SPEED * (0.1 + 0.05) + 1e-3, f"{sig.name} at x = {x_kill}: moved {travel:.3f} m"
        still = g.position()
        wait_for(g.node, lambda: False, timeout=0.2)
        assert math.dist(still, g.position()) < 1e-9, "the simulator stopped"


def test_nan_and_extreme_inputs_stop_or_stay_finite_and_never_move_the_arm_into_the_cylinder(start_node, models):
    g = Graph(start_node, models[0])
    assert call_repeatable(g.node, g.reset, Reset.Request(position=[0.45, 0.0, 0.05])).success
    g.start_filter()
    out = []
    g.node.create_subscription(TwistStamped, "/cmd_vel", out.append, 1000)
    cases = {
        "NaN command": (float("nan"), 0.0, 0.0),
        "Inf command": (float("inf"), 0.0, 0.0),
        "1e308 command": (1e308, 0.0, 0.0),
        "-1e308 command": (-1e308, 1e308, 0.0),
        "1e6 m/s into the cylinder": (1e6, 0.0, 0.0),
    }
    for name, v in cases.items():
        n = len(out)
        m = TwistStamped()
        m.twist.linear.x, m.twist.linear.y, m.twist.linear.z = v
        g.cmd.publish(m)
        assert wait_for(g.node, lambda: len(out) > n, 3), name
        t = out[-1].twist.linear
        assert all(math.isfinite(c) for c in (t.x, t.y, t.z)), f"{name}: {t}"
        p = g.position()
        # Whatever came out, its path over the horizon (0.1 s) stays outside the true cylinder.
        for j in range(1, 101):
            q = [p[0] + 1e-3 * j * t.x, p[1] + 1e-3 * j * t.y]
            assert radial(q) > RADIUS, f"{name}: output {t} heads into the cylinder"
        ROWS.append((name, "-", f"output ({t.x:.3g}, {t.y:.3g}, {t.z:.3g}) m/s", "-", "False"))
    wait_for(g.node, lambda: False, timeout=0.3)
    assert radial(g.position()) > RADIUS
