"""A hub on a Redis Cluster that no node answers as it starts, as on one Redis: it starts,
answers -32603 ("the hub's task store is unavailable") while no node answers, never a 5xx,
and serves once the cluster is up (each a real cluster: one primary owning every slot, its
port reserved and not listening until the test starts it).
"""
from __future__ import annotations

import os
import signal
import time

import pytest

from murmur_wsgi.hub import create_hub
from tests.hub.conftest import FAST, HubClient, close_hub, hub_config, wait_until
from tests.redis_topologies import Cluster

pytestmark = pytest.mark.one_store

UNAVAILABLE = {"code": -32603, "message": "Internal error: the hub's task store is "
                                          "unavailable; try again shortly"}
MESSAGE = {"message": {"messageId": "m-boot", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


def _served(rpc) -> bool:
    answer = rpc.call("SendMessage", MESSAGE)
    assert answer.status_code == 200
    found = answer.get_json()
    if "error" in found:
        assert found["error"] == UNAVAILABLE
        return False
    return found["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_hub_starts_on_a_cluster_no_node_answers_and_serves_once_it_does(tmp_path):
    cluster = Cluster(tmp_path / "cluster", size=1)
    hub = create_hub(hub_config(store=cluster.url, redis=dict(FAST)))
    try:
        rpc = HubClient(hub)
        for _ in range(2):                  # the second within the next try's pause
            answer = rpc.call("GetTask", {"id": "t-boot"})
            assert answer.status_code == 200 and answer.get_json()["error"] == UNAVAILABLE
            assert not _served(rpc)
        cluster.start()
        wait_until(lambda: _served(rpc))
        task = rpc.send("once the cluster answers")
        assert rpc.result("GetTask", {"id": task["id"]})["id"] == task["id"]
    finally:
        close_hub(hub)
        cluster.stop()


@pytest.mark.timed
def test_a_stalled_cluster_costs_the_start_one_try_of_its_nodes(tmp_path):
    """Every node stalled (SIGSTOP: connected, never answered): the start's try costs a
    timeout; the hub's own threads starting with it wait for the next try, a second on."""
    cluster = Cluster(tmp_path / "cluster", size=1).start()
    os.kill(cluster.nodes[0].proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        hub = create_hub(hub_config(store=cluster.url, redis=dict(FAST)))
        took = time.monotonic() - started
        try:
            answer = HubClient(hub).call("GetTask", {"id": "t-stalled"})
            assert answer.status_code == 200 and answer.get_json()["error"] == UNAVAILABLE
        finally:
            close_hub(hub)
        assert took < 2 * FAST["timeout_secs"]
    finally:
        os.kill(cluster.nodes[0].proc.pid, signal.SIGCONT)
        cluster.stop()
