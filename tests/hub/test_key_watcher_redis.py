"""The API-key watcher's client of the hub's Redis (hub/keys.py ``redis_client``): made with
the store's settings, on one redis-server and on the session's Redis Cluster."""
from __future__ import annotations

import pytest
import redis

from murmur_wsgi.hub.config import load_config
from murmur_wsgi.hub.keys import redis_client
from murmur_wsgi.hub.store.redis_client import release
from tests.hub.conftest import hub_config

pytestmark = pytest.mark.cluster


def _pools(client) -> list:
    """Its pools: each primary's on a cluster."""
    if isinstance(client, redis.RedisCluster):
        return [client.get_redis_connection(node).connection_pool
                for node in client.get_primaries()]
    return [client.connection_pool]


def test_the_watchers_client_is_bounded_by_the_setting(redis_server):
    """``redis.max_connections`` bounds its pools, as the store's; before, they took the
    default bound (64) whatever the setting."""
    client = redis_client(load_config(hub_config(store=redis_server.url,
                                                 redis={"max_connections": 3})))
    try:
        assert client.ping()
        assert [pool.max_connections for pool in _pools(client)] == \
            [3] * len(_pools(client))
    finally:
        release(client)
