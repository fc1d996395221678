"""``make bench-instructions``' served scenarios: a whole gunicorn worker's instructions.

``bench/instructions.py`` calls each application in one process, without HTTP; these
count what ``make bench`` measures as a rate, counted instead: the application served by
its own gunicorn gevent worker under ``valgrind --tool=callgrind`` (children traced, the
worker's count is the largest), 16 keep-alive connections posting to it. The HTTP tier,
the worker's own greenlets and timers, and the application are all in the count; the
kernel's part (the sockets, a round trip's wait) and Redis's own work are not.

- ``gunicorn-bare-post``: the bare app, the door's settings (``conf/gunicorn.conf.py``),
  posted ``make bench``'s request;
- ``gunicorn-bare-redis-send``: the bare app's floor of a blocking SendMessage on Redis
  (``bench/bare_app.py``'s ``redis_send_app``), posted the hub's SendMessage;
- ``gunicorn-hub-redis-sendmessage``: the hub on Redis, one worker, started as
  ``murmur-wsgi hub`` starts it (its heartbeat and sweep once an hour: under valgrind a
  run lasts minutes, and work per second would count in), posted the same SendMessage,
  a fresh messageId each;
- ``gunicorn-bare-redis-post`` and ``gunicorn-hub-redis-gettask``: GetTask's floor
  (``redis_app``, posted the hub's request) and the hub's GetTask of a task it made first.

Each runs twice, with ``calls`` requests and three times as many after the same warm-up;
the difference of the counts divided by the difference of the requests is per request.
Under ``tool="cachegrind"`` the same, for each of its events (misses, branches).
"""
from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import yaml

from bench.run import FLOOR_GET, GET_UNKNOWN, HUB_CONFIG, HUB_KEY, HUB_PATH, SEND, free_port

REPO = Path(__file__).resolve().parents[1]
CONNECTIONS = 16
WARM = 64                       # requests before the counted ones, the same in both runs
# NOTE: cachegrind's last level as one core's L2 of this machine (1 MiB, 8-way, 64-byte
# lines): the level a worker's working set spills out of. The last level valgrind reads
# from this VM's CPU is 512 MiB, which nothing misses.
LAST_LEVEL = "1048576,8,64"
SERVED = {             # name: (what it measures, needs Redis)
    "gunicorn-bare-post": ("the bare app under gunicorn's gevent worker: the HTTP tier too",
                           False),
    "gunicorn-bare-redis-send": ("the floor of a blocking SendMessage on Redis, served: "
                                 "the HTTP tier too", True),
    "gunicorn-hub-redis-sendmessage": ("the hub on Redis, served by its own worker: "
                                       "blocking SendMessage, the HTTP tier too", True),
    "gunicorn-bare-redis-post": ("the floor of a GetTask on Redis, served: the HTTP tier too",
                                 True),
    "gunicorn-hub-redis-gettask": ("the hub on Redis, served by its own worker: GetTask, "
                                   "the HTTP tier too", True),
}


