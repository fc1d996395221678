"""Cross-replica latency of the hub on Redis: a run on replica A, its subscriber on replica B.

Starts a redis-server (no persistence) and two replicas (``murmur-wsgi hub``,
separate gunicorn masters) on loopback ports. Each run of
``tests.e2e.hub_agents:ticks`` on A streams a token every 20 ms stamped with
the time it was written; B's SubscribeToTask stream reads them, and each
event's delay is the time B's client got it minus the newest stamp it carries.
``events.merge_secs`` is 0.001 here, so every token is its own stored event
and the figure is the store's path (A's write → Redis → B's blocking XREAD →
B's client); with the default 0.25 s a subscriber also waits for the merge.
Then CancelTask on B of runs on A: the time to the CANCELED answer. Then push
(on for both replicas, a local HTTPS receiver through the test-only
``push.allow_networks``): ``-p`` runs on A one after the other, each with a
config; a notification's latency is the receiver's clock when it arrived minus
the status timestamp its body carries (the state change, ms precision),
whichever replica delivered it (the config's lease decides).

``--cluster``: the same on a 3-primary Redis Cluster (``store: redis-cluster://…``) instead
of one redis-server.

    python bench/hub_replicas.py [-r RUNS] [-s SECONDS] [-c CANCELS] [-p PUSHES] [--cluster]

Results: a Markdown table on stdout, JSON in bench/results/hub-replicas-<timestamp>.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import jwt

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from bench.push_latency import stamp  # noqa: E402
from bench.report import git_commit, save, versions  # noqa: E402
from tests.e2e.hub_replicas import Replica, Subscriber, send, state, until  # noqa: E402
from tests.hub.push_util import SECRET, Receiver, make_cert  # noqa: E402
from tests.redis_topologies import Cluster  # noqa: E402
from tests.redis_util import RedisServer  # noqa: E402


def log(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def percentile(values: list, p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def event_delays(sub: Subscriber) -> list[float]:
    delays = []
    for event, received_ns in zip(sub.events, sub.received):
        update = event.get("result", {}).get("artifactUpdate")
        if not update:
            continue
        stamps = [int(line.split()[2]) for part in update["artifact"]["parts"]
                  for line in part.get("text", "").splitlines() if line.startswith("tick ")]
        if stamps:
            delays.append((received_ns - max(stamps)) / 1e6)
    return delays


def notified_task(received) -> tuple[str, str]:
    """(task id, state) of one notification's body."""
    body = received.json
    if "task" in body:
        return body["task"]["id"], body["task"]["status"]["state"]
    return body["statusUpdate"]["taskId"], body["statusUpdate"]["status"]["state"]


def final_notified(receiver, task_id: str) -> bool:
    return (task_id, "TASK_STATE_COMPLETED") in map(notified_task, list(receiver.requests))


def push_delays(receiver) -> list[float]:
    """Each notification's first arrival (deduped by jti) minus its state change, in ms."""
    seen, delays = set(), []
    for received in receiver.requests:
        claims = jwt.decode(received.headers["Authorization"][len("Bearer "):],
                            options={"verify_signature": False})
        if claims["jti"] not in seen:
            seen.add(claims["jti"])
            delays.append((received.at - stamp(received.json)) * 1000)
    return delays


class TimedSubscriber(Subscriber):
    """A Subscriber that notes when each event arrived (epoch ns)."""

    def __init__(self, replica, task_id):
        self.received: list[int] = []
        super().__init__(replica, task_id)

    def _read(self):
        for line in self.response.iter_lines():
            if line.startswith(b"data: "):
                self.received.append(time.time_ns())
                self.events.append(json.loads(line[6:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-r", "--runs", type=int, default=5, help="runs followed across")
    parser.add_argument("-s", "--seconds", type=float, default=2.0, help="each run's length")
    parser.add_argument("-c", "--cancels", type=int, default=20, help="cross-replica cancels")
    parser.add_argument("-p", "--pushes", type=int, default=50,
                        help="runs with a push config (3 notifications each)")
    parser.add_argument("--cluster", action="store_true",
                        help="on a 3-primary Redis Cluster instead of one redis-server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hub-replicas-") as tmp:
        directory = Path(tmp)
        server = (Cluster(directory / "cluster") if args.cluster
                  else RedisServer(directory)).start()
        cert, key = make_cert(directory)
        receiver = Receiver(cert, key)
        settings = {"events": {"merge_secs": 0.001}, "limits": {"rate_per_minute": 100_000},
                    "push": {"enabled": True, "secret": SECRET, "ports": [receiver.port],
                             "allow_networks": ["127.0.0.0/8"], "ca_file": cert}}
        a = b = None
        try:
            a = Replica(directory, server.url, **settings)
            b = Replica(directory, server.url, **settings)
            log(f"redis at {server.url}, replicas A {a.port} and B {b.port}")
            delays: list[float] = []
            for _ in range(args.runs):
                task = send(a, f"{args.seconds}")
                sub = TimedSubscriber(b, task["id"])
                sub.final(timeout=args.seconds + 20)
                delays.extend(event_delays(sub))
            cancels: list[float] = []
            for _ in range(args.cancels):
                task = send(a, "30")
                until(lambda: state(b, task["id"]) == "TASK_STATE_WORKING")
                started = time.perf_counter()
                answer = b.result("CancelTask", {"id": task["id"]})
                cancels.append((time.perf_counter() - started) * 1000)
                assert answer["status"]["state"] == "TASK_STATE_CANCELED", answer
            for _ in range(args.pushes):                            # one run at a time
                task_id = send(a, "0", push={"url": receiver.url()})["id"]
                try:
                    until(lambda: final_notified(receiver, task_id), timeout=30)
                except AssertionError:
                    for replica in (a, b):
                        log(f"replica {replica.port}:\n{replica.log()[-4000:]}")
                    raise
            pushes = push_delays(receiver)
        finally:
            for replica in (a, b):
                if replica is not None:
                    replica.stop()
            receiver.close()
            server.stop()
    rows = {"cross-replica event (ms)": delays, "cross-replica CancelTask (ms)": cancels,
            "push: state change to receiver (ms)": pushes}
    print(f"store: {'a 3-primary Redis Cluster' if args.cluster else 'one redis-server'}\n")
    print("| measure | n | p50 | p99 | max |\n|---|---|---|---|---|")
    for name, values in rows.items():
        print(f"| {name} | {len(values)} | {statistics.median(values):.2f} | "
              f"{percentile(values, 99):.2f} | {max(values):.2f} |")
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "commit": git_commit(), "versions": versions(("gunicorn", "gevent", "redis", "murmur-wsgi")), "args": vars(args),
              "results": {name: {"n": len(v), "p50": statistics.median(v),
                                 "p99": percentile(v, 99), "max": max(v)}
                          for name, v in rows.items()}}
    save(report, "hub-replicas-" + ("cluster-" if args.cluster else "") + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"), log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
