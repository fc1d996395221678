"""A run's events the store refused: kept in order, written when the store answers again.

A progress status, an artifactUpdate, a chunk of streamed text, or the run's
start (its WORKING status) that cannot be stored (``StoreError``: Redis away,
restarting) never raises into the agent, nor fails the run: the
run keeps it here, and every later event waits behind it, so the task's event
log gets them all, in the order the agent made them. The replica's next turns
write them (``Runs.retry_unwritten``), or the task's end carries them before
its final status (``Run.finish``), whichever comes first.

Exactly once: each event is numbered in the run's order when it is kept
(``n`` = 1, 2, …), and the store writes an event only if its number is past the
last one it wrote for the task. A write whose answer was lost (Redis stopped
right after it ran the script) is sent again with the same number and is not
written twice.

Concurrency: guarded by its run's lock, as every field of the run.
"""
from __future__ import annotations

import logging
from collections import deque

from murmur_wsgi.hub.store import StoreError

logger = logging.getLogger(__name__)


class KeptEvents:
    """One run's non-final events not yet stored, oldest first."""

    __slots__ = ("task_id", "events", "waiting", "unstarted", "started", "next")

    def __init__(self, task_id: str):
        self.task_id = task_id
        # (n, payload), oldest first. PERF: a deque: each written leaves the front at no
        # cost, where a list's ``del [0]`` moved every event kept behind it.
        self.events: deque[tuple[int, str]] = deque()
        self.next = 1                               # the next event's number
        self.waiting = False           # the last write failed
        self.unstarted = False         # the run's start (WORKING) is still to be stored
        self.started: str | None = None  # its statusUpdate, once stored late

    @property
    def idle(self) -> bool:
        """Nothing waits to be stored."""
        return not self.events and not self.unstarted

    def add(self, payload: str) -> bool:
        """Keep ``payload`` behind the others; True when none waited before it (write now)."""
        waited = not self.idle
        self.events.append((self.next, payload))
        self.next += 1
        return not waited

    def write(self, store) -> bool:
        """Store the run's start if it is still to be, then the kept events, oldest first,
        until one fails (kept, retried later).

        False when the store says the task has ended (another replica ended it): the
        events left are dropped.
        """
        if self.unstarted:
            try:
                self.started = store.start(self.task_id)
            except StoreError:
                self._failed()
                return True
            self.unstarted = False
        while self.events:
            try:
                n, payload = self.events[0]
                taken = store.append(self.task_id, payload, n)
            except StoreError:
                self._failed()
                return True
            self.events.popleft()
            if not taken:
                self.events.clear()
                return False
        if self.waiting:
            self.waiting = False
            logger.info("task %s: its kept events are stored", self.task_id)
        return True

    def _failed(self) -> None:
        if not self.waiting:
            logger.warning("task %s: its events cannot be stored yet; kept", self.task_id)
            self.waiting = True

    def take(self) -> list[tuple[int, str]]:
        """The events kept, ``(n, payload)``, now the caller's to write (the task's end)."""
        events, self.events = list(self.events), deque()
        self.unstarted = False              # the end is written from any state
        return events
