"""``make bench``: requests per second of the door, against a bare WSGI app, under gunicorn.

Both run with the door's own gunicorn settings (``-c conf/gunicorn.conf.py``: one gevent
worker) on a free loopback port, and ``wrk`` posts a JSON-RPC body to each (bench/post.lua).
Scenarios (see docs/performance.md):

    bare-post              the bare app (bench/bare_app.py): HTTP + gunicorn + gevent alone
    door-gettask-unknown   GetTask on an id the door does not hold: the dispatch path, -32001
    door-gettask           GetTask on a finished task (created first with SendMessage)
    door-sendmessage       held SendMessage to the demo agent, which answers at once
    hub-gettask            the hub (docs/hub.md): GetTask on a finished task, with an API key
    hub-sendmessage        the hub: blocking SendMessage to the demo agent (echo), API key
    hub-redis-gettask      the hub on Redis (a redis-server the runner starts), one worker:
                           GetTask on a finished task
    hub-redis-sendmessage  the same hub (one worker): blocking SendMessage to the demo agent
    hub-redis-unix-sendmessage  the same, the hub on that Redis's unix socket (unix://…)
    hub-redis-gettask-w2   the same hub with ``--workers 2`` (its ratio to one worker too)
    bare-redis-post        the bare app plus the read of a task record a GetTask sends,
                           answering that record as the hub does, to the hub's request: the
                           floor of a GetTask on Redis (hub-redis-gettask's ratio to it too)
    bare-redis-send        the bare app plus the two round trips of a blocking SendMessage
                           (the hub's own OPEN and END, with fresh ids) and its answer, to
                           the hub's request: the floor of hub-redis-sendmessage (its ratio
                           to it too)

Results: a Markdown table on stdout, and JSON in bench/results/<timestamp>.json.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import requests
import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from bench.report import git_commit, save, versions  # noqa: E402
LUA = REPO / "bench" / "post.lua"
CARD_PATH = "/.well-known/agent-card.json"
START_DEADLINE = 20.0
STOP_TIMEOUT = 40.0            # gunicorn_conf.graceful_timeout (30 s) plus margin
CLOSE = {"Connection": "close"}
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json", **CLOSE}

GET_UNKNOWN = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "tsk_x"}}
SEND = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                               "parts": [{"text": "hi"}]}}}

# The door under the benchmark: the demo agent, and a queue so that concurrent
# SendMessages wait their turn instead of being REJECTED by task_acceptance: single.
BENCH_MANIFEST = {
    "name": "bench-agent",
    "version": "0.1.0",
    "lifecycle": {"task_acceptance": "queue", "queue_depth": 1000, "after_task": "sleep"},
    "network": {"host": "127.0.0.1"},
    "agent": "demo",
}


# The hub under the benchmark: one tenant, one key, the demo agent; limits that admit the
# whole load (every request a new run).
HUB_KEY = "mhk_bench-key"
HUB_PATH = "/a2a/v1/agents/echo"
HUB_CONFIG = {
    "store": "memory",
    "limits": {"concurrency": 100_000, "rate_per_minute": 100_000_000},
    "tenants": {"bench": {"api_keys": [hashlib.sha256(HUB_KEY.encode()).hexdigest()],
                          "agents": {"echo": {"agent": "demo", "publish": True}}}},
}


class Skip(Exception):
    """A scenario the door cannot run yet; the message says why."""


def compact(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def log(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


# --- wrk -----------------------------------------------------------------------------


WRK_HELP = """wrk is not installed, and bench/run.py cannot install it here.
Install it, then run `make bench` again:
  Debian/Ubuntu:  sudo apt-get install -y wrk
  Fedora:         sudo dnf install -y wrk
  macOS:          brew install wrk
  from source:    https://github.com/wg/wrk (make; put ./wrk on PATH)"""


def ensure_wrk(install: bool) -> str:
    """Return wrk's path; as root with apt-get, install it first when missing."""
    path = shutil.which("wrk")
    if path:
        return path
    can_apt = shutil.which("apt-get") is not None and hasattr(os, "geteuid") \
        and os.geteuid() == 0
    if not (install and can_apt):
        print(WRK_HELP, file=sys.stderr)
        raise SystemExit(2)
    log("wrk is missing: apt-get update && apt-get install -y wrk")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "wrk"]):
        done = subprocess.run(argv, env=env, check=False)
        if done.returncode != 0:
            print(f"`{' '.join(argv)}` failed ({done.returncode}).\n{WRK_HELP}", file=sys.stderr)
            raise SystemExit(2)
    path = shutil.which("wrk")
    if not path:
        print(WRK_HELP, file=sys.stderr)
        raise SystemExit(2)
    return path


