"""Redis stopped and restarted under load, behind two hub replicas (two gunicorn masters).

Blocking SendMessages (the ``ticks`` agent, a few milliseconds each) and GetTasks of
what they answered go to A and B at once; redis-server (append-only, fsynced on every
write) is stopped mid-load and started again on its port. Every HTTP answer is a 200
(-32603 while Redis is away, never a 5xx or a traceback), both replicas answer again by
themselves, and every task a client was told of is COMPLETED on both afterwards.
"""
from __future__ import annotations

import threading
import uuid

import pytest

from tests.e2e.hub_replicas import Replica, state, until
from tests.redis_util import RedisServer

pytestmark = pytest.mark.e2e


def test_redis_stopped_and_restarted_mid_load_loses_no_acknowledged_task(tmp_path):
    server = RedisServer(tmp_path / "redis", persist=True).start()
    restarted = None
    replicas = [Replica(tmp_path, server.url), Replica(tmp_path, server.url)]
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

    threads = [threading.Thread(target=load, args=(replica,)) for replica in replicas]
    for thread in threads:
        thread.start()
    try:
        until(lambda: len(acknowledged) >= 20)
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
    finally:
        for replica in replicas:
            replica.stop()
        if restarted is not None:
            restarted.stop()
        server.stop()
