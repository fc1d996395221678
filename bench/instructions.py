"""``make bench-instructions``: instructions per request of each application, counted.

On a shared or small machine, requests per second move with the machine by 10-20 % from one
run to the next, as much as most changes to the code do. An instruction count does not:
``valgrind --tool=callgrind`` counts what the CPU executes, the same for the same code and
inputs whatever else runs. This runner counts, in one gevent-patched process per scenario
(as a gunicorn gevent worker is), the applications' own instructions per request: each is
called through Werkzeug's test environ by 16 greenlets, as ``wrk -c16`` calls the worker,
with the worker's gevent settings (``serving/worker.py``: ``untracked_greenlets``).

Each scenario runs twice, with ``--calls`` and with three times as many; the difference of
the two counts, divided by the difference of the calls, is its instructions per request:
the start (imports, the app, the environs, built alike in both runs) cancels. What gunicorn
does for a request (parse it, write the answer) is not in these counts: the ``gunicorn-``
scenarios count a whole serving worker (``bench/instructions_served.py``): the bare app,
the floor of a blocking SendMessage on Redis and the hub on Redis, each served by its own
gunicorn gevent worker under valgrind, 16 keep-alive connections posting to it. The
kernel's part (a round trip to Redis, the sockets) is in none: valgrind counts user space.

Scenarios: the bare app (``bench/bare_app.py``) and its Redis floor (the record read a GetTask
sends, and its answer), the door's held SendMessage, the hub's GetTask and blocking
SendMessage on the memory store and on Redis (a redis-server this runner starts, as ``make
bench`` does).
``--tool cachegrind`` runs the served scenarios under valgrind's cachegrind instead: with
their instructions, each one's simulated cache misses (first level, and one core's L2 as
the last) and mispredicted branches per request, in a table of their own.

Figures: docs/performance.md.
"""
from __future__ import annotations

import sys

if "--child" in sys.argv:       # patched before anything is imported, as gunicorn's worker is
    from gevent import monkey

    monkey.patch_all()

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
# make bench's bodies, hub and door (one home for each), and its free port
from bench.run import (BENCH_MANIFEST, FLOOR_GET, GET_UNKNOWN, HUB_CONFIG, HUB_KEY,  # noqa: E402
                       HUB_PATH, SEND)
from bench.instructions_served import SERVED, count_served  # noqa: E402

GREENLETS = 16
WARM = 50                       # calls before the counted ones (the first of each kind)

SCENARIOS = {          # name: (what it measures, needs Redis)
    **SERVED,
    "bare-post": ("the bare app: read the body, answer a small JSON", False),
    "bare-redis-post": ("the bare app + the record read a GetTask sends, answering the task read: "
                        "its floor", True),
    "bare-redis-send": ("the bare app + a blocking SendMessage's two round trips (the hub's "
                        "OPEN and END) and its answer: its floor", True),
    "door-sendmessage": ("the door: held SendMessage to the demo agent", False),
    "hub-gettask": ("the hub on memory: GetTask, X-API-Key", False),
    "hub-sendmessage": ("the hub on memory: blocking SendMessage", False),
    "hub-redis-gettask": ("the hub on Redis: GetTask, X-API-Key", True),
    "hub-redis-sendmessage": ("the hub on Redis: blocking SendMessage", True),
}
FLOORS = [("hub-redis-gettask", "bare-redis-post"),        # (scenario, its floor)
          ("hub-redis-sendmessage", "bare-redis-send"),
          ("gunicorn-hub-redis-sendmessage", "gunicorn-bare-redis-send"),
          ("gunicorn-hub-redis-gettask", "gunicorn-bare-redis-post")]
DIFFERENCES = [        # (scenario, minus, what the difference is)
    ("gunicorn-bare-post", "bare-post", "gunicorn's part of a request (the HTTP tier)"),
    ("hub-redis-gettask", "bare-redis-post", "the hub's part of a GetTask on Redis"),
    ("hub-redis-sendmessage", "hub-sendmessage", "what Redis adds to a blocking SendMessage"),
    ("hub-redis-sendmessage", "bare-redis-send", "the hub's part of a blocking SendMessage on "
     "Redis"),
    ("hub-sendmessage", "door-sendmessage", "the hub's SendMessage above the door's"),
]


# --- the child: one scenario in one process ---------------------------------------------


def _environ(path: str, body: dict, headers: dict) -> dict:
    from werkzeug.test import EnvironBuilder

    return EnvironBuilder(path=path, method="POST", data=json.dumps(body),
                          headers={"A2A-Version": "1.0", "Content-Type": "application/json",
                                   **headers}).get_environ()


