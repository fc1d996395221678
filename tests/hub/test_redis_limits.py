"""Admission's limits on Redis hold across replicas: two hubs on one Redis share one bound.

globex (tests/hub/conftest.py) has concurrency 1 and 3 runs per minute. A run
on A holds the tenant's only slot on B too, its lease renewed while it runs; a
replica that vanishes with a slot has it freed by the other's sweep; a lease
nobody renews (its replica died between admission and the task) expires.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.store.counters import CONCURRENCY
from murmur_wsgi.hub.store.redis_keys import running_key

from tests.hub.agents import gate
from tests.hub.conftest import KEY_B, HubClient, wait_until

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

CONCURRENCY_REFUSED = "concurrency limit reached: 1 runs at once for this tenant"
RATE_REFUSED = "rate limit reached: 3 runs per minute for this tenant"


def _globex(pair, agent):
    return [HubClient(rpc.hub, agent, {"X-API-Key": KEY_B}) for rpc in pair]


def _refusal(task) -> str:
    assert task["status"]["state"] == "TASK_STATE_REJECTED", task
    return task["status"]["message"]["parts"][0]["text"]


def _redis_ms(client) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def test_a_run_on_a_holds_the_tenant_s_slot_on_b(pair):
    a, b = _globex(pair, "held")
    running = a.hub.store._redis
    task = a.send("g-slot", configuration={"returnImmediately": True})
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert _refusal(b.send("g-slot", configuration={"returnImmediately": True})) == \
        CONCURRENCY_REFUSED
    # The lease outlives its first expiry: A renews it while the run goes on (waited for
    # as the renewal itself, so a loaded machine's late turn is not taken for a lapse).
    first = running.zscore(running_key("globex"), task["id"])
    wait_until(lambda: (running.zscore(running_key("globex"), task["id"]) or 0) > first
               and _redis_ms(running) > first + 50, timeout=10)
    assert _refusal(b.send("g-slot", configuration={"returnImmediately": True})) == \
        CONCURRENCY_REFUSED
    assert b.hub.admission.running("globex") == 1
    gate("g-slot").set()
    wait_until(lambda: b.hub.admission.running("globex") == 0)
    assert b.send("g-slot")["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_rate_is_counted_across_replicas(pair):
    a, b = _globex(pair, "echo")
    states = [rpc.send(f"n{i}")["status"]["state"] for i, rpc in enumerate((a, b, a))]
    assert states == ["TASK_STATE_COMPLETED"] * 3
    assert _refusal(b.send("n3")) == RATE_REFUSED
    assert _refusal(a.send("n4")) == RATE_REFUSED


def test_a_vanished_replica_s_slot_is_freed_by_the_sweep(pair):
    a, b = _globex(pair, "stubborn")
    released = gate("g-gone")
    task = a.send("g-gone", configuration={"returnImmediately": True})
    assert _refusal(b.send("g-gone", configuration={"returnImmediately": True})) == \
        CONCURRENCY_REFUSED
    # A vanishes (what SIGKILL leaves once its liveness expires): B's sweep ends the task,
    # which frees the slot at once.
    a.hub.replica.stop()
    a.hub.store._redis.delete(f"murmur:{{hub}}:replica:{a.hub.store.replica}")
    wait_until(lambda: b.hub.admission.running("globex") == 0, timeout=5)
    assert b.result("GetTask", {"id": task["id"]})["status"]["state"] == "TASK_STATE_FAILED"
    again = b.send("g-gone", configuration={"returnImmediately": True})
    assert again["status"]["state"] == "TASK_STATE_SUBMITTED"
    released.set()
    wait_until(lambda: not a.hub.runs.in_flight() and not b.hub.runs.in_flight())


def test_a_lease_nobody_renews_expires(redis_server):
    redis_server.flush()
    stores = redis_stores(redis_server.url, liveness_secs=0.2)
    try:
        counters = stores.counters
        # A slot taken by a replica that died before its task existed: nobody renews it.
        assert counters.take("t", "orphan", 1, 100) is None
        assert counters.take("t", "other", 1, 100) == CONCURRENCY
        wait_until(lambda: counters.running("t") == 0, timeout=5)   # 2 × 0.2 s
        assert counters.take("t", "other", 1, 100) is None
        counters.give("t", "other")
        assert counters.running("t") == 0
    finally:
        stores.close()
