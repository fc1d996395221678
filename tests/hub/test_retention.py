"""Retention of finished tasks on both stores: by age, by a cap per tenant, every key with it.

The store's own API (fixture ``stores``, both stores) for the rules; then a hub flooded
past ``tasks.max_per_tenant`` with accepted and refused messages, whose stored tasks, RSS
(memory store) and Redis key count stop growing.
"""
from __future__ import annotations

import os
import threading
import uuid

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError, load_config
from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.store.push_base import PushRecord
from murmur_wsgi.hub.store.redis_keys import done_key, events_key, runs_key
from murmur_wsgi.hub.store.retention import TRIM_BATCH, Retention
from murmur_wsgi.hub.task import COMPLETED, REJECTED, HubTask
from murmur_wsgi.wire.stream import task_event
from murmur_wsgi.wire.task import now_ms, text_part

from tests.hub.conftest import (FAST, KEY_B, HubClient, close_hub, hub_config, replica_turn,
                                send_params, wait_until)

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too


@pytest.fixture
def retention():
    """3 finished tasks per tenant for 60 s (``small``: 1), in the fixture ``stores``; each
    end forgets what it puts past them (batches of 1: whole batches are tested below)."""
    return Retention(60.0, 3, {"small": {"max_per_tenant": 1}}, batch=1)


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


def test_past_the_cap_the_oldest_finished_go_with_every_key(stores):
    made = [finished(stores, context_id="c1") for _ in range(3)]
    saved = stores.push.push_save(PushRecord("acme", "echo", made[0].id, "c1", "https://h/x",
                                           None), from_start=True)
    assert saved is not None
    running = HubTask(str(uuid.uuid4()), "c1", "acme", "echo", "live", {"messageId": "live"})
    stores.tasks.create(running, running.task_event())
    made.append(finished(stores, context_id="c1"))
    assert gone(stores, made[0])
    assert stores.push.push_list("acme", "echo", made[0].id) == []
    assert stores.tasks.claim_message("acme", "echo", made[0].message_id) is None  # forgotten
    page = stores.tasks.list("acme", "echo")
    assert [t.id for t in page.tasks] == [made[3].id, running.id, made[2].id, made[1].id]
    assert page.total == 4
    assert stores.tasks.list("acme", "echo", context_id="c1", state=COMPLETED).total == 3
    assert [t.id for t in stores.tasks.context_tasks("acme", "echo", "c1", 10, 1 << 20)] == \
        [made[1].id, made[2].id, running.id, made[3].id]
    assert stores.tasks.get("acme", "echo", running.id) is not None      # running: kept


def test_a_refused_task_counts_toward_its_tenants_cap_alone(stores):
    first = finished(stores, "small", state=REJECTED)
    other = finished(stores, "acme", state=REJECTED)
    second = finished(stores, "small")
    assert gone(stores, first) and not gone(stores, second) and not gone(stores, other)


def test_an_end_s_batch_is_a_tenth_of_the_cap_at_most_a_hundred():
    assert [Retention(batch=TRIM_BATCH).batch_of(cap) for cap in (1, 19, 20, 500, 100_000)] \
        == [1, 1, 2, 50, 100]
    assert Retention(batch=4).batch_of(100_000) == 4


def test_past_the_cap_redis_forgets_a_whole_batch_at_a_time(stores):
    stores.tasks._keep = Retention(60.0, 40, batch=4)         # a cap of 40: batches of 4
    made = [finished(stores) for _ in range(43)]
    if not stores.shared:       # in one process each end forgets at once, whatever the batch
        assert [gone(stores, task) for task in made] == [True] * 3 + [False] * 40
        return
    # Fewer than a batch past the cap: kept; the end that makes a whole batch forgets it.
    assert not any(gone(stores, task) for task in made)
    made.append(finished(stores))
    assert [gone(stores, task) for task in made] == [True] * 4 + [False] * 40
    more = [finished(stores) for _ in range(3)]
    assert stores.tasks.list("acme", "echo").total == 43                # 3 past the cap
    stores.tasks.expire_finished()                                      # the sweep: the rest
    assert [gone(stores, task) for task in made[4:7] + more] == [True] * 3 + [False] * 3
    assert stores.tasks.list("acme", "echo").total == 40


