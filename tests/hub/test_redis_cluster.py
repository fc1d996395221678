"""The Redis store on a real 3-primary Redis Cluster (hub/store/redis_cluster.py).

The store's own tests run on the cluster too (the modules marked ``cluster``); these check
what is the cluster's own: the URL, every key in its tenant's slot or the hub's, the
listener hearing a ``PUBLISH`` made on any node, and hot-path commands following a slot
that migrates (ASK) and then moved (MOVED), and a stalled primary answered within the
timeout. tests/hub/test_redis_slots.py shows tenants spread over the primaries.
"""
from __future__ import annotations

import os
import signal
import threading

import pytest
import redis

from murmur_wsgi.hub.config import ConfigError, load_config
from murmur_wsgi.hub.store import StoreError, redis_stores
from murmur_wsgi.hub.store.cluster_url import cluster_nodes
from murmur_wsgi.hub.store.redis_cluster import ClusterCommands, connect_cluster
from murmur_wsgi.hub.store.redis_feed import EventFeed
from murmur_wsgi.hub.store.redis_keys import EVENTS, HUB, task_key, tenant_prefix
from murmur_wsgi.hub import create_hub
from tests.hub.conftest import (FAST, KEY_B, HubClient, close_hub, hub_config, send_params,
                                wait_until)
from tests.hub.test_replicas import refused_within


@pytest.mark.parametrize("where", ["store", "url", "env"])
def test_a_cluster_url_names_the_redis_store(where):
    url = "redis-cluster://127.0.0.1:7000,10.0.0.2:7001"
    data, env = {}, {}
    if where == "store":
        data = {"store": url}
    elif where == "url":
        data = {"redis": {"url": url}}
    else:
        env = {"MURMUR_HUB_REDIS_URL": url}
    config = load_config(data, environ=env)
    assert config.store_url() == url and config.shared
    assert cluster_nodes(url) == ([("127.0.0.1", 7000), ("10.0.0.2", 7001)], None, None)
    assert cluster_nodes("redis-cluster://u:p%40ss@h:1/0") == ([("h", 1)], "u", "p@ss")


@pytest.mark.parametrize("url, line", [
    pytest.param("redis-cluster://127.0.0.1", "each node is HOST:PORT", id="no-port"),
    pytest.param("redis-cluster://127.0.0.1:7000,", "each node is HOST:PORT", id="empty"),
    pytest.param("redis-cluster://127.0.0.1:0", "each node is HOST:PORT", id="port-0"),
    pytest.param("redis-cluster://127.0.0.1:7000/1", "a Redis Cluster has only database 0",
                 id="db"),
    pytest.param("redis-cluster://127.0.0.1:7000?ssl_ca_certs=/etc/ca.pem",
                 "a redis-cluster URL takes no query (rediss-cluster:// for TLS)",
                 id="query-dropped"),
    pytest.param("rediss-cluster://127.0.0.1:7000?ssl_cert_reqs=none",
                 "a rediss-cluster URL's query takes ssl_ca_certs, ssl_certfile and ssl_keyfile "
                 "only, each once", id="unverified"),
])
def test_a_bad_cluster_url_is_refused_without_echoing_it(url, line):
    with pytest.raises(ConfigError) as info:
        load_config({"store": url}, environ={})
    assert str(info.value) == ("store: is not a redis-cluster:// (rediss-cluster://) "
                               "HOST:PORT[,HOST:PORT…] URL: " + line)


def _keys(cluster) -> list[str]:
    found = []
    for node in cluster.nodes:
        client = node.client()
        try:
            found += list(client.scan_iter(count=1000))
        finally:
            client.close()
    return found


