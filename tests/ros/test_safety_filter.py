"""safety_filter, driven by rclpy."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.qos import qos_profile_sensor_data
from std_srvs.srv import SetBool, Trigger

from conftest import BIN, ROOT, call_repeatable, pucl, query_cli, wait_for


class Harness:
    def __init__(self, start_node, model, pose_qos=10, **params):
        self.proc = start_node("safety_filter", "safety_filter.yaml", model_path=model or "''", **params)
        self.node = rclpy.create_node(f"filter_test_{os.getpid()}_{random.randint(0, 1 << 30)}")
        self.pose_pub = self.node.create_publisher(PoseStamped, "/ee_pose", pose_qos)
        self.cmd_pub = self.node.create_publisher(TwistStamped, "/cmd_vel_in", 10)
        self.out, self.diag = [], []
        self.node.create_subscription(TwistStamped, "/cmd_vel_out", self.out.append, 100)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diag.append, 100)
        # Discovery: wait until the filter's subscriptions and publisher are matched (it may already
        # have gone quiet after stop_pub_timeout, so its output is not what to wait for).
        assert wait_for(self.node, lambda: self.pose_pub.get_subscription_count() > 0
                        and self.cmd_pub.get_subscription_count() > 0
                        and self.node.count_publishers("/cmd_vel_out") > 0, timeout=20)
        # The filter reports a status change on /diagnostics once, and repeats only the current status
        # once a second: a change made before /diagnostics is matched would be missed. Its first
        # periodic report shows the subscription is matched.
        assert wait_for(self.node, lambda: self.diag, timeout=20)

    def pose(self, p, age=None):
        """Publish a pose; with `age` (s), stamped that long ago by this machine's clock."""
        m = PoseStamped()
        m.header.frame_id = "base_link"
        if age is not None:
            t = time.time() - age
            m.header.stamp.sec, m.header.stamp.nanosec = int(t), int((t - int(t)) * 1e9)
        m.pose.position.x, m.pose.position.y, m.pose.position.z = p
        m.pose.orientation.w = 1.0
        self.pose_pub.publish(m)

    def cmd(self, v):
        m = TwistStamped()
        m.header.frame_id = "base_link"
        (m.twist.linear.x, m.twist.linear.y, m.twist.linear.z,
         m.twist.angular.x, m.twist.angular.y, m.twist.angular.z) = v
        self.cmd_pub.publish(m)

    @staticmethod
    def _values(m):
        t = m.twist
        return [t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z]

    def next_output(self, timeout=2.0):
        n = len(self.out)
        assert wait_for(self.node, lambda: len(self.out) > n, timeout)
        return self._values(self.out[-1])

    def respond(self, pose, v):
        """Send pose and command, return the filter's answer to that command."""
        # The timer keeps republishing the answer to a previous command while it is fresh, and one
        # of those may arrive after `v` is sent. A zero command first, answered by a zero twist,
        # leaves the previous answers behind: outputs arrive in order, so the first nonzero one
        # after that zero answers `v`.
        if self.out and any(self._values(self.out[-1])):
            self.cmd([0.0] * 6)
            assert wait_for(self.node, lambda: not any(self._values(self.out[-1])), timeout=2.0)
        self.pose(pose)
        wait_for(self.node, lambda: False, timeout=0.05)  # let the pose arrive first
        self.cmd(v)
        target = [round(c, 9) for c in v]
        for _ in range(50):
            out = self.next_output()
            if any(abs(c) > 0 for c in out) or target == [0.0] * 6:
                return out
            # The pose is read best effort, as a driver's: one may be lost (CI saw a zero answer to
            # a far command once). A driver publishes its pose continuously; so does this.
            self.pose(pose)
        return out

    def diagnosed(self, text, timeout=3.0):
        return wait_for(self.node, lambda: any(text in s.message for a in self.diag for s in a.status), timeout)


def boundary_point(model):
    """A point on -x just outside the learned cylinder at y = 0, z = 0.05."""
    xs = [0.40 + 0.001 * i for i in range(200)]
    flat = []
    for x in xs:
        flat += [x, 0.0, 0.05]
    feasible = query_cli(model, flat)["feasible"]
    i = feasible.index(False) - 1
    return [xs[i], 0.0, 0.05]


