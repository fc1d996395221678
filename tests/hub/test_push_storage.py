"""Push configs and delivery leases behind the store interface (push/storage.py's contract),
on every store that keeps them: the memory store here (a test clock, no sleeps)."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.push.storage import (DELIVERED, DROPPED, LEASE_SECS, MAX_FAILURES,
                                          SKIPPED, PushRecord)
from murmur_wsgi.hub.store.memory import MemoryStore
from murmur_wsgi.hub.task import HubTask


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(clock):
    s = MemoryStore(clock=clock)
    yield s
    s.close()


def a_task(store, tenant="acme", agent="echo", task_id="t1"):
    task = HubTask(task_id, "ctx", tenant, agent, f"m-{task_id}", {"messageId": "m"})
    store.create(task, task.task_event())
    return task


def record(task_id="t1", config_id="c1", tenant="acme", agent="echo"):
    return PushRecord(tenant, agent, task_id, config_id, "https://h.example/a", None)


def test_save_from_start_or_only_later(store):
    a_task(store)
    assert store.push_save(record(config_id="a"), from_start=True).cursor == 0
    assert store.push_save(record(config_id="b"), from_start=False).cursor == 1
    assert [r.id for r in store.push_due("me", 0)] == ["a"]


def test_scoped_to_tenant_and_agent(store):
    a_task(store)
    store.push_save(record(), from_start=True)
    assert store.push_get("acme", "echo", "t1", "c1").id == "c1"
    assert store.push_get("other", "echo", "t1", "c1") is None
    assert store.push_get("acme", "other", "t1", "c1") is None
    assert store.push_list("other", "echo", "t1") == []
    assert store.push_delete("other", "echo", "t1", "c1") is False
    assert store.push_delete("acme", "echo", "t1", "c1") is True


def test_at_most_ten_per_task_replace_allowed(store):
    a_task(store)
    for i in range(10):
        assert store.push_save(record(config_id=f"c{i}"), from_start=True) is not None
    assert store.push_save(record(config_id="c10"), from_start=True) is None
    assert store.push_save(record(config_id="c3"), from_start=True).generation == 2


def test_one_owner_at_a_time_and_the_lease_expires(store, clock):
    a_task(store)
    saved = store.push_save(record(), from_start=True)
    assert store.push_lease(saved, "r1") is True
    assert store.push_lease(saved, "r2") is False
    assert store.push_due("r2", 0) == []                 # leased: not due for anyone
    clock.now += LEASE_SECS - 1
    assert store.push_lease(saved, "r2") is False
    clock.now += 1
    assert store.push_lease(saved, "r2") is True         # r1 died: its lease ran out
    assert store.push_advance(saved, "r1", 1, DELIVERED) is None    # r1 lost it
    assert store.push_advance(saved, "r2", 1, DELIVERED).cursor == 1


def test_at_most_two_configs_of_a_tenant_at_once(store):
    for task_id in ("t1", "t2", "t3"):
        a_task(store, task_id=task_id)
    a_task(store, tenant="globex", task_id="g1")
    saved = [store.push_save(record(task_id=t), from_start=True) for t in ("t1", "t2", "t3")]
    other = store.push_save(record(task_id="g1", tenant="globex"), from_start=True)
    assert store.push_lease(saved[0], "r1") is True
    assert store.push_lease(saved[1], "r2") is True
    assert store.push_lease(saved[2], "r1") is False     # the tenant has two
    assert store.push_lease(other, "r1") is True         # another tenant is not held back
    assert store.push_lease(saved[0], "r1") is True      # renewing is not a third
    store.push_release(saved[1], "r2")
    assert store.push_lease(saved[2], "r1") is True


def test_advance_counts_failures_and_disables(store):
    a_task(store)
    saved = store.push_save(record(), from_start=True)
    assert store.push_lease(saved, "r1")
    current = saved
    for seq in range(1, MAX_FAILURES):
        current = store.push_advance(current, "r1", seq, DROPPED, "HTTP 500")
        assert current.failures == seq and not current.disabled
    current = store.push_advance(current, "r1", 9, SKIPPED)
    assert current.failures == MAX_FAILURES - 1          # a skipped event changes nothing
    current = store.push_advance(current, "r1", 10, DROPPED, "HTTP 500")
    assert current.disabled and current.disabled_ms is not None
    assert store.push_due("r2", 0) == []
    again = store.push_save(record(), from_start=False)
    assert (again.failures, again.disabled, again.last_error) == (0, False, None)


def test_a_delivery_resets_the_count(store):
    a_task(store)
    saved = store.push_save(record(), from_start=True)
    store.push_lease(saved, "r1")
    current = store.push_advance(saved, "r1", 1, DROPPED, "HTTP 500")
    current = store.push_advance(current, "r1", 2, DELIVERED)
    assert current.failures == 0 and current.last_error == "HTTP 500"


def test_a_replaced_config_is_not_advanced_by_its_old_delivery(store):
    a_task(store)
    saved = store.push_save(record(), from_start=True)
    store.push_lease(saved, "r1")
    store.push_save(record(), from_start=False)
    assert store.push_advance(saved, "r1", 1, DELIVERED) is None


def test_due_waits_for_an_event(store):
    task = a_task(store)
    saved = store.push_save(record(), from_start=False)
    assert store.push_due("r1", 0) == []
    store.append(task.id, '{"artifactUpdate":{}}')
    assert [r.key for r in store.push_due("r1", 0)] == [saved.key]
    assert store.push_due("r1", 0, skip={saved.key}) == []
