"""Two hub replicas (two gunicorn masters, one of them with two workers) on one Redis.

Send on A, then GetTask, ListTasks and SubscribeToTask on B; cancel from B; one
run for a messageId raced on A and B; SIGKILL A mid-run: B's sweep ends the
task FAILED and B's subscriber gets the final event; replicas restarted: the
tasks are still there. Short liveness and sweep settings keep it fast.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
import threading
import time
import uuid

import pytest
import requests
import yaml

from tests.e2e.conftest import CLOSE, _kill_group, child_env, free_port, spawn

pytestmark = pytest.mark.e2e

WAIT = 20.0
KEY = "mhk_e2e-replicas-key"
PREFIX = "/a2a/v1/agents/"


def hub_yaml(port: int, redis_url: str) -> dict:
    return {
        "public_url": f"http://127.0.0.1:{port}",
        "store": redis_url,
        "drain_timeout_secs": 1,
        "redis": {"liveness_secs": 1, "sweep_interval_secs": 0.2},
        "tenants": {"acme": {
            "api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
            "agents": {"ticks": {"agent": "tests.e2e.hub_agents:ticks", "publish": True}}}},
    }


class Replica:
    """``murmur-wsgi hub --workers N`` on a free port; ``kill()`` is SIGKILL to its group."""

    def __init__(self, directory, redis_url: str, workers: int = 1, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = directory / f"hub-{self.port}.yaml"
        path.write_text(yaml.safe_dump(hub_yaml(self.port, redis_url)), encoding="utf-8")
        self.log_path = directory / f"hub-{self.port}-{time.monotonic_ns()}.log"
        self.proc = spawn([sys.executable, "-m", "murmur_wsgi.cli", "hub", "--config", str(path),
                           "--listen", f"127.0.0.1:{self.port}", "--workers", str(workers)],
                          self.log_path, child_env())
        deadline = time.monotonic() + WAIT
        while True:
            assert self.proc.poll() is None, self.log()
            try:
                if requests.get(f"{self.url}{PREFIX}ticks/.well-known/agent-card.json",
                                headers={**CLOSE, "X-API-Key": KEY},
                                timeout=0.5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, self.log()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.05)

    def rpc(self, method: str, params: dict, **kwargs):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return requests.post(f"{self.url}{PREFIX}ticks", data=json.dumps(body), timeout=WAIT,
                             headers={**CLOSE, "X-API-Key": KEY, "A2A-Version": "1.0",
                                      "Content-Type": "application/json"}, **kwargs)

    def result(self, method: str, params: dict):
        payload = self.rpc(method, params).json()
        assert "result" in payload, payload
        return payload["result"]

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        _kill_group(self.proc)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)
            raise AssertionError("a replica did not stop after SIGTERM:\n" + self.log()) from None


def send(replica: Replica, text: str, message_id: str | None = None) -> dict:
    return task_of(replica.result("SendMessage", {
        "message": {"messageId": message_id or uuid.uuid4().hex, "role": "ROLE_USER",
                    "parts": [{"text": text}]},
        "configuration": {"returnImmediately": True}}))


def task_of(result: dict) -> dict:
    """A SendMessage result: a SendMessageResponse ({"task": …}) or, before it, the Task."""
    return result.get("task", result)


def state(replica: Replica, task_id: str) -> str:
    return replica.result("GetTask", {"id": task_id})["status"]["state"]


def until(predicate, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.02)  # wait-ok: polling another process with a deadline


class Subscriber:
    """SubscribeToTask on a replica, read on a thread; ``events`` grows as they arrive."""

    def __init__(self, replica: Replica, task_id: str):
        self.events: list[dict] = []
        self.response = replica.rpc("SubscribeToTask", {"id": task_id}, stream=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.response.iter_lines():
            if line.startswith(b"data: "):
                self.events.append(json.loads(line[6:]))

    def final(self, timeout: float = WAIT) -> dict:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the stream did not end"
        return self.events[-1]


def final_state(event: dict) -> str:
    return event["result"]["statusUpdate"]["status"]["state"]


@pytest.fixture(scope="module")
def redis_url(redis_server):
    redis_server.flush()
    return redis_server.url


@pytest.fixture(scope="module")
def replicas(tmp_path_factory, redis_url):
    directory = tmp_path_factory.mktemp("replicas")
    a = Replica(directory, redis_url)
    b = Replica(directory, redis_url, workers=2)
    yield a, b, directory
    for replica in (a, b):
        replica.stop()


def test_send_on_a_read_list_and_follow_on_b(replicas):
    a, b, _ = replicas
    task = send(a, "0.5")
    sub = Subscriber(b, task["id"])
    assert until(lambda: state(b, task["id"]) == "TASK_STATE_COMPLETED")
    assert final_state(sub.final()) == "TASK_STATE_COMPLETED"
    kinds = [next(iter(e["result"])) for e in sub.events]
    assert kinds[0] == "task" and "artifactUpdate" in kinds
    listed = b.result("ListTasks", {"pageSize": 100})
    assert task["id"] in [t["id"] for t in listed["tasks"]]
    assert a.result("GetTask", {"id": task["id"]}) == b.result("GetTask", {"id": task["id"]})


def test_cancel_from_b(replicas):
    a, b, _ = replicas
    task = send(a, "30")
    until(lambda: state(b, task["id"]) == "TASK_STATE_WORKING")
    sub = Subscriber(b, task["id"])
    canceled = b.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert final_state(sub.final()) == "TASK_STATE_CANCELED"
    assert state(a, task["id"]) == "TASK_STATE_CANCELED"


def test_one_run_for_a_message_id_raced_on_a_and_b(replicas):
    a, b, _ = replicas
    message_id = uuid.uuid4().hex
    answers: list = [None, None]
    barrier = threading.Barrier(2)

    def race(i, replica):
        barrier.wait(5)
        answers[i] = replica.rpc("SendMessage", {
            "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "0.3"}]},
            "configuration": {"returnImmediately": True}}).json()

    threads = [threading.Thread(target=race, args=(i, r)) for i, r in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    ids = {task_of(ans["result"])["id"] for ans in answers if "result" in ans}
    codes = [ans["error"]["code"] for ans in answers if "error" in ans]
    assert len(ids) == 1 and codes in ([], [-32600]), answers
    task_id = ids.pop()
    until(lambda: state(b, task_id) == "TASK_STATE_COMPLETED")
    listed = b.result("ListTasks", {"pageSize": 100})["tasks"]
    assert sum(1 for t in listed if t["history"][0]["messageId"] == message_id) == 1


def test_sigkill_a_mid_run_b_sweeps_and_restart_keeps_the_tasks(replicas, redis_url):
    a, b, directory = replicas
    done = send(a, "0.1")
    until(lambda: state(b, done["id"]) == "TASK_STATE_COMPLETED")
    task = send(a, "60")
    until(lambda: state(b, task["id"]) == "TASK_STATE_WORKING")
    sub = Subscriber(b, task["id"])
    a.kill()
    last = sub.final(timeout=WAIT)
    assert final_state(last) == "TASK_STATE_FAILED"
    got = b.result("GetTask", {"id": task["id"]})
    assert got["status"]["state"] == "TASK_STATE_FAILED"
    assert "interrupted" in got["status"]["message"]["parts"][0]["text"]
    # Both replicas restarted (A on its port): every task is still there.
    b.stop()
    a2 = Replica(directory, redis_url, port=a.port)
    b2 = Replica(directory, redis_url, port=b.port)
    replicas_now = (a2, b2)
    try:
        for replica in replicas_now:
            assert state(replica, done["id"]) == "TASK_STATE_COMPLETED"
            assert state(replica, task["id"]) == "TASK_STATE_FAILED"
    finally:
        for replica in replicas_now:
            replica.stop()
    a.proc, b.proc = a2.proc, b2.proc          # the fixture's stop() finds them ended
