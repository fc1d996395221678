"""A config catching up on its task's events (the dispatcher's ``_catch_up``): its task is
read for the final body only, not for every page of events."""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.hub.push.dispatcher import Dispatcher
from murmur_wsgi.hub.task import COMPLETED
from tests.hub.test_push_storage import a_task, push, record  # noqa: F401

pytestmark = pytest.mark.cluster          # every store test on a Redis Cluster too

CHUNKS = 200                  # artifact chunks (never sent): on Redis, pages of 64 events


class _Counted:
    """A task store whose ``get`` calls are counted."""

    def __init__(self, tasks):
        self._tasks = tasks
        self.gets = 0

    def get(self, *args):
        self.gets += 1
        return self._tasks.get(*args)

    def __getattr__(self, name):
        return getattr(self._tasks, name)


class _Delivered:
    """A sender that delivers every event at once, keeping each body."""

    def __init__(self):
        self.bodies: list = []

    def send(self, record, seq, body):
        self.bodies.append(json.loads(body))
        return True, None


def test_a_config_catching_up_reads_its_task_for_the_final_body_only(stores, push):  # noqa: F811
    task = a_task(stores)
    stores.tasks.start(task.id)
    chunk = json.dumps({"artifactUpdate": {"taskId": task.id, "contextId": "ctx",
                                           "artifact": {"artifactId": "a", "parts": []}}})
    for _ in range(CHUNKS):
        assert stores.tasks.append(task.id, chunk)
    assert stores.tasks.end(task.id, COMPLETED, None, None, []) is not None
    saved = push.push_save(record(), from_start=True)
    assert push.push_lease(saved, "me")
    tasks, sender = _Counted(stores.tasks), _Delivered()
    dispatcher = Dispatcher(push, tasks, sender)
    dispatcher.owner = "me"
    dispatcher._catch_up(saved)
    states = [(body.get("task") or body["statusUpdate"])["status"]["state"]
              for body in sender.bodies]
    assert states == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    # NOTE: before, once per page of events and once more: on Redis a task of a 59 MB
    # answer was read whole 50 times for one config (10.8 s of the worker's CPU).
    assert tasks.gets == 1
    assert push.push_get("acme", "echo", "t1", "c1").cursor == CHUNKS + 3


def test_a_tasks_configs_share_its_final_body(stores, push):  # noqa: F811
    task = a_task(stores)
    stores.tasks.start(task.id)
    assert stores.tasks.end(task.id, COMPLETED, None, None, []) is not None
    saved = [push.push_save(record(config_id=f"c{i}"), from_start=True) for i in range(3)]
    tasks, sender = _Counted(stores.tasks), _Delivered()
    dispatcher = Dispatcher(push, tasks, sender)
    dispatcher.owner = "me"
    for config in saved:
        assert push.push_lease(config, "me")
        dispatcher._catch_up(config)
        push.push_release(config, "me")
    finals = [body for body in sender.bodies if "task" in body
              and body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"]
    assert len(finals) == 3 and finals[0] == finals[1] == finals[2]
    # NOTE: before, each config read the task again for the same body (on Redis, a task of
    # a 59 MB answer: 0.16 s to 0.7 s of the worker's CPU each, ten configs a task).
    assert tasks.gets == 1
