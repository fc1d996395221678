"""A hub on a Redis Cluster that no node answers as it starts, as on one Redis: it starts,
answers -32603 ("the hub's task store is unavailable") while no node answers, never a 5xx,
and serves once the cluster is up (each a real cluster: one primary owning every slot, its
port reserved and not listening until the test starts it).
"""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_cluster import FAILURES, connect_cluster, disconnect
from tests.hub.conftest import FAST, HubClient, close_hub, hub_config, wait_until
from tests.redis_topologies import Cluster
from tests.redis_util import RedisServer

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
@pytest.mark.waits
def test_a_stalled_cluster_costs_the_start_one_try_of_its_nodes(single_cluster):
    """Every node stalled (SIGSTOP: connected, never answered): the start's try costs a
    timeout; the hub's own threads starting with it wait for the next try, a second on."""
    cluster = single_cluster
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


def _connections(node) -> int:
    """The node's clients, the one asking included."""
    return len(node.client().execute_command("CLIENT", "LIST").strip().splitlines())


@pytest.mark.timed
@pytest.mark.waits
def test_a_cluster_closed_while_its_client_is_made_leaves_no_connection(tmp_path):
    """Two stalled nodes first in the URL (SIGSTOP: each costs the make a timeout), then the
    cluster's: the make outlasts the close's wait for it, and closes what it connected."""
    stalled = [RedisServer(tmp_path / f"stalled-{i}").start() for i in range(2)]
    cluster = Cluster(tmp_path / "cluster", size=1)
    ports = [server.port for server in stalled] + [cluster.port]
    for server in stalled:
        os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        client = connect_cluster("redis-cluster://" + ",".join(
            f"127.0.0.1:{port}" for port in ports), FAST["timeout_secs"])
        cluster.start()
        client._make_at = 0.0               # the next use makes it: no pause to wait out
        answered = []
        using = threading.Thread(target=lambda: answered.append(_pinged(client)))
        using.start()
        wait_until(lambda: client.__dict__.get("_maker") is not None)
        disconnect(client)
        using.join(10 * FAST["timeout_secs"])
        assert answered == ["RedisClusterUnreachableError"]
        wait_until(lambda: _connections(cluster.nodes[0]) == 1, timeout=3)
    finally:
        for server in stalled:
            os.kill(server.proc.pid, signal.SIGCONT)
            server.stop()
        cluster.stop()


def _pinged(client) -> str:
    try:
        return str(client.ping())
    except FAILURES as ex:
        return type(ex).__name__
