"""Retention against a model: for any caps and any sequence of ends, refusals and runs, a
store forgets a tenant's oldest finished tasks first and nothing else, and its sums never
drift.

Each example is a tenant of its own with its own ``max_per_tenant``, batch and
``max_bytes_per_tenant``, ending tasks of any size (COMPLETED or FAILED, with events, or
REJECTED at once) while others run and end later. After every step:

- the finished tasks kept are the newest ones: those forgotten are the oldest, every key
  of theirs gone; the newest is kept at its own end, and a running task always;
- the store's sizes are exactly those of the tasks it keeps, and its sum (Redis: the
  tenant's ``bytes``) is theirs;
- it keeps fewer than a batch more than its count's cap, and at most
  ``max_bytes_per_tenant`` but for its newest task's;
- ListTasks counts what it keeps.

On the memory store and on a redis-server (the Cluster runs the same scripts: the
example-based tests in test_retention_bytes.py run there).
"""
from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_wsgi.hub.store import memory_stores, redis_stores
from murmur_wsgi.hub.store.retention import Retention
from murmur_wsgi.hub.task import COMPLETED, FAILED, REJECTED, HubTask
from tests.hub.conftest import module_store
from tests.hub.retention_util import ended, keys_of, kept, sizes, total

pytestmark = pytest.mark.one_store          # the module's own stores: memory and Redis


@pytest.fixture(scope="module", params=["memory", "redis"])
def stores(request):
    store = module_store(request)
    found = memory_stores() if store == "memory" else redis_stores(store, timeout_secs=2.0,
                                                                   replica_id="model")
    yield found
    found.close()


steps = st.lists(st.one_of(
    st.tuples(st.just("end"), st.integers(0, 12_000), st.sampled_from([COMPLETED, FAILED]),
              st.integers(0, 3)),
    st.tuples(st.just("refuse"), st.integers(0, 6_000)),
    st.tuples(st.just("open"),),
    st.tuples(st.just("close"), st.integers(0, 12_000))), min_size=1, max_size=24)
caps = st.tuples(st.integers(1, 12), st.integers(1, 5), st.integers(3_000, 60_000))


def _open(stores, tenant: str) -> HubTask:
    message_id = uuid.uuid4().hex
    task = HubTask(str(uuid.uuid4()), "ctx", tenant, "echo", message_id,
                   {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "run"}]})
    stores.tasks.create(task, task.task_event())
    stores.tasks.start(task.id)
    return task


@settings(max_examples=60, deadline=None, database=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(script=steps, cap=caps)
def test_retention_forgets_the_oldest_finished_and_keeps_its_sums(stores, script, cap):
    count_cap, batch, byte_cap = cap
    retention = Retention(3600.0, count_cap, batch=batch, max_bytes=byte_cap)
    stores.tasks._keep = retention
    tenant = "t-" + uuid.uuid4().hex[:12]
    finished, running = [], []                  # finished: in the order of their ends
    for step in script:
        if step[0] == "end":
            _, size, state, events = step
            finished.append(ended(stores, tenant, size=size, state=state,
                                  events=['{"n":"%s"}' % ("e" * 300)] * events))
        elif step[0] == "refuse":
            finished.append(ended(stores, tenant, size=step[1], state=REJECTED))
        elif step[0] == "open":
            running.append(_open(stores, tenant))
        elif running:
            task = running.pop(0)
            assert stores.tasks.end(task.id, COMPLETED, "x" * step[1], None, []) is not None
            finished.append(task)
        else:
            continue
        flags = [kept(stores, task) for task in finished]
        assert not finished or flags[-1], step  # the newest is kept at its own end
        first = flags.index(True) if finished else 0
        assert flags == [False] * first + [True] * (len(finished) - first), (step, flags)
        assert all(not keys_of(stores, task.id) for task in finished[:first])
        assert all(kept(stores, task) for task in running)
        held = sizes(stores, tenant)
        assert set(held) == {task.id for task in finished[first:]}, step
        assert total(stores, tenant) == sum(held.values())
        assert len(held) < count_cap + retention.batch_of(count_cap), (step, len(held))
        newest = held[finished[-1].id] if finished else 0
        assert sum(held.values()) - newest <= byte_cap, (step, held)
        assert stores.tasks.list(tenant, "echo").total == len(held) + len(running)