def run_wrk(wrk: str, url: str, body: str, *, threads: int, connections: int,
            seconds: float, count: bool, path: str = "/", api_key: str | None = None) -> dict:
    """Run wrk with bench/post.lua; return the numbers its done() prints. Each run's %ID%
    tokens are its own (``WRK_RUN``): a SendMessage's messageId is never one an earlier
    run (the warm-up, another round) sent, whose task the hub would return instead."""
    env = dict(os.environ, WRK_BODY=body, WRK_COUNT="1" if count else "0", WRK_PATH=path,
               WRK_RUN=uuid.uuid4().hex[:12])
    if api_key:
        env["WRK_API_KEY"] = api_key
    argv = [wrk, f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "10s",
            "-s", str(LUA), url + path]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False,
                          timeout=seconds + 120)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    stats = json.loads(line[len("WRKJSON "):])
    stats["rps"] = stats["requests"] / (stats["duration_us"] / 1e6)
    stats["little_mean_ms"] = 1000 * connections / stats["rps"] if stats["rps"] else None
    return stats


# --- CPU -----------------------------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu(root: int) -> float | None:
    """CPU seconds (user + system) spent by process ``root`` and its descendants alive
    now (a gunicorn master and its workers), from /proc; None where there is no /proc."""
    parents, spent = {}, {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue                      # gone meanwhile
        parents[int(entry)] = int(fields[1])
        spent[int(entry)] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    if root not in spent:
        return None
    found = {root}
    while True:                           # children, then theirs, until none is new
        more = {pid for pid, ppid in parents.items() if ppid in found} - found
        if not more:
            return sum(spent[pid] for pid in found)
        found |= more


# --- servers -------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclasses.dataclass
class Server:
    """A gunicorn process this runner started, in its own process group."""

    name: str
    url: str
    proc: subprocess.Popen
    log_path: Path
    redis_pid: int | None = None          # the redis-server it uses, started by this runner

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log(f"{self.name} did not stop within {STOP_TIMEOUT}s of SIGTERM; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def start_server(name: str, argv: list[str], port: int, workdir: Path, ready,
                 env: dict | None = None) -> Server:
    """Start ``argv`` from the repository root; wait until ``ready(url)`` answers True."""
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env or server_env(), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(name, f"http://127.0.0.1:{port}", proc, log_path)
    deadline = time.monotonic() + START_DEADLINE
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{server.log()}")
        with contextlib.suppress(requests.ConnectionError, requests.Timeout):
            if ready(server.url):
                return server
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"{name} did not answer within {START_DEADLINE}s:\n{server.log()}")
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)          # paces the poll; returns at once if it dies


def server_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_WSGI_")}
    env.update(extra)
    return env


def start_bare(workdir: Path, app: str = "bench.bare_app:app", name: str = "bare",
               env: dict | None = None) -> Server:
    port = free_port()
    argv = [sys.executable, "-m", "gunicorn", "-c", "conf/gunicorn.conf.py",
            "-b", f"127.0.0.1:{port}", app]
    return start_server(name, argv, port, workdir,
                        lambda url: rpc(url, GET_UNKNOWN, timeout=0.5).status_code == 200,
                        env=env)


def start_door(workdir: Path) -> Server:
    port = free_port()
    manifest = json.loads(json.dumps(BENCH_MANIFEST))
    manifest["network"]["internal_port"] = port
    path = workdir / "murmur.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    argv = [sys.executable, "-m", "murmur_wsgi.cli", "serve", "--config", str(path),
            "--listen", f"127.0.0.1:{port}"]
    env = server_env(MURMUR_WSGI_HOME=str(workdir / "home"))   # record and trace: temporary
    return start_server("door", argv, port, workdir, door_ready, env=env)


