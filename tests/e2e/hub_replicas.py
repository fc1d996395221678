"""Two hub replicas on one Redis, as real processes: what the e2e tests and bench/hub_replicas.py use.

``Replica(directory, redis_url, workers=N)`` runs ``murmur-wsgi hub --workers N`` on a
free loopback port hosting ``tests.e2e.hub_agents:ticks`` and waits for its card;
``Subscriber`` reads a SubscribeToTask stream on a thread.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid

from tests.e2e.hub_process import WAIT, HubProcess

KEY = "mhk_e2e-replicas-key"
CAPPED_KEY = "mhk_e2e-replicas-capped"      # tenant "capped": 2 runs at once across the hub
SECRET = "e2e-replicas-operator-secret-" + "x" * 20


AGENTS = {"ticks": {"agent": "tests.e2e.hub_agents:ticks", "publish": True},
          "reports": {"agent": "tests.e2e.hub_agents:reports", "publish": True}}


def hub_yaml(port: int, redis_url: str, **extra) -> dict:
    return {**extra,
        "public_url": f"http://127.0.0.1:{port}",
        "store": redis_url,
        "drain_timeout_secs": 1,
        "redis": {"liveness_secs": 1, "sweep_interval_secs": 0.2},
        "auth": {"jwt": {"secret": SECRET}},
        "metrics": {"enabled": True},
        "tenants": {
            "acme": {"api_keys": [hashlib.sha256(KEY.encode()).hexdigest()], "agents": AGENTS},
            "capped": {"api_keys": [hashlib.sha256(CAPPED_KEY.encode()).hexdigest()],
                       "limits": {"concurrency": 2}, "agents": AGENTS}},
    }


class Replica(HubProcess):
    """``murmur-wsgi hub --workers N`` on a free port (or ``port``) hosting ``ticks``."""

    def __init__(self, directory, redis_url: str, workers: int = 1, port: int | None = None,
                 **settings):
        super().__init__(directory, lambda port: hub_yaml(port, redis_url, **settings),
                         agent="ticks", key=KEY, workers=workers, port=port)


def send(replica: Replica, text: str, message_id: str | None = None,
         push: dict | None = None, key: str = KEY) -> dict:
    """SendMessage (returnImmediately), with ``push`` as its taskPushNotificationConfig."""
    configuration = {"returnImmediately": True}
    if push is not None:
        configuration["taskPushNotificationConfig"] = push
    return task_of(replica.result("SendMessage", {
        "message": {"messageId": message_id or uuid.uuid4().hex, "role": "ROLE_USER",
                    "parts": [{"text": text}]},
        "configuration": configuration}, key))


def task_of(result: dict) -> dict:
    """The Task of a SendMessage result (a SendMessageResponse, ``{"task": …}``)."""
    return result["task"]


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
