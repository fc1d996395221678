"""The cyclic collector in a serving worker: its boot heap, its full collections, the loop's stalls.

Starts one gunicorn worker (``murmur-wsgi hub``, the memory store or a redis-server of
its own with ``--store redis``; or ``murmur-wsgi serve``, ``--app door``) with
``tests/gunicorn_gc_probe.py``'s hooks and gevent's monitor thread (a report for each
stretch the loop is kept past ``--block-ms``, 30 ms). For ``--secs`` seconds, at once:

- one client sends SendMessage with a data part of about ``--big-bytes`` (1 MB: a list
  of small objects, as a data part would hold), one after another, ``--big-pause``
  seconds apart;
- two clients send small SendMessages, one after another;
- another client (tenant ``other`` on the hub) times GetTask on a task of its own.

Reported: the objects the worker tracks after boot and those frozen, how long a full
collection of that heap takes, the full collections CPython started during the load and
how long they took, the loop's stalls past ``--block-ms``, GetTask's p50 / p99 / max, and
the worker's RSS after boot and at its exit. NOTE: each of the monitor's reports lists
every greenlet, found by a walk of ``gc.get_objects()``: on a heap of 60,000 tracked
objects a report keeps the loop itself, and stalls follow stalls; compare GetTask's
figures with ``--block-ms 0``. A stall whose stack ends in the probe's
collection callback was a collection's (``stalls_in_gc``).

    python bench/gc_pauses.py [--app hub|door] [--store memory|redis] [--secs 20]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from bench.report import git_commit  # noqa: E402
from tests.e2e.conftest import launch  # noqa: E402
from tests.e2e.hub_process import PREFIX, HubProcess  # noqa: E402
from tests.process_util import stopping  # noqa: E402
from tests.redis_util import RedisServer  # noqa: E402

KEYS = {"big": "mhk_gc-big", "small": "mhk_gc-small", "other": "mhk_gc-other"}
PROBE_CONF = str(REPO / "tests" / "gunicorn_gc_probe.py")
BLOCKED = "appears to be blocked"
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json", "Connection": "close"}


def hub_yaml(port: int, store: str | None) -> dict:
    config = {"public_url": f"http://127.0.0.1:{port}", "drain_timeout_secs": 1,
              "limits": {"max_body_bytes": "8Mi", "concurrency": 1000,
                         "rate_per_minute": 1_000_000},
              "tenants": {tenant: {"api_keys": [hashlib.sha256(key.encode()).hexdigest()],
                                   "agents": {"echo": {"agent": "demo", "publish": True}}}
                          for tenant, key in KEYS.items()}}
    if store is not None:
        config["store"] = store
    return config


DOOR_MANIFEST = {"name": "gc-agent", "version": "0.1.0", "agent": "demo",
                 "lifecycle": {"task_acceptance": "queue", "queue_depth": 1000,
                               "after_task": "sleep"},
                 "network": {"host": "127.0.0.1"}}


def big_data(size: int) -> list:
    row = len(json.dumps({"id": 100000, "name": "item-100000", "tags": ["a", "b"]})) + 2
    return [{"id": i, "name": f"item-{i}", "tags": ["a", "b"]} for i in range(size // row)]


def message(parts: list) -> dict:
    return {"message": {"messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER",
                        "parts": parts}}


class Target:
    """The served worker: its JSON-RPC URL, and a call as one tenant."""

    def __init__(self, url: str, keyed: bool):
        self.url, self.keyed = url, keyed

    def call(self, method: str, params: dict, tenant: str) -> dict:
        headers = {**V1, **({"X-API-Key": KEYS[tenant]} if self.keyed else {})}
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = requests.post(self.url, data=json.dumps(body), headers=headers, timeout=60)
        payload = answer.json()
        assert "result" in payload, payload
        return payload["result"]


def load(target: Target, secs: float, big_bytes: int, big_pause: float) -> dict:
    """The three clients for ``secs``; GetTask's waits and the messages sent."""
    own = target.call("SendMessage", message([{"text": "hello"}]), "other")["task"]["id"]
    data = big_data(big_bytes)
    target.call("SendMessage", message([{"data": {"rows": data}}]), "big")   # warm
    done = threading.Event()
    waits: list[float] = []
    sent = {"big": 0, "small": 0}

    def big():
        while not done.is_set():
            target.call("SendMessage", message([{"data": {"rows": data}}]), "big")
            sent["big"] += 1
            done.wait(big_pause)

    def small():
        while not done.is_set():
            target.call("SendMessage", message([{"text": "hi"}]), "small")
            sent["small"] += 1

    def probe():
        while not done.is_set():
            started = time.monotonic()
            assert target.call("GetTask", {"id": own}, "other")["id"] == own
            waits.append(time.monotonic() - started)

    threads = [threading.Thread(target=f, daemon=True) for f in (big, small, small, probe)]
    for thread in threads:
        thread.start()
    done.wait(secs)
    done.set()
    for thread in threads:
        thread.join(60)
    ordered = sorted(waits)

    def pct(p):
        return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000, 1)
    return {"sent": sent, "gettask": {"n": len(waits), "p50_ms": pct(50), "p99_ms": pct(99),
                                      "max_ms": round(ordered[-1] * 1000, 1)}}


