"""Each run has its own lock: while one run's end waits on the store, the worker's other
runs go on, and a cancel meanwhile finds the task ended as written. On both stores (and a
Redis Cluster)."""
from __future__ import annotations

import threading

import pytest

from tests.hub.conftest import HubClient

pytestmark = pytest.mark.cluster

WAIT = 10.0


def _first_end_waits(hub, monkeypatch) -> tuple:
    """The store's first end waits for ``go``, as on a slow store: ``(writing, go, ids)``,
    ``writing`` set as it waits, ``ids`` the task ids of the ends asked for."""
    real_end = hub.store.end
    writing, go, ids = threading.Event(), threading.Event(), []

    def end(task_id, *args, **kwargs):
        ids.append(task_id)
        if not writing.is_set():
            writing.set()
            go.wait(WAIT)
        return real_end(task_id, *args, **kwargs)

    monkeypatch.setattr(hub.store, "end", end)
    return writing, go, ids


def test_a_run_s_end_that_waits_on_the_store_holds_no_other_run(hub, monkeypatch):
    writing, go, _ = _first_end_waits(hub, monkeypatch)
    answers: dict = {}

    def send(name: str, text: str, agent: str) -> None:
        answers[name] = HubClient(hub).send(text, agent=agent)

    first = threading.Thread(target=send, args=("first", "first", "echo"))
    other = threading.Thread(target=send, args=("other", "a b c", "tokens"))
    try:
        first.start()
        assert writing.wait(WAIT)                # the first run's end is being written
        other.start()                           # another run: its start, tokens and end
        other.join(WAIT)
        assert not other.is_alive() and "first" not in answers
        assert answers["other"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        go.set()
        first.join(WAIT)
        other.join(WAIT)
    assert answers["first"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answers["first"]["artifacts"][0]["parts"][0]["text"].endswith("first")


def test_a_cancel_while_the_end_is_written_finds_the_task_ended_as_written(hub, monkeypatch):
    writing, go, ids = _first_end_waits(hub, monkeypatch)
    real_get, read = hub.store.get, threading.Event()

    def get(*args, **kwargs):                   # the cancel read the task before its end
        task = real_get(*args, **kwargs)
        if threading.current_thread() is canceller and not read.is_set():
            answers["read"] = task.state
            read.set()
        return task

    answers: dict = {}
    monkeypatch.setattr(hub.store, "get", get)

    def send() -> None:
        answers["task"] = HubClient(hub).send("first")

    def cancel() -> None:
        answers["cancel"] = HubClient(hub).error("CancelTask", {"id": ids[0]})

    sender, canceller = threading.Thread(target=send), threading.Thread(target=cancel)
    try:
        sender.start()
        assert writing.wait(WAIT)
        canceller.start()
        assert read.wait(WAIT)                  # the cancel read the task before its end
        assert answers["read"] == "TASK_STATE_WORKING" and "task" not in answers
    finally:
        go.set()
        sender.join(WAIT)
        canceller.join(WAIT)
    assert answers["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answers["cancel"]["code"] == -32002
    assert ids == [answers["task"]["id"]]       # one end written: the run's own
    assert HubClient(hub).result("GetTask", {"id": ids[0]})["status"]["state"] == \
        "TASK_STATE_COMPLETED"
