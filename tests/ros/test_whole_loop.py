"""The whole loop over ROS 2 (the README's main job) and the paper's constraint transfer (Fig. 1):
demonstrations recorded over topics, learned by the learner action, enforced by the safety filter
on starts and goals the demonstrations never used."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import loop  # noqa: E402


def test_filtered_runs_from_20_shifted_starts_and_goals_stay_feasible_and_reach_their_goals(tmp_path):
    lp = loop.Loop("reach_obstacle_3d", tmp_path / "work")
    try:
        demos = lp.record(24, jitter=0.02)
        assert demos.exists()
        r = lp.learn(seed=0)
        assert r.success and r.iou > 0.4
        runs, missed = [], []
        for i, (start, goal) in enumerate(loop.shifted(lp.spec, 20, seed=0)):
            poses, ok = lp.drive(start, goal)
            runs.append(poses)
            if not ok:
                missed.append(i)
        bad, steps, which = lp.violations(runs)
        assert bad == 0, f"true violations in runs {which}"
        assert not missed, f"runs {missed} did not reach their goals"
    finally:
        lp.close()
