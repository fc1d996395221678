"""Filtered ListTasks reads only its page: its work does not grow with the tasks stored.

Counted, not timed: each listing runs through the hub over a few hundred tasks, then over
ten times as many, and does the same work both times: on the memory store the same Python
lines run (``sys.settrace``), and no task is read but the page's; on Redis the same commands
are sent, the ids they answer are counted, and no record is read but the page's.

The tasks are made by the store's own API (memory), or its CREATE script in pipelines
(Redis); each is refused at its creation (one step) in one of ten contexts.
"""
from __future__ import annotations

import collections
import sys
import threading
import uuid

import pytest
import redis

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.store import memory_index, redis_scripts
from murmur_wsgi.hub.task import REJECTED, HubTask
from murmur_wsgi.wire.task import now_ms, rfc3339

from tests.hub.conftest import HubClient, close_hub, hub_config

SIZES = (1_000, 10_000)           # tasks stored at each count, the second ten times the first
BATCH = 2_000
EMPTY = {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}


def _tasks(start: int, stop: int):
    for i in range(start, stop):
        message_id = f"m{i}"
        task = HubTask(uuid.uuid4().hex, f"c{i % 10}", "acme", "echo", message_id,
                       {"messageId": message_id, "role": "ROLE_USER", "parts": []})
        task.set_state(REJECTED, None)
        if i == 0:
            task.status_ms -= 10_000        # the one task not changed since it
        yield task


def _fill(store, start: int, stop: int) -> None:
    if not store.shared:
        for task in _tasks(start, stop):
            store.create(task, task.task_event(), bind=False)
        return
    create = store._redis.register_script(redis_scripts.CREATE)
    pipe = store._redis.pipeline(transaction=False)
    for i, task in enumerate(_tasks(start, stop), 1):
        create(**store.create_call(task, task.task_event(), bind=False), client=pipe)
        if i % BATCH == 0:
            pipe.execute()
    pipe.execute()


# The lines a page runs may differ by a few between sizes where a clock's text is made
# afresh (a new second, a millisecond's text first met); reading the tasks the larger size
# adds would run thousands more.
CLOCK_LINES = 64


def _grew(work: dict) -> dict:
    """The listings whose work differs between the two sizes (Redis: the commands sent;
    memory: the lines run, within ``CLOCK_LINES``)."""
    return {name: (a, b) for name, (a, b) in work.items()
            if (abs(a - b) > CLOCK_LINES if isinstance(a, int) else a != b)}


class _Lines:
    """The Python lines this thread runs while in the block (every function's)."""

    def __init__(self):
        self.count = 0

    def _local(self, frame, event, arg):
        if event == "line":
            self.count += 1
        return self._local

    def _global(self, frame, event, arg):
        return self._local

    def __enter__(self):
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)


@pytest.fixture
def reads(monkeypatch):
    """What a block reads, in this thread: the tasks the memory store's index turns into
    tasks, and on Redis each command sent (its name) and the items of its list replies."""
    seen = {"tasks": 0, "commands": collections.Counter(), "items": 0}
    me = threading.get_ident()
    as_task = memory_index.as_task
    parse = redis.Redis.parse_response

    def counted_task(record):
        seen["tasks"] += threading.get_ident() == me
        return as_task(record)

    def counted_parse(self, connection, command_name, **options):
        reply = parse(self, connection, command_name, **options)
        if threading.get_ident() == me:
            seen["commands"][command_name.upper()] += 1
            seen["items"] += len(reply) if isinstance(reply, list) else 0
        return reply

    def reset():
        seen.update(tasks=0, commands=collections.Counter(), items=0)
        return seen

    monkeypatch.setattr(memory_index, "as_task", counted_task)
    monkeypatch.setattr(redis.Redis, "parse_response", counted_parse)
    return reset


LISTINGS = {
    "status": {"status": "TASK_STATE_WORKING"},
    "contextId": {"contextId": "no-such-context"},
    "contextId+status": {"contextId": "c3", "status": "TASK_STATE_COMPLETED"},
    "statusTimestampAfter": {"statusTimestampAfter": None},
    "statusTimestampAfter+status": {"statusTimestampAfter": None,
                                    "status": "TASK_STATE_REJECTED"},
}


def test_a_listing_that_matches_nothing_reads_no_task(hub, reads):
    rpc = HubClient(hub)
    later = rfc3339(now_ms() + 60_000)
    work = {}
    stored = 0
    for size in SIZES:
        _fill(hub.store, stored, size)
        stored = size
        assert rpc.result("ListTasks", {"pageSize": 1})["totalSize"] == size
        for name, params in LISTINGS.items():
            params = {k: later if v is None else v for k, v in params.items()}
            assert rpc.result("ListTasks", params) == EMPTY, name     # warm, as the next
            seen = reads()
            with _Lines() as lines:
                assert rpc.result("ListTasks", params) == EMPTY, name
            assert seen["tasks"] == 0 and seen["items"] == 0, (name, seen)
            assert "HGETALL" not in seen["commands"], (name, seen)
            # Redis: the same commands at both sizes; memory: the same lines run.
            key = dict(seen["commands"]) if hub.store.shared else lines.count
            work.setdefault(name, []).append(key)
    grew = _grew(work)
    assert not grew, grew


def test_tasks_changed_since_are_matched_without_reading_each(reads):
    """The memory store: statusTimestampAfter keeping all but the oldest task, with or without
    other filters, matches their seqs as sets and reads only its page: as many tasks read at
    either size, and (a status, or no other filter) the same lines run (it read every
    changed task: 60-265 ms over 100,000)."""
    h = create_hub(hub_config(store="memory"))     # Redis's cost: docs/hub.md
    try:
        rpc = HubClient(h)
        cases = {"alone": {}, "contextId": {"contextId": "c3"},
                 "none": {"contextId": "no-such-context"},
                 "status": {"status": "TASK_STATE_REJECTED"}}
        work, stored = {}, 0
        for size in SIZES:
            _fill(h.store, stored, size)
            stored = size
            updated = h.store._indexes._updated.get(("acme", "echo"))
            after = rfc3339(min(key[0] for key in updated if key is not None))
            for name, params in cases.items():
                params = {"statusTimestampAfter": after, **params}
                rpc.result("ListTasks", params)                 # warm, as the next
                seen = reads()
                with _Lines() as lines:
                    page = rpc.result("ListTasks", params)
                assert seen["tasks"] == len(page["tasks"]), (name, seen)
                if name != "none":
                    assert len(page["tasks"]) == 50 and page["nextPageToken"]
                    context = size // 10 if name == "contextId" else size
                    assert page["totalSize"] == context - (name != "contextId"), name
                else:
                    assert page == EMPTY
                if name != "contextId":          # a context's tasks are asked their times
                    work.setdefault(name, []).append(lines.count)
        grew = _grew(work)
        assert not grew, grew
    finally:
        close_hub(h)
