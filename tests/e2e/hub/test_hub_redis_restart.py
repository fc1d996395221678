"""Redis stopped and restarted under load, behind two hub replicas (two gunicorn masters).

Blocking SendMessages (the ``ticks`` agent, a few milliseconds each) and GetTasks of
what they answered go to A and B at once, and so do background runs of the ``reports``
agent, which reports progress, named artifacts and tokens for half a second each;
redis-server (append-only, fsynced on every write) is stopped mid-load and started
again on its port. Every HTTP answer is a 200 (-32603 while Redis is away, never a 5xx
or a traceback), both replicas answer again by themselves, and every task a client was
told of is COMPLETED on both afterwards, a ``reports`` task with every step's progress
and artifact in its event log, in order.
"""
from __future__ import annotations

import json
import threading
import uuid

import requests

import pytest

from tests.e2e.hub_process import PREFIX, start_together
from tests.e2e.hub_replicas import CAPPED_KEY, Replica, state, until
from tests.process_util import stopping
from tests.redis_util import RedisServer

pytestmark = pytest.mark.e2e

TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
            "TASK_STATE_REJECTED"}


def test_redis_stopped_and_restarted_mid_load_loses_no_acknowledged_task(tmp_path):
    server = RedisServer(tmp_path / "redis", persist=True).start()
    restarted = None
    # NOTE: the load's answers must all be COMPLETED: past acme's default 120 runs a minute
    # (the replicas share it on Redis) a fast machine's load would be answered REJECTED.
    limits = {"rate_per_minute": 100_000}
    replicas = start_together(lambda: Replica(tmp_path, server.url, limits=limits),
                              lambda: Replica(tmp_path, server.url, limits=limits))
    acknowledged, statuses, codes = [], [], set()
    stop = threading.Event()

    def load(replica):
        while not stop.is_set():
            response = replica.rpc("SendMessage", {"message": {
                "messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                "parts": [{"text": "0.01"}]}})
            statuses.append(response.status_code)
            payload = response.json()
            if "result" in payload:
                task_id = payload["result"]["task"]["id"]
                acknowledged.append(task_id)
                payload = replica.rpc("GetTask", {"id": task_id}).json()
            if "error" in payload:
                codes.add(payload["error"]["code"])

    reported = []

    def report(replica):
        # NOTE: background runs that span the outage: each reports 100 steps (~0.5 s),
        # one at a time per replica, under the tenant "capped" (its own 2 slots).
        while not stop.is_set():
            response = replica.rpc("SendMessage", {"message": {
                "messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                "parts": [{"text": "100"}]}, "configuration": {"returnImmediately": True}},
                CAPPED_KEY, agent="reports")
            statuses.append(response.status_code)
            payload = response.json()
            if "error" in payload:
                codes.add(payload["error"]["code"])
                continue
            task_id = payload["result"]["task"]["id"]
            reported.append((replica, task_id))
            until(lambda: stop.is_set() or _ended(replica, task_id))   # one at a time

    threads = [threading.Thread(target=load, args=(replica,)) for replica in replicas]
    threads += [threading.Thread(target=report, args=(replica,)) for replica in replicas]
    for thread in threads:
        thread.start()
    try:
        until(lambda: len(acknowledged) >= 20 and len(reported) >= 2)
        server.stop()
        until(lambda: -32603 in codes)
        restarted = RedisServer(tmp_path / "redis", port=server.port, persist=True).start()
        count = len(acknowledged)
        until(lambda: len(acknowledged) >= count + 20)        # both answer again by themselves
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    try:
        assert set(statuses) == {200} and codes == {-32603}
        for replica in replicas:
            for task_id in acknowledged:
                until(lambda: state(replica, task_id) == "TASK_STATE_COMPLETED")
            for _, task_id in reported:
                until(lambda: _state(replica, task_id) == "TASK_STATE_COMPLETED")
        for owner, task_id in reported:
            assert _steps(owner, task_id) == [f"step {n}" for n in range(100)] * 2
    finally:
        # PERF: nothing here is about the replicas' stop (a second or so): ``stopping`` waits
        # for them, then stops the Redis on their port; the session's end fails if they
        # did not stop.
        for replica in replicas:
            replica.stop_soon()
        redis_servers = [s for s in (restarted, server) if s is not None]
        stopping.after(server.url, lambda: [s.stop() for s in redis_servers])


def _state(replica, task_id) -> str | None:
    """A ``reports`` task's state; None while the replica cannot answer."""
    payload = replica.rpc("GetTask", {"id": task_id}, CAPPED_KEY, agent="reports").json()
    return payload.get("result", {}).get("status", {}).get("state")


def _ended(replica, task_id) -> bool:
    return _state(replica, task_id) in TERMINAL


def _steps(replica, task_id) -> list[str]:
    """The progress texts then the artifact texts of a ``reports`` task's event log."""
    response = requests.post(f"{replica.url}{PREFIX}reports", data=json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}),
        headers={"Content-Type": "application/json", "A2A-Version": "1.0",
                 "X-API-Key": CAPPED_KEY},
        timeout=30)
    events = [json.loads(line[len("data: "):])["result"]
              for line in response.text.split("\n") if line.startswith("data: ")]
    progress = [e["statusUpdate"]["status"]["message"]["parts"][0]["text"] for e in events
                if "statusUpdate" in e and e["statusUpdate"]["status"].get("message")
                and e["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"]
    notes = [e["artifactUpdate"]["artifact"]["parts"][0]["text"].removesuffix(" done")
             for e in events if "artifactUpdate" in e
             and e["artifactUpdate"]["artifact"]["artifactId"].startswith("step-")]
    return progress + notes
