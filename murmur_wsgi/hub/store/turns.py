"""Callers waiting for what a pool lends (a connection), served in their order of arrival:
``Turns``, the queue of ``redis_pool``'s pools and of ``redis_commands.Commands``.

A pool whose caller takes what was given back whenever it finds it free lets a caller
that gives one back and asks again at once take it ahead of those waiting: under
sustained overload a waiter waits its whole timeout while later callers are served. With
``Turns``, a caller that finds others waiting waits behind them, and what is given back
goes to the oldest.
"""
from __future__ import annotations

import collections
import threading
import time

from murmur_wsgi.hub.store.forks import anew_in_child


class Turns:
    """The callers waiting, the oldest first. Only the oldest tries to take (``wait``'s
    ``take``); one given back (``tell``) wakes it; one that leaves (served, out of time,
    failed) wakes the next, which tries then: one may be free.

    Concurrency: each waiter's Event in a deque under ``_lock``; ``waiting`` reads its
    length without it (a caller that finds nobody waiting takes without queueing, as the
    pool's common case). The oldest tries once after it joined, so what is given back
    while nobody waited (``tell`` saw none) is seen by the try. A forked child starts with
    none waiting, on a lock of its own (``forked``)."""

    def __init__(self):
        self.forked()
        anew_in_child(self)

    def forked(self) -> None:
        """Nobody waiting, on a new lock: made, and in a forked child (``forks``), whose
        parent's waiters are not its own and one of whose threads may have held the lock."""
        self._lock = threading.Lock()
        self._queue: collections.deque = collections.deque()

    @property
    def waiting(self) -> int:
        """The callers waiting now."""
        return len(self._queue)

    def wait(self, take, timeout: float):
        """``take()``'s first answer that is not None, tried in this caller's turn (at once
        when nobody is ahead, then each time one is given back), for at most ``timeout``
        seconds; None past it."""
        deadline = time.monotonic() + timeout
        turn = threading.Event()
        with self._lock:
            self._queue.append(turn)
            if self._queue[0] is turn:
                turn.set()                      # nobody ahead: try at once
        try:
            while turn.wait(max(0.0, deadline - time.monotonic())):
                turn.clear()                    # a give-back after the try sets it again
                found = take()
                if found is not None:
                    return found
            return None
        finally:
            with self._lock:
                self._queue.remove(turn)
                if self._queue:
                    self._queue[0].set()

    def tell(self) -> None:
        """One was given back: the oldest waiter tries."""
        if self._queue:
            with self._lock:
                if self._queue:
                    self._queue[0].set()
