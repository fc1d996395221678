"""Calls past the Redis store's connections (``redis.max_connections``): they wait for one
(hub/store/redis_pool.py), then answer -32603 as Redis being away does, never at once.

redis-py's own pool raised ``MaxConnectionsError`` at its 101st connection in use: 250
ListTasks at once on one hub answered -32603 about two times in five. Each test runs on
one redis-server and on the session's Redis Cluster.
"""
from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest

from murmur_wsgi.hub import create_hub
from tests.hub.conftest import HubClient, close_hub, hub_config, send_params, wait_until
from tests.hub.pool_util import together

pytestmark = pytest.mark.cluster

STORE_ERROR = -32603
UNLIMITED = {"concurrency": 1000, "rate_per_minute": 10 ** 8}


@pytest.fixture
def hub_of(redis_server):
    """A hub on the flushed Redis, made with ``redis`` settings."""
    redis_server.flush()
    made = []

    def make(**redis):
        made.append(create_hub(hub_config(store=redis_server.url, limits=UNLIMITED,
                                          redis=redis)))
        return made[-1]
    yield make
    for hub in made:
        close_hub(hub)


def _codes(hub, calls, threads: int) -> Counter:
    """Each of ``threads`` threads, started together, makes each of ``calls`` (a method and
    its params, or a callable of none giving them) in turn: how many answers had each error
    code ("ok": a result)."""
    codes: Counter = Counter()
    lock = threading.Lock()

    def caller(start):
        rpc = HubClient(hub)
        start.wait(timeout=30)
        for call in calls:
            method, params = call() if callable(call) else call
            body = rpc.call(method, params).get_json()
            with lock:
                codes[body.get("error", {}).get("code", "ok")] += 1
    together(threads, caller, join_secs=60)
    return codes


def test_a_burst_past_the_pools_bound_is_answered_whole(hub_of):
    """250 callers at once, each a ListTasks, a SendMessage, a GetTask of its task and of an
    unknown one, on the default bound (64 in use): none answers -32603."""
    hub = hub_of()
    task_id = HubClient(hub).send("warm")["id"]
    calls = [("ListTasks", {}), ("ListTasks", {"pageSize": 5}),
             lambda: ("SendMessage", send_params(f"m-{uuid.uuid4().hex}")),
             ("GetTask", {"id": task_id}), ("GetTask", {"id": "no-such-task"})]
    codes = _codes(hub, calls, 250)
    assert codes == {"ok": 1000, -32001: 250}


def _held(pool) -> list:
    """Every connection ``pool`` may still lend (the event listener may hold one), taken
    (connected) and held by the test."""
    left = pool.max_connections - len(pool._in_use_connections)
    return [pool.get_connection() for _ in range(left)]


def _pool_of(hub, tenant: str = "acme"):
    """The redis-py pool a ListTasks of ``tenant`` takes its connection from (on a cluster,
    that of the primary of the tenant's slot)."""
    client = hub.store.conn.redis
    if hub.store.conn.cluster:
        node = client.get_node_from_key("{t:" + tenant + "}")
        return client.get_redis_connection(node).connection_pool
    return client.connection_pool


def test_a_call_that_finds_every_connection_in_use_waits_for_one(hub_of):
    """Every connection of the pool held: a ListTasks waits (it is answered once one is
    given back); held past ``timeout_secs``, it answers -32603."""
    hub = hub_of(max_connections=3, timeout_secs=1.0)
    rpc = HubClient(hub)
    assert "tasks" in rpc.result("ListTasks", {})
    pool = _pool_of(hub)
    held = _held(pool)
    assert held
    try:
        answered = []
        waiting = threading.Thread(target=lambda: answered.append(
            HubClient(hub).call("ListTasks", {}).get_json()))
        waiting.start()
        wait_until(lambda: answered or pool.waiting == 1, timeout=5)
        pool.release(held.pop())
        waiting.join(10)
        assert "result" in answered[0], answered[0]
        held.append(pool.get_connection())
        assert rpc.error("ListTasks", {})["code"] == STORE_ERROR    # past the wait
        assert pool.waiting == 0
    finally:
        for conn in held:
            pool.release(conn)
    assert "tasks" in rpc.result("ListTasks", {})


def test_the_setting_bounds_the_hot_paths_connections_too(hub_of):
    """``redis.max_connections`` bounds the store's own connections (GetTask's read, a run's
    scripts) as it bounds redis-py's pool: 40 GetTasks at once on a bound of 3 are all
    answered, on 3 connections at most."""
    hub = hub_of(max_connections=3)
    task_id = HubClient(hub).send("warm")["id"]
    codes = _codes(hub, [("GetTask", {"id": task_id})] * 3, 40)
    assert codes == {"ok": 120}
    commands = hub.store.conn.command
    assert commands.idle <= 3 * (len(commands._nodes) if hub.store.conn.cluster else 1)
