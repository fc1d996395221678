"""A tenant's backlog of due push configs (a receiver slower than its events): a look of
the dispatcher finds no more of a tenant's configs than its delivery slots can take, a
refused lease leaves the tenant's other configs untried, and the backlog still drains at
once as slots free."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.push.dispatcher import Dispatcher
from murmur_wsgi.hub.store import redis_push, redis_push_looks
from murmur_wsgi.hub.store.push_base import TENANT_DELIVERIES, PushRecord
from tests.hub.push_util import cert, receiver  # noqa: F401
from tests.hub.test_push_redis import (redis_push_hub, redis_url, rstores,  # noqa: F401
                                       two_held_of)
from tests.hub.test_push_storage import a_task, push, record  # noqa: F401

pytestmark = pytest.mark.cluster          # every store test on a Redis Cluster too

BACKLOG = 40


def test_a_look_finds_a_tenants_backlog_only_as_far_as_its_slots(stores, push):  # noqa: F811
    for i in range(BACKLOG):
        a_task(stores, task_id=f"t{i}")
        push.push_save(record(task_id=f"t{i}"), from_start=True)
    due = push.push_due("me", 0)
    assert len(due) == TENANT_DELIVERIES                   # not the whole backlog
    assert all(push.push_lease(found, "me") for found in due)
    # The tenant's slots are taken: what another replica finds it cannot lease.
    later = push.push_due("r1", 0)
    assert len(later) <= TENANT_DELIVERIES
    assert not [found for found in later if push.push_lease(found, "r1")]
    # Another tenant's config is due beside the backlog.
    a_task(stores, tenant="globex", task_id="g1")
    push.push_save(record(task_id="g1", tenant="globex"), from_start=True)
    assert "g1" in {found.task_id for found in push.push_due("r1", 0)}


class _Backlogged:
    """A store whose look finds many configs of one tenant, whose leases are refused."""

    def __init__(self, records):
        self.records = records
        self.leases: list[str] = []

    def push_due(self, owner, timeout, skip=frozenset()):
        return [r for r in self.records if r.key not in skip]

    def push_lease(self, record, owner):
        self.leases.append(record.task_id)
        return False


def test_a_refused_lease_leaves_its_tenants_other_configs_untried():
    backlog = [PushRecord("acme", "echo", f"t{i}", "c1", "https://h.example/a", None)
               for i in range(BACKLOG)]
    other = PushRecord("globex", "echo", "g1", "c1", "https://h.example/a", None)
    store = _Backlogged([*backlog, other])
    dispatcher = Dispatcher(store, tasks=None, sender=None)
    blocked: set = set()
    dispatcher._turn(blocked)
    assert store.leases == ["t0", "g1"]                    # one refusal a tenant
    assert blocked == {r.key for r in [*backlog, other]}   # the rest wait for a next turn


@pytest.mark.timed
def test_a_backlog_drains_as_slots_free_not_a_look_at_a_time(receiver, redis_url):  # noqa: F811
    """Redis: a look leaves a tenant's configs past its slots for later; each config that
    leaves a slot brings the next ones to look at, so the backlog is not delivered two
    configs a full look (one a second)."""
    # NOTE: the tenant may run all 20 at once: on a loaded machine their runs overlap, and
    # past the default 4 runs at once a task is REJECTED (one notification, not three).
    hub = redis_push_hub(receiver, redis_url, runs=20)
    configs = hub.stores.push
    scans = []
    once = configs._push_due_once

    def counted(owner, skip, names=None):
        if names is None:
            scans.append(1)
        return once(owner, skip, names)

    try:
        two_held_of(hub, receiver, 20)
        configs._push_due_once = counted
        receiver.hold.set()
        receiver.wait_for(20 * 3)              # SUBMITTED, WORKING, COMPLETED of each
        assert len(scans) <= 3, scans          # two configs a look: 9 looks, 9 s at least
    finally:
        receiver.hold.set()
        hub.close(drain_timeout=5)


def test_a_full_look_on_redis_reads_a_tenants_backlog_only_as_far_as_its_first(
        rstores, monkeypatch):  # noqa: F811
    """Redis: a full look reads the configs a tenant listed first, not its whole backlog
    (before, every name of push:active: a backlog of 30,000 configs cost each worker
    88 ms a look, every second); the rest are read as the first leave the list, and
    another tenant's config is due beside it."""
    push = rstores.push
    monkeypatch.setattr(redis_push_looks, "LISTED_PER_TENANT", 4, raising=False)
    for i in range(BACKLOG):
        a_task(rstores, task_id=f"t{i}")
        push.push_save(record(task_id=f"t{i}"), from_start=True)
    a_task(rstores, tenant="globex", task_id="g1")
    push.push_save(record(task_id="g1", tenant="globex"), from_start=True)
    read = []
    looked = redis_push.looked

    def spied(redis, due, tenants, names, passed_over, *rest):
        read.append(len(names))
        return looked(redis, due, tenants, names, passed_over, *rest)

    monkeypatch.setattr(redis_push, "looked", spied)
    seen: list = []
    for _ in range(BACKLOG):
        due = push.push_due("me", 0)
        assert read[0] <= 4 + 1, read               # acme's first 4, globex's 1
        assert "g1" in {r.task_id for r in due} or "g1" in seen
        seen += [r.task_id for r in due]
        for found in due:                           # gone: the look drops its name
            assert push.push_delete(found.tenant, "echo", found.task_id, found.id)
        read.clear()
        if len(set(seen)) == BACKLOG + 1:
            break
    assert set(seen) == {f"t{i}" for i in range(BACKLOG)} | {"g1"}
    assert seen[:TENANT_DELIVERIES + 1].count("g1") == 1
    client = rstores.tasks._redis
    push.push_due("me", 0)                          # the last ones dropped
    assert client.smembers("murmur:{hub}:push:tenants") == set()
    assert client.keys("murmur:{hub}:push:active*") == []


def test_a_full_look_on_redis_reaches_a_config_listed_after_a_tenants_first_waiting_ones(
        rstores, monkeypatch):  # noqa: F811
    """Redis: a tenant's first listed configs all waiting on running tasks (caught up) do
    not hide its later ones: a config listed after them whose events are due is due at a
    full look, and one that waits is watched."""
    push = rstores.push
    monkeypatch.setattr(redis_push_looks, "LISTED_PER_TENANT", 4, raising=False)
    for i in range(8):                              # two pages, every config waiting
        a_task(rstores, task_id=f"w{i}")
        assert push.push_save(record(task_id=f"w{i}"), from_start=False).cursor == 1
    a_task(rstores, task_id="zlate")
    push.push_save(record(task_id="zlate"), from_start=True)    # its creation is due
    due, waiting, _ = push._push_due_once("me", frozenset())
    assert [r.task_id for r in due] == ["zlate"]
    assert {name.split("/")[1] for name in waiting} == {f"w{i}" for i in range(8)}
    assert [r.task_id for r in push.push_due("me", 0)] == ["zlate"]
