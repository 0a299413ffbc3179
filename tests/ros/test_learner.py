"""learner (ROS action) with constraint_server, driven by rclpy."""
import os
import random
import shutil

import rclpy
from pucl_interfaces.action import LearnConstraint
from pucl_interfaces.msg import ConstraintInfo
from rclpy.action import ActionClient
from rclpy.qos import DurabilityPolicy, QoSProfile

from conftest import ROOT, wait_for

DEMOS = str(ROOT / "data/demos/reach_obstacle_3d_ds.csv")


def client(start_node, **params):
    start_node("learner", "learner.yaml", **params)
    node = rclpy.create_node(f"learn_test_{os.getpid()}_{random.randint(0, 1 << 30)}")
    ac = ActionClient(node, LearnConstraint, "/learner/learn")
    assert ac.wait_for_server(timeout_sec=20)
    return node, ac


def send(node, ac, goal, attempts=4):
    """Send a goal and return (its handle, its feedback list). wait_for_server only sees the server's
    services; the server may not yet have matched this client's reader for their responses, and a
    response sent before that is lost (ros2/rclpy#1123 lists similar never-completing futures).
    So a goal that gets no answer in 10 s is sent again, with a new id; the learner rejects a goal
    while it runs one, so a rejection after a lost answer waits for the first goal to end."""
    for attempt in range(attempts):
        feedback = []
        sent = ac.send_goal_async(goal, feedback_callback=lambda f, fb=feedback: fb.append(f.feedback))
        rclpy.spin_until_future_complete(node, sent, timeout_sec=10)
        handle = sent.result()
        if handle is not None and handle.accepted:
            return handle, feedback
        if handle is not None and attempt == 0:
            return handle, feedback  # rejected at once: the caller's to judge
        if handle is not None:
            wait_for(node, lambda: False, 2.0)  # an earlier, unanswered goal is still running
    raise AssertionError(f"no answer to the goal in {attempts} attempts")


def run(node, ac, goal, cancel_after=None, timeout=60):
    handle, feedback = send(node, ac, goal)
    assert handle.accepted
    if cancel_after is not None:
        assert wait_for(node, lambda: len(feedback) >= cancel_after, 30)
        handle.cancel_goal_async()
    res = handle.get_result_async()
    rclpy.spin_until_future_complete(node, res, timeout_sec=timeout)
    return res.result().result, feedback


def test_learning_over_ros_writes_the_model_and_the_server_reloads_it(start_node, tmp_path):
    model = tmp_path / "model.json"
    start_node("constraint_server", "constraint_server.yaml", model_path=model)
    node, ac = client(start_node, model_path=model, demos=DEMOS)
    infos = []
    qos = QoSProfile(depth=5, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(ConstraintInfo, "/constraint_server/constraint_info", infos.append, qos)
    r, feedback = run(node, ac, LearnConstraint.Goal(seed=3))
    assert r.success, r.message
    # The message says why the loop ended, at the iteration the result counts.
    assert f"(iteration {r.iterations - 1}: R stopped growing" in r.message or (
        f"({r.iterations} iterations done)" in r.message), r.message
    assert r.model_path == str(model) and model.exists() and r.iou > 0.5
    assert feedback and feedback[-1].iteration == r.iterations and feedback[-1].memory_buffer > 0
    assert all(f.elapsed >= 0 for f in feedback)
    assert wait_for(node, lambda: any(i.model_path == str(model) for i in infos), 10)


def test_bad_goals_get_clear_errors_and_the_node_keeps_running(start_node, tmp_path):
    node, ac = client(start_node, model_path=tmp_path / "m.json", demos="''")
    r, _ = run(node, ac, LearnConstraint.Goal())
    assert not r.success and "no demonstrations" in r.message
    r, _ = run(node, ac, LearnConstraint.Goal(demos=str(ROOT / "data/demos/point_ellipse_2d.csv")))
    assert not r.success and "wrong dimension" in r.message
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    r, _ = run(node, ac, LearnConstraint.Goal(demos=str(empty)))
    assert not r.success and "empty" in r.message
    # An output in a folder that does not exist is refused before learning, not after it.
    r, feedback = run(node, ac, LearnConstraint.Goal(demos=DEMOS, output=str(tmp_path / "no/m.json")))
    assert not r.success and "does not exist" in r.message and not feedback, r.message
    assert not (tmp_path / "m.json").exists()


def test_a_cancelled_run_leaves_the_previous_model_intact(start_node, tmp_path):
    model = tmp_path / "model.json"
    node, ac = client(start_node, model_path=model, demos=DEMOS)
    r, _ = run(node, ac, LearnConstraint.Goal(seed=1))
    assert r.success
    before = model.read_bytes()
    slow = tmp_path / "slow.yaml"
    slow.write_text("iterations: 20\nstop_when_no_new_infeasible: false\nepochs: 2000\n")
    r, feedback = run(node, ac, LearnConstraint.Goal(seed=2, config=str(slow)), cancel_after=1)
    assert not r.success and "untouched" in r.message
    assert model.read_bytes() == before


def test_demonstrations_that_stop_short_of_the_goal_are_named_in_the_result_and_the_log(start_node, tmp_path):
    # The cylinder's demonstrations with the third cut after 20 steps, as a recording stopped early.
    lines = open(DEMOS).read().splitlines()
    kept = [l for l in lines if not (l.startswith("2,") and int(l.split(",")[1]) >= 20)]
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(kept) + "\n")
    node, ac = client(start_node, model_path=tmp_path / "m.json", demos=str(cut))
    r, _ = run(node, ac, LearnConstraint.Goal(seed=1))
    assert r.success, r.message
    assert "; warning: 1 of 12 demonstrations end short of the goal: #2 ends" in r.message, r.message
    log = lambda: (tmp_path / "learner.log").read_text()
    assert wait_for(node, lambda: "WARN" in log() and "end short of the goal" in log(), 10), log()
