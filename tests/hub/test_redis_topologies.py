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
from tests import ports
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
    # NOTE: the kernel gives a port closed a moment ago to a later bind(0), and random draws
    # from a block repeat too. Two servers started at once (the clusters started ahead, on
    # threads of their own) were once handed the same one.
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)


def test_ports_are_drawn_below_the_ephemeral_range_from_a_block_per_worker(monkeypatch):
    # NOTE: a port drawn by bind(0) lies in the ephemeral range, where an outgoing
    # connection can take it between its draw and its server's listen; and two xdist
    # workers drew from the same range.
    if ports._ephemeral_low() >= ports.HIGH + ports.BUS:
        drawn = [free_port() for _ in range(50)]
        assert all(port in ports._BLOCK and port + ports.BUS < ports._ephemeral_low()
                   for port in drawn)
    else:                               # a machine whose ephemeral range starts low
        assert ports._BLOCK == range(0) and free_port() > 0
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 32768)
    monkeypatch.delenv("MURMUR_TEST_PORTS", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    blocks = []
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        blocks.append(set(ports._block()))
    assert all(len(block) == 3333 for block in blocks)
    assert not (blocks[0] & blocks[1] or blocks[1] & blocks[2] or blocks[0] & blocks[2])
    assert max(max(block) for block in blocks) + ports.BUS < 30000
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 28000)
    assert ports._block() == range(0)


def test_two_runs_at_once_draw_from_ranges_apart(monkeypatch):
    """`make test` runs its timed tests that wait beside the others: each run's workers
    share out the range ``MURMUR_TEST_PORTS`` gives it (one outside 10000–19999: all)."""
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 32768)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    monkeypatch.setenv("MURMUR_TEST_PORTS", "10000-18000")
    blocks = []
    for worker in ("gw0", "gw1", "gw2", "gw3"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        blocks.append(ports._block())
    assert blocks == [range(10000, 12000), range(12000, 14000), range(14000, 16000),
                      range(16000, 18000)]
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    monkeypatch.setenv("MURMUR_TEST_PORTS", "18000-20000")
    assert ports._block() == range(18000, 20000)
    monkeypatch.setenv("MURMUR_TEST_PORTS", "5000-18000")
    assert ports._block() == range(ports.LOW, ports.HIGH)


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
