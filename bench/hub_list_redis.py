"""ms per ListTasks page of the hub on Redis when ``statusTimestampAfter`` meets a ``status``
or a ``contextId`` and many tasks match each.

Starts a redis-server (no persistence) and a hub on it (Werkzeug's test client, no HTTP),
and fills two agents of the tenant ``acme`` with N finished tasks each through the store's
CREATE script, the i-th task's status time N0 + i ms: ``echo``'s all REJECTED, in ten
contexts ``c0``…``c9`` and one task in ``tiny``; ``mixed``'s COMPLETED and FAILED in turn.
Then, for each listing, one page of 50 through the hub, best of ``--repeat``: the time the
worker took (its CPU and its round trips), and Redis's own time for the page
(its slow log, every command logged: the sum, and the longest command, which every other
client of that Redis waits out). Run it from the repository root:

    .venv/bin/python bench/hub_list_redis.py [-n 100000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from murmur_wsgi.hub import create_hub                                     # noqa: E402
from murmur_wsgi.hub.store import redis_scripts                            # noqa: E402
from murmur_wsgi.hub.task import COMPLETED, FAILED, REJECTED, HubTask      # noqa: E402
from murmur_wsgi.wire.task import rfc3339                                  # noqa: E402
from tests.hub.conftest import HubClient, close_hub, hub_config            # noqa: E402
from tests.redis_util import RedisServer                                   # noqa: E402

T0 = 1_800_000_000_000          # the first task's status time (ms)
BATCH = 2_000


def _tasks(agent: str, count: int):
    for i in range(count):
        context = "tiny" if agent == "echo" and i == count // 2 else f"c{i % 10}"
        state = REJECTED if agent == "echo" else (COMPLETED, FAILED)[i % 2]
        message_id = f"{agent}-{i}"
        task = HubTask(uuid.uuid4().hex, context, "acme", agent, message_id,
                       {"messageId": message_id, "role": "ROLE_USER", "parts": []})
        task.set_state(REJECTED, None)
        yield task, state, T0 + i


def fill(hub, count: int) -> None:
    store = hub.store
    create = store._redis.register_script(redis_scripts.CREATE)
    pipe = store._redis.pipeline(transaction=False)
    for agent in ("echo", "mixed"):
        for i, (task, state, ms) in enumerate(_tasks(agent, count), 1):
            create(**store.create_call(task, task.task_event(), bind=False, state=state, ms=ms),
                   client=pipe)
            if i % BATCH == 0:
                pipe.execute()
        pipe.execute()


def listings(count: int) -> dict:
    """name: (agent, params)."""
    every, half, tenth = rfc3339(T0 - 1), rfc3339(T0 + count // 2), rfc3339(T0 + count // 10)
    rejected, completed = {"status": "TASK_STATE_REJECTED"}, {"status": "TASK_STATE_COMPLETED"}
    rows = [("status all match, every task changed since", "echo", rejected, every),
            ("status all match, 90 % changed since", "echo", rejected, tenth),
            ("status all match, half changed since", "echo", rejected, half),
            ("status of half, half changed since", "mixed", completed, half),
            ("context of a tenth, every task changed since", "echo", {"contextId": "c3"}, every),
            ("context of one, every task changed since", "echo", {"contextId": "tiny"}, every)]
    return {name: (agent, {**params, "statusTimestampAfter": after})
            for name, agent, params, after in rows}


def redis_time(client) -> tuple[float, float]:
    """(ms in all, the longest command's ms) Redis ran since the last call (the hub's replica
    beats too, a few small commands): its slow
    log, every command at its level: a script once, its inner calls not again)."""
    entries = [e for e in client.slowlog_get(-1)          # a script's inner calls: "?:0"
               if e["client_address"] != b"?:0"
               and e["command"].split()[0].upper() not in (b"SLOWLOG", b"CONFIG", b"INFO")]
    client.slowlog_reset()
    durations = [e["duration"] / 1000 for e in entries]
    return sum(durations), max(durations, default=0.0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="ms per ListTasks page on Redis")
    parser.add_argument("-n", "--tasks", type=int, default=100_000, help="tasks per agent")
    parser.add_argument("--repeat", type=int, default=5, help="pages timed per listing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(Path(directory)).start()
        hub = create_hub(hub_config(store=server.url, tasks={"max_per_tenant": 2 * args.tasks}))
        client = server.client()
        try:
            start = time.perf_counter()
            fill(hub, args.tasks)
            print(f"{2 * args.tasks} tasks in {time.perf_counter() - start:.0f} s; "
                  f"one page of 50, best of {args.repeat}:")
            client.config_set("slowlog-log-slower-than", 0)
            client.config_set("slowlog-max-len", 100_000)
            print("| listing | worker ms | Redis ms | longest command ms | totalSize |")
            print("|---|---:|---:|---:|---:|")
            for name, (agent, params) in listings(args.tasks).items():
                rpc = HubClient(hub, agent)
                best = held = longest = float("inf")
                for _ in range(args.repeat):
                    redis_time(client)
                    start = time.perf_counter()
                    page = rpc.result("ListTasks", params)
                    took = time.perf_counter() - start
                    ms, most = redis_time(client)
                    best, held, longest = min(best, took), min(held, ms), min(longest, most)
                print(f"| {name} | {best * 1000:.1f} | {held:.1f} | {longest:.1f} "
                      f"| {page['totalSize']} |")
        finally:
            client.close()
            close_hub(hub)
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
