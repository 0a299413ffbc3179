"""constraint_server, driven by rclpy."""
import math
import os
import random
import shutil
import time

import rclpy
from pucl_interfaces.msg import ConstraintInfo
from pucl_interfaces.srv import QueryFeasibility
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from conftest import call, call_repeatable, query_cli, wait_for


def server(start_node, model, tmp_path, depth=10):
    path = tmp_path / "served.json"
    shutil.copy(model, path)
    start_node("constraint_server", "constraint_server.yaml", model_path=path)
    node = rclpy.create_node(f"test_client_{os.getpid()}_{random.randint(0, 1 << 30)}")
    # A client sending faster than it spins needs a deeper response queue than the default 10.
    client = node.create_client(QueryFeasibility, "/constraint_server/query_feasibility", qos_profile=QoSProfile(depth=depth))
    assert client.wait_for_service(timeout_sec=20), "service did not appear"
    return node, client, path


def states(n, seed=0):
    r = random.Random(seed)
    out = []
    for _ in range(n):
        out += [r.uniform(0.4, 0.7), r.uniform(-0.1, 0.1), r.uniform(0.03, 0.09)]
    return out


def test_batch_answers_equal_pucl_query(start_node, models, tmp_path):
    node, client, _ = server(start_node, models[0], tmp_path)
    xs = states(40)
    r = call_repeatable(node, client, QueryFeasibility.Request(states=xs))
    assert r.error == ""
    cli = query_cli(models[0], xs)
    assert list(r.feasible) == cli["feasible"]
    for a, b in zip(r.zeta, cli["zeta"]):
        assert abs(a - b) <= 1e-12
    for a, b in zip(r.gradient, cli["gradient"]):
        assert abs(a - b) <= 1e-12 * max(1.0, abs(b))
    # How far and which way: the same as the CLI's (whose JSON writes an infinite distance as null).
    assert len(r.distance) == 40 and len(r.direction) == 120
    for a, b, f in zip(r.distance, cli["distance"], r.feasible):
        assert (a > 0) == f
        assert (math.isinf(a) and b is None) or abs(a - b) <= 1e-12, (a, b)
    for a, b in zip(r.direction, cli["direction"]):
        assert abs(a - b) <= 1e-12
    node.destroy_node()


def test_malformed_request_gets_an_error_and_the_node_keeps_serving(start_node, models, tmp_path):
    node, client, _ = server(start_node, models[0], tmp_path)
    r = call_repeatable(node, client, QueryFeasibility.Request(states=[0.5, 0.0, 0.05, 0.1]))
    assert "multiple" in r.error and len(r.zeta) == 0
    r = call(node, client, QueryFeasibility.Request(states=[0.5, float("nan"), 0.05]))
    assert "finite" in r.error
    r = call(node, client, QueryFeasibility.Request(states=[0.55, 0.0, 0.05]))
    assert r.error == "" and list(r.feasible) == [False]
    # Extreme but finite states get finite answers, not NaN.
    r = call(node, client, QueryFeasibility.Request(states=[1e308, -1e308, 1e308]))
    assert r.error == "" and len(r.zeta) == 1
    assert all(math.isfinite(v) for v in list(r.zeta) + list(r.gradient)), (r.zeta, r.gradient)
    node.destroy_node()


def test_info_and_markers_are_latched(start_node, models, tmp_path):
    node, _, path = server(start_node, models[0], tmp_path)
    got = {}
    qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(ConstraintInfo, "/constraint_server/constraint_info", lambda m: got.setdefault("info", m), qos)
    node.create_subscription(MarkerArray, "/constraint_server/boundary", lambda m: got.setdefault("markers", m), qos)
    assert wait_for(node, lambda: "info" in got and "markers" in got)
    info = got["info"]
    assert info.task == "reach_obstacle_3d" and list(info.feature_names) == ["x", "y", "z"] and info.dimension == 3
    assert info.model_path == str(path) and info.threshold == 0.5 and not math.isnan(info.iou)
    cubes = [m for m in got["markers"].markers if m.ns == "learned_boundary"]
    assert cubes and len(cubes[0].points) > 50
    node.destroy_node()


def test_reload_under_1khz_queries_loses_none_and_never_mixes_models(start_node, models, tmp_path):
    node, client, path = server(start_node, models[0], tmp_path, depth=5000)
    x = [0.52, 0.035, 0.05]
    za, zb = query_cli(models[0], x)["zeta"][0], query_cli(models[1], x)["zeta"][0]
    assert abs(za - zb) > 1e-9, "the two models must answer differently"
    reload = node.create_client(Trigger, "/constraint_server/reload")
    assert reload.wait_for_service(timeout_sec=10)
    futures, t0 = [], time.monotonic()
    swapped = reloaded = None
    for i in range(3000):
        futures.append(client.call_async(QueryFeasibility.Request(states=x)))
        if i == 1000:
            # Replace the file atomically; the watch picks it up.
            tmp = tmp_path / "incoming.json"
            shutil.copy(models[1], tmp)
            os.replace(tmp, path)
            swapped = time.monotonic()
        if i == 2000:
            reloaded = reload.call_async(Trigger.Request())
        rclpy.spin_once(node, timeout_sec=0)
        delay = t0 + (i + 1) * 1e-3 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    assert wait_for(node, lambda: all(f.done() for f in futures) and reloaded.done(), timeout=30)
    answers = [f.result() for f in futures]
    assert all(a.error == "" for a in answers)
    zs = [a.zeta[0] for a in answers]
    assert all(z == za or z == zb for z in zs), "an answer came from neither model"
    # Once the new model answers, the old never does again (one atomic swap).
    first_b = zs.index(zb)
    assert all(z == zb for z in zs[first_b:]) and first_b >= 1000
    assert reloaded.result().success, reloaded.result().message
    assert swapped is not None
    node.destroy_node()


