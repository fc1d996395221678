"""Idle SubscribeToTask streams on the hub's Redis store: connections, commands, memory, cancel.

Starts a redis-server (no persistence) and one hub replica (``murmur-wsgi hub
--workers 1``, the demo agent), or two (``--replicas 2``: the run on A, every
stream on B). One task runs ``/sleep`` (quiet: no event until it ends); ``-n``
SubscribeToTask streams (default 2000) are opened on it from this process
(non-blocking sockets on one selector, one TCP connection per stream), each
read until its first event. Then, for ``-s`` seconds (default 10) with every
stream open and the task quiet:

- Redis connections at the window's end (the opening burst's idle ones closed by then):
  ``INFO clients``' ``connected_clients`` less this script's one (every replica's), and
  the streams' worker's own (its sockets to Redis' port, from /proc);
- Redis commands per second: ``INFO stats``' ``total_commands_processed`` over the
  window, less this script's own INFO calls;
- the streams' worker's RSS (``/proc``), before the streams and with them, per stream,
  and its slope over the RSS sampled as each fifth of the streams opened (least squares,
  as bench/streams.py measures the door's): what one more stream costs.

Then CancelTask (on A): the time from the cancel to each stream's final event,
p50 / p99 / max, and how many streams had it.

    python bench/hub_streams.py [-n STREAMS] [-s SECONDS] [--replicas 1|2]

Results: a Markdown table on stdout, JSON in bench/results/hub-streams-<timestamp>.json.
"""
from __future__ import annotations

import argparse
import errno
import os
import hashlib
import json
import selectors
import socket
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from bench.report import git_commit, save, versions  # noqa: E402
from bench.streams import memory_of, proc_children, raise_nofile, slope  # noqa: E402
from tests.e2e.hub_process import HubProcess  # noqa: E402
from tests.redis_util import RedisServer  # noqa: E402

KEY = "mhk_bench-streams-key"
OPEN_CONCURRENCY = 200
OPEN_TIMEOUT = 120.0
FINAL_TIMEOUT = 30.0
SLEEP_SECS = 600
CHECKPOINTS = 5                  # RSS sampled as each fifth of the streams is open


def log(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def hub_yaml(port: int, redis_url: str, streams: int) -> dict:
    return {
        "public_url": f"http://127.0.0.1:{port}",
        "store": redis_url,
        "drain_timeout_secs": 1,
        "limits": {"max_subscriptions": streams + 100, "run_timeout_secs": SLEEP_SECS + 60,
                   "rate_per_minute": 100000, "concurrency": 100},
        "stream": {"keepalive_secs": 15, "write_timeout_secs": 10},
        "tenants": {"acme": {"api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
                             "agents": {"echo": {"agent": "demo", "publish": True}}}},
    }


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Stream:
    __slots__ = ("sock", "buf", "opened", "final_at", "ended")

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.opened = False
        self.final_at = None
        self.ended = False


class Streams:
    """SubscribeToTask streams on one selector; a stream is open at its first data event."""

    def __init__(self, port: int, task_id: str):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                           "params": {"id": task_id}}).encode()
        self.request = (f"POST /a2a/v1/agents/echo HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                        f"Content-Type: application/json\r\nA2A-Version: 1.0\r\n"
                        f"X-API-Key: {KEY}\r\nContent-Length: {len(body)}\r\n\r\n"
                        ).encode() + body
        self.port = port
        self.selector = selectors.DefaultSelector()
        self.all: list[Stream] = []

    def _connect(self) -> Stream:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        err = sock.connect_ex(("127.0.0.1", self.port))
        if err not in (0, errno.EINPROGRESS):
            raise OSError(err, "connect failed")
        stream = Stream(sock)
        self.selector.register(sock, selectors.EVENT_WRITE, stream)
        self.all.append(stream)
        return stream

    def pump(self, timeout: float) -> None:
        now = time.perf_counter()
        for key, mask in self.selector.select(timeout):
            stream = key.data
            if mask & selectors.EVENT_WRITE:
                stream.sock.send(self.request)
                self.selector.modify(stream.sock, selectors.EVENT_READ, stream)
                continue
            try:
                data = stream.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                stream.ended = True
                self.selector.unregister(stream.sock)
                continue
            stream.buf += data
            if b'"error":' in stream.buf:                 # refused, or ended by an error
                stream.ended = True
                self.selector.unregister(stream.sock)
                continue
            if not stream.opened and b"data: " in stream.buf:
                stream.opened = True
            if stream.final_at is None and b"TASK_STATE_CANCELED" in stream.buf:
                stream.final_at = now
            if len(stream.buf) > 65536:
                del stream.buf[:-4096]

    def open(self, count: int) -> float:
        started = time.perf_counter()
        while True:
            pending = [s for s in self.all if not s.opened and not s.ended]
            if len(self.all) >= count and not pending:
                return time.perf_counter() - started
            while len(self.all) < count and len(pending) < OPEN_CONCURRENCY:
                pending.append(self._connect())
            if time.perf_counter() - started > OPEN_TIMEOUT:
                raise TimeoutError(f"{sum(s.opened for s in self.all)} of {count} open "
                                   f"after {OPEN_TIMEOUT:g} s")
            self.pump(0.5)

    def close(self) -> None:
        for stream in self.all:
            try:
                self.selector.unregister(stream.sock)
            except (KeyError, ValueError):
                pass
            stream.sock.close()
        self.selector.close()


def worker_of(hub: HubProcess) -> int:
    """The pid of the replica's one gunicorn worker (the CLI execs into the master)."""
    children = proc_children(hub.proc.pid)
    assert children, "the replica has no worker"
    return children[0]


