#!/usr/bin/env python3
"""The whole loop over ROS 2 on the built-in simulator: start the 'learn' graph (launch/graph.yaml)
with `ros2 launch pucl learn.launch.py` where pucl is installed and a ros2 command exists (else with
scripts/run_graph.py, which starts the same nodes), record expert demonstrations over topics, learn
the constraint with the learner action, serve it, then drive the simulator with a nominal
controller that would hit the obstacle, through the safety filter, and report IoU, the unsafe rate
and whether the filtered runs stayed feasible.

    loop.py [--task reach_obstacle_3d] [--workdir out/ros] [--demos N] [--jitter M] [--runs N] [--shift]
            [--expert-margin M] [--safety-margin M] [--learn-config FILE]
"""
import argparse
import csv
import functools
import json
import math
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time

import rclpy
import yaml
from geometry_msgs.msg import PoseStamped, TwistStamped
from pucl_interfaces.action import LearnConstraint
from pucl_interfaces.srv import QueryFeasibility, Reset, RunExpert
from rclpy.action import ActionClient
from std_srvs.srv import Trigger

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import run_graph  # noqa: E402


def task_file(task):
    p = ROOT / "config" / "tasks" / f"{task}.yaml"
    return yaml.safe_load((p if p.exists() else pathlib.Path(task)).read_text())


def pose_axes(spec):
    """Which axis of the pose and twist (0 = x, 1 = y, 2 = z) each of the task's positions is: by
    name where they are x, y and z (a planar task's [x, y]), otherwise in order (Task::pose_axes)."""
    names = spec["position"]
    by_name = ["xyz".index(n) for n in names if n in ("x", "y", "z")]
    return by_name if len(by_name) == len(names) == len(set(by_name)) else list(range(len(names)))


@functools.cache
def installed_prefix():
    """The install prefix of pucl when colcon installed it (it is in the ament index), else None."""
    try:
        from ament_index_python.packages import get_package_prefix

        return pathlib.Path(get_package_prefix("pucl"))
    except Exception:  # noqa: BLE001 - not installed, or no ament_index_python
        return None


def pucl(*args):
    prefix = installed_prefix()
    exe = prefix / "bin/pucl" if prefix and (prefix / "bin/pucl").exists() else ROOT / "target/release/pucl"
    out = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return out.stdout