@pytest.mark.one_store
def test_ends_given_one_batch_while_it_is_forgotten_leave_it_to_that_one(redis_server):
    redis_server.flush()
    found = redis_stores(redis_server.url, timeout_secs=2.0, replica_id="me",
                         retention=Retention(60.0, 40, batch=4))
    tasks, reads = found.tasks, []
    several = tasks._command.several
    entered, release = threading.Event(), threading.Event()

    def slow(*commands, **options):     # the batch's names read, held until released
        if len(commands) == 4 and all(command[0] == "HMGET" for command in commands):
            reads.append([command[1] for command in commands])
            entered.set()
            assert release.wait(5)
        return several(*commands, **options)
    try:
        made = [finished(found) for _ in range(43)]
        tasks._command.several = slow
        first = threading.Thread(target=finished, args=(found,))    # its end: the batch's turn
        first.start()
        assert entered.wait(5)
        later = finished(found)          # given the same oldest four meanwhile: leaves them
        release.set()
        first.join(5)
        assert not first.is_alive()
        assert len(reads) == 1
        assert [gone(found, task) for task in made + [later]] == [True] * 4 + [False] * 40
    finally:
        release.set()
        tasks._command.__dict__.pop("several", None)
        found.close()


def test_a_refused_task_keeps_its_message_once(stores):
    task = finished(stores, state=REJECTED)
    events, _ = stores.tasks.events(task.id, 0, 0)
    whole = stores.tasks.task_json("acme", "echo", task.id)
    assert [e.payload for e in events] == [task_event(whole)]
    assert stores.tasks.final_event(task.id) == task_event(whole)
    if stores.shared:             # the stream's entry is empty: the record's wire form holds it
        entry = stores.tasks._redis.xrange(events_key("acme", task.id))[0][1]
        assert entry == {"p": "", "t": "1"}
    else:                       # the record's wire form only: no history kept, no event text
        stored = stores.tasks.get("acme", "echo", task.id)
        assert stored._json == whole and stored._history is None
        assert stores.tasks._events[task.id] == (None,)


def _footprint(stores) -> int:
    """Redis's key count; in memory, the entries of every container of the task store and
    of the push configs (indexes included)."""
    if stores.shared:
        return stores.tasks._redis.dbsize()
    tasks, push = stores.tasks, stores.push
    indexes = tasks._indexes
    return (len(tasks._tasks) + len(tasks._events) + len(tasks._expiry) + len(tasks._claims)
            + len(tasks._marks) + sum(map(len, tasks._finished.values()))
            + indexes._lists.count() + indexes._updated.count()
            + sum(map(len, indexes._tasks.values())) + len(push._push) + len(push._push_ids)
            + sum(map(len, push._push_active.values())))


def test_a_flood_past_the_cap_leaves_nothing_behind(stores):
    def flood(count):
        for i in range(count):
            task = finished(stores, state=REJECTED if i % 2 else COMPLETED, context_id=f"c{i}")
            stores.push.push_save(PushRecord("acme", "echo", task.id, "c1", "https://h/x",
                                             None), from_start=True)
            stores.tasks.mark_cancel(task.id)
    flood(10)
    before = _footprint(stores)
    flood(40)
    assert _footprint(stores) == before
    assert stores.tasks.list("acme", "echo").total == 3


def test_past_its_retention_a_finished_task_goes(stores, clock):
    old = finished(stores)
    ended = now_ms()
    clock.now += 61.0                                    # the memory store's clock
    if stores.shared:                                      # Redis's: the end's time, in ms
        stores.tasks._keep = Retention(0.001, 3)
        wait_until(lambda: now_ms() > ended + 1)
    stores.tasks.expire_finished()
    assert gone(stores, old)


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
    # NOTE: the sweep left out: it forgets down to the cap what the ends leave past it (less
    # than a batch), and the figures below would depend on when it ran.
    config = hub_config(store=redis_server.url, tasks={"max_per_tenant": CAP},
                        redis={"sweep_interval_secs": 3600})
    config["tenants"]["acme"]["limits"] = {"rate_per_minute": 100_000, "concurrency": 50}
    hub = create_hub(config)
    client = redis_server.client()
    try:
        accepted, refused = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
        _flood(accepted, 300, 2_000)
        _flood(refused, 300, 2_000)
        # NOTE: counted once a beat has taken the ended runs out of the replica's runs (the
        # key goes with the last): a run waiting for the next beat counted one key more.
        runs = runs_key(hub.store.replica)
        wait_until(lambda: replica_turn(hub) and not client.exists(runs))
        keys, memory = client.dbsize(), client.info("memory")["used_memory"]
        _flood(accepted, 300, 2_000)
        _flood(refused, 300, 2_000)
        wait_until(lambda: replica_turn(hub) and not client.exists(runs))
        assert client.dbsize() <= keys
        assert client.info("memory")["used_memory"] < memory + 512 * 1024
        # NOTE: 300 a flood, a whole number of the cap's batches (a tenth of it): each end
        # that makes one forgets it, and a flood ends at the cap.
        for rpc in (accepted, refused):
            assert rpc.result("ListTasks", {})["totalSize"] == CAP
        assert client.zcard(done_key("acme")) == CAP
    finally:
        client.close()
        close_hub(hub)


