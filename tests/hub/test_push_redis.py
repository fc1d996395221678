"""Push configs and leases on a real redis-server (store/redis_push.py), replicas sharing it.

The contract (test_push_storage.py) runs on both stores; here what only Redis has: a dead
holder's lease and tenant slot taken over, a waiting
``push_due`` woken by an event another replica wrote, the configs' expiry with the task's
events, and two hubs on one Redis delivering each config once, in order, at most two
configs of a tenant at once.
"""
from __future__ import annotations

import json
import logging
import threading

import jwt
import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store import redis_push, redis_stores
from murmur_wsgi.hub.store.push_base import DELIVERED, PushRecord
from murmur_wsgi.hub.store.redis_keys import configs_key, slots_key
from murmur_wsgi.hub.store.redis_push_scripts import SKIP_BATCH
from murmur_wsgi.hub.task import COMPLETED, REJECTED
from tests.hub.push_util import Resolver, Sleeps, cert, push_config, receiver  # noqa: F401
from tests.hub.conftest import HubClient, wait_until
from tests.hub.test_push_storage import OWNERS, a_task, alive, record
from tests.redis_util import RedisServer

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too


@pytest.fixture
def redis_url(redis_server):
    redis_server.flush()
    client = redis_server.client()
    alive(client, *OWNERS)
    client.close()
    return redis_server.url


@pytest.fixture
def rstores(redis_url):
    """The Redis stores of replica ``me``."""
    found = redis_stores(redis_url, replica_id="me")
    yield found
    found.close()


@pytest.fixture
def push(rstores):
    return rstores.push


def test_a_dead_holders_lease_and_slot_are_taken_over(rstores, push, redis_server):
    for task_id in ("t1", "t2", "t3"):
        a_task(rstores, task_id=task_id)
    saved = [push.push_save(record(task_id=t), from_start=True) for t in ("t1", "t2", "t3")]
    assert push.push_lease(saved[0], "r1") and push.push_lease(saved[1], "r1")
    assert push.push_lease(saved[0], "r2") is False     # r1 lives: its lease holds
    assert push.push_lease(saved[2], "r2") is False     # and its two slots count
    # A look finds at most a tenant's slots' worth of its configs (two), in push:active's
    # order: r1's own leases are due for it, r1's are not for r2.
    assert {r.task_id for r in push.push_due("r2", 0)} <= {"t3"}
    mine = {r.task_id for r in push.push_due("r1", 0)}
    assert len(mine) == 2 and mine <= {"t1", "t2", "t3"}
    redis_server.client().delete("murmur:{hub}:replica:r1")        # r1 died (SIGKILL)
    taken = {r.task_id for r in push.push_due("r2", 0)}
    assert len(taken) == 2 and taken <= {"t1", "t2", "t3"}
    assert push.push_lease(saved[2], "r2") is True
    assert push.push_lease(saved[0], "r2") is True
    assert push.push_advance(saved[0], "r1", 1, DELIVERED) is None   # r1 lost it
    assert push.push_advance(saved[0], "r2", 1, DELIVERED).cursor == 1


CHUNK = '{"artifactUpdate":{}}'


def test_due_waits_for_an_event_not_for_chunks_alone(rstores, push):
    task = a_task(rstores)
    saved = push.push_save(record(), from_start=False)
    assert push.push_due("r1", 0) == []
    rstores.tasks.append(task.id, CHUNK)
    assert push.push_due("r1", 0) == []                 # a chunk alone is never sent
    rstores.tasks.append(task.id, '{"statusUpdate":{}}')
    assert [r.key for r in push.push_due("r1", 0)] == [saved.key]
    assert push.push_due("r1", 0, skip={saved.key}) == []


def test_chunks_pile_up_to_a_batch_then_the_cursor_catches_up(rstores, push):
    task = a_task(rstores)
    push.push_save(record(), from_start=False)
    for _ in range(SKIP_BATCH - 1):
        rstores.tasks.append(task.id, CHUNK)
    assert push.push_due("r1", 0) == []
    rstores.tasks.append(task.id, CHUNK)
    assert len(push.push_due("r1", 0)) == 1


def test_a_streamed_run_wakes_no_dispatcher_until_a_status(rstores, push, redis_url, monkeypatch):
    monkeypatch.setattr(redis_push, "FULL_SCAN_SECS", 60.0)     # as below: no full scan
    other = redis_stores(redis_url, replica_id="r1")
    streamer = None
    try:
        task = a_task(rstores)
        push.push_save(record(), from_start=False)

        def stream():
            for _ in range(5):
                other.tasks.append(task.id, CHUNK, tenant="acme")
            other.tasks.append(task.id, '{"statusUpdate":{}}', tenant="acme")
        streamer = threading.Timer(0.05, stream)
        streamer.start()
        due = push.push_due("me", 10.0)                  # one call: the chunks did not end it
        assert [r.key for r in due] == [("t1", "c1")] and due[0].cursor == 1
    finally:
        if streamer is not None:
            streamer.join(10)           # its appends have their answers before the client closes
        other.close()