class Loop:
    def __init__(self, task, workdir, expert_margin=None, safety_margin=None):
        """Start the 'learn' graph; `expert_margin`: the clearance (m) the simulator's expert keeps
        (default: the task's); `safety_margin`: the filter's distance from the learned boundary
        (default: the model's)."""
        self.task, self.workdir = task, pathlib.Path(workdir)
        self.spec = task_file(task)
        self.axes = pose_axes(self.spec)
        self.expert_margin = expert_margin
        overrides = {}
        if expert_margin is not None:
            overrides["kinematic_sim"] = {"ros__parameters": {"expert_margin": float(expert_margin)}}
        if safety_margin is not None:
            overrides["safety_filter"] = {"ros__parameters": {"safety_margin": float(safety_margin)}}
        self.workdir.mkdir(parents=True, exist_ok=True)
        params_file = None
        if overrides:
            params_file = self.workdir / "overrides.yaml"
            params_file.write_text(yaml.safe_dump(overrides))
        self.launch, self.procs = None, []
        prefix = installed_prefix()
        beside = pathlib.Path(sys.executable).parent / "ros2"  # the venv's tools from ../shared
        ros2 = shutil.which("ros2") or (str(beside) if beside.exists() else None)
        if prefix and ros2:
            args = [ros2, "launch", "pucl", "learn.launch.py", f"workdir:={self.workdir.resolve()}", f"task:={task}"]
            if params_file:
                args.append(f"params_file:={params_file.resolve()}")
            print(f"[loop] {' '.join(args)}", file=sys.stderr)
            log = open(self.workdir / "launch.log", "w")
            self.launch = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        else:
            print("[loop] no ros2 launch for an installed pucl here: scripts/run_graph.py learn", file=sys.stderr)
            bin_dir = prefix / "lib/pucl" if prefix else None
            self.procs = run_graph.start("learn", self.workdir, task, params_file=params_file, bin_dir=bin_dir)
        self.node = rclpy.create_node(f"pucl_loop_{os.getpid()}")
        self.pose = None
        self.node.create_subscription(PoseStamped, "/ee_pose", self._on_pose, 100)
        self.cmd = self.node.create_publisher(TwistStamped, "/cmd_vel_in", 10)
        self.reset_c = self.node.create_client(Reset, "/kinematic_sim/reset")
        self.expert_c = self.node.create_client(RunExpert, "/kinematic_sim/run_expert")
        self.rec_start = self.node.create_client(Trigger, "/demo_recorder/start")
        self.rec_stop = self.node.create_client(Trigger, "/demo_recorder/stop")
        self.learn_c = ActionClient(self.node, LearnConstraint, "/learner/learn")
        self.query_c = self.node.create_client(QueryFeasibility, "/constraint_server/query_feasibility")
        for c in (self.reset_c, self.expert_c, self.rec_start, self.rec_stop, self.query_c):
            if not c.wait_for_service(timeout_sec=30):
                raise RuntimeError(f"{c.srv_name} did not appear; see the logs in {self.workdir}")
        if not self.learn_c.wait_for_server(timeout_sec=30):
            raise RuntimeError("the learner action did not appear")
        self.spin_until(lambda: self.pose is not None and self.cmd.get_subscription_count() > 0, 30)

    def _on_pose(self, m):
        p = m.pose.position
        xyz = [p.x, p.y, p.z]
        self.pose = (time.monotonic(), [xyz[a] for a in self.axes])

    def spin_until(self, predicate, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            rclpy.spin_once(self.node, timeout_sec=0.01)
        return predicate()

    def call(self, client, request, timeout=30):
        f = client.call_async(request)
        rclpy.spin_until_future_complete(self.node, f, timeout_sec=timeout)
        if not f.done():
            raise RuntimeError(f"{client.srv_name}: no answer")
        return f.result()

    def close(self):
        self.node.destroy_node()
        run_graph.stop(self.procs)
        if self.launch and self.launch.poll() is None:
            os.killpg(self.launch.pid, signal.SIGINT)  # ros2 launch stops its nodes on SIGINT
            try:
                self.launch.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.launch.pid, signal.SIGKILL)
                self.launch.wait()

    def demo_starts(self, n, jitter, seed):
        """The task's starts in turn, each moved by up to +-jitter per axis where the expert can start
        (the CLI's generator draws them: it knows the expert's margin)."""
        if jitter <= 0:
            return [self.spec["starts"][i % len(self.spec["starts"])] for i in range(n)]
        path = self.workdir / "starts.csv"
        margin = [] if self.expert_margin is None else ["--margin", self.expert_margin]
        pucl("demos", "generate", "--task", self.task, "--count", n, "--jitter", jitter, "--seed", seed,
             *margin, "--out", path)
        with open(path) as f:
            rows = [r for r in csv.DictReader(f) if r["step"] == "0"]
        return [[float(r[c]) for c in self.spec["position"]] for r in rows]

    def record(self, n, jitter=0.0, seed=0):
        """n expert demonstrations, recorded over topics by the demo_recorder, from the task's starts,
        each moved by up to +-jitter (m) per axis (varied demonstrations show more of the obstacle)."""
        for i, start in enumerate(self.demo_starts(n, jitter, seed)):
            r = self.call(self.reset_c, Reset.Request(position=[float(v) for v in start]))
            if not r.success:
                raise RuntimeError(r.message)
            # The recorder refuses to start before it has a pose (its subscriptions may match the
            # simulator after this node's did): ask again until it has one.
            answers = []

            def started():
                answers.append(self.call(self.rec_start, Trigger.Request()))
                return answers[-1].success
            if not self.spin_until(started, 30):
                raise RuntimeError(f"demo_recorder did not start: {answers[-1].message}")
            r = self.call(self.expert_c, RunExpert.Request(), timeout=60)
            if not r.success:
                raise RuntimeError(f"expert: {r.message}")
            r = self.call(self.rec_stop, Trigger.Request())
            if not r.success:
                raise RuntimeError(r.message)
            print(f"demonstration {i + 1}/{n}: {r.message}", file=sys.stderr)
        return self.workdir / "demos.csv"

    def learn(self, seed=0, config=""):
        def feedback(f):
            fb = f.feedback
            print(f"learning: iteration {fb.iteration}/{fb.iterations}, |R| {fb.reliable_infeasible}, "
                  f"|M| {fb.memory_buffer}, loss {fb.loss:.4f}, {fb.elapsed:.1f} s", file=sys.stderr)
        goal = LearnConstraint.Goal(seed=seed, config=str(config))
        sent = self.learn_c.send_goal_async(goal, feedback_callback=feedback)
        rclpy.spin_until_future_complete(self.node, sent, timeout_sec=30)
        res = sent.result().get_result_async()
        rclpy.spin_until_future_complete(self.node, res, timeout_sec=300)
        r = res.result().result
        if not r.success:
            raise RuntimeError(f"learning failed: {r.message}")
        # The nodes would pick the new file up within their watch period; make it immediate.
        for node in ("safety_filter", "constraint_server"):
            reload = self.node.create_client(Trigger, f"/{node}/reload")
            if not reload.wait_for_service(timeout_sec=10) or not self.call(reload, Trigger.Request()).success:
                raise RuntimeError(f"the {node} did not load the model")
        return r

    def learned_feasible(self, position):
        """The constraint_server's answer for one position."""
        r = self.call(self.query_c, QueryFeasibility.Request(states=[float(v) for v in position]))
        if r.error:
            raise RuntimeError(f"query_feasibility: {r.error}")
        return r.feasible[0]

    def transfer_pairs(self, n, seed=0):
        """n shifted (start, goal) pairs (see `shifted`) a robot may be at: a start inside a true
        obstacle (the simulator refuses it) or inside the learned one (the constraint_server says
        infeasible), or a learned-infeasible goal, is drawn again. Returns (pairs, redrawn)."""
        pairs, redrawn = [], 0
        for start, goal in shifted(self.spec, None, seed):
            if len(pairs) == n:
                break
            if redrawn > 10 * n:
                raise RuntimeError(f"only {len(pairs)} of {n} shifted starts and goals are feasible")
            ok = self.learned_feasible(start) and self.learned_feasible(goal)
            if ok and self.call(self.reset_c, Reset.Request(position=[float(v) for v in start])).success:
                pairs.append((start, goal))
            else:
                redrawn += 1
        return pairs, redrawn

    def drive(self, start, goal, speed=0.25, timeout=20.0, rate=50.0):
        """A nominal P-controller towards `goal` (it ignores the obstacle), through the safety filter.
        Returns (poses, reached)."""
        r = self.call(self.reset_c, Reset.Request(position=[float(v) for v in start]))
        if not r.success:
            raise RuntimeError(r.message)
        t_reset = time.monotonic()
        self.spin_until(lambda: self.pose is not None and self.pose[0] > t_reset, 5)
        poses, tol = [], float(self.spec["goal"]["tolerance"])
        end = time.monotonic() + timeout
        reached = False
        while time.monotonic() < end:
            p = self.pose[1]
            poses.append(p)
            d = [g - x for g, x in zip(goal, p)]
            dist = math.sqrt(sum(v * v for v in d))
            if dist < tol:
                reached = True
                break
            v = [2.0 * c for c in d]
            n = math.sqrt(sum(c * c for c in v))
            if n > speed:
                v = [c * speed / n for c in v]
            xyz = [0.0, 0.0, 0.0]
            for a, c in zip(self.axes, v):
                xyz[a] = c
            m = TwistStamped()
            m.header.frame_id = "base_link"
            m.twist.linear.x, m.twist.linear.y, m.twist.linear.z = xyz
            self.cmd.publish(m)
            tick = time.monotonic() + 1.0 / rate
            while time.monotonic() < tick:
                rclpy.spin_once(self.node, timeout_sec=max(0.0, tick - time.monotonic()))
        return poses, reached

    def violations(self, runs):
        """True violations of driven runs, counted by `pucl demos check` (the task's true constraint)."""
        path = self.workdir / "driven.csv"
        names, actions = self.spec["state"], self.spec["action"]
        if names != self.spec["position"]:
            raise RuntimeError("driven runs are checked for tasks whose state is their position")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["demo", "step", *names, *actions])
            for i, poses in enumerate(runs):
                for t, p in enumerate(poses):
                    w.writerow([i, t, *p, *[0.0] * len(actions)])
        report = json.loads(pucl("demos", "check", path, "--task", self.task, "--json"))
        return report["violating_steps"], report["steps"], report["violating_demos"]