def test_a_replacement_with_the_same_size_and_time_is_noticed(start_node, models, tmp_path):
    node, client, path = server(start_node, models[0], tmp_path)
    x = [0.52, 0.035, 0.05]
    before = call_repeatable(node, client, QueryFeasibility.Request(states=x)).zeta[0]
    # Another model of exactly the same size, given the old file's modification time (as `cp -p`
    # or `rsync -t` leave it): the first decimal of the network's last parameter (the output bias)
    # changed.
    text = path.read_text()
    st = os.stat(path)
    end = text.index("]", text.index('"params"'))
    j = text.rindex(".", 0, end) + 1
    changed = text[:j] + str((int(text[j]) + 1) % 10) + text[j + 1:]
    assert len(changed) == len(text)
    incoming = tmp_path / "same_size.json"
    incoming.write_text(changed)
    os.utime(incoming, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(incoming, path)
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns and os.stat(path).st_size == st.st_size
    expected = query_cli(path, x)["zeta"][0]
    assert expected != before, "the edit must change the answer"
    assert wait_for(node, lambda: call(node, client, QueryFeasibility.Request(states=x)).zeta[0] == expected, 5)


BIG_CLIENT = """
import array, random, sys, rclpy
from pucl_interfaces.srv import QueryFeasibility
rclpy.init()
node = rclpy.create_node("big_client_%d" % random.randint(0, 1 << 30))
from rclpy.qos import QoSProfile
# A deep response queue: the small client's answers (hundreds while this one is in flight) reach this
# client's reader too, and with rclpy's default 10 the large answer was lost in half the tries.
client = node.create_client(QueryFeasibility, "/constraint_server/query_feasibility",
                            qos_profile=QoSProfile(depth=1000))
assert client.wait_for_service(timeout_sec=20)
import time
# Fast DDS drops a response whose client reader has not matched yet (ros2/rmw_fastrtps#390): a
# one-state request is asked until answered first, so that the big one is not lost that way.
deadline = time.monotonic() + 20
while True:
    f = client.call_async(QueryFeasibility.Request(states=[0.5, 0.0, 0.05]))
    rclpy.spin_until_future_complete(node, f, timeout_sec=2.0)
    if f.done() or time.monotonic() > deadline:
        assert f.done(), "no answer to a one-state request within 20 s"
        break
r = random.Random(3)
n = int(sys.argv[1])
flat = array.array("d", [v for _ in range(n)
                         for v in (r.uniform(0.4, 0.7), r.uniform(-0.1, 0.1), r.uniform(0.03, 0.09))])
print("sending", flush=True)
t0 = time.monotonic()
future = client.call_async(QueryFeasibility.Request(states=flat))
# The answer to 1e5 states is about 6.5 MB (distance and direction included): on a loaded 2-core
# machine the middleware's transfer, not the server's 3 s of work, can take long.
rclpy.spin_until_future_complete(node, future, timeout_sec=150)
a = future.result()
assert a is not None, "no answer within 150 s"
print("answered", len(a.zeta), repr(a.error), "in %.1f s" % (time.monotonic() - t0), flush=True)
"""


def test_a_large_request_does_not_make_a_small_client_wait_and_a_huge_one_is_refused(start_node, models, tmp_path):
    import subprocess
    import sys
    node, client, path = server(start_node, models[0], tmp_path)
    x = [0.52, 0.035, 0.05]
    expected = query_cli(models[0], x)["zeta"][0]
    call_repeatable(node, client, QueryFeasibility.Request(states=x))
    # A million states is above max_states_per_request (1e5): a clear error, at once.
    huge = subprocess.run([sys.executable, "-c", BIG_CLIENT, "1000000"], capture_output=True, text=True, timeout=120)
    assert "more than max_states_per_request (100000) states: split the request" in huge.stdout, huge.stdout + huge.stderr
    # 1e5 states from another process (another robot's client), while this one asks for one state.
    # Two tries, the better one judged: a server that serialises requests makes every try wait for
    # the big one, a noisy 2-core machine only now and then one request.
    tries = []
    for _ in range(2):
        big = subprocess.Popen([sys.executable, "-c", BIG_CLIENT, "100000"], stdout=subprocess.PIPE, text=True)
        assert big.stdout.readline().strip() == "sending"
        waits = []
        while big.poll() is None:
            t = time.monotonic()
            r = call(node, client, QueryFeasibility.Request(states=x))
            waits.append(time.monotonic() - t)
            assert r.zeta[0] == expected
            time.sleep(0.002)
        out = big.stdout.read()
        assert big.returncode == 0 and "answered 100000 ''" in out, out
        print(f"\nthe 1e5-state client: {out.strip()}")
        tries.append(sorted(waits))
        if tries[-1][-1] < 0.1:
            break
    waits = min(tries, key=lambda w: w[-1])
    print(f"\n{len(waits)} small requests while the 1e5-state one was served: median "
          f"{1e3 * waits[len(waits) // 2]:.1f} ms, max {1e3 * waits[-1]:.1f} ms")
    assert waits[-1] < 0.1, f"a 1-state request waited {waits[-1]:.3f} s"
