"""``make bench-streams``: idle murmur.WatchSession streams, and fan-out latency to subscribers.

Each phase starts its own door, ``murmur-wsgi serve`` (gunicorn -k gevent, one worker) on
a free loopback port, with the demo agent, ``observability.metrics: true`` and
``stream.heartbeat_secs`` from ``--heartbeat``. The client side is this one process: raw
HTTP/1.1 on non-blocking sockets driven by ``selectors`` (no threads), one TCP connection
per stream. See docs/performance.md, "Streams".

    idle     open N WatchSession streams (``-n``, default 5000), each read until its
             connection-ack; the worker's RSS before and after, per stream, the time to
             open them; /metrics must count N open streams; then every client closes
             and /metrics must come back to 0 open streams (within 2 heartbeats + 30 s).
    bare     (``--bare``) the same N streams held by a bare gevent WSGI app under the same
             gunicorn settings (``bare_stream_app`` below): the server's share of the
             memory, apart from the door's.
    fanout   S WatchSession subscribers (``-s``, default 1000), then R rounds (``-r``,
             default 50) of one SendMessage (returnImmediately, echo: four numbered
             events), each round waiting until every subscriber has the task's terminal
             status. Per event: send -> first subscriber, first -> last subscriber, send
             -> last subscriber, and (status events) the event's own timestamp -> last.

Results: a Markdown table on stdout, JSON in bench/results/streams-<timestamp>.json.
Only the standard library is imported here: gunicorn imports this module in the bare
app's worker, whose memory is the baseline.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import http.client
import json
import os
import platform
import re
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from bench.report import git_commit, save, versions  # noqa: E402
HOST = "127.0.0.1"
START_DEADLINE = 30.0
STOP_TIMEOUT = 40.0            # gunicorn_conf.graceful_timeout (30 s) plus margin
OPEN_CONCURRENCY = 256         # connections opening at once (gunicorn's backlog is 2048)
OPEN_TIMEOUT = 120.0           # every stream acknowledged within this
OPEN_STALL = 15.0              # ... and none waits this long without another one acknowledged
ROUND_TIMEOUT = 30.0           # every subscriber has a round's terminal status within this
POLL_WAIT = 0.25               # between /metrics polls
FD_MARGIN = 64                 # descriptors beyond the streams: logs, listeners, /metrics
WARMUP_ROUNDS = 2              # fan-out rounds run first and not counted
TERMINAL = (b"TASK_STATE_COMPLETED", b"TASK_STATE_FAILED", b"TASK_STATE_CANCELED",
            b"TASK_STATE_REJECTED")
_STATE = re.compile(rb'"state":"(TASK_STATE_[A-Z_]+)"')
_STAMP = re.compile(rb'"timestamp":"([0-9T:.\-]+)Z"')


def log(text: str) -> None:
    print(f"bench-streams: {text}", file=sys.stderr, flush=True)


def compact(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def post_bytes(body: bytes, *, close: bool = False) -> bytes:
    return (b"POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"A2A-Version: 1.0\r\n%sContent-Length: %d\r\n\r\n"
            % (HOST.encode(), b"Connection: close\r\n" if close else b"", len(body)) + body)


WATCH = post_bytes(compact({"jsonrpc": "2.0", "id": 1, "method": "murmur.WatchSession",
                            "params": {}}))


def send_message_request(n: int, text: str) -> bytes:
    return post_bytes(compact(
        {"jsonrpc": "2.0", "id": n, "method": "SendMessage",
         "params": {"message": {"messageId": f"bench-fanout-{n}", "role": "ROLE_USER",
                                "parts": [{"text": text}]},
                    "configuration": {"returnImmediately": True}}}), close=True)


# --- limits and processes -------------------------------------------------------------


def raise_nofile(need: int) -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to the hard one (children inherit it); return both."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, need)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        log(f"RLIMIT_NOFILE is {soft} (hard {hard}); {need} descriptors were asked for")
    return soft, hard


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def server_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_WSGI_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def proc_children(pid: int) -> list[int]:
    """The children of ``pid``: /proc/<pid>/task/*/children, else a scan of /proc."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                    found.update(int(x) for x in fh.read().split())
    if found:
        return sorted(found)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    # pid (comm) state ppid ...: comm may hold spaces; split after its ")".
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.add(int(entry))
    return sorted(found)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def memory_of(pid: int) -> dict:
    """VmRSS, RssAnon, RssFile (bytes) and open descriptors of a process."""
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    with contextlib.suppress(OSError):
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


@dataclasses.dataclass
class Server:
    """A gunicorn master this runner started in its own process group, and its worker."""

    name: str
    port: int
    proc: subprocess.Popen
    log_path: Path
    worker: int | None = None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def memory(self) -> dict:
        return memory_of(self.worker)

    def stop(self) -> float:
        """SIGTERM; after STOP_TIMEOUT, SIGKILL to the group. Seconds it took."""
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log(f"{self.name} did not stop within {STOP_TIMEOUT}s of SIGTERM; killing it")
        # The worker too, should it outlive its master; the group is this server's alone.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        return time.monotonic() - started


def start_server(name: str, argv: list[str], port: int, workdir: Path, env: dict) -> Server:
    """Start ``argv`` from the repository root; wait until it answers and has one worker."""
    log_path = workdir / f"{name}-{port}.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(name, port, proc, log_path)
    deadline = time.monotonic() + START_DEADLINE
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{server.log()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                status, _ = http_get(port, "/.well-known/agent-card.json", timeout=0.5)
                children = proc_children(proc.pid)
                if status in (200, 404) and len(children) == 1:
                    server.worker = children[0]
                    return server
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not serve within {START_DEADLINE}s:\n"
                                   + server.log())
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)          # paces the poll; returns at once if it dies
    except BaseException:
        server.stop()
        raise


def gunicorn_conf(workdir: Path, worker_connections: int, *, door: bool) -> Path:
    """A gunicorn conf: the door's own settings (or, bare, the same core ones) with
    ``worker_connections`` raised to hold the streams."""
    path = workdir / ("door-gunicorn.conf.py" if door else "bare-gunicorn.conf.py")
    if door:
        text = ("from murmur_wsgi.door.gunicorn_conf import *  # noqa: F401,F403\n"
                f"worker_connections = {worker_connections}\n")
    else:
        # Not the door's hooks: they import the door, whose modules would count in the
        # bare worker's memory. A short graceful_timeout: the bare streams never end.
        text = ("worker_class = 'gevent'\nworkers = 1\n"
                f"worker_connections = {worker_connections}\n"
                "timeout = 60\ngraceful_timeout = 2\nkeepalive = 75\npreload_app = False\n"
                "accesslog = None\nerrorlog = '-'\ncontrol_socket_disable = True\n")
    path.write_text(text, encoding="utf-8")
    return path


def start_door(workdir: Path, args, name: str) -> Server:
    port = free_port()
    manifest = {
        "name": "bench-streams", "version": "0.1.0", "agent": "demo",
        "lifecycle": {"task_acceptance": "queue", "queue_depth": 1000, "after_task": "sleep"},
        "network": {"host": HOST, "internal_port": port},
        "stream": {"heartbeat_secs": args.heartbeat},
        "observability": {"metrics": True},
    }
    path = workdir / f"{name}-{port}.yaml"
    path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")   # JSON is YAML
    argv = [sys.executable, "-m", "murmur_wsgi.cli", "serve", "--config", str(path),
            "--listen", f"{HOST}:{port}"]
    if args.worker_connections != "stock":
        conf = gunicorn_conf(workdir, worker_connections(args), door=True)
        argv += ["--gunicorn-conf", str(conf)]
    env = server_env(MURMUR_WSGI_HOME=str(workdir / f"home-{port}"))
    return start_server(name, argv, port, workdir, env)


def start_bare(workdir: Path, args) -> Server:
    port = free_port()
    conf = gunicorn_conf(workdir, worker_connections(args, stock=4096), door=False)
    argv = [sys.executable, "-m", "gunicorn", "-c", str(conf), "-b", f"{HOST}:{port}",
            "bench.streams:bare_stream_app"]
    env = server_env(BENCH_BARE_HEARTBEAT=str(args.heartbeat))
    return start_server("bare", argv, port, workdir, env)


def worker_connections(args, stock: int = 4096) -> int:
    if args.worker_connections in ("auto", "stock"):
        return max(stock, args.streams + FD_MARGIN, args.subscribers + FD_MARGIN)
    return int(args.worker_connections)


def http_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def open_streams_gauge(port: int) -> int:
    status, body = http_get(port, "/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}: {body[:200]!r}")
    for line in body.decode().splitlines():
        if line.startswith("murmur_open_streams "):
            return int(float(line.split()[1]))
    raise RuntimeError("/metrics has no murmur_open_streams")


# --- the bare app --------------------------------------------------------------------


_BARE_COND = threading.Condition(threading.RLock())    # gevent-patched in the worker


def bare_stream_app(environ, start_response):
    """The baseline: an SSE answer that writes one event, then waits like the door's body.

    A POST: it reads the request body, answers ``text/event-stream`` with one
    ``connection-ack`` event, then waits on a condition nobody notifies, with a
    heartbeat timeout, as the door's stream body does; a heartbeat is written
    when the wait times out.
    """
    if environ.get("REQUEST_METHOD") != "POST":
        # The runner's readiness probe (a GET): a plain answer, not a stream.
        start_response("404 Not Found", [("Content-Type", "text/plain"),
                                         ("Content-Length", "0")])
        return [b""]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    environ["wsgi.input"].read(length)
    start_response("200 OK", [("Content-Type", "text/event-stream"),
                              ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")])
    interval = float(os.environ.get("BENCH_BARE_HEARTBEAT", "60"))

    def body():
        yield b'data: {"jsonrpc":"2.0","id":1,"result":{"bare":"connection-ack"}}\n\n'
        while True:
            with _BARE_COND:
                _BARE_COND.wait(interval)
            yield b":heartbeat\n\n"

    return body()


# --- the client ------------------------------------------------------------------------


class Conn:
    """One stream's connection: raw HTTP/1.1, a chunked body, SSE events split out."""

    __slots__ = ("sock", "raw", "sse", "headers_done", "chunk_left", "acked", "ended",
                 "t_start", "t_ack", "heartbeats", "markers", "status", "index", "seen")

    def __init__(self, sock: socket.socket, index: int):
        self.sock = sock
        self.index = index
        self.raw = bytearray()
        self.sse = bytearray()
        self.headers_done = False
        self.chunk_left = -1       # -1: a size line is due; else data bytes still due (+CRLF)
        self.acked = False
        self.ended = False
        self.t_start = 0.0
        self.t_ack = 0.0
        self.heartbeats = 0
        self.markers: dict[str, int] = {}
        self.status = None
        self.seen = 0              # numbered events received

    def feed(self, data: bytes, on_event, now: float) -> None:
        """Take received bytes; call ``on_event(conn, event_id, data, now)`` per numbered event."""
        raw = self.raw
        raw += data
        if not self.headers_done:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(raw[:end]).decode("latin-1")
            del raw[:end + 4]
            self.headers_done = True
            self.status = int(head.split(" ", 2)[1])
            if self.status != 200 or "transfer-encoding: chunked" not in head.lower():
                raise RuntimeError(f"stream {self.index}: not a chunked 200 answer:\n{head}\n"
                                   f"{bytes(raw[:300])!r}")
        sse = self.sse
        while True:
            if self.chunk_left < 0:
                end = raw.find(b"\r\n")
                if end < 0:
                    break
                size = int(bytes(raw[:end]).split(b";")[0], 16)
                del raw[:end + 2]
                if size == 0:
                    self.ended = True
                    break
                self.chunk_left = size
            if len(raw) < self.chunk_left + 2:
                break
            sse += raw[:self.chunk_left]
            del raw[:self.chunk_left + 2]
            self.chunk_left = -1
        while True:
            end = sse.find(b"\n\n")
            if end < 0:
                break
            event = bytes(sse[:end])
            del sse[:end + 2]
            if event.startswith(b":"):
                self.heartbeats += 1
            elif event.startswith(b"id: "):
                line = event.index(b"\n")
                self.seen += 1
                on_event(self, int(event[4:line]), event[line + 1:], now)
            elif b'"connection-ack"' in event:
                if not self.acked:
                    self.acked = True
                    self.t_ack = now
            else:
                match = re.search(rb'"frame":"([a-z\-]+)"', event)
                name = match.group(1).decode() if match else "other"
                self.markers[name] = self.markers.get(name, 0) + 1


def _ignore_event(conn, event_id, data, now):
    pass


class Client:
    """Many stream connections on one selector, in this thread."""

    def __init__(self, port: int):
        self.port = port
        self.selector = selectors.DefaultSelector()
        self.conns: list[Conn] = []
        self.on_event = _ignore_event
        self.closed_early = 0
        self.extra: dict[socket.socket, object] = {}     # other sockets: sock -> callback

    def _connect(self, index: int) -> Conn:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        conn = Conn(sock, index)
        conn.t_start = time.perf_counter()
        err = sock.connect_ex((HOST, self.port))
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            raise OSError(err, f"connect to {HOST}:{self.port}: {os.strerror(err)}")
        self.selector.register(sock, selectors.EVENT_WRITE, conn)
        return conn

    def _writable(self, conn: Conn) -> None:
        err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise OSError(err, f"stream {conn.index}: connect failed: {os.strerror(err)}")
        sent = conn.sock.send(WATCH)          # a few hundred bytes: one send fits
        if sent != len(WATCH):
            raise OSError(f"stream {conn.index}: short send ({sent} of {len(WATCH)})")
        self.selector.modify(conn.sock, selectors.EVENT_READ, conn)

    def _readable(self, conn: Conn, now: float) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as ex:
            data = b""
            log(f"stream {conn.index}: {ex}")
        if not data:
            conn.ended = True
        else:
            conn.feed(data, self.on_event, now)
        if conn.ended:
            self.closed_early += 1
            self.selector.unregister(conn.sock)

    def pump(self, timeout: float) -> int:
        """Wait up to ``timeout`` for readiness once, and handle it; return events handled."""
        ready = self.selector.select(timeout)
        now = time.perf_counter()     # every socket in ``ready`` had its data by now
        for key, mask in ready:
            conn = key.data
            if isinstance(conn, Conn):
                if mask & selectors.EVENT_WRITE:
                    self._writable(conn)
                else:
                    self._readable(conn, now)
            else:
                conn(key.fileobj, now)
        return len(ready)

    def open(self, count: int, deadline: float, progress=None) -> float:
        """Open ``count`` more streams, each read until its connection-ack; seconds taken."""
        started = time.perf_counter()
        first = len(self.conns)
        target = first + count
        pending: list[Conn] = []
        next_index = first
        last_report = last_progress = started
        acked_before = -1
        while True:
            pending = [c for c in pending if not c.acked]
            while next_index < target and len(pending) < OPEN_CONCURRENCY:
                conn = self._connect(next_index)
                self.conns.append(conn)
                pending.append(conn)
                next_index += 1
            if not pending and next_index >= target:
                return time.perf_counter() - started
            if self.closed_early:
                bad = next(c for c in self.conns if c.ended)
                raise RuntimeError(f"stream {bad.index} ended while opening "
                                   f"(status {bad.status}): {bytes(bad.raw[:300])!r}")
            now = time.perf_counter()
            acked = len(self.conns) - len(pending) - first
            if acked != acked_before:
                acked_before, last_progress = acked, now
            if now > deadline or now - last_progress > OPEN_STALL:
                why = "before the deadline" if now > deadline else \
                    f"and none more for {OPEN_STALL:g}s (does the server hold no more " \
                    "connections? gunicorn's worker_connections caps them)"
                raise TimeoutError(f"{first + acked} streams open: {acked} of {count} "
                                   f"acknowledged {why}; {len(pending)} waiting")
            if progress and now - last_report > 5:
                last_report = now
                progress(len(self.conns) - len(pending) - first)
            self.pump(min(0.5, deadline - now))

    def close_all(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.selector.unregister(conn.sock)
            conn.sock.close()
        for sock in list(self.extra):
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.selector.unregister(sock)
            sock.close()
        self.extra.clear()
        self.selector.close()


# --- statistics --------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def summary_ms(values: list[float]) -> dict:
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "p50": percentile(ms, 50), "p99": percentile(ms, 99),
            "max": max(ms) if ms else None, "min": min(ms) if ms else None,
            "mean": sum(ms) / len(ms) if ms else None}


def mib(n: float) -> float:
    return n / (1024 * 1024)


# --- phases ------------------------------------------------------------------------------


def wait_for_gauge(port: int, want: int, deadline: float, what: str) -> tuple[bool, float, int]:
    """Poll /metrics' open-stream gauge until it equals ``want``; (reached, seconds, last)."""
    started = time.monotonic()
    last_report = started
    value = -1
    while True:
        value = open_streams_gauge(port)
        now = time.monotonic()
        if value == want:
            return True, now - started, value
        if now > deadline:
            return False, now - started, value
        if now - last_report >= 10:
            last_report = now
            log(f"{what}: {value} open streams after {now - started:.0f}s, waiting for {want}")
        time.sleep(POLL_WAIT)


def slope(samples: list[tuple[int, int]]) -> float | None:
    """Least squares of RSS over the streams open, ``[(streams, bytes), …]``: the marginal
    bytes of one more stream, without what the first ones paid once (None: one count)."""
    xs, ys = [x for x, _ in samples], [y for _, y in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else None


def hold_streams(server: Server, n: int, checkpoints: int = 5) -> tuple[dict, Client]:
    """Open ``n`` idle streams on ``server``; RSS before, at checkpoints, after."""
    client = Client(server.port)
    http_get(server.port, "/.well-known/agent-card.json")    # the lazy paths, once
    before = server.memory()
    log(f"{server.name}: worker {server.worker}: RSS {mib(before['VmRSS']):.1f} MiB before; "
        f"opening {n} streams")
    samples = [{"streams": 0, **before}]
    step = max(1, n // checkpoints)
    opened = 0
    seconds = 0.0
    deadline = time.perf_counter() + OPEN_TIMEOUT
    try:
        while opened < n:
            batch = min(step, n - opened)
            seconds += client.open(batch, deadline, progress=lambda k, base=opened: log(
                f"{server.name}: {base + k} streams acknowledged"))
            opened += batch
            samples.append({"streams": opened, **server.memory()})
            log(f"{server.name}: {opened} streams open, RSS "
                f"{mib(samples[-1]['VmRSS']):.1f} MiB")
    except BaseException:
        client.close_all()
        raise
    after = samples[-1]
    acks = [c.t_ack - c.t_start for c in client.conns]
    result = {
        "streams": n,
        "open_seconds": seconds,
        "opens_per_second": n / seconds if seconds else None,
        "ack_latency_ms": summary_ms(acks),
        "rss_before": before["VmRSS"], "rss_after": after["VmRSS"],
        "rss_anon_before": before.get("RssAnon"), "rss_anon_after": after.get("RssAnon"),
        "worker_fds_after": after.get("fds"),
        "rss_per_stream": (after["VmRSS"] - before["VmRSS"]) / n,
        "rss_anon_per_stream": (after["RssAnon"] - before["RssAnon"]) / n
        if "RssAnon" in after else None,
        "samples": samples,
    }
    # The marginal cost: least squares of RSS over the checkpoints.
    if len(samples) > 2:
        result["rss_slope_per_stream"] = slope([(s["streams"], s["VmRSS"]) for s in samples])
    return result, client


def phase_idle(args, workdir: Path) -> dict:
    server = start_door(workdir, args, "door-idle")
    client = None
    try:
        result, client = hold_streams(server, args.streams)
        counted = open_streams_gauge(server.port)
        result["metrics_open_streams"] = counted
        result["metrics_ok"] = counted == args.streams
        log(f"door: /metrics counts {counted} open streams (opened {args.streams})")
        # Heartbeats seen while idle (a slow open can outlast one interval).
        result["heartbeats_seen"] = sum(c.heartbeats for c in client.conns)
        client.close_all()
        client = None
        closed_at = time.monotonic()
        # A WSGI app learns of a gone client only when a write fails: the first
        # heartbeat after the close is accepted by the kernel (the peer answers it
        # with RST), the second fails. Hence two intervals, plus a margin.
        budget = 2 * args.heartbeat + 30
        log(f"door: every client closed; waiting up to {budget:.0f}s for /metrics to count "
            f"0 open streams (released at a failed heartbeat write)")
        reached, seconds, last = wait_for_gauge(server.port, 0, closed_at + budget, "door")
        result.update(released=reached, release_seconds=seconds, open_after_deadline=last,
                      release_budget_seconds=budget)
        if reached:
            log(f"door: 0 open streams {seconds:.1f}s after the clients closed")
            result["rss_after_release"] = server.memory()["VmRSS"]
        else:
            log(f"door: PROBLEM: {last} streams still open {seconds:.0f}s after the clients "
                "closed")
    finally:
        if client is not None:
            client.close_all()
        result_stop = server.stop()
        log(f"door: stopped in {result_stop:.1f}s (exit {server.proc.returncode})")
    result["stop_seconds"] = result_stop
    result["worker_connections"] = worker_connections(args) \
        if args.worker_connections != "stock" else "stock (4096)"
    return result


def phase_bare(args, workdir: Path) -> dict:
    server = start_bare(workdir, args)
    client = None
    try:
        result, client = hold_streams(server, args.streams)
    finally:
        if client is not None:
            client.close_all()
        stopped = server.stop()
        log(f"bare: stopped in {stopped:.1f}s (exit {server.proc.returncode})")
    return result


class FanOut:
    """Per numbered event: when the first and the last subscriber had it, and how many."""

    def __init__(self, subscribers: int, offset: float):
        self.subscribers = subscribers
        self.offset = offset           # time.time() - time.perf_counter()
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.count: dict[int, int] = {}
        self.kind: dict[int, str] = {}
        self.stamp: dict[int, float] = {}   # the status timestamp, epoch seconds
        self.terminal: set[int] = set()

    def on_event(self, conn: Conn, event_id: int, data: bytes, now: float) -> None:
        count = self.count.get(event_id)
        if count is None:
            self.first[event_id] = now
            self.count[event_id] = 1
            self._classify(event_id, data)
        else:
            self.count[event_id] = count + 1
        self.last[event_id] = now

    def _classify(self, event_id: int, data: bytes) -> None:
        head = data[:80]
        if b'"statusUpdate"' in head:
            match = _STATE.search(data)
            state = match.group(1) if match else b"?"
            self.kind[event_id] = "status " + state.decode().replace("TASK_STATE_", "")
            if state in TERMINAL:
                self.terminal.add(event_id)
            stamp = _STAMP.search(data)
            if stamp:
                parsed = datetime.strptime(stamp.group(1).decode(), "%Y-%m-%dT%H:%M:%S.%f")
                self.stamp[event_id] = parsed.replace(tzinfo=timezone.utc).timestamp()
        elif b'"artifactUpdate"' in head:
            self.kind[event_id] = "artifact"
        else:
            match = re.search(rb'"frame":"([a-z\-]+)"', data)
            self.kind[event_id] = "frame " + (match.group(1).decode() if match else "?")

    def round_done(self, since: int) -> bool:
        """Every subscriber has a terminal status numbered above ``since``."""
        return any(self.count[e] >= self.subscribers for e in self.terminal if e > since)


def phase_fanout(args, workdir: Path) -> dict:
    server = start_door(workdir, args, "door-fanout")
    client = Client(server.port)
    offset = time.time() - time.perf_counter()
    stats = FanOut(args.subscribers, offset)
    rounds: list[dict] = []
    try:
        http_get(server.port, "/.well-known/agent-card.json")
        open_seconds = client.open(args.subscribers, time.perf_counter() + OPEN_TIMEOUT)
        counted = open_streams_gauge(server.port)
        log(f"fanout: {args.subscribers} subscribers in {open_seconds:.2f}s; /metrics counts "
            f"{counted}")
        if counted != args.subscribers:
            raise RuntimeError(f"/metrics counts {counted} open streams, not "
                               f"{args.subscribers}")
        client.on_event = stats.on_event
        for n in range(WARMUP_ROUNDS + args.rounds):
            if n == WARMUP_ROUNDS:
                cpu0 = (own_cpu_seconds(), cpu_seconds(server.worker), time.perf_counter())
            rounds.append(run_round(client, stats, n, args.text,
                                    counted=n >= WARMUP_ROUNDS))
        cpu1 = (own_cpu_seconds(), cpu_seconds(server.worker), time.perf_counter())
        rss = server.memory()
        lagged = sum(c.markers.get("lagged", 0) for c in client.conns)
        gaps = sum(c.markers.get("gap", 0) for c in client.conns)
        heartbeats = sum(c.heartbeats for c in client.conns)
    finally:
        client.close_all()
        stopped = server.stop()
        log(f"fanout: door stopped in {stopped:.1f}s (exit {server.proc.returncode})")

    measured = [r for r in rounds if r["counted"]]
    ids = [e for r in measured for e in r["events"]]
    first_last = [stats.last[e] - stats.first[e] for e in ids]
    send_first = [stats.first[e] - r["t_send"] for r in measured for e in r["events"]]
    send_last = [stats.last[e] - r["t_send"] for r in measured for e in r["events"]]
    stamp_last = [stats.last[e] + offset - stats.stamp[e] for e in ids if e in stats.stamp]
    incomplete = {e: stats.count[e] for e in ids if stats.count[e] != args.subscribers}
    by_kind: dict[str, list[float]] = {}
    for e in ids:
        by_kind.setdefault(stats.kind.get(e, "?"), []).append(stats.last[e] - stats.first[e])
    return {
        "subscribers": args.subscribers,
        "rounds": args.rounds, "warmup_rounds": WARMUP_ROUNDS, "text": args.text,
        "subscribers_open_seconds": open_seconds,
        "events_per_round": sorted({len(r["events"]) for r in measured}),
        "events_measured": len(ids),
        "events_not_at_every_subscriber": incomplete,
        "lagged_frames": lagged, "gap_frames": gaps, "heartbeats_seen": heartbeats,
        "round_seconds": summary_ms([r["seconds"] for r in measured]),
        "send_to_first_ms": summary_ms(send_first),
        "first_to_last_ms": summary_ms(first_last),
        "send_to_last_ms": summary_ms(send_last),
        "stamp_to_last_ms": summary_ms(stamp_last),
        "first_to_last_by_kind_ms": {k: summary_ms(v) for k, v in sorted(by_kind.items())},
        "worker_rss_with_subscribers": rss["VmRSS"],
        # CPU over the measured rounds: the worker's (HTTP, the task, the fan-out writes)
        # and this client's (reading and parsing every subscriber's events).
        "measured_wall_seconds": cpu1[2] - cpu0[2],
        "worker_cpu_seconds": cpu1[1] - cpu0[1],
        "client_cpu_seconds": cpu1[0] - cpu0[0],
        "worker_cpu_us_per_delivery": 1e6 * (cpu1[1] - cpu0[1]) / (len(ids) * args.subscribers)
        if ids else None,
        "client_cpu_us_per_delivery": 1e6 * (cpu1[0] - cpu0[0]) / (len(ids) * args.subscribers)
        if ids else None,
        "send_answers": sorted({r["answer"] for r in rounds}),
        "rounds_detail": [{k: v for k, v in r.items() if k != "t_send"} for r in rounds],
    }


def run_round(client: Client, stats: FanOut, n: int, text: str, counted: bool) -> dict:
    """One SendMessage (returnImmediately); pump until every subscriber has its end."""
    since = max(stats.count, default=0)
    answer = bytearray()
    done_reading = []

    def read_answer(sock, now):
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        if data:
            answer.extend(data)
            return
        client.selector.unregister(sock)
        del client.extra[sock]
        sock.close()
        done_reading.append(now)

    sock = socket.create_connection((HOST, client.port), timeout=10)
    request = send_message_request(1000 + n, f"{text} {n}")
    t_send = time.perf_counter()
    sock.sendall(request)
    sock.setblocking(False)
    client.extra[sock] = read_answer
    client.selector.register(sock, selectors.EVENT_READ, read_answer)
    deadline = t_send + ROUND_TIMEOUT
    while not (stats.round_done(since) and done_reading):
        now = time.perf_counter()
        if now > deadline:
            missing = sum(1 for e in stats.terminal if e > since)
            raise TimeoutError(f"round {n}: not every subscriber had the task's terminal "
                               f"status within {ROUND_TIMEOUT}s (terminal events seen: "
                               f"{missing}; answer {bytes(answer[:200])!r})")
        client.pump(min(0.5, deadline - now))
    head, _, body = bytes(answer).partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1].decode() if head else "?"
    state = _STATE.search(body)
    events = sorted(e for e in stats.count if e > since)
    return {"round": n, "counted": counted, "t_send": t_send, "events": events,
            "kinds": [stats.kind.get(e) for e in events],
            "seconds": max(stats.last[e] for e in events) - t_send,
            "answer": f"{status} {state.group(1).decode() if state else '?'}"}


# --- report ------------------------------------------------------------------------------


def fmt(value, spec=".1f", unit="") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def markdown(report: dict) -> str:
    lines = []
    idle, bare, fan = report.get("idle"), report.get("bare"), report.get("fanout")
    if idle or bare:
        lines += ["| idle streams | server | open | RSS before | RSS after | per stream "
                  "(slope) | open time | /metrics | released |",
                  "|---|---|---:|---:|---:|---:|---:|---|---|"]
        for name, r in (("door", idle), ("bare gevent app", bare)):
            if not r:
                continue
            if "error" in r:
                lines.append(f"| {name} | | | | | | | error: {r['error'][:120]} | |")
                continue
            released = "–"
            if "released" in r:
                released = (f"0 after {r['release_seconds']:.1f} s" if r["released"]
                            else f"**{r['open_after_deadline']} still open**")
            counted = (f"{r['metrics_open_streams']} open" if "metrics_open_streams" in r
                       else "–")
            lines.append(
                f"| {r['streams']} | {name} | {r['streams']} | {mib(r['rss_before']):.1f} MiB | "
                f"{mib(r['rss_after']):.1f} MiB | {r['rss_per_stream'] / 1024:.1f} KiB "
                f"({fmt(r.get('rss_slope_per_stream', 0) / 1024)} KiB) | "
                f"{r['open_seconds']:.2f} s | {counted} | {released} |")
        lines.append("")
    if fan:
        if "error" in fan:
            lines.append(f"fan-out: error: {fan['error']}")
        else:
            lines += [f"| fan-out to {fan['subscribers']} subscribers, {fan['rounds']} rounds, "
                      f"{fan['events_measured']} events | p50 ms | p99 ms | max ms |",
                      "|---|---:|---:|---:|"]
            for key, label in (("first_to_last_ms", "first subscriber → last subscriber"),
                               ("send_to_last_ms", "SendMessage sent → last subscriber"),
                               ("send_to_first_ms", "SendMessage sent → first subscriber"),
                               ("stamp_to_last_ms", "status timestamp → last subscriber "
                                                    "(status events, 1 ms stamps)")):
                s = fan[key]
                lines.append(f"| {label} | {fmt(s['p50'])} | {fmt(s['p99'])} | "
                             f"{fmt(s['max'])} |")
            lines.append("")
            lines.append(f"lagged frames {fan['lagged_frames']}, gap frames {fan['gap_frames']}, "
                         f"events missing at some subscriber "
                         f"{len(fan['events_not_at_every_subscriber'])}")
    return "\n".join(lines)


def _interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--streams", type=int, default=5000, help="idle streams")
    parser.add_argument("-s", "--subscribers", type=int, default=1000,
                        help="fan-out subscribers")
    parser.add_argument("-r", "--rounds", type=int, default=50, help="fan-out rounds (tasks)")
    parser.add_argument("--heartbeat", type=float, default=60.0,
                        help="stream.heartbeat_secs of the door (default 60)")
    parser.add_argument("--text", default="hello from the fan-out bench",
                        help="the SendMessage text (echoed by the demo agent)")
    parser.add_argument("--worker-connections", default="auto",
                        help="gunicorn worker_connections: auto (max(4096, streams + 64)), "
                             "a number, or stock (conf/gunicorn.conf.py as it is)")
    parser.add_argument("--bare", action="store_true",
                        help="also hold the idle streams on a bare gevent WSGI app")
    parser.add_argument("--skip-idle", action="store_true")
    parser.add_argument("--skip-fanout", action="store_true")
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    args = parser.parse_args(argv)

    # SIGTERM (e.g. a timeout around make) unwinds like Ctrl-C: every finally stops its server.
    signal.signal(signal.SIGTERM, _interrupted)
    need = max(args.streams, args.subscribers) + FD_MARGIN
    soft, hard = raise_nofile(need)
    if soft < need:
        fits = soft - FD_MARGIN
        log(f"RLIMIT_NOFILE hard limit {hard}: running with {fits} streams/subscribers")
        args.streams = min(args.streams, fits)
        args.subscribers = min(args.subscribers, fits)

    started = datetime.now(timezone.utc)
    report = {
        "started": started.isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "versions": versions(),
        "rlimit_nofile": [soft, hard],
        "heartbeat_secs": args.heartbeat,
        "worker_connections": args.worker_connections,
    }
    failed = False
    with tempfile.TemporaryDirectory(prefix="murmur-bench-streams-") as tmp:
        workdir = Path(tmp)
        phases = []
        if not args.skip_idle and args.streams > 0:
            phases.append(("idle", phase_idle))
            if args.bare:
                phases.append(("bare", phase_bare))
        if not args.skip_fanout and args.subscribers > 0 and args.rounds > 0:
            phases.append(("fanout", phase_fanout))
        for name, phase in phases:
            try:
                report[name] = phase(args, workdir)
            except (RuntimeError, TimeoutError, OSError) as ex:
                log(f"{name}: FAILED: {ex}")
                report[name] = {"error": str(ex)}
                failed = True
    table = markdown(report)
    print(table)
    if not args.no_save:
        save(report, f"streams-{started.strftime('%Y%m%dT%H%M%SZ')}", log)
    idle = report.get("idle") or {}
    if idle.get("released") is False or idle.get("metrics_ok") is False:
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
