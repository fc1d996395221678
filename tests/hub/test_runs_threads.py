"""The hub's runs under real threads (the hub's ``--dev`` server, a threaded WSGI stack).

Each test makes its interleaving with events, in the thread that must wait, at the
moment that matters: deterministic, no timing.
"""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.hub.run_registry import Runs
from murmur_wsgi.hub.task import FAILED

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
