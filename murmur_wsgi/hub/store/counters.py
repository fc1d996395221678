"""Admission's counters: runs at once and runs per minute of each tenant.

``take`` takes a run's slot and a token of the tenant's bucket in one step
(or refuses, naming which: CONCURRENCY, RATE), ``give`` gives the slot back,
``renew`` keeps the slots of the runs a replica still runs (shared counters
lease them). ``LocalCounters`` counts in this process (the memory store: one
process); ``redis_limits.RedisCounters`` in Redis, for every replica.

Concurrency:
    ``LocalCounters._lock`` guards its counts; ``take`` holds it for the whole step.
"""
from __future__ import annotations

import abc
import threading
import time

CONCURRENCY, RATE = "concurrency", "rate"        # what ``take`` refused on
OVERDUE = "overdue:"            # an overdue run's member begins so (``overdue_member``)


def overdue_member(task_id: str) -> str:
    """The slot an overdue run holds: its own ends with its task (on Redis, at once)."""
    return OVERDUE + task_id


class Counters(abc.ABC):
    """Every method of a shared implementation may raise ``StoreError``."""

    ends_free = False        # the task store's end of a task gives its run's slot back

    @abc.abstractmethod
    def take(self, tenant: str, task_id: str, concurrency: int, rate: int) -> str | None:
        """Take a slot and a token for ``task_id``: None, or what refused (CONCURRENCY, RATE)."""

    @abc.abstractmethod
    def give(self, tenant: str, task_id: str) -> None:
        """Give ``task_id``'s slot back."""

    @abc.abstractmethod
    def hold(self, tenant: str, member: str) -> None:
        """Take a slot under ``member`` whatever the bound (an overdue run's agent, which
        executes on after its task ended: ``Admission.hold``)."""

    @abc.abstractmethod
    def renew(self, held: list) -> None:
        """Keep the slots of ``held`` ``(tenant, task_id)`` (the runs this replica runs)."""

    @abc.abstractmethod
    def running(self, tenant: str) -> int:
        """The tenant's slots taken now."""


class LocalCounters(Counters):
    """Runs at once and token buckets of each tenant, in this process."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}                   # guarded by _lock
        self._buckets: dict[str, tuple[float, float]] = {}   # tenant -> (tokens, at)

    def take(self, tenant, task_id, concurrency, rate):
        with self._lock:
            if self._running.get(tenant, 0) >= concurrency:
                return CONCURRENCY
            now = self._clock()
            tokens, at = self._buckets.get(tenant, (float(rate), now))
            tokens = min(float(rate), tokens + (now - at) * rate / 60.0)
            if tokens < 1.0:
                self._buckets[tenant] = (tokens, now)
                return RATE
            self._buckets[tenant] = (tokens - 1.0, now)
            self._running[tenant] = self._running.get(tenant, 0) + 1
        return None

    def give(self, tenant, task_id):
        with self._lock:
            self._running[tenant] = max(0, self._running.get(tenant, 0) - 1)

    def hold(self, tenant, member):
        with self._lock:
            self._running[tenant] = self._running.get(tenant, 0) + 1

    def renew(self, held):
        """Nothing to renew: a process's counts die with it."""

    def running(self, tenant):
        return self._running.get(tenant, 0)