def test_a_waiting_due_wakes_on_another_replicas_event(rstores, push, redis_url, monkeypatch):
    # No full scan while it waits (it would find the config as well): only a wake-up can,
    # however late the event comes on a loaded machine; without one the wait ends with [].
    monkeypatch.setattr(redis_push, "FULL_SCAN_SECS", 60.0)
    other = redis_stores(redis_url, replica_id="r1")
    event = None
    try:
        task = a_task(rstores)
        push.push_save(record(), from_start=False)
        assert push.push_due("me", 0) == []
        event = threading.Timer(0.05, other.tasks.append, (task.id, '{"statusUpdate":{}}'),
                                {"tenant": "acme"})
        event.start()
        due = push.push_due("me", 10.0)
        assert [r.key for r in due] == [("t1", "c1")]
    finally:
        if event is not None:
            event.join(10)              # its append has its answer before the client closes
        other.close()


def test_configs_expire_with_the_tasks_events(rstores, push, redis_server):
    task = a_task(rstores)
    saved = push.push_save(record(), from_start=False)
    assert rstores.tasks.end(task.id, COMPLETED, None, None, []) is not None
    assert push.push_lease(saved, "me")
    push.push_advance(saved, "me", 2, DELIVERED)
    assert push.push_due("me", 0) == []                 # caught up on a final task: done
    client = redis_server.client()
    assert client.pttl(configs_key("acme", "t1")) > 0
    assert client.smembers("murmur:{hub}:push:tenants") == set()
    assert client.keys("murmur:{hub}:push:active*") == []
    fields = json.loads(client.hget(configs_key("acme", "t1"), "c1"))
    assert fields["cursor"] == 2 and "secret" not in json.dumps(fields)


BAD_RECORDS = {
    "not-json": "garbage",
    "no-fields": '{"tenant":"acme"}',
    "cursor-text": '{"tenant":"acme","agent":"echo","url":"https://h.example/a","token":null,'
                   '"cursor":"x","failures":0,"disabled":false,"gen":1,"created":1}',
    "disabled-at-text": '{"tenant":"acme","agent":"echo","url":"https://h.example/a",'
                        '"cursor":0,"failures":0,"disabled":false,"disabledMs":"x","gen":1,'
                        '"created":1}',
    "no-disabled": '{"tenant":"acme","agent":"echo","url":"https://h.example/a","cursor":0,'
                   '"failures":0,"gen":1,"created":1}',
}


@pytest.mark.parametrize("raw", BAD_RECORDS.values(), ids=BAD_RECORDS)
def test_a_config_record_that_cannot_be_read_is_never_due_and_stops_no_other(
        rstores, push, redis_server, raw):
    # NOTE: the DUE script's error (or the record's, read) failed every look: no config of
    # any tenant was delivered again while the record was kept.
    for task_id in ("t1", "t2"):
        a_task(rstores, task_id=task_id)
    bad = push.push_save(record(task_id="t1"), from_start=True)
    good = push.push_save(record(task_id="t2", config_id="c2"), from_start=True)
    redis_server.client().hset(configs_key("acme", "t1"), "c1", raw)
    assert [r.key for r in push.push_due("me", 0)] == [good.key]
    assert push.push_due("me", 0, skip={good.key}) == []
    assert bad.key not in {r.key for r in push.push_due("me", 0)}


@pytest.mark.parametrize("value", ["garbage", "r1 soon", ""])
def test_a_tenant_slot_that_cannot_be_read_is_dropped_not_an_error(rstores, push,
                                                                    redis_server, value):
    # NOTE: the LEASE script failed on it: every lease of the tenant raised, and the
    # dispatcher's turn with it, so no tenant's config was leased again.
    a_task(rstores)
    saved = push.push_save(record(), from_start=True)
    redis_server.client().hset(slots_key("acme"), "t9/c9", value)
    assert push.push_lease(saved, "me") is True
    assert redis_server.client().hkeys(slots_key("acme")) == ["t1/c1"]


def test_a_record_round_trips(rstores, push):
    a_task(rstores)
    saved = push.push_save(PushRecord("acme", "echo", "t1", "c1", "https://h.example/a",
                                       "tok"), from_start=True)
    assert push.push_get("acme", "echo", "t1", "c1") == saved
    assert (saved.token, saved.generation, saved.cursor) == ("tok", 1, 0)
    assert push.push_list("acme", "echo", "t1") == [saved]


def test_a_config_saved_again_while_a_look_drops_it_stays_listed(rstores, push, monkeypatch):
    """A client deletes a config and creates it again (the same id): the look the delete's
    wake-up started found the config gone, and its removal of the name from push:active
    came after the create had listed it; the config, saved, was never due again."""
    a_task(rstores)
    push.push_save(record(), from_start=True)
    due = push._scripts["DUE"]

    def look(*args, **kwargs):
        monkeypatch.setitem(push._scripts, "DUE", due)     # this look only
        assert push.push_delete("acme", "echo", "t1", "c1")
        answer = due(*args, **kwargs)                      # the config is gone
        push.push_save(record(), from_start=True)          # created again, before the drop
        return answer

    monkeypatch.setitem(push._scripts, "DUE", look)
    assert push.push_due("me", 0) == []
    assert [r.id for r in push.push_due("me", 0)] == ["c1"]


