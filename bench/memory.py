"""Memory probe: bytes the door holds per finished task, measured with tracemalloc.

Builds a door in-process (the demo agent, ``task_acceptance: queue``), sends N
SendMessages through Werkzeug's test client, and compares traced memory before and
after, once a warm-up batch has filled every lazy cache. Run it from the repository
root:

    .venv/bin/python bench/memory.py [-n 2000] [--text-bytes 2]
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

V1 = {"A2A-Version": "1.0"}


class ProbeError(Exception):
    """The door cannot run the probe (yet); the message says why."""


def build(n: int):
    try:
        from werkzeug.test import Client

        from murmur_wsgi import create_app
    except ImportError as ex:
        raise ProbeError(f"cannot import the door: {ex}") from None
    manifest = {"name": "memory-probe", "version": "0.1.0", "agent": "demo",
                "lifecycle": {"task_acceptance": "queue", "queue_depth": 1000,
                              "after_task": "sleep"},
                "tasks": {"keep_finished": n + 1000, "keep_finished_total": n + 1000}}
    door = create_app(manifest, listen="127.0.0.1:41873")
    return door, Client(door)


def send(client, i: int, text: str) -> str:
    body = {"jsonrpc": "2.0", "id": i, "method": "SendMessage",
            "params": {"message": {"messageId": f"mem-{i}", "role": "ROLE_USER",
                                   "parts": [{"text": text}]}}}
    response = client.post("/", data=json.dumps(body), headers=V1,
                           content_type="application/json")
    try:
        answer = response.get_json()
    finally:
        response.close()
    task = (answer or {}).get("result", {}).get("task")
    if not task:
        raise ProbeError("SendMessage did not answer a task (is it served yet?): "
                         + json.dumps(answer)[:300])
    state = task.get("status", {}).get("state")
    if state != "TASK_STATE_COMPLETED":
        raise ProbeError(f"the demo agent's task ended {state}, not TASK_STATE_COMPLETED")
    return task["id"]


def held_tasks(door) -> int | None:
    try:
        return len(door.session.store)
    except (AttributeError, TypeError):
        return None


def probe(n: int, warmup: int, text: str, top: int) -> dict:
    tracemalloc.start(1)
    door, client = build(n + warmup)
    for i in range(warmup):
        send(client, i, text)
    gc.collect()
    before_tasks = held_tasks(door)
    before = tracemalloc.take_snapshot()
    base, _ = tracemalloc.get_traced_memory()
    for i in range(warmup, warmup + n):
        send(client, i, text)
    gc.collect()
    after, peak = tracemalloc.get_traced_memory()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    held = held_tasks(door)
    if held is not None and before_tasks is not None and held - before_tasks != n:
        raise ProbeError(f"the store holds {held - before_tasks} new tasks, not {n} "
                         "(evicted? raise tasks.keep_finished)")
    sites = snapshot.compare_to(before, "lineno")[:top]
    return {
        "tasks": n,
        "text_bytes": len(text.encode()),
        "bytes_total": after - base,
        "bytes_per_task": (after - base) / n,
        "peak_bytes": peak,
        "held_tasks": held,
        "top_sites": [{"site": str(stat.traceback[0]), "size_diff": stat.size_diff,
                       "count_diff": stat.count_diff} for stat in sites],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="bytes the door holds per finished task")
    parser.add_argument("-n", "--tasks", type=int, default=2000, help="finished tasks to add")
    parser.add_argument("--warmup", type=int, default=200, help="tasks sent before measuring")
    parser.add_argument("--text-bytes", type=int, default=2,
                        help="size of each message's text (the demo agent echoes it)")
    parser.add_argument("--top", type=int, default=8, help="allocation sites to list")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    text = ("hi" * (args.text_bytes // 2 + 1))[:args.text_bytes] or "h"
    try:
        result = probe(args.tasks, args.warmup, text, args.top)
    except ProbeError as ex:
        print(f"memory probe: {ex}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['tasks']} finished tasks ({result['text_bytes']}-byte text, echoed): "
          f"{result['bytes_total'] / 1024:.0f} KiB, "
          f"{result['bytes_per_task']:.0f} bytes per finished task")
    print("where the bytes went (top allocation sites):")
    for site in result["top_sites"]:
        print(f"  {site['size_diff'] / result['tasks']:8.0f} B/task  "
              f"{site['count_diff'] / result['tasks']:6.2f} blocks/task  {site['site']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
