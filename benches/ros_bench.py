"""End-to-end benchmarks of the ROS 2 nodes through DDS on loopback (run by scripts/bench_ros.sh):
cmd_vel_in -> cmd_vel_out latency of safety_filter at 100 Hz and 1 kHz input, and the throughput of
constraint_server's query service for single-state and 1000-state batch requests."""
import os
import pathlib
import random
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "ros"))
import conftest  # noqa: E402  (isolated domain, node helpers)
import rclpy  # noqa: E402
from geometry_msgs.msg import PoseStamped, TwistStamped  # noqa: E402
from pucl_interfaces.srv import QueryFeasibility  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]


def latency(node, rate, seconds):
    pose_pub = node.create_publisher(PoseStamped, "/ee_pose", 10)
    cmd_pub = node.create_publisher(TwistStamped, "/cmd_vel_in", 100)
    sent, got = {}, {}

    def on_out(m):
        seq = int(round(m.twist.angular.z * 1e6))
        if seq in sent and seq not in got:
            got[seq] = time.monotonic()

    node.create_subscription(TwistStamped, "/cmd_vel_out", on_out, 1000)
    assert conftest.wait_for(node, lambda: cmd_pub.get_subscription_count() > 0 and pose_pub.get_subscription_count() > 0, 20)
    p = PoseStamped()
    p.pose.position.x, p.pose.position.y, p.pose.position.z = 0.35, -0.09, 0.05  # far from the obstacle
    n = int(rate * seconds)
    t0 = time.monotonic()
    for i in range(n):
        pose_pub.publish(p)
        c = TwistStamped()
        c.twist.linear.x = 0.1
        c.twist.angular.z = (i + 1) * 1e-6  # passes unchanged: identifies the command
        sent[i + 1] = time.monotonic()
        cmd_pub.publish(c)
        # Wait for events until the next send time (blocking, so the harness leaves the CPU to the
        # node under test on this 2-core machine).
        while (left := t0 + (i + 1) / rate - time.monotonic()) > 0:
            rclpy.spin_once(node, timeout_sec=left)
    conftest.wait_for(node, lambda: len(got) >= n, 2)
    lat = [1e3 * (got[k] - sent[k]) for k in got]
    for x in (pose_pub, cmd_pub):
        node.destroy_publisher(x)
    return lat, n


def throughput(node, states_per_request, seconds, in_flight):
    client = node.create_client(QueryFeasibility, "/constraint_server/query_feasibility", qos_profile=QoSProfile(depth=1000))
    assert client.wait_for_service(timeout_sec=20)
    r = random.Random(0)
    xs = []
    for _ in range(states_per_request):
        xs += [r.uniform(0.4, 0.7), r.uniform(-0.1, 0.1), r.uniform(0.03, 0.09)]
    req = QueryFeasibility.Request(states=xs)
    done, pending, rtt = 0, [], []
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        while len(pending) < in_flight:
            pending.append((time.monotonic(), client.call_async(req)))
        rclpy.spin_once(node, timeout_sec=0.001)
        still = []
        for ts, f in pending:
            if f.done():
                assert f.result().error == ""
                done += 1
                rtt.append(1e3 * (time.monotonic() - ts))
            else:
                still.append((ts, f))
        pending = still
    elapsed = time.monotonic() - t0
    node.destroy_client(client)
    return done / elapsed, statistics.median(rtt)


def main():
    import tempfile

    rclpy.init()
    d = pathlib.Path(tempfile.mkdtemp())
    model = conftest.learn(d / "m.json", 1)
    filt = conftest.Node("safety_filter", "safety_filter.yaml", [("model_path", model)], log=d / "filter.log")
    server = conftest.Node("constraint_server", "constraint_server.yaml", [("model_path", model)], log=d / "server.log")
    node = rclpy.create_node(f"bench_{os.getpid()}")
    try:
        print("| safety_filter cmd_vel_in -> cmd_vel_out | commands | received | median ms | p99 ms | max ms |")
        print("|---|---|---|---|---|---|")
        for rate in (100, 1000):
            lat, n = latency(node, rate, 5.0)
            print(f"| {rate} Hz input, 5 s | {n} | {len(lat)} | {statistics.median(lat):.3f} | {pct(lat, 0.99):.3f} | {max(lat):.3f} |")
        print()
        print("| constraint_server ~/query_feasibility | requests/s | states/s | median round trip ms |")
        print("|---|---|---|---|")
        for states, in_flight in ((1, 1), (1, 16), (1000, 1), (1000, 4)):
            rps, rtt = throughput(node, states, 5.0, in_flight)
            print(f"| {states} state(s) per request, {in_flight} in flight | {rps:.0f} | {rps * states:.0f} | {rtt:.3f} |")
    finally:
        filt.stop()
        server.stop()
        rclpy.shutdown()


if __name__ == "__main__":
    main()
