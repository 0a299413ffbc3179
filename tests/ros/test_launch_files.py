"""The launch files, exercised without the `launch` package (none installs here): each
launch/*.launch.py runs against stand-ins of launch, launch_ros and ament_index_python that record
what it declares, and the nodes it would start must be exactly the command lines that
scripts/run_graph.py starts for the same graph (which the whole-loop test runs)."""
import importlib.util
import pathlib
import sys
import types

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import run_graph  # noqa: E402


class LaunchConfiguration:
    def __init__(self, name):
        self.name = name


def stand_ins():
    """Modules that record the launch description instead of launching it."""
    launch = types.ModuleType("launch")
    launch.LaunchDescription = lambda actions: list(actions)
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = lambda name, **kw: ("argument", name, kw)
    substitutions = types.ModuleType("launch.substitutions")
    substitutions.LaunchConfiguration = LaunchConfiguration
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.Node = lambda **kw: ("node", kw)
    ament = types.ModuleType("ament_index_python")
    packages = types.ModuleType("ament_index_python.packages")
    # An installed package's share directory holds launch/ and config/, as the repository does.
    packages.get_package_share_directory = lambda pkg: str(ROOT) if pkg == "pucl" else pytest.fail(pkg)
    return {"launch": launch, "launch.actions": actions, "launch.substitutions": substitutions,
            "launch_ros": launch_ros, "launch_ros.actions": ros_actions,
            "ament_index_python": ament, "ament_index_python.packages": packages}


def resolve(value, args):
    if isinstance(value, LaunchConfiguration):
        return args[value.name]
    if isinstance(value, list):
        return "".join(resolve(v, args) for v in value)
    return str(value)


def launched_commands(path, args, bin_dir):
    """The command lines `ros2 launch` would run for a launch file, given the launch arguments."""
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out, declared = [], set()
    for action in module.generate_launch_description():
        if action[0] == "argument":
            declared.add(action[1])
            continue
        kw = action[1]
        assert kw["package"] == "pucl"
        params_file, overrides = kw["parameters"]
        cmd = [str(bin_dir / kw["executable"]), "--ros-args", "--params-file", params_file]
        for k, v in overrides.items():
            cmd += ["-p", f"{k}:={resolve(v, args)}"]
        for a, b in kw["remappings"]:
            cmd += ["-r", f"{a}:={b}"]
        out.append((kw["name"], cmd))
    assert declared == set(args), f"{path.name} declares {declared}"
    return out


@pytest.mark.parametrize("graph", ["learn", "filter", "sim"])
def test_launch_file_starts_exactly_what_run_graph_starts(graph, monkeypatch, tmp_path):
    for name, module in stand_ins().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "pucl_graph", raising=False)
    args = {"workdir": str(tmp_path / "w"), "task": "reach_four_cups_3d"}
    bin_dir = ROOT / "target" / "release"
    launched = launched_commands(ROOT / "launch" / f"{graph}.launch.py", args, bin_dir)
    assert launched == run_graph.commands(graph, args["workdir"], args["task"], bin_dir=bin_dir)
    for name, cmd in launched:
        # Every executable exists and every parameter file it is given is one of config/.
        assert (bin_dir / cmd[0].split("/")[-1]).exists(), name
        assert (ROOT / "config").samefile(pathlib.Path(cmd[3]).parent), cmd[3]