def connections_to(pid: int, port: int) -> int:
    """The TCP connections process ``pid`` holds to loopback ``port`` (/proc/net/tcp)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, inode = fields[2], fields[9]
        if inode in inodes and int(remote.split(":")[1], 16) == port:
            count += 1
    return count


def redis_figures(client, seconds: float) -> dict:
    first = client.info("stats")["total_commands_processed"]
    started = time.monotonic()
    time.sleep(seconds)  # wait-ok: the measurement window itself
    last = client.info("stats")["total_commands_processed"]
    elapsed = time.monotonic() - started
    # At the window's end: what the streams hold once the opening burst's are closed.
    connections = client.info("clients")["connected_clients"] - 1     # less this client
    own = 2                                # the INFO calls between the two readings
    return {"connections": connections,
            "commands_per_sec": round((last - first - own) / elapsed, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--streams", type=int, default=2000)
    parser.add_argument("-s", "--seconds", type=float, default=10.0)
    parser.add_argument("--replicas", type=int, choices=(1, 2), default=1)
    parser.add_argument("--memory", action="store_true",
                        help="the memory store (one replica): the streams' cost apart from Redis")
    args = parser.parse_args(argv)
    raise_nofile(args.streams * 2 + 256)
    report = {"bench": "hub-streams", "date": datetime.now(timezone.utc).isoformat(),
              "commit": git_commit(), "versions": versions(), "streams": args.streams,
              "replicas": args.replicas, "store": "memory" if args.memory else "redis"}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        server = RedisServer(workdir / "redis").start()
        hubs: list[HubProcess] = []
        client = redis.Redis(port=server.port, decode_responses=True)
        try:
            store = "memory" if args.memory else server.url
            for _ in range(1 if args.memory else args.replicas):
                hubs.append(HubProcess(workdir, lambda p: hub_yaml(p, store, args.streams),
                                       agent="echo", key=KEY, workers=1))
            runner, reader = hubs[0], hubs[-1]
            task = runner.result("SendMessage", {
                "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                            "parts": [{"text": f"/sleep {SLEEP_SECS}"}]},
                "configuration": {"returnImmediately": True}})["task"]
            worker = worker_of(reader)
            before = memory_of(worker)
            quiet = redis_figures(client, min(args.seconds, 5.0))
            report["without_streams"] = quiet
            streams = Streams(reader.port, task["id"])
            log(f"opening {args.streams} SubscribeToTask streams on {reader.url}")
            try:
                samples, opened_secs = [(0, before["VmRSS"])], 0.0
                for step in range(1, CHECKPOINTS + 1):
                    opened_secs += streams.open(args.streams * step // CHECKPOINTS)
                    samples.append((len(streams.all), memory_of(worker)["VmRSS"]))
                report["open_secs"] = round(opened_secs, 2)
                report["rss_samples"] = samples
                report["rss_kib_slope_per_stream"] = round((slope(samples) or 0.0) / 1024, 2)
                report["refused"] = sum(s.ended for s in streams.all)
                if report["refused"]:
                    sample = next(bytes(s.buf[-200:]) for s in streams.all if s.ended)
                    log(f"{report['refused']} streams refused: {sample!r}")
                log(f"{args.streams - report['refused']} open in {report['open_secs']} s; "
                    f"measuring {args.seconds:g} s")
                report["with_streams"] = redis_figures(client, args.seconds)
                report["with_streams"]["worker_connections"] = connections_to(worker,
                                                                              server.port)
                streams.pump(0)
                after = memory_of(worker)
                report["rss_bytes_before"] = before["VmRSS"]
                report["rss_bytes_with"] = after["VmRSS"]
                report["rss_kib_per_stream"] = round(
                    (after["VmRSS"] - before["VmRSS"]) / 1024 / args.streams, 2)
                sent = time.perf_counter()
                answer = runner.result("CancelTask", {"id": task["id"]})
                report["cancel_state"] = answer["status"]["state"]
                deadline = sent + FINAL_TIMEOUT
                while time.perf_counter() < deadline and \
                        any(s.final_at is None for s in streams.all):
                    streams.pump(0.2)
                delays = [(s.final_at - sent) * 1000 for s in streams.all if s.final_at]
                report["final_events"] = len(delays)
                report["final_ms"] = {"p50": percentile(delays, 50),
                                      "p99": percentile(delays, 99),
                                      "max": max(delays) if delays else None}
            finally:
                streams.close()
        finally:
            client.close()
            for hub in hubs:
                hub.stop()
            server.stop()
    save(report, "hub-streams-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"), log)
    ws = report.get("with_streams", {})
    print("| streams | refused | replicas | open (s) | Redis connections (all / the worker's) "
          "| Redis commands/s | RSS/stream (KiB; slope) | final events "
          "| cancel → final p50 / p99 (ms) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    final = report.get("final_ms", {})
    fmt = lambda v: "–" if v is None else f"{v:.1f}"  # noqa: E731
    print(f"| {args.streams} | {report.get('refused')} | {args.replicas} | {report.get('open_secs')} "
          f"| {ws.get('connections')} / {ws.get('worker_connections')} "
          f"| {ws.get('commands_per_sec')} "
          f"| {report.get('rss_kib_per_stream')}; {report.get('rss_kib_slope_per_stream')} "
          f"| {report.get('final_events')} "
          f"| {fmt(final.get('p50'))} / {fmt(final.get('p99'))} |")
    print(f"\nwithout streams: {report['without_streams']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
