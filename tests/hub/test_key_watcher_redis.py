"""The API-key watcher's client of the hub's Redis (hub/keys.py ``redis_client``): made with
the store's settings, on one redis-server and on the session's Redis Cluster; a Redis away
is told in one line as it starts and one as it ends."""
from __future__ import annotations

import logging

import pytest
import redis

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import load_config
from murmur_wsgi.hub.keys import KeyWatcher, redis_client
from murmur_wsgi.hub.store.redis_client import connect, release
from tests.hub.conftest import KEY_A, HubClient, close_hub, hub_config
from tests.redis_util import RedisServer

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


def test_a_redis_away_is_one_line_as_it_starts_and_one_as_it_ends(tmp_path, caplog):
    """The watcher reads the table at each of 4 requests while Redis is away, then once it
    answers: before, 4 WARNING lines (one every 2 s per worker in a hub), none as it ended."""
    caplog.set_level(logging.INFO, logger="murmur_wsgi.hub.keys")
    server = RedisServer(tmp_path / "later")            # its port chosen, not listening yet
    hub = create_hub(hub_config())
    client = connect(server.url, 0.5)
    watcher = KeyWatcher(hub.credentials, None, hub.config.tenants, client, every=0)
    hub.credentials.refresh = watcher.refresh
    try:
        rpc = HubClient(hub, "echo", {"X-API-Key": KEY_A})
        for _ in range(4):
            assert rpc.card().status_code == 200        # the keys it had
        server.start()
        assert rpc.card().status_code == 200
        lines = [(r.levelname, r.getMessage()) for r in caplog.records
                 if r.name == "murmur_wsgi.hub.keys"]
        assert lines == [("WARNING", "api keys: reading Redis failed (ConnectionError); "
                                     "keeping the keys until it answers"),
                         ("INFO", "api keys: Redis answers again")]
    finally:
        release(client)
        close_hub(hub)
        server.stop()
