"""A million-chunk stream on the hub: another tenant's wait, and the worker's memory.

Starts ``murmur-wsgi hub`` (one worker; the memory store, or Redis with
``--store redis``: a redis-server of its own, no persistence) with the demo
agent for two tenants. Tenant ``acme`` sends ``/stream N`` (default 1 000 000
chunks) by SendStreamingMessage and reads the stream to its end as fast as it
can; meanwhile tenant ``other`` times GetTask on a task of its own, one after
another, and the worker's RSS (``/proc``) is sampled every 10 ms. Reported:

- the stream: seconds, bytes, ``data:`` events, its final state;
- the other tenant's GetTask: how many, p50 / p99 / max seconds;
- the worker's RSS: before the run, its peak during it, and a second after it.

    python bench/hub_stream_memory.py [-n CHUNKS] [--store memory|redis]

Results: a Markdown table on stdout, JSON in bench/results/hub-stream-memory-<ts>.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import socket
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from bench.report import git_commit, save, versions  # noqa: E402
from bench.streams import memory_of, proc_children  # noqa: E402
from tests.e2e.hub_process import PREFIX, HubProcess  # noqa: E402
from tests.process_util import stopping  # noqa: E402
from tests.redis_util import RedisServer  # noqa: E402

KEYS = {"acme": "mhk_bench-stream-acme", "other": "mhk_bench-stream-other"}
SAMPLE_SECS = 0.01
SETTLE_SECS = 1.0             # after the run, before the RSS "after" is read
STREAM_TIMEOUT = 600.0


def log(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def hub_yaml(port: int, store: str | None) -> dict:
    config = {
        "public_url": f"http://127.0.0.1:{port}",
        "drain_timeout_secs": 1,
        "limits": {"run_timeout_secs": STREAM_TIMEOUT},
        "tenants": {tenant: {"api_keys": [hashlib.sha256(key.encode()).hexdigest()],
                             "agents": {"echo": {"agent": "demo", "publish": True}}}
                    for tenant, key in KEYS.items()},
    }
    if store is not None:
        config["store"] = store
    return config


def worker_of(pid: int) -> int:
    """The one gunicorn worker under ``pid`` (the deepest descendant)."""
    children = proc_children(pid)
    while children:
        pid = children[0]
        children = proc_children(pid)
    return pid


def rss(pid: int) -> int:
    return memory_of(pid)["VmRSS"]


class Sampler(threading.Thread):
    """The worker's peak RSS until ``stop`` is set."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = rss(pid)
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(SAMPLE_SECS):
            self.peak = max(self.peak, rss(self.pid))


class Prober(threading.Thread):
    """Tenant ``other``: GetTask on its own task, one after another, each timed."""

    def __init__(self, server: HubProcess, task_id: str):
        super().__init__(daemon=True)
        self.server = server
        self.task_id = task_id
        self.waits: list[float] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            started = time.monotonic()
            answer = self.server.rpc("GetTask", {"id": self.task_id}, KEYS["other"])
            self.waits.append(time.monotonic() - started)
            assert answer.status_code == 200 and "result" in answer.json(), answer.text


def stream(port: int, chunks: int) -> dict:
    """Send ``/stream chunks`` as acme and read the whole stream: seconds, bytes, events."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                       "params": {"message": {"messageId": f"m-{uuid.uuid4().hex}",
                                              "role": "ROLE_USER",
                                              "parts": [{"text": f"/stream {chunks}"}]}}})
    request = (f"POST {PREFIX}echo HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Content-Type: application/json\r\nA2A-Version: 1.0\r\nConnection: close\r\n"
               f"X-API-Key: {KEYS['acme']}\r\nContent-Length: {len(body)}\r\n\r\n{body}")
    started = time.monotonic()
    size = events = 0
    tail = b""
    with socket.create_connection(("127.0.0.1", port), timeout=STREAM_TIMEOUT) as sock:
        sock.sendall(request.encode())
        while data := sock.recv(1 << 20):
            size += len(data)
            window = tail + data
            events += window.count(b"data: ") - tail.count(b"data: ")
            tail = window[-4096:]
    text = tail.decode("utf-8", "replace")
    final = next((s for s in ("COMPLETED", "FAILED", "CANCELED") if f"TASK_STATE_{s}" in text),
                 None)
    return {"secs": round(time.monotonic() - started, 3), "bytes": size, "events": events,
            "final": final}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def measure(directory: Path, chunks: int, store: str | None = None,
            settle: float = SETTLE_SECS) -> dict:
    """One run on a hub of its own: the figures the module's docstring lists, the RSS
    "after" read ``settle`` seconds after the run. The hub is sent SIGTERM and left to stop
    (tests/process_util.py's ``stopping``: its Redis waits for it, ``main`` checks it)."""
    server = HubProcess(directory, lambda port: hub_yaml(port, store), agent="echo",
                        key=KEYS["acme"], workers=1)
    try:
        other = server.result("SendMessage", {"message": {
            "messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER",
            "parts": [{"text": "hello"}]}}, KEYS["other"])["task"]["id"]
        stream(server.port, 1000)                        # the code paths, warm
        worker = worker_of(server.proc.pid)
        before = rss(worker)
        sampler, prober = Sampler(worker), Prober(server, other)
        sampler.start()
        prober.start()
        try:
            run = stream(server.port, chunks)
        finally:
            prober.stop.set()
            sampler.stop.set()
            prober.join(30)
            sampler.join(30)
        settled = time.monotonic() + settle
        while time.monotonic() < settled:                # the RSS a second after the run
            time.sleep(SAMPLE_SECS)  # wait-ok: a bench's sampling pace
        after = rss(worker)
    finally:
        server.stop_soon()
    waits = prober.waits
    return {"chunks": chunks, "store": "redis" if store else "memory", "stream": run,
            "gettask": {"count": len(waits), "p50": round(percentile(waits, 50), 4),
                        "p99": round(percentile(waits, 99), 4), "max": round(max(waits), 4)},
            "rss": {"before": before, "peak": sampler.peak, "after": after,
                    "growth": sampler.peak - before, "left": after - before}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--chunks", type=int, default=1_000_000)
    parser.add_argument("--store", choices=("memory", "redis"), default="memory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        redis_server = RedisServer(directory).start() if args.store == "redis" else None
        try:
            result = measure(directory, args.chunks, redis_server and redis_server.url)
        finally:
            if redis_server is not None:
                redis_server.stop()
            stopping.check()
    stamp = datetime.now(timezone.utc)
    report = {"when": stamp.isoformat(timespec="seconds"), "commit": git_commit(),
              "versions": versions(), **result}
    mib = 1024 * 1024
    r, g, s = result["rss"], result["gettask"], result["stream"]
    print(f"| store | chunks | stream s | MiB | events | final | GetTask n | p50 s | p99 s | "
          f"max s | RSS before MiB | peak | after |\n|{'---|' * 13}\n"
          f"| {result['store']} | {args.chunks} | {s['secs']} | {s['bytes'] / mib:.1f} | "
          f"{s['events']} | {s['final']} | {g['count']} | {g['p50']} | {g['p99']} | "
          f"{g['max']} | {r['before'] / mib:.0f} | {r['peak'] / mib:.0f} | "
          f"{r['after'] / mib:.0f} |")
    save(report, f"hub-stream-memory-{stamp.strftime('%Y%m%dT%H%M%SZ')}", log)


if __name__ == "__main__":
    main()