def _call(app, environ) -> bytes:
    status = []
    body = b"".join(app(environ, lambda s, h, exc=None: status.append(s)))
    if not status or not status[0].startswith("200"):
        raise SystemExit(f"the app answered {status} {body[:300]!r}")
    return body


def _send(path: str, headers: dict, run: str, n: int) -> list:
    environs = []
    for i in range(n):
        body = json.loads(json.dumps(SEND))
        body["params"]["message"]["messageId"] = f"ins-{run}-{i}"
        environs.append(_environ(path, body, headers))
    return environs


def _hub(store: str, workdir: str):
    import yaml

    from murmur_wsgi.hub.app import create_hub

    # NOTE: the replica's heartbeat and sweep are work per second, not per request: under
    # valgrind a run lasts minutes, and a sweep (a SCAN of every key) would count in.
    config = {**json.loads(json.dumps(HUB_CONFIG)), "store": store,
              "public_url": "http://127.0.0.1:1",
              "redis": {"liveness_secs": 3600, "sweep_interval_secs": 3600}}
    path = os.path.join(workdir, "hub.yaml")
    with open(path, "w", encoding="utf-8") as out:
        yaml.safe_dump(config, out)
    return create_hub(path)


def build(name: str, total: int, redis_url: str, workdir: str):
    """The scenario's app and ``total`` environs, one per call."""
    run = uuid.uuid4().hex[:12]
    if name.startswith("bare"):
        os.environ["BENCH_REDIS_URL"] = redis_url
        from bench import bare_app

        if name == "bare-redis-post":           # posted the hub's request
            return bare_app.redis_app, [_environ(HUB_PATH, FLOOR_GET, {"X-API-Key": HUB_KEY})
                                        for _ in range(total)]
        if name == "bare-redis-send":
            return bare_app.redis_send_app, _send(HUB_PATH, {"X-API-Key": HUB_KEY}, run, total)
        return bare_app.app, [_environ("/", GET_UNKNOWN, {}) for _ in range(total)]
    if name == "door-sendmessage":
        from murmur_wsgi.door.app import create_app

        os.environ["MURMUR_WSGI_HOME"] = os.path.join(workdir, "home")
        door = create_app(json.loads(json.dumps(BENCH_MANIFEST)), record=True, trace=True)
        return door, _send("/", {}, run, total)
    hub = _hub(redis_url if "-redis-" in name else "memory", workdir)
    headers = {"X-API-Key": HUB_KEY}
    if name.endswith("sendmessage"):
        return hub, _send(HUB_PATH, headers, run, total)
    first = json.loads(_call(hub, _send(HUB_PATH, headers, run + "-first", 1)[0]))
    get = {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
           "params": {"id": first["result"]["task"]["id"]}}
    return hub, [_environ(HUB_PATH, get, headers) for _ in range(total)]


def child(name: str, calls: int, total: int, redis_url: str) -> None:
    import gevent

    from murmur_wsgi.serving.worker import untracked_greenlets

    untracked_greenlets()       # as both applications' gunicorn worker does

    with tempfile.TemporaryDirectory(prefix="murmur-instructions-") as workdir:
        app, environs = build(name, total + WARM, redis_url, workdir)
        for environ in environs[:WARM]:
            _call(app, environ)
        counted = iter(environs[WARM:WARM + calls])

        def caller():
            for environ in counted:
                _call(app, environ)
        gevent.joinall([gevent.spawn(caller) for _ in range(GREENLETS)])
        sys.stdout.flush()
        os._exit(0)             # not the app's close: the same in both runs, and shorter


# --- the runner ------------------------------------------------------------------------


VALGRIND_HELP = """valgrind is not installed. Install it, then run this again:
  Debian/Ubuntu:  sudo apt-get install -y valgrind
  Fedora:         sudo dnf install -y valgrind"""


def ensure_valgrind() -> str:
    path = shutil.which("valgrind")
    if path:
        return path
    if shutil.which("apt-get") and os.geteuid() == 0:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "valgrind"]):
            subprocess.run(argv, env=env, check=False, stdout=subprocess.DEVNULL)
        path = shutil.which("valgrind")
    if not path:
        print(VALGRIND_HELP, file=sys.stderr)
        raise SystemExit(2)
    return path


def count(valgrind: str, name: str, calls: int, total: int, redis_url: str) -> int:
    argv = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
            str(Path(__file__).resolve()), "--child", name, "--calls", str(calls),
            "--total", str(total), "--redis-url", redis_url]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=1800)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"{name}: valgrind failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return int(found.group(1))


