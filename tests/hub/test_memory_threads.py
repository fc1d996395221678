"""The memory store under real threads (the hub's ``--dev`` server: Werkzeug's threaded one).

A new message in a context reads the context's earlier tasks outside the store's lock
(their stored forms, measured against ``limits.history_bytes``: a running task's history
and artifacts). A running task's whole form was once encoded and cached there: a task
started meanwhile kept its old form cached, and GetTask answered the state it had before. The encoding below waits, in the reading thread, until
the task has changed: deterministic, no timing.
"""
from __future__ import annotations

import threading

from murmur_wsgi.hub import task as task_module
from murmur_wsgi.hub.store.counters import LocalCounters
from murmur_wsgi.hub.store.memory import MemoryTaskStore
from murmur_wsgi.hub.task import WORKING, HubTask


def _task(store) -> HubTask:
    task = HubTask("t-1", "ctx", "acme", "echo", "m1",
                   {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]})
    store.create(task, '{"task":{}}')            # its wire form not cached yet
    return task


def test_a_task_changed_while_its_context_is_read_is_not_cached_stale(monkeypatch):
    store = MemoryTaskStore()
    task = _task(store)
    encoding, resume, found = threading.Event(), threading.Event(), []
    encode = task_module.compact_utf8

    def encode_once_changed(value):
        if threading.current_thread() is reader:
            encoding.set()
            resume.wait(10)
        return encode(value)

    monkeypatch.setattr(task_module, "compact_utf8", encode_once_changed)
    reader = threading.Thread(
        target=lambda: found.append(store.context_tasks("acme", "echo", "ctx", 50, 1 << 20)))
    reader.start()
    try:
        assert encoding.wait(10), "the context's tasks were not encoded"
        assert store.start(task.id) is not None              # while its form is encoded
    finally:
        resume.set()
        reader.join(10)
    assert [read.id for read in found[0]] == ["t-1"]
    whole = store.task_json("acme", "echo", "t-1")
    assert '"state":"TASK_STATE_WORKING"' in whole, whole


def test_a_running_task_read_in_its_context_is_sized_by_its_history_and_keeps_no_form():
    """Its size is its history's and artifacts' JSON, as a Redis record's ``hist`` and
    ``arts``: no wire form is encoded, none is kept, and GetTask renders it as it is."""
    store = MemoryTaskStore()
    task = _task(store)
    [read] = store.context_tasks("acme", "echo", "ctx", 50, 1 << 20)
    assert read is task and task._json is None
    assert store._stored_sizes([task]) == [len(task.history_json().encode()) + len("[]")]
    store.start(task.id)
    assert '"state":"TASK_STATE_WORKING"' in store.render(task)


def test_a_message_accepted_under_threads_is_never_read_before_it_starts(monkeypatch):
    """The Redis store accepts a message in one step (its OPEN script): no reader finds its
    task before it starts. The memory store let go of its lock between the task's creation
    and its start: a thread reading in between (a second SendMessage of the same messageId
    on the ``--dev`` server: its claim, then its task) answered the task SUBMITTED. A
    reader there now finds the store held, and waits."""
    store = MemoryTaskStore()
    task = HubTask("t-1", "ctx", "acme", "echo", "m1",
                   {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]})
    seen = []
    start = store.start

    def read_now():                         # the message sent again, if the store is free
        if not store.lock.acquire(blocking=False):
            seen.append("waits")
            return
        try:
            found = store.claim_message("acme", "echo", "m1")
            seen.append(store.get("acme", "echo", found).state)
        finally:
            store.lock.release()

    def start_with_a_reader(task_id):
        reader = threading.Thread(target=read_now)
        reader.start()
        reader.join(10)
        return start(task_id)

    monkeypatch.setattr(store, "start", start_with_a_reader)
    opened = store.open(task, task.task_event(), LocalCounters(), 4, 100)
    assert opened.started is not None
    assert seen == ["waits"]
    assert store.get("acme", "echo", "t-1").state == WORKING
