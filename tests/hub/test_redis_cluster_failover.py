"""A ``CLUSTER FAILOVER`` under a hub with ``redis.wait_replicas``: the write sent to the old
primary (a replica now, the hub's connections to it still open) is MOVED, and its ``WAIT``
refused there ("WAIT cannot be used with replica instances"): the write is sent, with its
``WAIT``, to the new primary. The failover is a ``TAKEOVER`` (the graceful one waits on
the cluster's handshake, which timed out on these test clusters now and then)."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store.redis_keys import tenant_prefix
from tests.hub.conftest import HubClient, hub_config, wait_until
from tests.hub.test_redis_cluster import _primary_of

pytestmark = pytest.mark.one_store


def _role(node) -> str:
    client = node.client()
    try:
        return client.info("replication")["role"]
    finally:
        client.close()


def test_a_durable_write_to_a_demoted_primary_goes_to_the_new_one(replicated_cluster):
    """Before, the refused ``WAIT`` was raised, not the MOVED followed: the message was
    -32603 (every write in flight at the promotion, in a probe with two replicas)."""
    cluster = replicated_cluster
    hub = create_hub(hub_config(store=cluster.url, redis={"timeout_secs": 2.0,
                                                          "wait_replicas": 1}))
    rpc = HubClient(hub, "echo")
    try:
        before = rpc.send("before")                 # connections to acme's primary, idle
        primary = _primary_of(cluster, tenant_prefix("acme"))
        replica = cluster.replica_of(primary)
        # Replication is asynchronous: the replica is waited for until it holds the task.
        written = primary.client().info("replication")["master_repl_offset"]
        wait_until(lambda: replica.client().info("replication")["slave_repl_offset"] >= written)
        control = replica.client()
        try:
            control.execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        finally:
            control.close()
        wait_until(lambda: _role(replica) == "master" and _role(primary) == "slave", 10.0)
        after = rpc.call("SendMessage", {"message": {
            "messageId": "m-after-failover", "role": "ROLE_USER",
            "parts": [{"text": "after"}]}}).get_json()
        assert "result" in after, after
        assert after["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert rpc.result("GetTask", {"id": before["id"]})["id"] == before["id"]
    finally:
        hub.close(drain_timeout=0.5)