def test_every_key_is_in_its_tenants_slot_or_the_hubs(redis_cluster, hub_on_cluster):
    rpc, other = hub_on_cluster
    tasks = [rpc.send(f"hello {n}") for n in range(3)] + [other.send("hi")]
    held = rpc.send("hold g-cluster-slot", configuration={"returnImmediately": True},
                    agent="held")
    rpc.result("CancelTask", {"id": held["id"]}, agent="held")
    keys = _keys(redis_cluster)
    client = redis_cluster.client()
    try:
        slot_of = {k: client.keyslot(k) for k in keys}
        tags = {tag: client.keyslot(tag) for tag in (HUB, tenant_prefix("acme"),
                                                    tenant_prefix("globex"))}
    finally:
        client.close()
    assert len(keys) > 20
    for key, slot in slot_of.items():
        tag = next(t for t in tags if key.startswith(t))
        assert slot == tags[tag], key
    assert {slot_of[k] for k in keys if k.startswith(tenant_prefix("acme"))} == \
        {tags[tenant_prefix("acme")]}
    assert task_key("globex", tasks[3]["id"]) in keys and task_key("acme", held["id"]) in keys
    assert any(k.startswith(HUB) for k in keys)         # the replicas' own keys


@pytest.fixture
def hub_on_cluster(redis_cluster):
    redis_cluster.flush()
    h = create_hub(hub_config(store=redis_cluster.url))
    yield HubClient(h), HubClient(h, headers={"X-API-Key": KEY_B})
    close_hub(h)


def test_the_listener_hears_a_publish_on_every_node(redis_cluster):
    client = redis_cluster.client()
    heard, lock = [], threading.Lock()

    def took(data):
        with lock:
            heard.append(data)

    feed = EventFeed(client, EVENTS, block_secs=0.2)
    feed.also(HUB + "test", took)
    feed.start()
    try:
        wait_until(lambda: feed.subscribed)
        for node in redis_cluster.nodes:
            one = node.client()
            try:
                wait_until(lambda one=one, port=node.port: one.publish(
                    HUB + "test", str(port)) >= 0 and str(port) in heard)
            finally:
                one.close()
        assert {int(p) for p in heard} == {n.port for n in redis_cluster.nodes}
    finally:
        feed.close(wait=2.0)
        client.close()


def _node_id(client: redis.Redis) -> str:
    return client.execute_command("CLUSTER", "MYID")


def test_commands_follow_a_slot_that_migrates_then_moved(redis_cluster):
    redis_cluster.flush()
    stores = redis_stores(redis_cluster.url, timeout_secs=2.0, replica_id="me")
    commands = stores.tasks.conn.command
    assert isinstance(commands, ClusterCommands)
    cluster = stores.tasks.conn.redis
    key, other = task_key("acme", "moving"), task_key("acme", "staying")
    slot = cluster.keyslot(key)
    source = cluster.get_node_from_key(key)
    target = next(n for n in cluster.get_primaries() if n.name != source.name)
    nodes = {n.port: n for n in redis_cluster.nodes}
    src, dst = nodes[source.port].client(), nodes[target.port].client()
    src_id = _node_id(src)
    try:
        commands("HSET", key, "id", "moving")
        commands("HSET", other, "id", "staying")
        stale = connect_cluster(redis_cluster.url, 2.0)      # its slot map: before the move
        assert stale.get_node_from_key(key).name == source.name
        dst_id = _node_id(dst)
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", key)
        # Migrating: the moved key is answered through ASK, the other still by its source.
        assert commands.several(("HGET", key, "id"), ("EXISTS", key)) == ["moving", 1]
        assert commands("HGET", other, "id") == "staying"
        with pytest.raises(redis.exceptions.AskError):      # not asked (retention's reads)
            commands.several(("HGET", key, "id"), asking=False)
        src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", other)
        _set_owner(redis_cluster, slot, dst_id)
        # Moved: MOVED refreshes the slot map; every command goes to the new owner.
        pipe = stale.pipeline(transaction=False)
        pipe.hget(other, "id")
        pipe.exists(key)
        assert pipe.execute() == ["staying", 1]
        assert stale.get_node_from_key(key).name == target.name
        stale.close()
        assert commands("HGET", other, "id") == "staying"
        assert cluster.get_node_from_key(key).name == target.name
        assert stores.tasks._scripts["RELEASE"](keys=[key + ":none"]) == 1
    finally:
        stores.close()
        src.close()
        dst.close()
        _owned_again(redis_cluster, slot, src_id)


