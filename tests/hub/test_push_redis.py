"""Push configs and leases on a real redis-server (store/redis_push.py), replicas sharing it.

The contract tests of the memory store (test_push_storage.py) run here again on Redis,
where owners are replicas: a lease counts while its holder's liveness key lives. Then
what only Redis has: a dead holder's lease and tenant slot taken over, a waiting
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
from murmur_wsgi.hub.push.storage import DELIVERED, PushRecord
from murmur_wsgi.hub.store import redis_push
from murmur_wsgi.hub.store.redis_push import RedisPushStore
from murmur_wsgi.hub.store.redis_push_scripts import SKIP_BATCH
from murmur_wsgi.hub.task import COMPLETED
from tests.hub.push_util import Resolver, Sleeps, cert, push_config, receiver  # noqa: F401
from tests.hub.conftest import HubClient, wait_until
from tests.hub.test_push_storage import (  # noqa: F401 - the same contract, on Redis
    a_task, record, test_a_delivery_resets_the_count,
    test_a_replaced_config_is_not_advanced_by_its_old_delivery,
    test_advance_counts_failures_and_disables, test_at_most_ten_per_task_replace_allowed,
    test_at_most_two_configs_of_a_tenant_at_once, test_save_from_start_or_only_later, test_scoped_to_tenant_and_agent)
from tests.redis_util import RedisServer

OWNERS = ("me", "r1", "r2")


def alive(server, *owners):
    client = server.client()
    for owner in owners:
        client.set(f"murmur:hub:replica:{owner}", "1", px=60_000)
    client.close()


@pytest.fixture
def redis_url(redis_server):
    redis_server.flush()
    alive(redis_server, *OWNERS)
    return redis_server.url


@pytest.fixture
def store(redis_url):
    s = RedisPushStore(redis_url, replica_id="me")
    yield s
    s.close()


def test_a_dead_holders_lease_and_slot_are_taken_over(store, redis_server):
    for task_id in ("t1", "t2", "t3"):
        a_task(store, task_id=task_id)
    saved = [store.push_save(record(task_id=t), from_start=True) for t in ("t1", "t2", "t3")]
    assert store.push_lease(saved[0], "r1") and store.push_lease(saved[1], "r1")
    assert store.push_lease(saved[0], "r2") is False     # r1 lives: its lease holds
    assert store.push_lease(saved[2], "r2") is False     # and its two slots count
    assert {r.task_id for r in store.push_due("r2", 0)} == {"t3"}
    assert {r.task_id for r in store.push_due("r1", 0)} == {"t1", "t2", "t3"}   # its own
    redis_server.client().delete("murmur:hub:replica:r1")        # r1 died (SIGKILL)
    assert {r.task_id for r in store.push_due("r2", 0)} == {"t1", "t2", "t3"}
    assert store.push_lease(saved[2], "r2") is True
    assert store.push_lease(saved[0], "r2") is True
    assert store.push_advance(saved[0], "r1", 1, DELIVERED) is None   # r1 lost it
    assert store.push_advance(saved[0], "r2", 1, DELIVERED).cursor == 1


CHUNK = '{"artifactUpdate":{}}'


def test_due_waits_for_an_event_not_for_chunks_alone(store):
    task = a_task(store)
    saved = store.push_save(record(), from_start=False)
    assert store.push_due("r1", 0) == []
    store.append(task.id, CHUNK)
    assert store.push_due("r1", 0) == []                 # a chunk alone is never sent
    store.append(task.id, '{"statusUpdate":{}}')
    assert [r.key for r in store.push_due("r1", 0)] == [saved.key]
    assert store.push_due("r1", 0, skip={saved.key}) == []


def test_chunks_pile_up_to_a_batch_then_the_cursor_catches_up(store):
    task = a_task(store)
    store.push_save(record(), from_start=False)
    for _ in range(SKIP_BATCH - 1):
        store.append(task.id, CHUNK)
    assert store.push_due("r1", 0) == []
    store.append(task.id, CHUNK)
    assert len(store.push_due("r1", 0)) == 1


def test_a_streamed_run_wakes_no_dispatcher_until_a_status(store, redis_url, monkeypatch):
    monkeypatch.setattr(redis_push, "FULL_SCAN_SECS", 60.0)     # as below: no full scan
    other = RedisPushStore(redis_url, replica_id="r1")
    streamer = None
    try:
        task = a_task(store)
        store.push_save(record(), from_start=False)

        def stream():
            for _ in range(5):
                other.append(task.id, CHUNK)
            other.append(task.id, '{"statusUpdate":{}}')
        streamer = threading.Timer(0.05, stream)
        streamer.start()
        due = store.push_due("me", 10.0)                  # one call: the chunks did not end it
        assert [r.key for r in due] == [("t1", "c1")] and due[0].cursor == 1
    finally:
        if streamer is not None:
            streamer.join(10)           # its appends have their answers before the client closes
        other.close()


def test_a_waiting_due_wakes_on_another_replicas_event(store, redis_url, monkeypatch):
    # No full scan while it waits (it would find the config as well): only a wake-up can,
    # however late the event comes on a loaded machine; without one the wait ends with [].
    monkeypatch.setattr(redis_push, "FULL_SCAN_SECS", 60.0)
    other = RedisPushStore(redis_url, replica_id="r1")
    event = None
    try:
        task = a_task(store)
        store.push_save(record(), from_start=False)
        assert store.push_due("me", 0) == []
        event = threading.Timer(0.05, other.append, (task.id, '{"statusUpdate":{}}'))
        event.start()
        due = store.push_due("me", 10.0)
        assert [r.key for r in due] == [("t1", "c1")]
    finally:
        if event is not None:
            event.join(10)              # its append has its answer before the client closes
        other.close()


def test_configs_expire_with_the_tasks_events(store, redis_server):
    task = a_task(store)
    saved = store.push_save(record(), from_start=False)
    assert store.end(task.id, COMPLETED, None, None, []) is not None
    assert store.push_lease(saved, "me")
    store.push_advance(saved, "me", 2, DELIVERED)
    assert store.push_due("me", 0) == []                 # caught up on a final task: done
    client = redis_server.client()
    assert client.pttl("murmur:hub:push:t1") > 0
    assert client.smembers("murmur:hub:push:active") == set()
    fields = json.loads(client.hget("murmur:hub:push:t1", "c1"))
    assert fields["cursor"] == 2 and "secret" not in json.dumps(fields)


def test_a_record_round_trips(store):
    a_task(store)
    saved = store.push_save(PushRecord("acme", "echo", "t1", "c1", "https://h.example/a",
                                       "tok"), from_start=True)
    assert store.push_get("acme", "echo", "t1", "c1") == saved
    assert (saved.token, saved.generation, saved.cursor) == ("tok", 1, 0)
    assert store.push_list("acme", "echo", "t1") == [saved]


def state_of(received) -> str:
    body = received.json
    return (body.get("task") or body["statusUpdate"])["status"]["state"]


def redis_push_hub(receiver, url):
    config = push_config(receiver)
    config["store"] = url
    config["redis"] = {"liveness_secs": 2, "sweep_interval_secs": 0.5}
    hub = create_hub(config)
    hub.sleeps = Sleeps()
    hub.push.sender.sleep = hub.sleeps
    hub.push.egress.resolver = Resolver()
    return hub


def test_two_hubs_deliver_each_config_once_in_order_two_per_tenant(receiver, redis_url):
    a, b = redis_push_hub(receiver, redis_url), redis_push_hub(receiver, redis_url)
    try:
        receiver.hold.clear()
        rpc = HubClient(a)
        for i in range(3):
            rpc.send(f"t{i}", configuration={"returnImmediately": True,
                                              "taskPushNotificationConfig": {
                                                  "url": receiver.url()}})
        with receiver.cond:
            assert receiver.cond.wait_for(lambda: receiver.in_flight == 2, 10)
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