def test_hub_yaml_sets_retention_per_tenant():
    config = load_config(hub_config(tasks={"retention_secs": 3600},
                                    tenants={"acme": {"tasks": {"max_per_tenant": 5,
                                                                "max_bytes_per_tenant": "64Ki"}},
                                             "globex": {}}))
    retention = Retention.from_config(config)
    assert retention.of("acme") == (3600.0, 5, 64 * 1024)
    assert retention.of("globex") == (3600.0, 100_000, 1024 ** 3)
    assert load_config(hub_config()).tasks == {"retention_secs": 604_800.0,
                                               "max_per_tenant": 100_000,
                                               "max_bytes_per_tenant": 1024 ** 3}
    top = load_config(hub_config(tasks={"max_bytes_per_tenant": "2Mi"}))
    assert Retention.from_config(top).of("globex")[2] == 2 * 1024 ** 2


@pytest.mark.parametrize("data, line", [
    ({"tasks": {"max_per_tenant": 0}}, "tasks.max_per_tenant"),
    ({"tasks": {"retention_secs": -1}}, "tasks.retention_secs"),
    ({"tasks": {"keep": 1}}, "tasks.keep: is not a key this hub reads"),
    ({"tenants": {"a": {"tasks": {"max_per_tenant": "many"}}}},
     "tenants.a.tasks.max_per_tenant"),
    ({"tasks": {"max_bytes_per_tenant": 0}}, "tasks.max_bytes_per_tenant"),
    ({"tenants": {"a": {"tasks": {"max_bytes_per_tenant": "lots"}}}},
     "tenants.a.tasks.max_bytes_per_tenant"),
])
def test_bad_retention_values_name_the_key(data, line):
    with pytest.raises(ConfigError) as info:
        load_config(data)
    assert str(info.value).startswith(line), str(info.value)


@pytest.mark.one_store
def test_a_replicas_sweep_forgets_the_tasks_of_a_tenant_that_stopped_writing(redis_server):
    redis_server.flush()
    hub = create_hub(hub_config(store=redis_server.url, redis=dict(FAST),
                                tasks={"retention_secs": 0.2}))
    try:
        rpc = HubClient(hub)
        task = rpc.send("hi")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        # Nothing more is written: only the sweep (every 0.1 s here) can forget it.
        wait_until(lambda: "error" in rpc.call("GetTask", {"id": task["id"]}).get_json())
        assert rpc.error("GetTask", {"id": task["id"]})["code"] == -32001
        assert rpc.result("ListTasks", {})["totalSize"] == 0
        assert not redis_server.client().keys(f"*{task['id']}*")
    finally:
        close_hub(hub)


@pytest.mark.one_store                # the memory store's retention, forced between two steps
def test_a_repeated_message_whose_task_is_forgotten_as_it_is_read_starts_again(hub, rpc,
                                                                                monkeypatch):
    first = rpc.send("hello", message_id="again")
    store, found = hub.store, hub.store.get

    def forgotten_first(tenant, agent, task_id):
        if task_id == first["id"]:
            with store.lock:                  # retention, between the claim and the read
                store._forget_locked(task_id)
        return found(tenant, agent, task_id)

    monkeypatch.setattr(store, "get", forgotten_first)
    second = rpc.send("hello", message_id="again")
    assert second["id"] != first["id"] and second["status"]["state"] == "TASK_STATE_COMPLETED"
    monkeypatch.undo()
    assert rpc.send("hello", message_id="again")["id"] == second["id"]