def shifted(spec, n, seed):
    """Starts and goals shifted around the task's (the paper's constraint transfer, Fig. 1): the
    task's starts in turn, each moved by up to 3 cm per axis, and goals moved by up to 5 cm (x back
    by up to 4 or on by 2, y either way by 5, z up by up to 4; a planar task's first two). Within the
    task's bounds where it has them. n pairs, or without end when n is None."""
    rng = random.Random(seed)
    bounds = spec["dynamics"].get("bounds")
    goal = spec["goal"]["position"]
    if bounds:
        lo, hi = bounds["lower"], bounds["upper"]
    else:
        lo, hi = [-math.inf] * len(goal), [math.inf] * len(goal)
    clamp = lambda p: [min(max(v, a + 0.005), b - 0.005) for v, a, b in zip(p, lo, hi)]  # noqa: E731
    shifts = [(-0.04, 0.02), (-0.05, 0.05), (0.0, 0.04)]
    i = 0
    while n is None or i < n:
        s = [v + rng.uniform(-0.03, 0.03) for v in spec["starts"][i % len(spec["starts"])]]
        g = [c + rng.uniform(*r) for c, r in zip(goal, shifts)]
        yield clamp(s), clamp(g)
        i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="reach_obstacle_3d")
    ap.add_argument("--workdir", default="out/ros")
    ap.add_argument("--demos", type=int, default=24, help="expert demonstrations to record")
    ap.add_argument("--jitter", type=float, default=0.02, help="m per axis by which demonstration starts vary")
    ap.add_argument("--runs", type=int, default=12, help="filtered runs of the nominal controller")
    ap.add_argument("--shift", action="store_true", help="shift starts and goals (constraint transfer)")
    ap.add_argument("--learn-config", default="", help="learn.yaml overrides for the learner action")
    ap.add_argument("--expert-margin", type=float, help="m the expert keeps from the true constraint "
                    "(default: the task's expert.margin)")
    ap.add_argument("--safety-margin", type=float, help="m the filter keeps from the learned boundary "
                    "(default: the model's)")
    a = ap.parse_args()
    rclpy.init()
    loop = Loop(a.task, a.workdir, a.expert_margin, a.safety_margin)
    try:
        demos = loop.record(a.demos, a.jitter)
        print(f"recorded {demos}", file=sys.stderr)
        r = loop.learn(config=a.learn_config)
        ev = json.loads(pucl("eval", "--task", a.task, "--model", r.model_path, "--json"))
        runs, reached = [], 0
        if a.shift:
            pairs, redrawn = loop.transfer_pairs(a.runs, 0)
            print(f"shifted starts and goals: {len(pairs)}, {redrawn} drawn again (inside a true or the "
                  f"learned obstacle)", file=sys.stderr)
        else:
            pairs = [(s, loop.spec["goal"]["position"]) for s in loop.spec["starts"]][: a.runs]
        r3 = lambda p: [round(v, 3) for v in p]  # noqa: E731
        for i, (start, goal) in enumerate(pairs):
            poses, ok = loop.drive(start, goal)
            runs.append(poses)
            reached += ok
            if not ok:
                print(f"run {i} from {r3(start)} to {r3(goal)} stopped short at {r3(poses[-1])}", file=sys.stderr)
        bad, steps, which = loop.violations(runs)
        print(f"model {r.model_path}: IoU {ev['iou']:.3f}, recall {ev['recall']:.3f}, precision {ev['precision']:.3f}, "
              f"unsafe rate of the DSM policy {100 * ev['unsafe_rate']:.3f} % "
              f"(goal reached in {100 * ev['goal_reached']:.1f} % of its episodes)")
        print(f"filtered runs of a controller that ignores the obstacle: {len(runs)}, goal reached {reached}, "
              f"true violations {bad} of {steps} steps -> {'stayed feasible' if bad == 0 else 'VIOLATED in runs ' + str(which)}")
        sys.exit(0 if bad == 0 else 1)
    finally:
        loop.close()
        rclpy.shutdown()


if __name__ == "__main__":
    main()
