"""Builds launch descriptions from launch/graph.yaml (shared by the *.launch.py files)."""
import os

import yaml
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def describe(graph):
    share = get_package_share_directory("pucl")
    with open(os.path.join(share, "launch", "graph.yaml")) as f:
        desc = yaml.safe_load(f)
    workdir, task = LaunchConfiguration("workdir"), LaunchConfiguration("task")
    actions = [
        DeclareLaunchArgument("workdir", default_value=os.path.join(os.getcwd(), "pucl_out"),
                              description="where demos.csv and model.json go"),
        DeclareLaunchArgument("task", default_value="reach_obstacle_3d", description="built-in task or task file"),
    ]
    for entry in desc["graphs"][graph]:
        node = desc["nodes"][entry["node"]]
        overrides = {}
        for k, v in {**node.get("set", {}), **entry.get("set", {})}.items():
            # "{workdir}/x" and "{task}" become launch substitutions.
            v = str(v)
            if v.startswith("{workdir}"):
                overrides[k] = [workdir, v[len("{workdir}"):]]
            elif v == "{task}":
                overrides[k] = task
            else:
                overrides[k] = v
        actions.append(Node(
            package="pucl",
            executable=node["executable"],
            name=entry["node"],
            parameters=[os.path.join(share, node["params"]), overrides],
            remappings=list(entry.get("remap", {}).items()),
            output="screen",
        ))
    return LaunchDescription(actions)
