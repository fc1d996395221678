"""Retention of finished tasks on both stores: by age, by a cap per tenant, every key with it.

The store's own API (fixture ``stores``, both stores) for the rules; then a hub flooded
past ``tasks.max_per_tenant`` with accepted and refused messages, whose stored tasks, RSS
(memory store) and Redis key count stop growing.
"""
from __future__ import annotations

import os
import uuid

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store import memory_stores, redis_stores
from murmur_wsgi.hub.store.push_base import PushRecord
from murmur_wsgi.hub.store.retention import Retention
from murmur_wsgi.hub.task import COMPLETED, REJECTED, HubTask
from murmur_wsgi.wire.stream import task_event
from murmur_wsgi.wire.task import now_ms, text_part

from tests.hub.conftest import KEY_B, HubClient, close_hub, hub_config, send_params, wait_until


@pytest.fixture
def kept(request, clock):
    """Stores keeping 3 finished tasks per tenant for 60 s (``tenants["small"]``: 1)."""
    retention = Retention(60.0, 3, {"small": {"max_per_tenant": 1}})
    if getattr(request, "param", "memory") == "memory":
        found = memory_stores(clock=clock, retention=retention)
    else:
        server = request.getfixturevalue("redis_server")
        server.flush()
        found = redis_stores(server.url, timeout_secs=2.0, replica_id="me",
                             retention=retention)
    yield found
    found.close()


def pytest_generate_tests(metafunc):
    if "kept" in metafunc.fixturenames:
        metafunc.parametrize("kept", ["memory", "redis"], indirect=True)


def finished(stores, tenant="acme", *, state=COMPLETED, context_id="ctx") -> HubTask:
    message_id = uuid.uuid4().hex
    task = HubTask(str(uuid.uuid4()), context_id, tenant, "echo", message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [text_part("hi")]})
    assert stores.tasks.claim_message(tenant, "echo", message_id) is None
    if state == REJECTED:
        task.set_state(REJECTED, "refused")
        stores.tasks.create(task, task.task_event(), bind=False)
    else:
        stores.tasks.create(task, task.task_event())
        stores.tasks.end(task.id, state, None, None, [])
    return task


def gone(stores, task) -> bool:
    tasks = stores.tasks
    return (tasks.get(task.tenant, task.agent, task.id) is None
            and tasks.events(task.id, 0, 0) == ([], False)
            and task.id not in [t.id for t in tasks.list(task.tenant, task.agent).tasks])


def test_past_the_cap_the_oldest_finished_go_with_every_key(kept):
    made = [finished(kept, context_id="c1") for _ in range(3)]
    saved = kept.push.push_save(PushRecord("acme", "echo", made[0].id, "c1", "https://h/x",
                                           None), from_start=True)
    assert saved is not None
    running = HubTask(str(uuid.uuid4()), "c1", "acme", "echo", "live", {"messageId": "live"})
    kept.tasks.create(running, running.task_event())
    made.append(finished(kept, context_id="c1"))
    assert gone(kept, made[0])
    assert kept.push.push_list("acme", "echo", made[0].id) == []
    assert kept.tasks.claim_message("acme", "echo", made[0].message_id) is None  # forgotten
    page = kept.tasks.list("acme", "echo")
    assert [t.id for t in page.tasks] == [made[3].id, running.id, made[2].id, made[1].id]
    assert page.total == 4
    assert kept.tasks.list("acme", "echo", context_id="c1", state=COMPLETED).total == 3
    assert [t.id for t in kept.tasks.context_tasks("acme", "echo", "c1", 10)] == \
        [made[1].id, made[2].id, running.id, made[3].id]
    assert kept.tasks.get("acme", "echo", running.id) is not None      # running: kept


def test_a_refused_task_counts_toward_its_tenants_cap_alone(kept):
    first = finished(kept, "small", state=REJECTED)
    other = finished(kept, "acme", state=REJECTED)
    second = finished(kept, "small")
    assert gone(kept, first) and not gone(kept, second) and not gone(kept, other)


def test_a_refused_task_keeps_its_message_once(kept):
    task = finished(kept, state=REJECTED)
    events, _ = kept.tasks.events(task.id, 0, 0)
    whole = kept.tasks.task_json("acme", "echo", task.id)
    assert [e.payload for e in events] == [task_event(whole)]
    assert kept.tasks.final_event(task.id) == task_event(whole)
    if kept.shared:             # the stream's entry is empty: the record's wire form holds it
        entry = kept.tasks._redis.xrange(f"murmur:hub:ev:{task.id}")[0][1]
        assert entry == {"p": "", "t": "1"}
    else:                       # the record's history only: no cached wire form, no event text
        stored = kept.tasks.get("acme", "echo", task.id)
        assert stored._json is None and kept.tasks._events[task.id][0].payload is None


def test_past_its_retention_a_finished_task_goes(kept, clock):
    old = finished(kept)
    ended = now_ms()
    clock.now += 61.0                                    # the memory store's clock
    if kept.shared:                                      # Redis's: the end's time, in ms
        kept.tasks._keep = Retention(0.001, 3)
        wait_until(lambda: now_ms() > ended + 1)
    kept.tasks.expire_finished()
    assert gone(kept, old)


FLOOD = 600
CAP = 100


def _rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def _flood(rpc, count: int, size: int) -> None:
    for _ in range(count):
        params = send_params("x" * size)
        rpc.result("SendMessage", params)


@pytest.mark.one_store
def test_a_flood_past_the_cap_stops_growing_the_memory_store():
    config = hub_config(store="memory", tasks={"max_per_tenant": CAP})
    config["tenants"]["acme"]["limits"] = {"rate_per_minute": 100_000, "concurrency": 50}
    hub = create_hub(config)
    try:
        accepted, refused = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
        _flood(accepted, FLOOD, 20_000)                   # past the cap: steady state
        _flood(refused, FLOOD, 20_000)                    # globex: 3 runs a minute, then REJECTED
        before = _rss_kb()
        _flood(accepted, FLOOD, 20_000)
        _flood(refused, FLOOD, 20_000)
        grown = _rss_kb() - before
        for rpc in (accepted, refused):
            assert rpc.result("ListTasks", {})["totalSize"] == CAP
        states = {t["status"]["state"] for t in refused.result("ListTasks", {})["tasks"]}
        assert states == {"TASK_STATE_REJECTED"}
        # 1,200 more tasks of 20 KB each would be 24 MB; kept to the cap, RSS stays put.
        assert grown < 4_000, f"RSS grew {grown} KB"
    finally:
        close_hub(hub)


@pytest.mark.one_store
def test_a_flood_past_the_cap_stops_growing_redis(redis_server):
    redis_server.flush()
    config = hub_config(store=redis_server.url, tasks={"max_per_tenant": CAP})
    config["tenants"]["acme"]["limits"] = {"rate_per_minute": 100_000, "concurrency": 50}
    hub = create_hub(config)
    client = redis_server.client()
    try:
        accepted, refused = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
        _flood(accepted, 300, 2_000)
        _flood(refused, 300, 2_000)
        keys, memory = client.dbsize(), client.info("memory")["used_memory"]
        _flood(accepted, 300, 2_000)
        _flood(refused, 300, 2_000)
        assert client.dbsize() <= keys
        assert client.info("memory")["used_memory"] < memory + 512 * 1024
        for rpc in (accepted, refused):
            assert rpc.result("ListTasks", {})["totalSize"] == CAP
        assert client.zcard("murmur:hub:done:acme") == CAP
    finally:
        client.close()
        close_hub(hub)