def test_a_config_saved_while_a_look_drops_its_name_stays_listed_on_a_cluster(
        redis_cluster, monkeypatch):
    """On a cluster a save lists its config (the hub's slot) a round trip before its script
    (the tenant's): a look between the two found the name without its config and dropped
    it, and the config was saved unlisted, never due."""
    redis_cluster.flush()
    stores = redis_stores(redis_cluster.url, replica_id="me")
    try:
        a_task(stores)
        command = stores.tasks.conn.command
        durable = command.durable

        def look_first(*args):
            monkeypatch.setattr(command, "durable", durable)    # this save only
            assert stores.push.push_due("me", 0) == []         # listed, not saved yet
            return durable(*args)

        monkeypatch.setattr(command, "durable", look_first)
        stores.push.push_save(record(), from_start=True)
        assert [r.id for r in stores.push.push_due("me", 0)] == ["c1"]
    finally:
        stores.close()


def state_of(received) -> str:
    body = received.json
    return (body.get("task") or body["statusUpdate"])["status"]["state"]


def redis_push_hub(receiver, url, runs: int | None = None):
    """A hub with push on, on Redis at ``url``; ``runs``: tenant acme's runs at once
    (limits.concurrency, 4 unless given)."""
    config = push_config(receiver)
    config["store"] = url
    config["redis"] = {"liveness_secs": 2, "sweep_interval_secs": 0.5}
    if runs is not None:
        config["tenants"]["acme"]["limits"] = {"concurrency": runs}
    hub = create_hub(config)
    hub.sleeps = Sleeps()
    hub.push.sender.sleep = hub.sleeps
    hub.push.egress.resolver = Resolver()
    return hub


def two_held_of(hub, receiver, count: int) -> None:
    """``count`` messages to ``hub``, each with a config, while ``receiver`` holds every
    request: returns once the tenant's two delivery slots are taken. Each run must be
    admitted: more than the tenant's runs at once (a loaded machine's runs overlap) are
    REJECTED, tasks of one event, one notification, not three."""
    receiver.hold.clear()
    rpc = HubClient(hub)
    for i in range(count):
        task = rpc.send(f"t{i}", configuration={"returnImmediately": True,
                                                 "taskPushNotificationConfig": {
                                                     "url": receiver.url()}})
        assert task["status"]["state"] != REJECTED, (i, task["status"])
    with receiver.cond:
        assert receiver.cond.wait_for(lambda: receiver.in_flight == 2, 10)


def test_two_hubs_deliver_each_config_once_in_order_two_per_tenant(receiver, redis_url):
    a, b = redis_push_hub(receiver, redis_url), redis_push_hub(receiver, redis_url)
    try:
        two_held_of(a, receiver, 3)
        receiver.hold.set()
        got = receiver.wait_for(9)
        assert receiver.most_in_flight == 2                # the third config waited
        jtis = [jwt.decode(r.headers["Authorization"][len("Bearer "):],
                           options={"verify_signature": False})["jti"] for r in got]
        assert len(set(jtis)) == 9 == len(jtis)            # each event once, by one replica
        per_task: dict = {}
        for r in got:
            body = r.json
            task_id = body["task"]["id"] if "task" in body else body["statusUpdate"]["taskId"]
            per_task.setdefault(task_id, []).append(state_of(r))
        assert list(per_task.values()) == [["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                                            "TASK_STATE_COMPLETED"]] * 3
    finally:
        receiver.hold.set()
        a.close(drain_timeout=5)
        b.close(drain_timeout=5)


def test_the_dispatcher_outlives_redis_down_and_delivers_after(tmp_path, receiver, caplog):
    server = restarted = RedisServer(tmp_path).start()
    hub = redis_push_hub(receiver, server.url)
    rpc = HubClient(hub)

    def logged(text):
        return sum(text in r.getMessage() for r in caplog.records)
    try:
        with caplog.at_level(logging.WARNING, logger="murmur_wsgi.hub.push.dispatcher"):
            server.stop()
            wait_until(lambda: logged("could not read the store"), timeout=10)
            restarted = RedisServer(tmp_path, port=server.port).start()
            wait_until(lambda: "result" in rpc.call("ListTasks", {}).get_json(), timeout=10)
            rpc.send("after", configuration={"returnImmediately": True,
                                             "taskPushNotificationConfig": {
                                                 "url": receiver.url()}})
            got = receiver.wait_for(3)
            wait_until(lambda: logged("reads the store again"), timeout=10)
        assert [state_of(r) for r in got] == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                                              "TASK_STATE_COMPLETED"]
        assert logged("could not read the store") == 1          # once per outage
    finally:
        hub.close(drain_timeout=5)
        server.stop()
        restarted.stop()