def start_hub(workdir: Path, name: str = "hub", store: str = "memory",
              workers: int = 1) -> Server:
    port = free_port()
    config = json.loads(json.dumps(HUB_CONFIG))
    config["public_url"] = f"http://127.0.0.1:{port}"
    config["store"] = store
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    argv = [sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", str(path),
            "--listen", f"127.0.0.1:{port}", "--workers", str(workers)]
    env = {k: v for k, v in server_env().items() if not k.startswith("MURMUR_HUB_")}
    return start_server(name, argv, port, workdir, hub_ready, env=env)


def start_redis_hubs(workdir: Path, stack, targets: list[str]) -> dict:
    """A redis-server (no persistence) and a hub on it per target: ``hub-redis`` with one
    worker, ``hub-redis-w2`` with two, ``hub-redis-unix`` with one on its unix socket.
    Skip when redis-server is not installed."""
    if shutil.which("redis-server") is None:
        raise Skip("redis-server is not installed (Debian/Ubuntu: apt-get install -y "
                   "redis-server; `make test` installs it as root)")
    from tests.redis_util import RedisServer

    redis = RedisServer(workdir / "redis").start()
    stack.callback(redis.stop)
    servers = {}
    for target in targets:
        if target == "bare-redis":
            server = start_bare(workdir, "bench.bare_app:redis_app", "bare-redis",
                                env=server_env(BENCH_REDIS_URL=redis.url))
        elif target == "bare-redis-send":
            # NOTE: on a database of its own: the replica its commands name is no hub's, and
            # the hubs' sweep would end its runs.
            server = start_bare(workdir, "bench.bare_app:redis_send_app", "bare-redis-send",
                                env=server_env(BENCH_REDIS_URL=f"redis://127.0.0.1:{redis.port}/2"))
        else:
            # NOTE: the socket's hub on a database of its own: each hub's tenant reaches its
            # tasks.max_per_tenant (then each message pays two more round trips) on its own.
            url = redis.socket_url(db=1) if target.endswith("-unix") else redis.url
            server = start_hub(workdir, target, url, 2 if target.endswith("-w2") else 1)
        server.redis_pid = redis.proc.pid
        servers[target] = server
        stack.callback(stop_and_report, server)
    return servers


def hub_ready(url: str) -> bool:
    return requests.get(url + HUB_PATH + CARD_PATH, headers={**CLOSE, "X-API-Key": HUB_KEY},
                        timeout=0.5).status_code == 200


def hub_rpc(url: str, body: dict) -> dict:
    return requests.post(url + HUB_PATH, data=compact(body), headers={**V1, "X-API-Key": HUB_KEY},
                         timeout=30).json()


def door_ready(url: str) -> bool:
    return requests.get(url + CARD_PATH, headers=CLOSE, timeout=0.5).status_code == 200


def rpc(url: str, body: dict, timeout: float = 30) -> requests.Response:
    return requests.post(url + "/", data=compact(body), headers=V1, timeout=timeout)


# --- scenarios -----------------------------------------------------------------------


def expect_error(url: str, body: dict, code: int) -> None:
    answer = rpc(url, body).json()
    got = answer.get("error", {}).get("code")
    if got != code:
        raise Skip(f"expected error {code}, the door answered {compact(answer)[:300]}")


def send_message(url: str) -> dict:
    """One SendMessage to the demo agent; its task, or Skip if the door cannot yet."""
    answer = rpc(url, SEND).json()
    task = answer.get("result", {}).get("task")
    if not task or "id" not in task:
        raise Skip(f"SendMessage is not served yet: {compact(answer)[:300]}")
    return task


def prepare_get_unknown(url: str) -> tuple[str, bool]:
    expect_error(url, GET_UNKNOWN, -32001)
    return compact(GET_UNKNOWN), False


def prepare_get_existing(url: str) -> tuple[str, bool]:
    task = send_message(url)
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task["id"]}}
    answer = rpc(url, body).json()
    if answer.get("result", {}).get("id") != task["id"]:
        raise Skip(f"GetTask does not return the task SendMessage made: {compact(answer)[:300]}")
    return compact(body), False


def prepare_send(url: str) -> tuple[str, bool]:
    send_message(url)
    body = json.loads(compact(SEND))
    body["params"]["message"]["messageId"] = "bench-%ID%"     # a fresh id per request
    return compact(body), True