def _owned_again(cluster, slot: int, owner_id: str) -> None:
    """The session's cluster as it was: ``slot`` (emptied) its first owner's again, with no
    migration left open (other tests count on the tenants' primaries), as every node sees it.

    NOTE: the node the slot moved to took a config epoch above its first owner's; a ping it
    sent before it was told of the way back, reaching a node after that node was told, made
    that node give the slot to it again for good (a lower epoch's claim loses), and every
    later command of the slot went back and forth between two nodes (MOVED until redis-py's
    TTL ran out, seen once under load). The owner bumps its epoch above every other node's.
    """
    cluster.flush()
    _set_owner(cluster, slot, owner_id)
    clients = [node.client() for node in cluster.nodes]
    try:
        owner = next(client for client in clients if _node_id(client) == owner_id)
        owner.execute_command("CLUSTER", "BUMPEPOCH")
        wait_until(lambda: all(_owner_of(client, slot) == owner_id for client in clients),
                   timeout=10)
    finally:
        for client in clients:
            client.close()


def _owner_of(client: redis.Redis, slot: int) -> str | None:
    """The id of the node that ``client``'s node says holds ``slot``."""
    for start, end, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
        if start <= slot <= end:
            return primary[2]
    return None


def _set_owner(cluster, slot: int, owner_id: str) -> None:
    """``slot`` is ``owner_id``'s, as every node is told."""
    for node in cluster.nodes:
        client = node.client()
        try:
            client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", owner_id)
        finally:
            client.close()


@pytest.mark.timed
@pytest.mark.waits
def test_a_stalled_primary_answers_32603_within_its_timeout_then_recovers(spare_cluster):
    """The primary of the tenant's slot stopped (SIGSTOP): each request is refused within
    ``redis.timeout_secs``, as on one Redis, and served again once it is back; with every
    node killed (the cluster client's own failure), refused the same way. (A cluster of
    its own: tests/conftest.py's spare_cluster.)"""
    timeout = FAST["timeout_secs"]             # as on one Redis (tests/hub/test_replicas.py)
    cluster = spare_cluster
    hub = create_hub(hub_config(store=cluster.url, redis=dict(FAST)))
    rpc = HubClient(hub, "echo")
    try:
        task = rpc.send("hello")
        proc = _primary_of(cluster, tenant_prefix("acme")).proc
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            refused_within(rpc, task["id"], timeout)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_until(lambda: "result" in rpc.call("GetTask", {"id": task["id"]}).get_json(),
                   timeout=20)
        # NOTE: a message also reaches the hub's slot, whose primary may still take the
        # cluster for down a moment after the stopped one is back (CLUSTERDOWN: -32603).
        wait_until(lambda: "result" in rpc.call("SendMessage", send_params("again")).get_json(),
                   timeout=20)
        for node in cluster.nodes:                 # then the whole cluster gone: no node left
            os.kill(node.proc.pid, signal.SIGKILL)
            node.proc.wait(timeout=5)
        refused_within(rpc, task["id"], timeout)
        for call in (hub.store.has_events, hub.store.cancel_marked, hub.store.final_event):
            with pytest.raises(StoreError):    # through the cluster client: no node to ask
                call(task["id"])
    finally:
        hub.close(drain_timeout=5)
        cluster.stop()


def _primary_of(cluster, key: str):
    """The node of ``cluster`` that is the primary of ``key``'s slot."""
    client = cluster.client()
    try:
        port = client.get_node_from_key(key).port
    finally:
        client.close()
    return next(n for n in cluster.nodes if n.port == port)


@pytest.mark.parametrize("url", [
    "redis://127.0.0.1:6379/0?", "rediss://127.0.0.1:6379/0?", "unix:///run/redis.sock?",
    "redis-cluster://127.0.0.1:7000?", "rediss-cluster://127.0.0.1:7000?",
    "redis-cluster://127.0.0.1:7000?&", "redis-sentinel://127.0.0.1:26379/murmur/0?",
    "rediss-sentinel://127.0.0.1:26379/murmur/0?",
])
def test_an_empty_query_is_none_in_every_url_form(url):
    """A trailing '?' (a query of no field): before, redis-cluster:// alone refused it (as
    taking no query), where every other form, rediss-cluster:// included, read none."""
    assert load_config({"store": url}, environ={}).store_url() == url
    if url.startswith("redis-cluster"):
        assert cluster_nodes(url) == ([("127.0.0.1", 7000)], None, None)
