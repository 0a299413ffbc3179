#!/usr/bin/env python3
"""Start a pucl graph from launch/graph.yaml exactly as the launch files do (same executables,
parameter files, overrides and remappings), where no `ros2 launch` exists. Stops everything on
SIGINT/SIGTERM or when a node exits.

    run_graph.py learn --workdir out/ros --task reach_obstacle_3d [--params-file F] [--print]
"""
import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]


def file_overrides(params_file):
    """{node: {parameter: value}} of a ROS parameter file (keys: node names, /name or /**), as the
    launch files' params_file argument applies it."""
    if not params_file:
        return {}
    try:
        data = yaml.safe_load(pathlib.Path(params_file).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise SystemExit(f"params file {params_file}: {e}")
    if not isinstance(data, dict) or not all(isinstance(b, dict) or b is None for b in data.values()):
        raise SystemExit(f"params file {params_file}: expected node names (or /**) mapping to ros__parameters")
    return {key.lstrip("/"): (body or {}).get("ros__parameters", {}) for key, body in data.items()}


def commands(graph, workdir, task, bin_dir=ROOT / "target" / "release", root=ROOT, overrides=None,
             params_file=None):
    """The command line of every node of `graph`, as the launch files build them; `params_file`
    (keys: node names or /**) and then `overrides` ({node: {parameter: value}}) set more parameters
    last, as `ros2 launch ... params_file:=F` does."""
    desc = yaml.safe_load((root / "launch" / "graph.yaml").read_text())
    if graph not in desc["graphs"]:
        raise SystemExit(f"unknown graph '{graph}'; graph.yaml has {', '.join(desc['graphs'])}")
    subst = {"workdir": str(workdir), "task": task}
    unknown = set(overrides or {}) - {e["node"] for e in desc["graphs"][graph]}
    if unknown:
        raise SystemExit(f"overrides for nodes not in graph '{graph}': {', '.join(sorted(unknown))}")
    extra = file_overrides(params_file)
    out = []
    for entry in desc["graphs"][graph]:
        node = desc["nodes"][entry["node"]]
        cmd = [str(bin_dir / node["executable"]), "--ros-args", "--params-file", str(root / node["params"])]
        for k, v in {**node.get("set", {}), **entry.get("set", {})}.items():
            cmd += ["-p", f"{k}:={str(v).format(**subst)}"]
        for k, v in {**extra.get("**", {}), **extra.get(entry["node"], {}),
                     **(overrides or {}).get(entry["node"], {})}.items():
            cmd += ["-p", f"{k}:={v if isinstance(v, str) else json.dumps(v)}"]
        for a, b in entry.get("remap", {}).items():
            cmd += ["-r", f"{a}:={b}"]
        out.append((entry["node"], cmd))
    return out


def start(graph, workdir, task, log_dir=None, overrides=None, params_file=None, bin_dir=None):
    """Start the graph's nodes; returns [(name, Popen)]."""
    pathlib.Path(workdir).mkdir(parents=True, exist_ok=True)
    procs = []
    kw = {"bin_dir": pathlib.Path(bin_dir)} if bin_dir else {}
    for name, cmd in commands(graph, workdir, task, overrides=overrides, params_file=params_file, **kw):
        log = open(pathlib.Path(log_dir or workdir) / f"{name}.log", "w")
        procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)))
    return procs


def stop(procs, timeout=5.0):
    for _, p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    end = time.monotonic() + timeout
    for _, p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graph", help="learn, filter or sim (launch/graph.yaml)")
    ap.add_argument("--workdir", default="out/ros", help="where demos.csv, model.json and logs go")
    ap.add_argument("--task", default="reach_obstacle_3d", help="built-in task name or task file")
    ap.add_argument("--params-file", help="a parameter file applied last to every node (keys: node names or /**)")
    ap.add_argument("--print", action="store_true", help="print the command lines and exit")
    a = ap.parse_args()
    if a.print:
        for name, cmd in commands(a.graph, a.workdir, a.task, params_file=a.params_file):
            print(name + ": " + " ".join(cmd))
        return
    procs = start(a.graph, a.workdir, a.task, params_file=a.params_file)
    stopping = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.append(True))
    print(f"started {', '.join(n for n, _ in procs)}; Ctrl-C stops", file=sys.stderr)
    while not stopping and all(p.poll() is None for _, p in procs):
        time.sleep(0.1)
    for name, p in procs:
        if p.poll() is not None and not stopping:
            print(f"{name} exited with {p.returncode}; stopping the graph", file=sys.stderr)
    stop(procs)


if __name__ == "__main__":
    main()
