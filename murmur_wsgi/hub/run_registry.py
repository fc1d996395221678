"""The runs of this replica, by task id: where a run is found, waited for and drained.

``Runs`` holds the lock and condition every run's fields are guarded by (see
hub/runs.py's Concurrency), the runs in flight, and the final writes a failing
store refused (``unwritten``, retried by the replica's turn, hub/replica.py).
"""
from __future__ import annotations

import threading

from murmur_wsgi.hub.runs import INTERRUPTED, Run
from murmur_wsgi.hub.task import FAILED


class Runs:
    """The runs of this replica, by task id."""

    def __init__(self, store, admission, pricing: dict, merge_secs: float):
        self.store = store
        self.admission = admission
        self.pricing = pricing
        self.merge_secs = merge_secs
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # see the module's Concurrency
        self._runs: dict[str, Run] = {}                # guarded by lock
        self.unwritten: list[tuple] = []               # store.end args; guarded by lock
        self.metrics = None                            # HubMetrics, when /metrics is served

    def timer(self, seconds: float, fn) -> threading.Timer:
        timer = threading.Timer(seconds, fn)
        timer.daemon = True
        timer.start()
        return timer

    def add(self, run: Run) -> None:
        with self.lock:
            self._runs[run.task_id] = run
        if self.metrics is not None:
            self.metrics.run_started()

    def get(self, task_id: str) -> Run | None:
        return self._runs.get(task_id)

    def ended(self, run: Run) -> None:
        # NOTE: the slot is given back before the run leaves: the drain, which waits for the
        # last one to leave, then closes the store.
        run.release_slot()
        with self.changed:
            self._runs.pop(run.task_id, None)
            self.changed.notify_all()           # the drain waits for the last one
        if self.metrics is not None:
            self.metrics.run_ended()

    def retry_unwritten(self) -> None:
        """Write the ends the store refused, oldest first; stop at the first failure."""
        with self.lock:
            pending = list(self.unwritten)
        for args in pending:
            self.store.end(*args)               # StoreError: the next turn retries
            with self.lock:
                self.unwritten.remove(args)

    def in_flight(self) -> list[Run]:
        with self.lock:
            return list(self._runs.values())

    def wait(self, predicate, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def drain(self, timeout: float) -> int:
        """Wait up to ``timeout`` for the runs in flight; end the rest FAILED (interrupted)."""
        self.wait(lambda: not self._runs, timeout)
        left = self.in_flight()
        for run in left:
            run.request_stop(cancel=False)
            run.finish(FAILED, INTERRUPTED)
        return len(left)
