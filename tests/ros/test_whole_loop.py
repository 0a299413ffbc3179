"""The whole loop over ROS 2 (the README's main job), on the task's own starts."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import loop  # noqa: E402


def test_whole_loop_records_learns_serves_and_filters_on_the_task_starts(tmp_path):
    lp = loop.Loop("reach_obstacle_3d", tmp_path / "work")
    try:
        demos = lp.record(12)
        assert demos.exists()
        r = lp.learn(seed=0)
        assert r.success and r.iou > 0.4
        runs, reached = [], 0
        for start in lp.spec["starts"]:
            poses, ok = lp.drive(start, lp.spec["goal"]["position"])
            runs.append(poses)
            reached += ok
        bad, steps, which = lp.violations(runs)
        assert bad == 0, f"true violations in runs {which}"
        assert reached == len(runs)
    finally:
        lp.close()
