"""The hub's runs under real threads (the hub's ``--dev`` server, a threaded WSGI stack).

Each test makes its interleaving with events, in the thread that must wait, at the
moment that matters: deterministic, no timing.
"""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.hub.run_registry import Runs
from murmur_wsgi.hub.task import FAILED
from tests.hub.agents import SEEN, gate
from tests.hub.conftest import HubClient, send_params

pytestmark = pytest.mark.one_store


class _EndsOnce:
    """A store whose ``end`` of a task waits, in the thread ``slow``, until ``resume``."""

    shared = True

    def __init__(self):
        self.ended: list[str] = []
        self.slow = None
        self.entered, self.resume = threading.Event(), threading.Event()

    def end(self, task_id, *args):
        if threading.current_thread() is self.slow:
            self.entered.set()
            self.resume.wait(10)
        if task_id in self.ended:
            return None                          # ended already: the store's compare-and-set
        self.ended.append(task_id)
        return []


def test_two_retries_of_one_unwritten_end_write_it_once_and_both_return():
    """The replica's turn and the hub's close (or two closes) retry the unwritten ends at
    once: the end one of them wrote is no longer in ``unwritten`` when the other's own
    write of it returns, and removing it again raised ValueError out of ``Hub.close``."""
    store = _EndsOnce()
    runs = Runs(store, None, {}, 0.5)
    runs.unwritten.append(("t-1", FAILED, "interrupted", None, [], (0, 0), None))
    failed = []

    def retry():
        try:
            runs.retry_unwritten()
        except Exception as ex:  # noqa: BLE001 - what the test looks for
            failed.append(ex)

    store.slow = threading.Thread(target=retry)
    store.slow.start()
    try:
        assert store.entered.wait(10), "the first retry did not reach the store"
        runs.retry_unwritten()                  # the other one, while the first writes
    finally:
        store.resume.set()
        store.slow.join(10)
    assert failed == []
    assert store.ended == ["t-1"] and runs.unwritten == []


class _HeldRegistration:
    """A SendMessage (returnImmediately) to ``held`` whose ``hub.runs.add`` waits, in its
    own thread, until ``release``: its task is stored and started, its run not registered."""

    def __init__(self, hub, monkeypatch, text: str):
        self.add = hub.runs.add
        self.registering, self.release = threading.Event(), threading.Event()
        self.task_id = self.sent = None
        monkeypatch.setattr(hub.runs, "add", self._add)
        gate(text)                               # never opened: the run ends otherwise
        params = send_params(text, configuration={"returnImmediately": True})
        self.sender = threading.Thread(target=self._send, args=(hub, params))
        self.sender.start()
        assert self.registering.wait(10), "the run was not registered"

    def _send(self, hub, params) -> None:
        self.sent = HubClient(hub, "held").result("SendMessage", params)

    def _add(self, run) -> None:
        if threading.current_thread() is self.sender:
            self.task_id = run.task_id
            self.registering.set()
            self.release.wait(10)
        self.add(run)

    def done(self) -> None:
        self.release.set()
        self.sender.join(10)


def test_a_cancel_between_a_tasks_start_and_its_runs_registration_cancels_it(hub, monkeypatch):
    """A message's task is stored and started a moment before its run is registered
    (``Runs.add``). A CancelTask in between found no run, and on the memory store answered
    -32002 for a task WORKING, whose run then went on; now it marks the task, and the run
    is stopped as it is registered: CANCELED."""
    mark, progressed, found = hub.store.mark_cancel, threading.Event(), {}

    def mark_then_tell(*args, **kwargs):
        mark(*args, **kwargs)
        progressed.set()

    def cancel():
        try:
            found["cancel"] = HubClient(hub, "held").call(
                "CancelTask", {"id": held.task_id}).get_json()
        finally:
            progressed.set()

    monkeypatch.setattr(hub.store, "mark_cancel", mark_then_tell)
    held = _HeldRegistration(hub, monkeypatch, "cancel-race")
    canceller = threading.Thread(target=cancel)
    try:
        canceller.start()
        assert progressed.wait(10), "the cancel neither marked the task nor answered"
    finally:
        held.done()
        canceller.join(10)
    assert "result" in found["cancel"], found["cancel"]
    assert found["cancel"]["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert held.sent["task"]["id"] == held.task_id


def test_a_run_registered_after_the_drain_ends_interrupted(hub, monkeypatch):
    """A message that passed the closing check before the hub closed has its run registered
    after the drain took the runs in flight: it escaped the drain (close answered 0
    interrupted, its agent ran on after the store closed). Now it ends FAILED as the drain
    ends those, its agent never called."""
    held = _HeldRegistration(hub, monkeypatch, "late-run")
    try:
        hub.close(drain_timeout=5)               # nothing in flight yet: the drain is done
    finally:
        held.done()
    task = hub.store.get("acme", "held", held.task_id)
    assert task.state == "TASK_STATE_FAILED", task.state
    assert task.status_text.startswith("interrupted")
    assert not [ctx for ctx in SEEN if ctx.task_id == held.task_id]