def _ratios(per: dict, chosen: list) -> list[tuple[str, float]]:
    """Each scenario against bare-post, and each hub against its floor, as instructions of a
    served request: a served scenario's own count (``SERVED``), another's with gunicorn's
    part (gunicorn-bare-post less bare-post) added, when both were counted."""
    tier = per["gunicorn-bare-post"] - per["bare-post"] \
        if "gunicorn-bare-post" in per and "bare-post" in per else None

    def served(name):
        return per[name] if name in SERVED else None if tier is None else tier + per[name]
    bare = served("gunicorn-bare-post") if "gunicorn-bare-post" in per else None
    rows = [(f"{name} ÷ bare-post", bare / served(name)) for name in chosen
            if bare is not None and name not in ("gunicorn-bare-post", "bare-post")
            and served(name) is not None]
    rows += [(f"{hub} ÷ its floor", served(floor) / served(hub)) for hub, floor in FLOORS
             if hub in per and floor in per and served(hub) is not None]
    return rows


def _events_table(events: dict) -> None:
    """cachegrind's events per served request: instructions, first-level misses
    (instruction fetch, data read, data write), last-level ones (one core's L2:
    ``LAST_LEVEL``), conditional and indirect branches and their mispredictions; and the
    last level's misses added up."""
    names = list(next(iter(events.values())))
    print("\n| scenario | " + " | ".join(names) + " | last-level misses |")
    print("|---|" + "---:|" * (len(names) + 1))
    for name, per in events.items():
        print(f"| {name} | " + " | ".join(f"{per[event]:,.0f}" for event in names)
              + f" | {per['ILmr'] + per['DLmr'] + per['DLmw']:,.0f} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--calls", type=int, default=400,
                        help="calls of the shorter run (the longer makes 3 x as many)")
    parser.add_argument("-k", "--only", action="append", default=[],
                        help="scenarios whose name holds this (repeatable)")
    parser.add_argument("--tool", choices=["callgrind", "cachegrind"], default="callgrind",
                        help="cachegrind: the served scenarios' simulated cache misses and "
                        "mispredicted branches per request too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--total", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.calls, args.total, args.redis_url)
        return 0
    valgrind = ensure_valgrind()
    chosen = [n for n in SCENARIOS if not args.only or any(k in n for k in args.only)]
    short = -(-args.calls // GREENLETS) * GREENLETS       # a multiple of the connections
    long = 3 * short
    per: dict[str, float] = {}
    events: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="murmur-instructions-") as tmp:
        redis = None
        if any(SCENARIOS[n][1] for n in chosen):
            if shutil.which("redis-server") is None:
                print("redis-server is not installed: the Redis scenarios are skipped "
                      "(Debian/Ubuntu: apt-get install -y redis-server)", file=sys.stderr)
                chosen = [n for n in chosen if not SCENARIOS[n][1]]
            else:
                sys.path.insert(0, str(REPO))
                from tests.redis_util import RedisServer

                redis = RedisServer(Path(tmp) / "redis").start()
        try:
            for name in chosen:
                url = redis.url if redis is not None else ""
                if name in SERVED:
                    low = count_served(valgrind, name, short, Path(tmp), url, args.tool)
                    high = count_served(valgrind, name, long, Path(tmp), url, args.tool)
                    if args.tool == "cachegrind":
                        events[name] = {event: (high[event] - low[event]) / (long - short)
                                        for event in high}
                    low, high = low["Ir"], high["Ir"]
                else:
                    low = count(valgrind, name, short, long, url)
                    high = count(valgrind, name, long, long, url)
                per[name] = (high - low) / (long - short)
                print(f"instructions: {name}: {per[name] / 1000:.0f} K per request",
                      file=sys.stderr, flush=True)
        finally:
            if redis is not None:
                redis.stop()
    print("| scenario | what it measures | instructions per request |")
    print("|---|---|---:|")
    for name in chosen:
        print(f"| {name} | {SCENARIOS[name][0]} | {per[name] / 1000:,.0f} K |")
    rows = [(a, b, what) for a, b, what in DIFFERENCES if a in per and b in per]
    if rows:
        print("\n| difference | what it is | instructions per request |")
        print("|---|---|---:|")
        for a, b, what in rows:
            print(f"| {a} − {b} | {what} | {(per[a] - per[b]) / 1000:,.0f} K |")
    if events:
        _events_table(events)
    ratios = _ratios(per, chosen)
    if ratios:
        print("\nAs instructions of a served request: a served scenario's own count, another's "
              "with gunicorn's part added (the kernel's and Redis's own work left out):\n")
        print("| ratio | as instructions |")
        print("|---|---:|")
        for what, ratio in ratios:
            print(f"| {what} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
