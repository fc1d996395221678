"""This replica's part in a shared store: liveness, cancels from other replicas, the sweep.

With a shared store (Redis) every serving process is a replica. One thread
(``Replica``) renews its liveness key (and its runs' admission leases) every
third of ``redis.liveness_secs``, checks the cancel marks of its runs every
second (the text's fallback: a mark published on the cancel channel reaches
the run at once) and whether another replica ended one of them (its sweep
took this one for dead: the run ends here with that end), renews the
watch of the tasks its streams read (their events are announced while
watched: hub/store/redis_feed.py), retries the
final writes a failing store refused (``Runs.unwritten``), and every
``redis.sweep_interval_secs`` runs the stale sweep: the runs of replicas
whose liveness expired, and runs older than ``sweep_max_age_secs``, end
FAILED with their final event, and the finished tasks past their retention
are forgotten (``tasks.retention_secs``; the tenants still writing forget
theirs as they write). A memory store has no replicas: nothing runs.

Concurrency:
    ``_stop`` (an Event) ends the thread; every wait is on it, with a timeout.
"""
from __future__ import annotations

import logging
import threading
import time

from murmur_wsgi.hub.store import StoreError

logger = logging.getLogger(__name__)

TICK_SECS = 1.0                 # the mark check's period (the text: every second)
SWEPT = "interrupted: the replica running it stopped answering"


class Replica:
    def __init__(self, hub):
        self.hub = hub
        self.store = hub.stores.replicas
        settings = hub.config.redis
        self.renew_every = settings["liveness_secs"] / 3
        self.sweep_every = settings["sweep_interval_secs"]
        self.tick = min(TICK_SECS, self.renew_every)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> None:
        try:
            self.store.heartbeat()
        except StoreError:
            logger.warning("the hub's store is unavailable at start; retrying every %g s",
                           self.tick)
        self.store.listen_cancels(self.cancelled)
        self._thread = threading.Thread(target=self._loop, name="hub-replica", daemon=True)
        self._thread.start()

    def cancelled(self, task_id: str) -> None:
        """Another replica marked ``task_id`` (or its sweep ended it): stop its run when this
        replica runs it; an ended task ends the run here with that end."""
        run = self.hub.runs.get(task_id)
        if run is None:
            return
        try:
            if self.store.ended_of([(run.tenant, task_id)]):
                run.ended_elsewhere()
                return
        except StoreError:
            pass                        # the cancel stands; the next tick looks again
        run.request_stop(cancel=True)

    def _loop(self) -> None:
        now = time.monotonic()
        renew_at, sweep_at = now + self.renew_every, now + self.sweep_every
        while not self._stop.wait(self.tick):
            try:
                now = time.monotonic()
                if now >= renew_at:
                    self.store.heartbeat()
                    self.hub.admission.renew(self.hub.runs.leases())
                    renew_at = now + self.renew_every
                self.hub.runs.retry_unwritten()
                runs = self.hub.runs.in_flight()
                named = [(run.tenant, run.task_id) for run in runs]
                for task_id in self.store.cancel_marks(named):
                    self.cancelled(task_id)
                self.hub.store.keep_watching()
                ended = self.store.ended_of(named)
                for run in runs:
                    if run.task_id in ended:
                        run.ended_elsewhere()       # its sweep took this replica for dead
                if now >= sweep_at:
                    sweep_at = now + self.sweep_every
                    for task_id in self.store.sweep(self.hub.config.sweep_max_age_secs, SWEPT):
                        logger.warning("sweep: task %s ended FAILED (its replica is gone, or "
                                       "it ran past sweep_max_age_secs)", task_id)
                    self.hub.store.expire_finished()
                if self._failing:
                    logger.warning("the hub's store answers again")
                    self._failing = False
            except StoreError:
                if not self._failing:
                    logger.warning("the hub's store is unavailable; retrying every %g s",
                                   self.tick)
                self._failing = True
            except Exception:  # noqa: BLE001 - the loop must outlive one bad turn
                logger.exception("the replica's maintenance failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.tick + 1)
