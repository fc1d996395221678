"""The hub as a real process: ``murmur-wsgi hub`` (gunicorn -k gevent) on a free loopback port.

``HubProcess(directory, config, agent=..., key=...)`` writes ``config`` (a mapping, or
a function of the port that returns one) as hub.yaml, runs the README's command from
the repository root (``gunicorn_conf``: with that ``--gunicorn-conf``) and waits until ``agent``'s card is served to ``key``. ``rpc``
posts one JSON-RPC call with that key; ``stop`` is SIGTERM and a wait (tests/e2e/
conftest.py's ``stop_process``, as the door's), ``stop_soon`` SIGTERM and no wait (the
session's end checks it stopped), ``kill`` SIGKILL to its group.
``together`` starts (or stops) several at once: each of them mostly waits.
"""
from __future__ import annotations

import json
import sys
import threading
import time

import requests
import yaml

from tests.e2e.conftest import (CLOSE, START_DEADLINE, child_env, free_port, kill_group, spawn,
                                stop_process, wait_served)
from tests.process_util import stopping

WAIT = 20.0                     # seconds: an answer's timeout
PREFIX = "/a2a/v1/agents/"


class HubProcess:
    """``murmur-wsgi hub [--workers N]`` on a free port (or ``port``), serving ``agent``'s card."""

    def __init__(self, directory, config, *, agent: str, key: str, workers: int | None = None,
                 port: int | None = None, env: dict | None = None,
                 gunicorn_conf: str | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.agent = agent
        self.key = key
        path = directory / f"hub-{self.port}.yaml"
        data = config(self.port) if callable(config) else config
        self.store_url = data.get("store")  # a Redis URL, or the memory store ("memory", None)
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        # NOTE: a replica restarted on its port writes a new log, the old one kept.
        self.log_path = directory / f"hub-{self.port}-{time.monotonic_ns()}.log"
        argv = [sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", str(path),
                "--listen", f"127.0.0.1:{self.port}"]
        if workers is not None:
            argv += ["--workers", str(workers)]
        if gunicorn_conf is not None:
            argv += ["--gunicorn-conf", gunicorn_conf]
        self.proc = spawn(argv, self.log_path, child_env(**(env or {})))
        try:
            wait_served(self.proc, self.card_url(), time.monotonic() + START_DEADLINE,
                        "the hub", self.log, {"X-API-Key": key})
        except BaseException:
            self.kill()
            raise

    def card_url(self, agent: str | None = None) -> str:
        return f"{self.url}{PREFIX}{agent or self.agent}/.well-known/agent-card.json"

    def rpc(self, method: str, params: dict, key: str | None = None, *, agent: str | None = None,
            **kwargs) -> requests.Response:
        """POST one JSON-RPC call to ``agent`` (default: the card's) with ``key``'s X-API-Key."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return requests.post(f"{self.url}{PREFIX}{agent or self.agent}", data=json.dumps(body),
                             timeout=WAIT, headers={**CLOSE, "X-API-Key": key or self.key,
                                                    "A2A-Version": "1.0",
                                                    "Content-Type": "application/json"},
                             **kwargs)

    def result(self, method: str, params: dict, key: str | None = None, *,
               agent: str | None = None):
        """The call's ``result`` (failing with the answer when it has none)."""
        payload = self.rpc(method, params, key, agent=agent).json()
        assert "result" in payload, payload
        return payload["result"]

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        kill_group(self.proc)
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 30.0) -> float:
        """SIGTERM, wait up to ``timeout`` (kill and fail past it); the seconds it took."""
        return stop_process(self.proc, timeout, "the hub", self.log)

    def stop_soon(self, timeout: float = 30.0) -> None:
        """``stop``, its wait left to tests/process_util.py's ``stopping`` (a Redis flushed or
        stopped waits for it first)."""
        proc = self.proc
        stopping.stop(proc, lambda: stop_process(proc, timeout, "the hub", self.log),
                      self.store_url)


def together(*calls):
    """Each call's result, the calls run at once on threads (starting or stopping servers,
    which mostly wait on them); once all ended, the first exception raised, if any. What a
    failed start leaves to stop is the caller's: ``start_together`` stops it."""
    results: list = [None] * len(calls)
    errors: list = []

    def run(index, call):
        try:
            results[index] = call()
        except BaseException as ex:  # noqa: BLE001 - raised below, on the caller's thread
            errors.append(ex)

    threads = [threading.Thread(target=run, args=(i, call), daemon=True)
               for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def start_together(*starts):
    """The servers the ``starts`` make (each a HubProcess), started at once; when one fails,
    the others are stopped and its exception raised."""
    started: list = [None] * len(starts)

    def start(index, make):
        started[index] = make()

    try:
        together(*(lambda i=i, make=make: start(i, make) for i, make in enumerate(starts)))
    except BaseException:
        for server in started:
            if server is not None:
                server.kill()
        raise
    return started
