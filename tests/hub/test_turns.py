"""Callers waiting for a pool's connection (hub/store/turns.py): served in their order of
arrival, each told once one is given back, the next told when one leaves, none for good."""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.hub.store.turns import Turns
from tests.hub.conftest import wait_until

pytestmark = pytest.mark.one_store


class _Shelf:
    """What the waiters take: items given back, one ``take`` each."""

    def __init__(self):
        self.items: list = []
        self.lock = threading.Lock()

    def take(self):
        with self.lock:
            return self.items.pop(0) if self.items else None

    def give(self, turns, *items) -> None:
        with self.lock:
            self.items.extend(items)
        turns.tell()


def _queued(turns, shelf, names, served, timeout=10.0) -> list:
    """A waiter per name, started one after another once the one before waits."""
    threads = []
    for name in names:
        thread = threading.Thread(
            target=lambda name=name: served.append((name, turns.wait(shelf.take, timeout))))
        thread.start()
        threads.append(thread)
        wait_until(lambda n=len(threads): turns.waiting == n)
    return threads


def test_waiters_are_served_in_their_order_of_arrival():
    turns, shelf, served = Turns(), _Shelf(), []
    threads = _queued(turns, shelf, "abc", served)
    for n, item in enumerate((1, 2, 3), 1):
        shelf.give(turns, item)
        wait_until(lambda n=n: len(served) == n)
    assert served == [("a", 1), ("b", 2), ("c", 3)] and turns.waiting == 0
    for thread in threads:
        thread.join(5)


def test_one_that_leaves_tells_the_next():
    """Two given back at one tell: the oldest takes one, and tells the next, which takes the
    other."""
    turns, shelf, served = Turns(), _Shelf(), []
    threads = _queued(turns, shelf, "ab", served)
    shelf.give(turns, 1, 2)
    wait_until(lambda: len(served) == 2)
    assert served == [("a", 1), ("b", 2)]
    for thread in threads:
        thread.join(5)


def test_a_waiter_out_of_time_gets_none_and_leaves():
    turns, shelf = Turns(), _Shelf()
    assert turns.wait(shelf.take, 0.05) is None
    assert turns.waiting == 0
    shelf.give(turns, 1)                        # nobody waits: nobody told
    assert turns.wait(shelf.take, 0.05) == 1    # the first try, at once