def prepare_hub_get(url: str) -> tuple[str, bool]:
    answer = hub_rpc(url, SEND)
    task = answer.get("result", {}).get("task")
    if not task or task.get("status", {}).get("state") != "TASK_STATE_COMPLETED":
        raise Skip(f"the hub's SendMessage did not complete: {compact(answer)[:300]}")
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task["id"]}}
    if hub_rpc(url, body).get("result", {}).get("id") != task["id"]:
        raise Skip("the hub's GetTask does not return the task")
    return compact(body), False


def prepare_hub_send(url: str) -> tuple[str, bool]:
    body = json.loads(compact(SEND))
    body["params"]["message"]["messageId"] = "bench-%ID%"     # a fresh id per request
    return compact(body), True


def prepare_bare(url: str) -> tuple[str, bool]:
    return compact(GET_UNKNOWN), False


# The floor is posted the hub's GetTask: a task id as long as the hub's (a UUID).
FLOOR_GET = {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
             "params": {"id": "00000000-0000-4000-8000-000000000000"}}


def prepare_floor(url: str) -> tuple[str, bool]:
    return compact(FLOOR_GET), False


@dataclasses.dataclass
class Scenario:
    name: str
    target: str                  # "bare", "door" or "hub"
    what: str
    prepare: object              # url -> (body, count answers?)
    path: str = "/"
    api_key: str | None = None


SCENARIOS = [
    Scenario("bare-post", "bare", "bare WSGI app: read the body, answer a small JSON",
             prepare_bare),
    Scenario("door-gettask-unknown", "door", "GetTask on an unknown id: every layer, -32001",
             prepare_get_unknown),
    Scenario("door-gettask", "door", "GetTask on a finished task: the stored wire form",
             prepare_get_existing),
    Scenario("door-sendmessage", "door", "held SendMessage to the demo agent (echo)",
             prepare_send),
    Scenario("hub-gettask", "hub", "hub: GetTask on a finished task, X-API-Key",
             prepare_hub_get, HUB_PATH, HUB_KEY),
    Scenario("hub-sendmessage", "hub", "hub: blocking SendMessage to the demo agent, X-API-Key",
             prepare_hub_send, HUB_PATH, HUB_KEY),
    Scenario("hub-redis-gettask", "hub-redis", "hub on Redis, one worker: GetTask, X-API-Key",
             prepare_hub_get, HUB_PATH, HUB_KEY),
    Scenario("hub-redis-sendmessage", "hub-redis",
             "hub on Redis, one worker: blocking SendMessage, X-API-Key", prepare_hub_send,
             HUB_PATH, HUB_KEY),
    Scenario("hub-redis-unix-sendmessage", "hub-redis-unix",
             "hub on the same Redis through its unix socket (store: unix://…), one worker: "
             "blocking SendMessage", prepare_hub_send, HUB_PATH, HUB_KEY),
    Scenario("hub-redis-gettask-w2", "hub-redis-w2",
             "hub on Redis, --workers 2: GetTask, X-API-Key", prepare_hub_get, HUB_PATH, HUB_KEY),
    Scenario("bare-redis-post", "bare-redis",
             "bare app + the record read a GetTask sends to that Redis, its answer the task read: "
             "its floor", prepare_floor, HUB_PATH, HUB_KEY),
    Scenario("bare-redis-send", "bare-redis-send",
             "bare app + a blocking SendMessage's two round trips to that Redis (the hub's "
             "OPEN and END) and its answer: its floor", prepare_hub_send, HUB_PATH, HUB_KEY),
]
W2_OF = {"hub-redis-gettask-w2": "hub-redis-gettask"}     # reported as a ratio to one worker
FLOOR_OF = {"hub-redis-gettask": "bare-redis-post",       # and as a ratio to its floor
            "hub-redis-sendmessage": "bare-redis-send"}