def figures(out: Path, log: str, secs: float) -> dict:
    records = [json.loads(line) for line in out.read_text().splitlines()]
    boot = dict(next(r["boot"] for r in records if "boot" in r))
    full_ms = round(boot.pop("full_secs") * 1000, 2)
    end = next((r["exit"] for r in records if "exit" in r), {})
    fulls = [r["full"] for r in records if "full" in r]
    return {"boot": {**boot, "full_ms": full_ms},
            "full_collections": {"n": len(fulls), "per_min": round(len(fulls) * 60 / secs, 1),
                                 "max_ms": round(max(fulls, default=0) * 1000, 1),
                                 "mean_ms": round(sum(fulls) / len(fulls) * 1000, 1)
                                 if fulls else 0},
            "exit": end, "stalls": log.count(BLOCKED),
            "stalls_in_gc": sum("in _timed" in report.split("\n2")[0]
                                for report in log.split(BLOCKED)[1:])}


def run(args, directory: Path) -> dict:
    out = directory / f"gc-{time.monotonic_ns()}.jsonl"
    env = {"GC_PROBE_OUT": str(out), "GC_PROBE_APP": args.app}
    if args.block_ms:
        env.update(GEVENT_MONITOR_THREAD_ENABLE="true",
                   GEVENT_MAX_BLOCKING_TIME=str(args.block_ms / 1000))
    if args.app == "door":
        server = launch(directory, DOOR_MANIFEST, env=env, gunicorn_conf=PROBE_CONF)
        target = Target(server.url + "/", keyed=False)
    else:
        redis_server = RedisServer(directory).start() if args.store == "redis" else None
        server = HubProcess(directory, lambda port: hub_yaml(
            port, redis_server and redis_server.url), agent="echo", key=KEYS["other"],
            workers=1, env=env, gunicorn_conf=PROBE_CONF)
        target = Target(f"{server.url}{PREFIX}echo", keyed=True)
    try:
        result = load(target, args.secs, args.big_bytes, args.big_pause)
    finally:
        server.stop()
        if args.app == "hub" and redis_server is not None:
            redis_server.stop()
    return {**result, **figures(out, server.log(), args.secs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", choices=("hub", "door"), default="hub")
    parser.add_argument("--store", choices=("memory", "redis"), default="memory")
    parser.add_argument("--secs", type=float, default=20.0)
    parser.add_argument("--big-bytes", type=int, default=1_000_000)
    parser.add_argument("--big-pause", type=float, default=0.5)
    parser.add_argument("--block-ms", type=float, default=30.0,
                        help="the monitor's bound; 0: no monitor (its reports walk every "
                             "object the collector tracks, a cost that grows with the heap)")
    parser.add_argument("--keep", type=Path, help="a folder for the server's log, kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = run(args, args.keep or Path(tmp))
        finally:
            stopping.check()
    print(json.dumps({"commit": git_commit(), "app": args.app, "store": args.store,
                      **result}, indent=1))


if __name__ == "__main__":
    os.chdir(REPO)
    main()
