"""The whole loop over ROS 2 (the README's main job) and the paper's constraint transfer (Fig. 1):
demonstrations recorded over topics, learned by the learner action, enforced by the safety filter
on starts and goals the demonstrations never used."""
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import loop  # noqa: E402

# The simulator's expert keeps 2.5 cm from the obstacle, so the learned boundary is pinned down to
# within d_r - 2.5 cm of the true one; the filter keeps 6 mm from it (docs/DESIGN.md, "Safety margin").
CLEARANCE, MARGIN = 0.025, 0.006


def users_copy(task, folder):
    """The built-in task file under a new name, as a user copies one: no file in config/learn/ has
    that name, so the learner derives its settings from the recorded demonstrations."""
    text = (ROOT / "config" / "tasks" / f"{task}.yaml").read_text()
    assert f"name: {task}\n" in text
    path = folder / f"my_{task}.yaml"
    path.write_text(text.replace(f"name: {task}\n", f"name: my_{task}\n"))
    return str(path)


@pytest.mark.parametrize("task,demos,may_stop,derived", [
    ("reach_obstacle_3d", 24, 0, False),
    ("reach_four_cups_3d", 38, 1, False),
    # A user's copy of the cylinder task: derived settings. Two of 40 such runs stop short of shifted
    # goals behind the cylinder without ROS (tests/transfer.rs), so two may here.
    ("reach_obstacle_3d", 24, 2, True),
], ids=["reach_obstacle_3d", "reach_four_cups_3d", "users_copy_of_reach_obstacle_3d"])
def test_filtered_runs_from_20_shifted_starts_and_goals_stay_feasible_and_reach_their_goals(
        tmp_path, task, demos, may_stop, derived):
    """Every run stays feasible. Every run reaches its goal, except that on the four cups one may stop
    in front of their pocket: the filter does so in about 1 % of shifted runs (docs/RESULTS.md,
    transfer: 3 of 400), and over ROS which run does depends on timing (CI saw run 12 stop once)."""
    if derived:
        task = users_copy(task, tmp_path)
    lp = loop.Loop(task, tmp_path / "work", expert_margin=CLEARANCE, safety_margin=MARGIN)
    try:
        path = lp.record(demos, jitter=0.02)
        assert path.exists()
        r = lp.learn(seed=0)
        assert r.success and r.iou > 0.3
        # The result says which settings were derived, and only for a task without a settings file.
        assert ("; derived identify.d_r = " in r.message) == derived, r.message
        pairs, _ = lp.transfer_pairs(20, seed=0)
        runs, missed = [], []
        for i, (start, goal) in enumerate(pairs):
            poses, ok = lp.drive(start, goal)
            runs.append(poses)
            if not ok:
                missed.append((i, start, goal, poses[-1]))
        bad, steps, which = lp.violations(runs)
        assert bad == 0, f"true violations in runs {which}"
        assert len(missed) <= may_stop, f"goals not reached: {missed}"
    finally:
        lp.close()