def run_once(scenario: Scenario, server: Server, wrk: str, args) -> dict:
    """Prepare ``scenario`` (Skip if the door cannot yet), warm up, and run wrk once."""
    body, count = scenario.prepare(server.url)
    where = {"path": scenario.path, "api_key": scenario.api_key}
    if args.warmup > 0:
        run_wrk(wrk, server.url, body, threads=args.threads, connections=args.connections,
                seconds=args.warmup, count=False, **where)
    log(f"{scenario.name}: wrk -t{args.threads} -c{args.connections} -d{args.duration:g}s")
    before = cpu_now(server)
    stats = run_wrk(wrk, server.url, body, threads=args.threads, connections=args.connections,
                    seconds=args.duration, count=count, **where)
    stats["body"] = body
    for key, spent in cpu_now(server).items():
        if spent is not None and before[key] is not None and stats["requests"]:
            stats[key] = 1e6 * (spent - before[key]) / stats["requests"]
    log(f"{scenario.name}: {stats['rps']:.0f} requests/s, "
        f"{stats.get('server_cpu_us', float('nan')):.0f} µs of the server's CPU each")
    return stats


def cpu_now(server: Server) -> dict:
    """CPU seconds so far of the server's processes, and of its redis-server if any."""
    return {"server_cpu_us": tree_cpu(server.proc.pid),
            "redis_cpu_us": tree_cpu(server.redis_pid) if server.redis_pid else None}


