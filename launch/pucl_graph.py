"""Builds launch descriptions from launch/graph.yaml (shared by the *.launch.py files)."""
import os

import yaml
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _nodes(context, graph, desc, share):
    subst = {name: LaunchConfiguration(name).perform(context) for name in ("workdir", "task")}
    extra = LaunchConfiguration("params_file").perform(context)
    if extra and not os.path.isfile(extra):
        raise RuntimeError(f"params_file: no such file: {extra}")
    actions = []
    for entry in desc["graphs"][graph]:
        node = desc["nodes"][entry["node"]]
        # "{workdir}/x" and "{task}" become the launch arguments' values, as in scripts/run_graph.py.
        sets = {k: str(v).format(**subst) for k, v in {**node.get("set", {}), **entry.get("set", {})}.items()}
        actions.append(Node(
            package="pucl",
            executable=node["executable"],
            name=entry["node"],
            parameters=[os.path.join(share, node["params"]), sets] + ([extra] if extra else []),
            remappings=list(entry.get("remap", {}).items()),
            output="screen",
        ))
    return actions


def describe(graph):
    share = get_package_share_directory("pucl")
    with open(os.path.join(share, "launch", "graph.yaml")) as f:
        desc = yaml.safe_load(f)
    return LaunchDescription([
        DeclareLaunchArgument("workdir", default_value=os.path.join(os.getcwd(), "pucl_out"),
                              description="where demos.csv and model.json go"),
        DeclareLaunchArgument("task", default_value="reach_obstacle_3d", description="built-in task or task file"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="a parameter file applied last to every node (keys: node names or /**)"),
        OpaqueFunction(function=_nodes, args=[graph, desc, share]),
    ])