def test_command_into_the_obstacle_loses_its_inward_part_and_away_passes(start_node, models):
    h = Harness(start_node, models[0])
    p = boundary_point(models[0])
    g = query_cli(models[0], p)["gradient"]
    out = h.respond(p, [0.2, 0.05, 0.0, 0.0, 0.0, 0.5])
    inward = -(out[0] * g[0] + out[1] * g[1] + out[2] * g[2])
    assert inward <= 1e-9, (out, g)
    assert out[5] == 0.5, "angular velocity passes unchanged"
    away = [-0.2, 0.03, 0.0, 0.0, 0.0, 0.0]
    out = h.respond(p, away)
    assert all(abs(a - b) < 1e-12 for a, b in zip(out, away)), out
    task = json.loads(Path(models[0]).read_text())["task"]
    assert wait_for(h.node, lambda: any(kv.key == "model" and kv.value == f"task {task}"
                                        for a in h.diag for s in a.status for kv in s.values), 3.0)


def test_a_planar_model_filters_the_twist_in_its_plane_and_passes_z(start_node, tmp_path):
    # The ellipses (inputs [x, y]): a command at the learned circle from below loses its inward part
    # in the plane; the twist's z and angular velocity pass, and the pose's z is not read.
    model = str(tmp_path / "ellipses.json")
    pucl("learn", "--task", "point_ellipse_2d", "--demos", ROOT / "data/demos/point_ellipse_2d.csv",
         "--seed", "0", "--out", model)
    ys = [0.001 * i for i in range(400)]
    feasible = query_cli(model, [c for y in ys for c in (0.72, y)])["feasible"]
    y = ys[feasible.index(False) - 1]
    g = query_cli(model, [0.72, y])["gradient"]
    h = Harness(start_node, model)
    for z in (0.0, 2.0):
        out = h.respond([0.72, y, z], [0.0, 0.2, 0.3, 0.0, 0.0, 0.5])
        assert out[2] == 0.3 and out[5] == 0.5, out
        assert -(out[0] * g[0] + out[1] * g[1]) <= 1e-9, (out, g)
        assert out[:2] != [0.0, 0.2], "modulated in the plane"
    assert h.diagnosed("filtering")


def test_a_pose_published_best_effort_as_a_drivers_sensor_data_is_read(start_node, models):
    # Arm drivers often publish their state with sensor-data QoS (best effort). The filter reads it:
    # a command far from the obstacle passes, one into it loses its inward part.
    h = Harness(start_node, models[0], pose_qos=qos_profile_sensor_data)
    far = [0.35, -0.09, 0.05]
    assert h.respond(far, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])[0] > 0.09, "no pose would give a zero twist"
    p = boundary_point(models[0])
    g = query_cli(models[0], p)["gradient"]
    out = h.respond(p, [0.2, 0.05, 0.0, 0.0, 0.0, 0.0])
    assert -(out[0] * g[0] + out[1] * g[1] + out[2] * g[2]) <= 1e-9, (out, g)
    assert out[:2] != [0.2, 0.05], "modulated where the pose is, so the pose was read"


