"""The Redis topologies beyond one server that the hub's tests start (tests/redis_topologies.py).

A real three-primary Cluster on free loopback ports: the properties the hub's store
relies on there — hash-tagged keys share one slot, so one script may touch them all. The
Sentinel set (``SentinelSet``) is exercised by tests/hub/test_redis_sentinel.py.
"""
from __future__ import annotations

import threading

import pytest
import redis

from tests.redis_topologies import cluster_port
from tests.redis_util import free_port


COUNT_KEYS = "return redis.call('INCR', KEYS[1]) + redis.call('RPUSH', KEYS[2], ARGV[1])"


@pytest.fixture
def cluster(redis_cluster):
    """The session's cluster (tests/hub/conftest.py), flushed."""
    redis_cluster.flush()
    return redis_cluster


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


def test_no_port_is_handed_out_twice():
    # NOTE: the kernel gives a port closed a moment ago to a later bind(0): 3,000 draws of
    # about 28,000 ephemeral ports repeat dozens of them. Two servers started at once (the
    # clusters started ahead, on threads of their own) were once handed the same one.
    ports = [free_port() for _ in range(3000)]
    assert len(set(ports)) == len(ports)


def test_a_cluster_port_reserves_its_bus_port():
    handed = []
    threads = [threading.Thread(target=lambda: handed.extend(cluster_port() for _ in range(50)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    taken = handed + [port + 10000 for port in handed]
    assert len(handed) == 200 and len(set(taken)) == len(taken)
