"""Waits by key on one lock: a reader of a task's events waits on a condition of that
task's own, so an event wakes its own task's readers, not every reader of every task.

Concurrency: every method is called with ``lock`` held (the memory store's). A key's
condition lives while anyone waits on it; a wait has its timeout.
"""
from __future__ import annotations

import threading


class KeyedWaits:
    """``wait(key, timeout)`` until ``wake(key)`` (or ``wake_all()``) or the timeout."""

    __slots__ = ("_lock", "_waiting")

    def __init__(self, lock):
        self._lock = lock
        # key -> [a Condition on lock, how many wait on it]: while any waits
        self._waiting: dict[str, list] = {}

    def wait(self, key: str, timeout: float) -> None:
        waiting = self._waiting.get(key)
        if waiting is None:
            waiting = self._waiting[key] = [threading.Condition(self._lock), 0]
        waiting[1] += 1
        try:
            waiting[0].wait(timeout)
        finally:
            waiting[1] -= 1
            if not waiting[1]:
                del self._waiting[key]

    def wake(self, key: str) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting[0].notify_all()

    def wake_all(self) -> None:
        for waiting in self._waiting.values():
            waiting[0].notify_all()