def test_a_command_held_back_for_a_second_is_diagnosed_as_a_warning_and_the_filtered_command_still_flows(start_node, models):
    # A robot 1 cm inside the learned cylinder, commanded further in: the filter only lets it leave,
    # so the command makes no headway. After a second /diagnostics says so (WARN, not a stop), and
    # once the command turns to where the filter lets the robot go, it is back to OK.
    h = Harness(start_node, models[0])
    p = boundary_point(models[0])
    inside = [p[0] + 0.01, p[1], p[2]]

    def drive(v, until, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            h.pose(inside)
            h.cmd(v)
            if wait_for(h.node, until, 0.05):
                return True
        return False

    def status(level, text):
        return lambda: h.diag and any(s.level in (level, bytes([level])) and text in s.message
                                      for s in h.diag[-1].status)

    assert drive([0.2, 0.0, 0.0, 0.0, 0.0, 0.0], status(1, "held back by the learned constraint"), 5.0)
    assert any(h._values(m)[:3] != [0.0] * 3 for m in h.out[-5:]), "the filtered command still flows"
    assert drive([-0.2, 0.0, 0.0, 0.0, 0.0, 0.0], status(0, "filtering"), 5.0)
    log = Path(h.proc.log.name).read_text()
    assert "held back by the learned constraint" in log, log


def test_stale_pose_stale_command_nan_and_no_model_give_zero_and_say_why(start_node, models):
    h = Harness(start_node, models[0], publish_period=0.02)
    far = [0.35, -0.09, 0.05]
    out = h.respond(far, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert out[0] > 0
    last_command = time.monotonic()
    # Stale command: nothing new for longer than cmd_timeout (0.5 s); the next timer output
    # (publish_period 0.02 s) is a zero twist. Slack of 0.1 s for scheduling on a busy machine.
    assert wait_for(h.node, lambda: h.out[-1].twist.linear.x == 0.0, timeout=1.5)
    assert time.monotonic() - last_command <= 0.5 + 0.02 + 0.1
    assert h.diagnosed("command is stale")
    # Stale pose: commands keep coming, poses stop.
    h.diag.clear()
    for _ in range(40):
        h.cmd([0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
        wait_for(h.node, lambda: False, timeout=0.025)
    assert h.out[-1].twist.linear.x == 0.0 and h.diagnosed("pose is stale")
    # NaN command: a zero twist, with a fresh pose too. The pose follows the NaN's diagnosis: sent
    # first, a timer output could pair it with the last (still fresh) finite command.
    h.diag.clear()
    h.cmd([float("nan"), 0.0, 0.0, 0.0, 0.0, 0.0])
    assert h.diagnosed("NaN")
    h.pose(far)
    n = len(h.out)
    assert wait_for(h.node, lambda: len(h.out) >= n + 5, timeout=2.0)
    assert all(h._values(m) == [0.0] * 6 for m in h.out[n:]), [h._values(m) for m in h.out[n:]]


def test_no_model_gives_zero_and_enable_false_passes_through(start_node):
    h = Harness(start_node, None)
    out = h.respond([0.35, -0.09, 0.05], [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert out == [0.0] * 6 and h.diagnosed("no constraint model")
    # The command goes stale; that status is repeated once a second while unchanged, for a monitor
    # that was not listening at the change.
    assert h.diagnosed("command is stale")
    h.diag.clear()
    assert h.diagnosed("command is stale")
    # Whatever the status, the model key says that no model is loaded.
    values = [dict((kv.key, kv.value) for kv in s.values) for a in h.diag for s in a.status]
    assert values and all(v.get("model") == "none" for v in values), values
    enable = h.node.create_client(SetBool, "/safety_filter/enable")
    assert enable.wait_for_service(timeout_sec=10)
    assert call_repeatable(h.node, enable, SetBool.Request(data=False)).success
    out = h.respond([0.35, -0.09, 0.05], [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert out[0] == 0.1


def test_a_pose_stamped_older_than_pose_timeout_gives_zero_within_one_period(start_node, models):
    h = Harness(start_node, models[0], publish_period=0.02)
    far = [0.35, -0.09, 0.05]
    h.pose(far, age=0.0)
    out = h.respond(far, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert out[0] > 0
    # New to the filter, but stamped 5 s ago: the answer to the next command is a zero twist.
    for age in (5.0, 100.0, 1e6):
        h.diag.clear()
        h.pose(far, age=age)
        # The timer's answer to the previous command turns zero once the old pose is in.
        assert wait_for(h.node, lambda: h._values(h.out[-1]) == [0.0] * 6, timeout=2.0)
        h.cmd([0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
        assert h.next_output() == [0.0] * 6
        assert h.diagnosed("pose is stale")
        assert h.respond(far, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])[0] > 0, "a fresh pose filters again"
    # Stamped in the future beyond max_clock_skew: a clock fault, also a stop.
    h.diag.clear()
    h.pose(far, age=-1.0)
    assert wait_for(h.node, lambda: h._values(h.out[-1]) == [0.0] * 6, timeout=2.0)
    h.cmd([0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert h.next_output() == [0.0] * 6 and h.diagnosed("in the future")


def test_sigterm_publishes_a_zero_twist_as_the_last_output(start_node, models):
    h = Harness(start_node, models[0], publish_period=0.02)
    far = [0.35, -0.09, 0.05]
    out = h.respond(far, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert out[0] > 0
    h.cmd([0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    h.proc.proc.send_signal(signal.SIGTERM)
    assert h.proc.proc.wait(timeout=5) == 0
    assert wait_for(h.node, lambda: h.diagnosed("shutting down", timeout=0.01), 3)
    wait_for(h.node, lambda: False, timeout=0.2)  # anything still in flight
    last = h.out[-1].twist
    assert (last.linear.x, last.linear.y, last.linear.z) == (0.0, 0.0, 0.0)


def test_reloads_under_1khz_commands_leave_no_gap_and_a_failed_reload_is_diagnosed(start_node, models, tmp_path):
    path = tmp_path / "served.json"
    shutil.copy(models[0], path)
    h = Harness(start_node, str(path), publish_period=0.02)
    far = [0.35, -0.09, 0.05]
    assert h.respond(far, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])[0] > 0
    reload = h.node.create_client(Trigger, "/safety_filter/reload")
    assert reload.wait_for_service(timeout_sec=10)
    arrivals = []
    # When the filter published each output (its stamp): a stall shows as a gap between stamps.
    h.node.create_subscription(TwistStamped, "/cmd_vel_out",
                               lambda m: arrivals.append(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec), 10000)
    pending, t0 = [], time.monotonic()
    for i in range(3000):
        if i % 100 == 0:
            h.pose(far)
        h.cmd([0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
        if i % 500 == 250:
            pending.append(reload.call_async(Trigger.Request()))
        rclpy.spin_once(h.node, timeout_sec=0)
        delay = t0 + (i + 1) * 1e-3 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    last_sent = time.time()
    assert wait_for(h.node, lambda: all(f.done() for f in pending), 20)
    # Wait until the filter has answered past the last command (the timer keeps publishing).
    assert wait_for(h.node, lambda: arrivals and max(arrivals) > last_sent, 20)
    assert len(pending) == 6 and all(f.result().success for f in pending), [f.result().message for f in pending]
    window = sorted(a for a in arrivals if a <= last_sent)
    gaps = [b - a for a, b in zip(window, window[1:])]
    print(f"\n{len(window)} outputs for 3000 commands over 6 reloads; largest gap {1e3 * max(gaps):.1f} ms")
    # Before reloads moved off the command path, each stalled the filter for about 0.1 s.
    assert max(gaps) < 0.05, f"largest gap between outputs {max(gaps):.3f} s"
    # Queues are depth 10 (the newest command is the one that matters), so a loaded 2-core machine
    # may drop a few; a reload that blocked the command path would drop about 100 per reload.
    assert len(window) >= 0.9 * 3000, f"{len(window)} outputs for 3000 commands"
    # A broken file: the previous model keeps filtering, and /diagnostics says why (ERROR).
    h.diag.clear()
    path.write_text("{ not a model")
    r = call_repeatable(h.node, reload, Trigger.Request())
    assert not r.success
    assert wait_for(h.node, lambda: any(s.level == b"\x02" or s.level == 2 for a in h.diag for s in a.status
                                        if "not (re)loaded" in s.message), 3)
    assert h.respond(far, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])[0] > 0


def model_in_millimetres(tmp_path):
    """A model of the cylinder task written in millimetres (expert demonstrations, derived settings)."""
    t = yaml.safe_load((ROOT / "config/tasks/reach_obstacle_3d.yaml").read_text())
    mm = lambda v: [mm(c) for c in v] if isinstance(v, list) else 1000.0 * v
    t["name"] = "mm_obstacle_3d"
    t["units"] = {k: ("mm" if v == "m" else v.replace(" m/s", " mm/s").replace("0.48", "480"))
                  for k, v in t["units"].items()}
    d = t["dynamics"]
    d["velocity_scale"], d["bounds"] = mm(d["velocity_scale"]), {k: mm(v) for k, v in d["bounds"].items()}
    t["goal"] = {k: mm(v) for k, v in t["goal"].items()}
    t["starts"], t["start_jitter"] = mm(t["starts"]), mm(t["start_jitter"])
    t["reward"]["goal_bonus"] = mm(t["reward"]["goal_bonus"])
    t["expert"]["margin"] = mm(t["expert"]["margin"])
    for c in t["true_constraint"]:
        c["center"], c["radius"] = mm(c["center"]), mm(c["radius"])
    for axis in t["evaluation"]["grid"]:
        axis["min"], axis["max"] = mm(axis["min"]), mm(axis["max"])
    task, demos, model = tmp_path / "mm.yaml", tmp_path / "mm.csv", tmp_path / "mm.json"
    task.write_text(yaml.safe_dump(t))
    pucl("demos", "generate", "--task", task, "--count", "12", "--out", demos)
    pucl("learn", "--task", task, "--demos", demos, "--out", model)
    return model


def test_a_model_learned_in_millimetres_is_refused_naming_the_unit_and_the_output_is_zero(start_node, tmp_path):
    # Poses arrive in metres (REP 103): fed to a model in mm, 0.35 m would read as 0.35 mm.
    model = model_in_millimetres(tmp_path)
    h = Harness(start_node, str(model), publish_period=0.02)
    out = h.respond([0.35, -0.09, 0.05], [0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert out == [0.0] * 6 and h.diagnosed("no constraint model")
    reload = h.node.create_client(Trigger, "/safety_filter/reload")
    assert reload.wait_for_service(timeout_sec=10)
    r = call_repeatable(h.node, reload, Trigger.Request())
    assert not r.success and "'x' is in mm" in r.message and "REP 103" in r.message, r.message
    assert h.diagnosed("not (re)loaded")


ROS2 = Path(sys.executable).parent / "ros2"


@pytest.mark.skipif(not ROS2.exists(), reason="the real ros2 CLI is not installed (scripts/setup_ros.sh installs it from ../shared)")
def test_ros2_param_lists_sets_refuses_and_dumps_the_filters_parameters(start_node, models, tmp_path):
    def ros2(*args):
        # Without the daemon each call discovers the graph anew: retry while the node is not seen yet.
        end = time.monotonic() + 20
        while True:
            out = subprocess.run([str(ROS2), *args, "--no-daemon"], capture_output=True, text=True, timeout=60)
            text = out.stdout + out.stderr
            if "Node not found" not in text or time.monotonic() > end:
                return text

    h = Harness(start_node, models[0], publish_period=0.02)
    far, go = [0.35, -0.09, 0.05], [0.1, 0.0, 0.0, 0.0, 0.0, 0.0]
    same = lambda a, b: all(abs(x - y) < 1e-12 for x, y in zip(a, b))  # noqa: E731
    base = h.respond(far, go)  # 16 cm from the learned cylinder: almost unchanged
    assert abs(base[0] - go[0]) < 0.01, base
    listed = ros2("param", "list", "/safety_filter").split()
    assert {"safety_margin", "lookahead_time", "cmd_timeout", "use_header_stamp", "model_path"} <= set(listed)
    # A margin wider than the distance to the learned obstacle changes the very next command, and
    # the hulls (which leave the task's goal open by the margin) are built again with it.
    h.diag.clear()
    assert "Set parameter successful" in ros2("param", "set", "/safety_filter", "safety_margin", "0.2")
    assert h.diagnosed(f"loaded {models[0]}: task", timeout=10), "not prepared again for the new margin"
    assert "0.2" in ros2("param", "get", "/safety_filter", "safety_margin")
    out = h.respond(far, go)
    print(f"\nmargin of the model: {base[:3]}; margin 0.2 m: {out[:3]}")
    assert out[0] < base[0] - 0.02, (base, out)
    assert "Set parameter successful" in ros2("param", "set", "/safety_filter", "safety_margin", "-1.0")
    assert same(h.respond(far, go), base), "a negative margin: the model's own again"
    # A speed limit scales the command as a whole before it is filtered (an arm limited axis by
    # axis would bend it); 0 lifts it.
    assert "Set parameter successful" in ros2("param", "set", "/safety_filter", "max_linear_speed", "0.05")
    out = h.respond(far, go)
    speed = sum(c * c for c in out[:3]) ** 0.5
    assert abs(speed - 0.05) < 0.005 and out[0] > 0.99 * speed, (base, out)
    assert "Set parameter successful" in ros2("param", "set", "/safety_filter", "max_linear_speed", "0.0")
    assert same(h.respond(far, go), base), "no limit: the command as before"
    assert "not a number >= 0" in ros2("param", "set", "/safety_filter", "max_linear_speed", "-0.1")
    # At start too: a negative limit in a parameter file is an error naming it, not "no limit".
    bad = subprocess.run([str(BIN / "safety_filter"), "--ros-args", "-p", "max_linear_speed:=-1.0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "max_linear_speed" in bad.stderr, bad.stderr
    # Invalid values and start-only parameters are refused, with the reason.
    assert "not a positive number" in ros2("param", "set", "/safety_filter", "lookahead_time", "-1.0")
    assert "read at start" in ros2("param", "set", "/safety_filter", "pose_topic", "elsewhere")
    # The dump is a parameter file a node starts with.
    dump = tmp_path / "dump.yaml"
    dump.write_text(ros2("param", "dump", "/safety_filter"))
    params = yaml.safe_load(dump.read_text())["/safety_filter"]["ros__parameters"]
    assert params["safety_margin"] == -1.0 and params["model_path"] == str(models[0])
    h.proc.stop()
    again = subprocess.Popen([str(BIN / "safety_filter"), "--ros-args", "--params-file", str(dump)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert "Double value is: -1.0" in ros2("param", "get", "/safety_filter", "safety_margin")
    finally:
        again.send_signal(signal.SIGINT)
        again.wait(timeout=10)
