"""Push configs and delivery leases (store/push_base.py's contract) on both stores: memory
(a test clock, no sleeps) and a real redis-server, where owners are replicas whose liveness
keys live for the test."""
from __future__ import annotations

import time

import pytest

from murmur_wsgi.hub.store.push_base import (DELIVERED, DROPPED, LEASE_SECS, MAX_FAILURES,
                                             SKIPPED, TASK_GONE, PushRecord)
from murmur_wsgi.hub.task import HubTask

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

OWNERS = ("me", "r1", "r2")


def alive(client, *owners):
    for owner in owners:
        client.set(f"murmur:{{hub}}:replica:{owner}", "1", px=60_000)


@pytest.fixture
def push(stores):
    """The push configs of ``stores``, their owners alive (on Redis a lease counts while its
    owner lives)."""
    if stores.shared:
        alive(stores.tasks._redis, *OWNERS)
    return stores.push


def a_task(stores, tenant="acme", agent="echo", task_id="t1"):
    task = HubTask(task_id, "ctx", tenant, agent, f"m-{task_id}", {"messageId": "m"})
    stores.tasks.create(task, task.task_event())
    return task


def record(task_id="t1", config_id="c1", tenant="acme", agent="echo"):
    return PushRecord(tenant, agent, task_id, config_id, "https://h.example/a", None)


def test_save_from_start_or_only_later(stores, push):
    a_task(stores)
    assert push.push_save(record(config_id="a"), from_start=True).cursor == 0
    assert push.push_save(record(config_id="b"), from_start=False).cursor == 1
    assert [r.id for r in push.push_due("me", 0)] == ["a"]


def test_scoped_to_tenant_and_agent(stores, push):
    a_task(stores)
    push.push_save(record(), from_start=True)
    assert push.push_get("acme", "echo", "t1", "c1").id == "c1"
    assert push.push_get("other", "echo", "t1", "c1") is None
    assert push.push_get("acme", "other", "t1", "c1") is None
    assert push.push_list("other", "echo", "t1") == []
    assert push.push_delete("other", "echo", "t1", "c1") is False
    assert push.push_delete("acme", "echo", "t1", "c1") is True


def test_at_most_ten_per_task_replace_allowed(stores, push):
    a_task(stores)
    for i in range(10):
        assert push.push_save(record(config_id=f"c{i}"), from_start=True) is not None
    assert push.push_save(record(config_id="c10"), from_start=True) is None
    assert push.push_save(record(config_id="c3"), from_start=True).generation == 2


def test_a_config_of_a_task_gone_is_not_kept(stores, push):
    # The methods find the task first; retention may forget it before the config is saved
    # (or it never was): nothing is kept, and a task of that id later has no config.
    assert push.push_save(record(), from_start=True) is TASK_GONE
    assert push.push_save(record(config_id="c2"), from_start=False) is TASK_GONE
    a_task(stores)
    assert push.push_list("acme", "echo", "t1") == []
    assert push.push_get("acme", "echo", "t1", "c1") is None
    assert push.push_due("me", 0) == []
    if not stores.shared:
        assert (push._push, push._push_ids, push._push_active) == ({}, {}, {})


@pytest.mark.one_store             # the memory store's test clock moves the lease's time
def test_one_owner_at_a_time_and_the_lease_expires(stores, push, clock):
    a_task(stores)
    saved = push.push_save(record(), from_start=True)
    assert push.push_lease(saved, "r1") is True
    assert push.push_lease(saved, "r2") is False
    assert push.push_due("r2", 0) == []                 # leased: not due for anyone
    clock.now += LEASE_SECS - 1
    assert push.push_lease(saved, "r2") is False
    clock.now += 1
    assert push.push_lease(saved, "r2") is True         # r1 died: its lease ran out
    assert push.push_advance(saved, "r1", 1, DELIVERED) is None    # r1 lost it
    assert push.push_advance(saved, "r2", 1, DELIVERED).cursor == 1