def summarize(scenario: Scenario, runs: list[dict], skipped: str | None) -> dict:
    """One result per scenario: the median run's numbers, and every run's rate."""
    result = {"name": scenario.name, "target": scenario.target, "what": scenario.what}
    if skipped is not None:
        result["skipped"] = skipped
        return result
    ordered = sorted(runs, key=lambda run: run["rps"])
    result.update(ordered[len(ordered) // 2])
    result["rounds_rps"] = [run["rps"] for run in runs]
    for key in ("server_cpu_us", "redis_cpu_us"):     # each its own median round
        spent = sorted(run[key] for run in runs if key in run)
        if spent:
            result[key] = spent[len(spent) // 2]
            result[f"rounds_{key}"] = [run.get(key) for run in runs]
    return result


# --- report --------------------------------------------------------------------------


def stop_and_report(server: Server) -> None:
    server.stop()
    if server.proc.returncode not in (0, -signal.SIGTERM):
        log(f"{server.name} exited with {server.proc.returncode}:\n{server.log()[-2000:]}")


def wrk_version(wrk: str) -> str:
    done = subprocess.run([wrk, "-v"], capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).splitlines()[0] if (done.stdout or done.stderr) else "?"


def markdown(results: list[dict]) -> str:
    bare = next((r["rps"] for r in results if r["name"] == "bare-post" and "rps" in r), None)
    # NOTE: wrk's latency figures break Little's law on a small machine (its mean exceeds
    # connections / rate), so the table shows the mean that law gives; wrk's percentiles
    # stay in the JSON.
    lines = ["| scenario | what it measures | req/s | vs bare | server CPU µs/req | vs bare by CPU "
             "| Redis CPU µs/req | mean ms | notes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        if "rps" not in r:
            lines.append(f"| {r['name']} | {r['what']} | – | – | – | – | – | – | "
                         f"skipped: {r.get('skipped', '')[:80]} |")
            continue
        ratio = f"{r['rps'] / bare:.2f}" if bare else "–"
        notes = []
        if r.get("ratio_to_w1"):
            notes.append(f"{r['ratio_to_w1']:.2f}× one worker")
        if r.get("ratio_to_floor"):
            notes.append(f"{r['ratio_to_floor']:.2f}× its floor ({FLOOR_OF[r['name']]})"
                         + (f", {r['cpu_ratio_to_floor']:.2f}× by CPU"
                            if r.get("cpu_ratio_to_floor") else ""))
        if len(r.get("rounds_rps", [])) > 1:
            notes.append(f"{len(r['rounds_rps'])} rounds: {min(r['rounds_rps']):.0f}"
                         f"–{max(r['rounds_rps']):.0f} req/s")
        if r.get("states"):
            notes.append(", ".join(f"{k} {v}" for k, v in sorted(r["states"].items())))
        if r.get("rpc_errors"):
            notes.append("errors " + ", ".join(f"{k}: {v}" for k, v in r["rpc_errors"].items()))
        errs = {k: v for k, v in r["errors"].items() if v}
        if errs:
            notes.append("wrk " + ", ".join(f"{k} {v}" for k, v in errs.items()))
        lines.append(f"| {r['name']} | {r['what']} | {r['rps']:.0f} | {ratio} | "
                     f"{_figure(r.get('server_cpu_us'), '.0f')} | "
                     f"{_figure(r.get('cpu_ratio_to_bare'), '.2f')} | "
                     f"{_figure(r.get('redis_cpu_us'), '.0f')} | "
                     f"{r['little_mean_ms']:.2f} | {'; '.join(notes)} |")
    return "\n".join(lines)


def _figure(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def cpu_ratio(base: dict, other: dict) -> float | None:
    """``base``'s server CPU per request over ``other``'s: the ratio of their rates were
    the worker's CPU all either needed (its own core, Redis and wrk on others)."""
    if base.get("server_cpu_us") and other.get("server_cpu_us"):
        return base["server_cpu_us"] / other["server_cpu_us"]
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-d", "--duration", type=float, default=10, help="seconds per run")
    parser.add_argument("-t", "--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("-c", "--connections", type=int, default=16, help="wrk connections")
    parser.add_argument("--warmup", type=float, default=2, help="seconds of warm-up per run")
    parser.add_argument("-r", "--rounds", type=int, default=1,
                        help="run every scenario this many times, interleaved; report medians")
    parser.add_argument("-k", "--only", action="append", default=[],
                        help="run scenarios whose name contains this (repeatable)")
    parser.add_argument("--no-install", action="store_true", help="never apt-get install wrk")
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    args = parser.parse_args(argv)

    wrk = ensure_wrk(install=not args.no_install)
    chosen = [s for s in SCENARIOS if not args.only or any(k in s.name for k in args.only)]
    started = datetime.now(timezone.utc)
    runs: dict[str, list[dict]] = {s.name: [] for s in chosen}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="murmur-bench-") as tmp, \
            contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        servers = {}
        for target, start in (("bare", start_bare), ("door", start_door), ("hub", start_hub)):
            if any(s.target == target for s in chosen):
                servers[target] = server = start(workdir)
                stack.callback(stop_and_report, server)
        on_redis = sorted({s.target for s in chosen
                           if s.target.startswith(("hub-redis", "bare-redis"))})
        if on_redis:
            try:
                servers.update(start_redis_hubs(workdir, stack, on_redis))
            except Skip as ex:
                log(f"the hub on Redis: skipped: {ex}")
                skipped.update({s.name: str(ex) for s in chosen if s.target in on_redis})
        # Rounds interleave the scenarios, so a busy moment on a shared machine
        # lands on all of them rather than on one; each reports its median round.
        for round_no in range(args.rounds):
            if args.rounds > 1:
                log(f"round {round_no + 1} of {args.rounds}")
            for scenario in chosen:
                if scenario.name in skipped:
                    continue
                try:
                    runs[scenario.name].append(
                        run_once(scenario, servers[scenario.target], wrk, args))
                except Skip as ex:
                    log(f"{scenario.name}: skipped: {ex}")
                    skipped[scenario.name] = str(ex)
    results = [summarize(s, runs[s.name], skipped.get(s.name)) for s in chosen]

    report = {
        "started": started.isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "versions": versions(),
        "wrk": {"version": wrk_version(wrk), "threads": args.threads,
                "connections": args.connections, "duration_s": args.duration,
                "warmup_s": args.warmup, "rounds": args.rounds},
        "manifest": BENCH_MANIFEST,
        "hub_config": HUB_CONFIG,
        "scenarios": results,
    }
    bare = next((r["rps"] for r in results if r["name"] == "bare-post" and "rps" in r), None)
    by_name = {r["name"]: r for r in results}
    for r in results:
        if bare and "rps" in r:
            r["ratio_to_bare"] = r["rps"] / bare
        r["cpu_ratio_to_bare"] = cpu_ratio(by_name.get("bare-post", {}), r)
        r["cpu_ratio_to_floor"] = cpu_ratio(by_name.get(FLOOR_OF.get(r["name"], ""), {}), r)
        one = by_name.get(W2_OF.get(r["name"], ""), {})
        if "rps" in r and one.get("rps"):
            r["ratio_to_w1"] = r["rps"] / one["rps"]
        floor = by_name.get(FLOOR_OF.get(r["name"], ""), {})
        if "rps" in r and floor.get("rps"):
            r["ratio_to_floor"] = r["rps"] / floor["rps"]
    table = markdown(results)
    print(table)
    if not args.no_save:
        save(report, started.strftime('%Y%m%dT%H%M%SZ'), log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
