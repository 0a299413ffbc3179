"""kinematic_sim, driven by rclpy."""
import math
import os
import random
import time

import rclpy
from geometry_msgs.msg import PoseStamped, TwistStamped
from pucl_interfaces.srv import Reset, RunExpert
from rclpy.qos import DurabilityPolicy, QoSProfile
from visualization_msgs.msg import Marker, MarkerArray

from conftest import call, call_repeatable, wait_for


class Sim:
    def __init__(self, start_node, **params):
        start_node("kinematic_sim", "kinematic_sim.yaml", **params)
        self.node = rclpy.create_node(f"sim_test_{os.getpid()}_{random.randint(0, 1 << 30)}")
        self.poses, self.applied = [], []
        self.node.create_subscription(PoseStamped, "/ee_pose", lambda m: self.poses.append((time.monotonic(), m)), 1000)
        self.node.create_subscription(TwistStamped, "/applied_twist", self.applied.append, 1000)
        self.cmd = self.node.create_publisher(TwistStamped, "/cmd_vel", 10)
        self.reset = self.node.create_client(Reset, "/kinematic_sim/reset")
        self.expert = self.node.create_client(RunExpert, "/kinematic_sim/run_expert")
        assert self.reset.wait_for_service(timeout_sec=20) and self.expert.wait_for_service(timeout_sec=20)
        assert wait_for(self.node, lambda: len(self.poses) > 0 and self.cmd.get_subscription_count() > 0, 20)

    def position(self):
        p = self.poses[-1][1].pose.position
        return [p.x, p.y, p.z]

    def command(self, v):
        m = TwistStamped()
        m.twist.linear.x, m.twist.linear.y, m.twist.linear.z = v
        self.cmd.publish(m)

    def settle(self, seconds):
        wait_for(self.node, lambda: False, timeout=seconds)


def test_pose_integrates_the_commanded_twist_within_the_task_limits(start_node):
    s = Sim(start_node)
    assert call_repeatable(s.node, s.reset, Reset.Request()).success
    s.settle(0.1)
    x0 = s.position()[0]
    assert abs(x0 - 0.35) < 1e-9
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.5:
        s.command([0.24, 0.0, 0.0])
        s.settle(0.05)
    moved = s.position()[0] - x0
    assert 0.24 * 0.3 < moved < 0.24 * 0.8, moved  # about 0.5 s at 0.24 m/s, with discovery slack
    s.command([1.0, 0.0, 0.0])  # beyond the action box: 1 unit = 0.48 m/s
    assert wait_for(s.node, lambda: abs(s.applied[-1].twist.linear.x - 0.48) < 1e-9, 2)
    # A stale command stops the end effector (cmd_timeout 0.1 s).
    assert wait_for(s.node, lambda: s.applied[-1].twist.linear.x == 0.0, 2)


def test_a_planar_task_moves_in_its_plane_and_leaves_the_pose_z_at_zero(start_node):
    # point_ellipse_2d's positions are [x, y]: the pose carries them on x and y, z stays 0, and the
    # twist's z moves nothing.
    s = Sim(start_node, task="point_ellipse_2d")
    assert call_repeatable(s.node, s.reset, Reset.Request(position=[0.1, 0.2])).success
    assert wait_for(s.node, lambda: s.position() == [0.1, 0.2, 0.0], 2), s.position()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.5:
        s.command([0.0, 0.3, 0.5])
        s.settle(0.05)
    x, y, z = s.position()
    assert x == 0.1 and z == 0.0, s.position()
    assert 0.3 * 0.3 < y - 0.2 < 0.3 * 0.8, y
    assert s.applied[-1].twist.linear.z == 0.0


def test_reset_into_the_obstacle_is_refused_and_the_node_keeps_running(start_node):
    s = Sim(start_node)
    r = call_repeatable(s.node, s.reset, Reset.Request(position=[0.55, 0.0, 0.05]))
    assert not r.success and "obstacle" in r.message
    r = call_repeatable(s.node, s.reset, Reset.Request(position=[0.5, 0.0]))
    assert not r.success and "3 values" in r.message
    r = call_repeatable(s.node, s.reset, Reset.Request(position=[0.44, 0.03, 0.09]))
    assert r.success
    assert wait_for(s.node, lambda: max(abs(a - b) for a, b in zip(s.position(), [0.44, 0.03, 0.09])) < 1e-9, 2)


def test_expert_drives_to_the_goal_around_the_obstacle(start_node):
    s = Sim(start_node)
    assert call_repeatable(s.node, s.reset, Reset.Request(position=[0.35, 0.03, 0.05])).success
    t0 = time.monotonic()
    r = call(s.node, s.expert, RunExpert.Request(), timeout=30)
    assert r.success, r.message
    during = [m for t, m in s.poses if t >= t0]
    assert len(during) > 20
    for m in during:
        p = m.pose.position
        assert math.hypot(p.x - 0.55, p.y) >= 0.04, "the expert entered the cylinder"
    assert wait_for(s.node, lambda: math.dist(s.position(), [0.68, 0.0, 0.04]) < 0.01, 2)


def test_true_obstacles_are_latched_markers(start_node):
    s = Sim(start_node)
    got = []
    qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    s.node.create_subscription(MarkerArray, "/kinematic_sim/obstacles", got.append, qos)
    assert wait_for(s.node, lambda: got, 10)
    cylinders = [m for m in got[0].markers if m.type == Marker.CYLINDER]
    assert len(cylinders) == 1 and abs(cylinders[0].scale.x - 0.08) < 1e-12