def test_at_most_two_configs_of_a_tenant_at_once(stores, push):
    for task_id in ("t1", "t2", "t3"):
        a_task(stores, task_id=task_id)
    a_task(stores, tenant="globex", task_id="g1")
    saved = [push.push_save(record(task_id=t), from_start=True) for t in ("t1", "t2", "t3")]
    other = push.push_save(record(task_id="g1", tenant="globex"), from_start=True)
    assert push.push_lease(saved[0], "r1") is True
    assert push.push_lease(saved[1], "r2") is True
    assert push.push_lease(saved[2], "r1") is False     # the tenant has two
    assert push.push_lease(other, "r1") is True         # another tenant is not held back
    assert push.push_lease(saved[0], "r1") is True      # renewing is not a third
    push.push_release(saved[1], "r2")
    assert push.push_lease(saved[2], "r1") is True


def test_a_deleted_config_holds_its_slot_until_its_delivery_gives_it_back(stores, push):
    # NOTE: a delete freed the slot of a config being delivered while its delivery went
    # on: a tenant that deleted each config once its delivery started had six of them in
    # flight at once to a slow receiver, not two.
    for task_id in ("t1", "t2", "t3"):
        a_task(stores, task_id=task_id)
    saved = [push.push_save(record(task_id=t), from_start=True) for t in ("t1", "t2", "t3")]
    assert push.push_lease(saved[0], "r1") and push.push_lease(saved[1], "r1")
    assert push.push_delete("acme", "echo", "t1", "c1") is True
    assert push.push_lease(saved[2], "r1") is False     # t1's delivery still goes on
    assert push.push_advance(saved[0], "r1", 1, DELIVERED) is None
    push.push_release(saved[0], "r1")
    assert push.push_lease(saved[2], "r1") is True


def test_advance_counts_failures_and_disables(stores, push):
    a_task(stores)
    saved = push.push_save(record(), from_start=True)
    assert push.push_lease(saved, "r1")
    current = saved
    for seq in range(1, MAX_FAILURES):
        current = push.push_advance(current, "r1", seq, DROPPED, "HTTP 500")
        assert current.failures == seq and not current.disabled
    current = push.push_advance(current, "r1", 9, SKIPPED)
    assert current.failures == MAX_FAILURES - 1          # a skipped event changes nothing
    current = push.push_advance(current, "r1", 10, DROPPED, "HTTP 500")
    assert current.disabled and current.disabled_ms is not None
    assert push.push_due("r2", 0) == []
    again = push.push_save(record(), from_start=False)
    assert (again.failures, again.disabled, again.last_error) == (0, False, None)


def test_a_delivery_resets_the_count(stores, push):
    a_task(stores)
    saved = push.push_save(record(), from_start=True)
    push.push_lease(saved, "r1")
    current = push.push_advance(saved, "r1", 1, DROPPED, "HTTP 500")
    current = push.push_advance(current, "r1", 2, DELIVERED)
    assert current.failures == 0 and current.last_error == "HTTP 500"


def test_a_replaced_config_is_not_advanced_by_its_old_delivery(stores, push):
    a_task(stores)
    saved = push.push_save(record(), from_start=True)
    push.push_lease(saved, "r1")
    push.push_save(record(), from_start=False)
    assert push.push_advance(saved, "r1", 1, DELIVERED) is None


@pytest.mark.one_store   # Redis holds back a config whose pending events are chunks only
def test_due_waits_for_an_event(stores, push):
    task = a_task(stores)
    saved = push.push_save(record(), from_start=False)
    assert push.push_due("r1", 0) == []
    stores.tasks.append(task.id, '{"artifactUpdate":{}}')
    assert [r.key for r in push.push_due("r1", 0)] == [saved.key]
    assert push.push_due("r1", 0, skip={saved.key}) == []


def test_a_wake_between_looks_is_kept_for_the_next(stores, push):
    """``notify_push`` while no look waits (a dispatcher's close() between its turns): the
    next look returns at once, not after its whole wait (the memory store's was lost, and
    close() then waited a dispatcher's idle second for its loop); the one after waits."""
    push.notify_push()
    started = time.monotonic()
    assert push.push_due("r1", 30) == []
    assert time.monotonic() - started < 10
    started = time.monotonic()
    assert push.push_due("r1", 0.05) == []
    assert time.monotonic() - started >= 0.05