def _argv(name: str, port: int, redis_url: str, workdir: Path) -> tuple[list, dict]:
    """The server's command line and environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    listen = f"127.0.0.1:{port}"
    if name.startswith("gunicorn-hub-"):
        config = {**json.loads(json.dumps(HUB_CONFIG)), "store": redis_url,
                  "public_url": f"http://{listen}",
                  "redis": {"liveness_secs": 3600, "sweep_interval_secs": 3600}}
        path = workdir / "hub.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return [sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", str(path),
                "--listen", listen, "--workers", "1"], env
    app = "bench.bare_app:app"
    if name == "gunicorn-bare-redis-send":
        # NOTE: a database of its own, as make bench gives it (no hub's replica names it)
        app = "bench.bare_app:redis_send_app"
        env["BENCH_REDIS_URL"] = redis_url.rsplit("/", 1)[0] + "/2"
    elif name == "gunicorn-bare-redis-post":
        app = "bench.bare_app:redis_app"
        env["BENCH_REDIS_URL"] = redis_url
    return [sys.executable, "-m", "gunicorn", "-c", "conf/gunicorn.conf.py", "-b", listen,
            app], env


def _requests(name: str, tag: str, n: int, task_id: str = "") -> list[tuple[str, bytes, dict]]:
    """``n`` requests of the scenario: (path, body, headers); a GetTask's of ``task_id``."""
    if name == "gunicorn-bare-post":
        body = json.dumps(GET_UNKNOWN).encode()
        return [("/", body, {"Content-Type": "application/json", "A2A-Version": "1.0"})] * n
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0", "X-API-Key": HUB_KEY}
    if name.endswith("redis-post") or name.endswith("gettask"):
        get = FLOOR_GET if name.endswith("redis-post") else \
            {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        return [(HUB_PATH, json.dumps(get).encode(), headers)] * n
    out = []
    for i in range(n):
        body = json.loads(json.dumps(SEND))
        body["params"]["message"]["messageId"] = f"served-{tag}-{i}"
        out.append((HUB_PATH, json.dumps(body).encode(), headers))
    return out


def _post(port: int, requests: list) -> list:
    """``requests`` posted on ``CONNECTIONS`` keep-alive connections, each must answer 200;
    the last answer's body."""
    failures: list = []
    last: list = []

    def post(share: list) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            for path, body, headers in share:
                conn.request("POST", path, body, headers)
                answer = conn.getresponse()
                text = answer.read()
                if answer.status != 200 or b'"error"' in text:
                    failures.append((answer.status, text[:200]))
                last[:] = [text]
        except (OSError, http.client.HTTPException) as ex:
            failures.append(ex)
        finally:
            conn.close()
    threads = [threading.Thread(target=post, args=(requests[i::CONNECTIONS],))
               for i in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} failed requests: {failures[:3]}")
    return last


def _ready(port: int, proc: subprocess.Popen, deadline: float) -> None:
    while True:                 # the one probe that succeeds is the same in both runs
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("GET", "/", headers={"Connection": "close"})
            conn.getresponse().read()
            conn.close()
            return
        except (OSError, http.client.HTTPException):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the server under valgrind did not answer") from None
            try:
                proc.wait(timeout=0.5)          # paces the probes; returns at once if it dies
            except subprocess.TimeoutExpired:
                pass


def count_served(valgrind: str, name: str, calls: int, workdir: Path, redis_url: str,
                 tool: str = "callgrind") -> dict:
    """The serving worker's events for the warm-up and ``calls`` requests, by name: its
    instructions (``Ir``) under callgrind; its simulated cache misses and mispredicted
    branches too under ``tool="cachegrind"`` (``I1mr``, ``D1mr``, ``Bcm``, ...)."""
    from murmur_wsgi.groups import child_setup

    port = free_port()
    out = workdir / f"{name}-{calls}"
    out.mkdir()
    argv, env = _argv(name, port, redis_url, out)
    options = ["--cache-sim=yes", "--branch-sim=yes", f"--LL={LAST_LEVEL}"] \
        if tool == "cachegrind" else []
    argv = [valgrind, f"--tool={tool}", *options, "--trace-children=yes",
            f"--{tool}-out-file={out}/cg.%p", *argv]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=child_setup())  # dies with us
    tag = uuid.uuid4().hex[:12]
    try:
        _ready(port, proc, time.monotonic() + 300)
        task_id = ""
        if name.endswith("gettask"):            # the task it reads, made the same in both runs
            made = _post(port, _requests("gunicorn-hub-redis-sendmessage", tag + "-made", 1))
            task_id = json.loads(made[0])["result"]["task"]["id"]
        _post(port, _requests(name, tag + "-warm", WARM, task_id))
        _post(port, _requests(name, tag, calls, task_id))
    finally:
        proc.terminate()
        proc.wait(timeout=300)
    counts = []                 # each process's events; the worker's has the most
    for path in out.iterdir():
        if path.name.startswith("cg."):
            text = path.read_text(errors="replace")
            names = re.search(r"^events: (.+)$", text, re.M)
            found = re.search(r"^summary: (.+)$", text, re.M)
            if names and found:
                counts.append(dict(zip(names.group(1).split(), map(int, found.group(1).split()))))
    return max(counts, key=lambda events: events["Ir"])
