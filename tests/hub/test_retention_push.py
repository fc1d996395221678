"""A task's push configs count toward its tenant's kept bytes (``tasks.max_bytes_per_tenant``)
on every store: added when saved (at the task's end when it still runs), the difference
when replaced, taken when deleted or forgotten with their task; so configs past a tenant's
bytes make retention forget its oldest finished tasks, their configs with them.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.store.push_base import MAX_CONFIGS_PER_TASK, PushRecord
from murmur_wsgi.hub.store.retention import Retention, task_bytes
from murmur_wsgi.hub.task import COMPLETED, HubTask

from tests.hub.retention_util import ended as _ended
from tests.hub.retention_util import kept as _kept
from tests.hub.retention_util import sizes as _sizes
from tests.hub.retention_util import total as _total

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

CAP = 64 * 1024
URL = "https://h.example/" + "u" * 2_000
TOKEN = "t" * 500


@pytest.fixture
def retention():
    """A cap of 100 tasks (batches of 10) and 64 KiB per tenant, for an hour."""
    return Retention(3600.0, 100, batch=10, max_bytes=CAP)


def _config(task, config_id, url=URL, token=TOKEN) -> PushRecord:
    return PushRecord(task.tenant, task.agent, task.id, config_id, url, token)


def _config_bytes(task_id, config_id, url=URL, token=TOKEN) -> int:
    return sum(len(text.encode()) for text in (task_id, config_id, url, token or ""))


def _own_bytes(stores, task) -> int:
    """The task's wire form and events: its bytes without its configs."""
    events, _ = stores.tasks.events(task.id, 0, 0, tenant=task.tenant)
    return task_bytes(stores.tasks.task_json(task.tenant, task.agent, task.id),
                      [event.payload for event in events])


def _counted(stores, task) -> int:
    """The task's bytes with its configs', as a tenant's kept bytes should count them."""
    return _own_bytes(stores, task) + sum(
        _config_bytes(task.id, config.id, config.url, config.token)
        for config in stores.push.push_list(task.tenant, task.agent, task.id))


def test_configs_past_a_tenants_bytes_forget_its_oldest_finished(stores):
    made = [_ended(stores, size=1_000) for _ in range(10)]
    assert _total(stores, "acme") < CAP / 2                  # the tasks alone: well within
    for task in made:
        for n in range(MAX_CONFIGS_PER_TASK):
            assert stores.push.push_save(_config(task, f"c{n}"), from_start=False)
    stores.tasks.expire_finished()                           # the sweep
    kept = [task for task in made if _kept(stores, task)]
    assert 1 <= len(kept) < len(made) and kept == made[len(made) - len(kept):]
    assert sum(_counted(stores, task) for task in kept) <= CAP
    assert _total(stores, "acme") == sum(_sizes(stores, "acme").values()) == \
        sum(_counted(stores, task) for task in kept)
    for task in made[:len(made) - len(kept)]:                # forgotten: their configs too
        assert stores.push.push_list("acme", "echo", task.id) == []
        assert stores.push.push_get("acme", "echo", task.id, "c0") is None


def test_a_tasks_configs_count_when_saved_replaced_deleted_and_at_its_end(stores):
    task = _ended(stores, size=100)
    push = stores.push
    push.push_save(_config(task, "a"), from_start=False)
    assert _sizes(stores, "acme")[task.id] == _counted(stores, task) > _own_bytes(stores, task)
    push.push_save(_config(task, "a", url="https://h.example/short", token=None), False)
    assert _sizes(stores, "acme")[task.id] == _counted(stores, task)        # the difference
    push.push_save(_config(task, "b"), from_start=False)
    assert push.push_delete("acme", "echo", task.id, "a")
    assert _sizes(stores, "acme")[task.id] == _counted(stores, task)
    assert push.push_delete("acme", "echo", task.id, "b")
    assert _sizes(stores, "acme")[task.id] == _own_bytes(stores, task)
    assert _total(stores, "acme") == _own_bytes(stores, task)
    # A running task's configs: counted at its end, with it.
    live = HubTask("live", "ctx", "acme", "echo", "m-live", {"messageId": "m-live"})
    stores.tasks.create(live, live.task_event())
    push.push_save(_config(live, "x"), from_start=True)
    push.push_save(_config(live, "y"), from_start=True)
    assert push.push_delete("acme", "echo", live.id, "y")
    assert live.id not in _sizes(stores, "acme")
    stores.tasks.start(live.id)
    assert stores.tasks.end(live.id, COMPLETED, None, None, []) is not None
    assert _sizes(stores, "acme")[live.id] == _counted(stores, live) > \
        _own_bytes(stores, live) + 2_000
    assert _total(stores, "acme") == sum(_sizes(stores, "acme").values())
