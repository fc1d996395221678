"""``murmur-wsgi hub`` (gunicorn -k gevent) on a Redis Cluster that no node answers as it starts:
the worker starts (before, it died with redis-py's "provide at least one reachable node" and
gunicorn exited 3), answers -32603 while no node answers, and serves once the cluster is up
(a real one-primary cluster, its port reserved and not listening until the test starts it).
"""
from __future__ import annotations

import uuid

import pytest

from tests.e2e.hub_replicas import Replica, until
from tests.redis_topologies import Cluster

pytestmark = pytest.mark.e2e

UNAVAILABLE = {"code": -32603, "message": "Internal error: the hub's task store is "
                                          "unavailable; try again shortly"}


def _sent(replica: Replica) -> dict:
    answer = replica.rpc("SendMessage", {"message": {
        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "0.01"}]}})
    assert answer.status_code == 200
    return answer.json()


def test_the_hub_starts_before_its_cluster_and_serves_once_it_answers(tmp_path):
    cluster = Cluster(tmp_path / "cluster", size=1)
    replica = Replica(tmp_path, cluster.url)
    try:
        assert _sent(replica)["error"] == UNAVAILABLE
        answer = replica.rpc("GetTask", {"id": "t-before"})
        assert answer.status_code == 200 and answer.json()["error"] == UNAVAILABLE
        cluster.start()
        task = until(lambda: _sent(replica).get("result"))["task"]
        assert replica.result("GetTask", {"id": task["id"]})["id"] == task["id"]
        # The command's check, then its one worker (the store's client; the API-key
        # watcher's is quiet): before, the worker said it twice.
        assert replica.log().count("no node of the Redis Cluster answers") == 2, replica.log()
    finally:
        replica.stop()
        cluster.stop()
