"""The Redis topologies beyond one server that the hub's tests start (tests/redis_topologies.py).

A real three-primary Cluster and a real primary + replica + three sentinels, on free
loopback ports: the properties the hub's store relies on there — a tenant's hash-tagged
keys share one slot, so one script may touch them all; a write acknowledged by ``WAIT 1``
outlives its primary's SIGKILL and the failover Sentinel runs.
"""
from __future__ import annotations

import pytest
import redis

from tests.redis_topologies import SERVICE, SentinelSet

COUNT_KEYS = "return redis.call('INCR', KEYS[1]) + redis.call('RPUSH', KEYS[2], ARGV[1])"


@pytest.fixture
def cluster(redis_cluster):
    """The session's cluster (tests/hub/conftest.py), flushed."""
    redis_cluster.flush()
    return redis_cluster


@pytest.fixture
def sentinels(tmp_path_factory):
    started = SentinelSet(tmp_path_factory.mktemp("sentinel")).start()
    yield started
    started.stop()


def test_a_cluster_of_three_primaries_shares_out_every_slot(cluster):
    client = cluster.client()
    try:
        primaries = {node.port for node in client.get_primaries()}
        assert primaries == {node.port for node in cluster.nodes}
        assert cluster.url.startswith("redis-cluster://127.0.0.1:")
        assert cluster.url.count(",") == 2
    finally:
        client.close()


def test_a_tenants_hash_tagged_keys_share_one_slot_and_one_script(cluster):
    client = cluster.client()
    try:
        keys = ["{t:acme}:count", "{t:acme}:list"]
        assert client.keyslot(keys[0]) == client.keyslot(keys[1])
        assert client.eval(COUNT_KEYS, 2, *keys, "x") == 2
        # Two tenants' tags name different slots: the script cannot span them.
        other = "{t:globex}:list"
        assert client.keyslot(other) != client.keyslot(keys[0])
        with pytest.raises(redis.RedisClusterException):
            client.eval(COUNT_KEYS, 2, keys[0], other, "x")
    finally:
        client.close()


def test_a_write_acknowledged_by_a_replica_outlives_its_primarys_death(sentinels):
    watchers = sentinels.watchers()
    primary = watchers.master_for(SERVICE, socket_timeout=0.5, decode_responses=True)
    primary.set("task:1", "acknowledged")
    assert primary.execute_command("WAIT", 1, 1000) == 1
    old = sentinels.primary_port()
    sentinels.kill_primary()
    new = sentinels.wait_failover()
    assert new != old and new == sentinels.replica.port
    after = watchers.master_for(SERVICE, socket_timeout=0.5, decode_responses=True)
    assert after.get("task:1") == "acknowledged"
    assert sentinels.url.endswith(f"/{SERVICE}/0")
