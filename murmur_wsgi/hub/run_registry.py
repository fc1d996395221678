"""The runs of this replica, by task id: where a run is found, waited for and drained.

``Runs`` holds the runs in flight (its lock guards the registry; a run's fields,
the run's own lock: hub/runs.py's Concurrency), the final writes a failing store
refused (``unwritten``, retried by the replica's turn, hub/replica.py), and the
overdue runs: ended (their timeout, the drain, the sweep) while their agent
still executes, each holding its tenant's concurrency slot until it returns.
"""
from __future__ import annotations

import functools
import threading
import time
from typing import NamedTuple

from murmur_wsgi.hub.runs import INTERRUPTED, Run
from murmur_wsgi.hub.store import StoreError
from murmur_wsgi.hub.store.base import each_then_raise
from murmur_wsgi.hub.store.counters import overdue_member
from murmur_wsgi.hub.task import FAILED
from murmur_wsgi.timers import Timer, Timers


class Lease(NamedTuple):
    """One admission slot to renew (what ``Admission.renew`` reads of a run)."""

    tenant: str
    task_id: str


class Runs:
    """The runs of this replica, by task id."""

    def __init__(self, store, admission, pricing: dict, merge_secs: float):
        self.store = store
        self.admission = admission
        self.pricing = pricing
        self.merge_secs = merge_secs
        self.lock = threading.RLock()                  # the registry's: see hub/runs.py
        self.changed = threading.Condition(self.lock)  # a run left (notified to ``wait``)
        self._runs: dict[str, Run] = {}                # guarded by lock
        self._overdue: dict[str, Run] = {}             # guarded by lock: ended, agent executing
        self.unwritten: list[tuple] = []               # store.end args; guarded by lock
        self._drained = False          # guarded by lock: the drain took the runs in flight
        self._waiting = 0              # guarded by lock: threads in ``wait``
        self.metrics = None                            # HubMetrics, when /metrics is served
        self.timers = Timers("hub-timers")             # every run's timeout and flush

    def timer(self, seconds: float, fn) -> Timer:
        """Call ``fn()`` in ``seconds`` (``cancel()`` it before): one thread for all."""
        return self.timers.after(seconds, fn)

    def close(self) -> None:
        """After the drain: no timer of a run fires any more."""
        self.timers.close()

    def add(self, run: Run) -> None:
        with self.lock:
            self._runs[run.task_id] = run
            late = self._drained
        if self.metrics is not None:
            self.metrics.run_started()
        if late:
            # NOTE: its message was accepted before the hub closed (``hub.closing``), its run
            # comes after the drain took the runs in flight: it ends as the drain ends those.
            run.request_stop(cancel=False)
            run.finish(FAILED, INTERRUPTED)
            return
        # NOTE: the task is stored and started before its run is here: a CancelTask that
        # came between (real threads) found no run and marked the task instead, then looked
        # again (methods/tasks.py). Registered first, read second: one of the two sees the
        # other. A shared store's marks are the replica's turn's to read (a round trip).
        if not self.store.shared and self.store.cancel_marked(run.task_id):
            run.request_stop(cancel=True)

    def get(self, task_id: str) -> Run | None:
        return self._runs.get(task_id)

    def ended(self, run: Run) -> None:
        # NOTE: the slot is given back before the run leaves: the drain, which waits for the
        # last one to leave, then closes the store.
        run.release_slot()
        with self.lock:                         # PERF: the lock itself, not its Condition's
            self._runs.pop(run.task_id, None)
            if self._waiting:                   # PERF: a notify costs about 3 K instructions
                self.changed.notify_all()       # the drain waits for the last one
        if self.metrics is not None:
            self.metrics.run_ended()

    def became_overdue(self, run: Run) -> None:
        """``run``'s task ends while its agent executes: it takes a slot of its own before
        its task's is given back (the run's lock held; StoreError: it could not)."""
        self.admission.hold(run.tenant, overdue_member(run.task_id))
        with self.lock:
            self._overdue[run.task_id] = run
        if self.metrics is not None:
            self.metrics.run_overdue(1)

    def no_longer_overdue(self, run: Run) -> None:
        """The agent of an overdue ``run`` returned: its slot is given back (the run's lock
        held)."""
        with self.lock:
            was = self._overdue.pop(run.task_id, None)
        if was is not None and self.metrics is not None:
            self.metrics.run_overdue(-1)
        try:
            self.admission.release(run.tenant, overdue_member(run.task_id))
        except StoreError:
            pass                # a shared store's lease expires by itself

    def overdue(self) -> list[Run]:
        """The runs whose task ended while their agent still executes."""
        with self.lock:
            return list(self._overdue.values())

    def leases(self) -> list:
        """``(tenant, task_id)`` of every admission slot this replica holds, to renew: each
        run in flight, and each overdue run under its own member."""
        with self.lock:
            return [Lease(run.tenant, run.task_id) for run in self._runs.values()] + \
                [Lease(run.tenant, overdue_member(run.task_id))
                 for run in self._overdue.values()]

    def retry_unwritten(self) -> None:
        """Write the events the store refused: each run's kept events, then the ends, oldest
        first. An end that fails stays for the next turn and does not hold the others (on a
        cluster without one primary, its tenants' fail): the first failure is raised after."""
        for run in self.in_flight():
            run.store_kept()
        with self.lock:
            pending = list(self.unwritten)
        each_then_raise(functools.partial(self._write_end, args) for args in pending)

    def _write_end(self, args: tuple) -> None:
        self.store.end(*args)
        with self.lock:
            # NOTE: two retries may write one end at once (the replica's turn and the hub's
            # close, or two closes): the other may have taken it out already.
            if args in self.unwritten:
                self.unwritten.remove(args)
            if self._waiting:
                self.changed.notify_all()       # a CancelTask waits for its run's end

    def written(self, task_id: str, deadline: float) -> bool:
        """Whether the end of ``task_id``'s run is written: none the store refused is left
        (``unwritten``), waiting until ``deadline`` (``time.monotonic()``) for the replica's
        turn to write it."""
        return self.wait(lambda: not self._unwritten_locked(task_id),
                         max(0.0, deadline - time.monotonic()))

    def unwritten_end(self, task_id: str) -> bool:
        """Whether a run of ``task_id`` ended here with its end refused, not written yet."""
        with self.lock:
            return self._unwritten_locked(task_id)

    def _unwritten_locked(self, task_id: str) -> bool:
        return any(args[0] == task_id for args in self.unwritten)

    def in_flight(self) -> list[Run]:
        with self.lock:
            return list(self._runs.values())

    def wait(self, predicate, timeout: float) -> bool:
        """Wait up to ``timeout`` for ``predicate()`` (read under the lock), woken as runs
        leave."""
        with self.changed:
            self._waiting += 1
            try:
                return self.changed.wait_for(predicate, timeout)
            finally:
                self._waiting -= 1

    def drain(self, timeout: float) -> int:
        """Wait up to ``timeout`` for the runs in flight; end the rest FAILED (interrupted)."""
        self.wait(lambda: not self._runs, timeout)
        with self.lock:
            self._drained = True
            left = list(self._runs.values())
        for run in left:
            # NOTE: ended first, then stopped (as at the run timeout): stopped first, its
            # agent could end the task itself (CANCELED) before this FAILED it.
            try:
                run.finish(FAILED, INTERRUPTED)
            finally:
                run.request_stop(cancel=False)
        # NOTE: a run whose own end was being written (a shared store's, without its lock:
        # hub/runs.py) refused the drain's: its write is waited for, within the timeout
        # again, before the hub closes the store under it.
        self.wait(lambda: all(run.task_id not in self._runs or not run.ending
                              for run in left), timeout)
        return len(left)
