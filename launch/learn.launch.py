"""ros2 launch pucl learn.launch.py [workdir:=DIR] [task:=TASK] [params_file:=FILE]: the 'learn' graph of launch/graph.yaml
(scripts/run_graph.py learn starts the same nodes where no ros2 launch exists)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from pucl_graph import describe  # noqa: E402


def generate_launch_description():
    return describe("learn")
