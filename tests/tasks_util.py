"""Helpers for task tests: messages, and waiting on the session without sleeping."""
from __future__ import annotations

import re

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
TASK_ID = re.compile(r"^tsk_[0-9a-f]{32}$")
CONTEXT_ID = re.compile(r"^ctx_[0-9a-f]{32}$")
DEADLINE = 10.0


def message(text="hello", **extra):
    msg = {"messageId": "msg-1", "role": "ROLE_USER", "parts": [{"text": text}]}
    msg.update(extra)
    return msg


def send_params(text="hello", configuration=None, **extra):
    params = {"message": message(text, **extra)}
    if configuration is not None:
        params["configuration"] = configuration
    return params


NOW = {"returnImmediately": True}


def wait_until(door, predicate, timeout=DEADLINE):
    """Wait on the session's event ring until ``predicate()`` holds (every change wakes it)."""
    ring = door.session.ring
    with ring._cond:
        ok = ring._cond.wait_for(predicate, timeout)
    assert ok, "condition not reached before the deadline"


def wait_state(door, task_id, *states, timeout=DEADLINE):
    store = door.session.store
    wait_until(door, lambda: (rec := store.get(task_id)) is not None and rec.state in states,
               timeout)
    return store.get(task_id)


def strip_volatile(task: dict) -> dict:
    """Check and blank the ids and timestamps of a task, for an exact comparison."""
    assert TASK_ID.match(task["id"]), task["id"]
    assert TIMESTAMP.match(task["status"]["timestamp"]), task["status"]["timestamp"]
    task = dict(task, id="tsk", status=dict(task["status"], timestamp="ts"))
    if not task["contextId"].startswith("ctx-"):
        assert CONTEXT_ID.match(task["contextId"]), task["contextId"]
        task["contextId"] = "ctx"
    message_ = task["status"].get("message")
    if message_:
        task["status"]["message"] = dict(message_, messageId="msg", contextId="ctx",
                                         taskId="tsk")
    return task
