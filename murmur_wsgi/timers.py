"""One thread for many timers: a hub replica's runs' (the run timeout, the merge flush), the
client's calls' (an answer's headers, client/deadline.py).

A ``threading.Timer`` is a thread: one per run (or call), made and torn down
every time even though a run that ends in time never needs it. ``Timers`` keeps
every deadline in one heap, watched by one daemon thread (started at the first
timer) that sleeps until the earliest is due or an earlier one comes. A timer
that fires runs its callback on a thread of its own (a greenlet under gevent),
so a callback that writes to a slow store never delays the other timers.

A cancelled timer stays in the heap until it is due or until the cancelled
ones are more than half of it, when the heap is rebuilt without them: memory
follows the timers that can still fire, whatever the rate of runs.

PERF: the thread is woken only for a timer due before the thread wakes anyway
(``_wake_at``: at most ``IDLE_SECS`` away). A run's timeout (minutes) never is,
so a message's timer costs its push and its cancel, not a turn of the thread
(with few runs at a time the heap is often empty, and every new timer was its
earliest: about 2–3 % of a blocking SendMessage's instructions, docs/performance.md).

Concurrency:
    ``_lock`` (under ``_changed``) guards the heap, the cancelled count and the
    thread; callbacks are started outside it. Every wait has a timeout
    (``IDLE_SECS`` when nothing is due) and ``close()`` wakes it.
"""
from __future__ import annotations

import _thread
import heapq
import itertools
import logging
import math
import threading
import time

from murmur_wsgi import logs

logger = logging.getLogger(__name__)

IDLE_SECS = 60.0             # the longest the thread sleeps with nothing due


class Timer:
    """One pending call; ``cancel()`` before it is due and it never runs."""

    __slots__ = ("due", "fn", "cancelled", "_owner")

    def __init__(self, due: float, fn, owner: Timers):
        self.due = due
        self.fn = fn
        self.cancelled = False
        self._owner = owner

    def cancel(self) -> None:
        self._owner._cancel(self)


class Timers:
    """Timers on one thread named ``name``: ``after(seconds, fn)`` and ``close()``."""

    def __init__(self, name: str = "timers", clock=time.monotonic):
        self._name = name
        self._clock = clock
        self._lock = threading.RLock()    # NOTE: an RLock under a Condition (docs/architecture.md)
        self._changed = threading.Condition(self._lock)
        self._heap: list = []             # (due, n, Timer)
        self._order = itertools.count()
        self._cancelled = 0               # cancelled timers still in the heap
        self._thread: threading.Thread | None = None
        self._closed = False
        # When the waiting thread wakes by itself; -inf while it does not wait (it looks at
        # the heap before it waits again). Guarded by _lock.
        self._wake_at = -math.inf

    def after(self, seconds: float, fn) -> Timer:
        """Call ``fn()`` (on a thread of its own, under the log bound in force here) in
        ``seconds``, unless cancelled first."""
        timer = Timer(self._clock() + max(0.0, seconds), logs.carrying_bound(fn), self)
        thread = None
        with self._lock:                          # PERF: the lock itself, not its Condition's
            if self._closed:
                timer.cancelled = True            # a closed registry runs nothing more
                return timer
            heapq.heappush(self._heap, (timer.due, next(self._order), timer))
            if self._thread is None:
                thread = self._thread = threading.Thread(target=self._serve,
                                                         name=self._name, daemon=True)
            elif timer.due < self._wake_at:
                self._changed.notify()            # earlier than the thread would wake
        if thread is not None:
            # NOTE: started outside the lock: start() waits for the thread to run, and under
            # gevent that wait would switch greenlets with the lock held.
            thread.start()
        return timer

    def pending(self) -> int:
        """Timers that may still fire."""
        with self._lock:
            return len(self._heap) - self._cancelled

    def _cancel(self, timer: Timer) -> None:
        with self._lock:
            if timer.cancelled:
                return
            timer.cancelled = True
            if timer.fn is None:
                return                            # fired already: not in the heap
            timer.fn = None
            self._cancelled += 1
            if self._cancelled > len(self._heap) // 2:
                self._heap = [entry for entry in self._heap if not entry[2].cancelled]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _serve(self) -> None:
        while True:
            with self._changed:
                due = []
                while not self._closed:
                    now = self._clock()
                    while self._heap and self._heap[0][0] <= now:
                        _, _, timer = heapq.heappop(self._heap)
                        if timer.cancelled:
                            self._cancelled -= 1
                        else:
                            due.append(timer.fn)
                            timer.fn = None
                    if due:
                        break
                    wait = min(self._heap[0][0] - now if self._heap else IDLE_SECS, IDLE_SECS)
                    self._wake_at = now + wait
                    self._changed.wait(wait)
                    self._wake_at = -math.inf
                if self._closed:
                    return
            for fn in due:
                _thread.start_new_thread(self._fire, (fn,))

    @staticmethod
    def _fire(fn) -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001 - one timer's failure must not pass silently
            logger.exception("a timer failed")

    def close(self) -> None:
        """Drop every pending timer and end the thread (within its wait)."""
        with self._changed:
            self._closed = True
            for _, _, timer in self._heap:
                timer.cancelled = True
                timer.fn = None
            self._heap, self._cancelled = [], 0
            self._changed.notify_all()
