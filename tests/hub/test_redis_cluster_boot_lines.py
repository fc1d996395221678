"""What a hub logs of a Redis Cluster's state (hub/store/redis_cluster.py): one line as each
state starts (no node answers, the nodes refuse the URL's password, the cluster answers),
from the store's client only (the API-key watcher's client, hub/keys.py, is quiet), while
each request that fails still logs its one WARNING. Each a real cluster: one primary
owning every slot, its port reserved and not listening until the test starts it.
"""
from __future__ import annotations

import logging

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.keys import watch_keys
from murmur_wsgi.hub.store.redis_cluster import FAILURES
from tests.hub.conftest import FAST, HubClient, close_hub, hub_config, wait_until
from tests.redis_topologies import Cluster

pytestmark = pytest.mark.one_store

PASSWORD = "cluster-pw-never-logged"
WRONG = "wrong-" + PASSWORD
NO_NODE = "no node of the Redis Cluster answers"
ANSWERS = "the Redis Cluster answers"
REFUSED = "refused the URL's user or password"


def _lines(caplog, text: str, level: int = logging.WARNING) -> int:
    return sum(1 for record in caplog.records
               if text in record.getMessage() and record.levelno == level)


def _answers(client) -> bool:
    try:
        return bool(client.ping())
    except FAILURES:
        return False


def test_a_worker_on_a_cluster_no_node_answers_says_so_once_and_once_that_it_answers(
        tmp_path, caplog):
    """Before, the store's client and the API-key watcher's each said both: two lines of
    each per worker."""
    caplog.set_level(logging.INFO, logger="murmur_wsgi.hub.store.redis_cluster")
    cluster = Cluster(tmp_path / "cluster", size=1)
    hub = create_hub(hub_config(store=cluster.url, redis=dict(FAST)))
    try:
        watcher = watch_keys(hub, None)
        assert _lines(caplog, NO_NODE) == 1
        cluster.start()
        wait_until(lambda: _answers(hub.store.conn.redis) and _answers(watcher.redis))
        assert _lines(caplog, ANSWERS, logging.INFO) == 1
    finally:
        close_hub(hub)
        cluster.stop()


def test_a_cluster_that_comes_up_refusing_the_password_says_so_once_as_it_starts_and_ends(
        tmp_path, caplog):
    """The hub starts with no node answering; the node then comes up asking for another
    password: 4 tries of the client refused, one line; each request that failed meanwhile
    one WARNING; the node given the URL's password, the cluster answers, one line. Before,
    each try logged the refusal (once a second, with the hub's own loops trying)."""
    caplog.set_level(logging.INFO, logger="murmur_wsgi.hub.store")
    cluster = Cluster(tmp_path / "cluster", size=1, password=PASSWORD)
    hub = create_hub(hub_config(store=cluster.url.replace(PASSWORD, WRONG),
                                redis=dict(FAST)))
    try:
        client, rpc = hub.store.conn.redis, HubClient(hub)
        cluster.start()
        for _ in range(4):
            client._make_at = 0.0                # the next use tries: no pause to wait out
            assert rpc.call("GetTask", {"id": "t-refused"}).get_json()["error"]["code"] \
                == -32603
        assert _lines(caplog, REFUSED) == 1
        assert _lines(caplog, "failed: RedisClusterUnreachableError") == 4
        cluster.nodes[0].client().config_set("requirepass", WRONG)
        client._make_at = 0.0
        wait_until(lambda: _answers(client))
        assert _lines(caplog, ANSWERS, logging.INFO) == 1
        assert _lines(caplog, REFUSED) == 1
        assert PASSWORD not in caplog.text           # nor WRONG, the URL's, which holds it
    finally:
        close_hub(hub)
        cluster.stop()
