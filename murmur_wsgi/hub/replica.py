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
FAILED with their final event (held a while after a gap in this replica's
own beats: ``_beat``), and the finished tasks past their retention
are forgotten (``tasks.retention_secs``; the tenants still writing forget
theirs as they write). When the cancel channel is back after a loss (its
listener subscribed again: what it carried meanwhile reached nobody), the
thread looks at its runs' marks and ends at once (``lost``), not at its next
tick. A cancel heard on the channel for a run of this replica's is looked at
(whether another replica ended the task) on a thread of its own: the listener,
which reads every stream's notifications, never waits for a command. A failing
heartbeat (the store away) ends a turn; past it, a step that fails does not keep the
others from theirs (a cluster serving without one primary fails only the steps that
reach that primary's tenants). A memory store has no replicas: nothing runs.

Concurrency:
    ``_wake`` (a Condition) guards ``_stopped``, ``_lost`` and ``_stopping``; the thread's
    every wait is on it, with a timeout. ``lost()`` and ``cancelled()`` (the listener's
    thread) only set those and start a thread: at most one a run (``_stopping``).
"""
from __future__ import annotations

import functools
import logging
import threading
import time

from murmur_wsgi.hub.store import StoreError
from murmur_wsgi.hub.store.base import each_then_raise, retried_quietly

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
        # NOTE: after the store refused or held back a beat, the others' liveness may have
        # lapsed meanwhile though they live: they renew within a command's timeout and a
        # tick of its return, and only a key still gone past that takes its replica for
        # dead (``_beat``).
        self.hold_secs = settings["liveness_secs"] + settings["timeout_secs"]
        self._wake = threading.Condition()
        self._stopped = False
        self._lost = False                  # the cancel channel was lost, and is back
        self._stopping: set[str] = set()    # runs a cancel heard is stopping (under _wake)
        self._thread: threading.Thread | None = None
        self._failing = False
        self._renew_at = self._sweep_at = 0.0     # the loop's (its thread's only)
        self._refused = False                     # a heartbeat failed since (the loop's)
        self._beaten = False                      # this turn wrote a beat (the loop's)

    def start(self) -> None:
        try:
            with retried_quietly():
                self.store.heartbeat()
        except StoreError:
            self._refused = True            # its first beat written holds the sweep
            self._failing = True            # the outage's line: the loop logs its end
            logger.warning("the hub's store is unavailable at start; retrying every %g s",
                           self.tick)
        self.store.listen_cancels(self.cancelled, self.lost)
        self._thread = threading.Thread(target=self._loop, name="hub-replica", daemon=True)
        self._thread.start()

    def cancelled(self, task_id: str) -> None:
        """Another replica marked ``task_id`` (or its sweep ended it), heard on the cancel
        channel (the listener's thread, which must not block: no command here): a run of
        this replica's is stopped on a thread of its own, one at a time a run."""
        run = self.hub.runs.get(task_id)
        if run is None:
            return
        with self._wake:
            if task_id in self._stopping:
                return
            self._stopping.add(task_id)
        try:
            threading.Thread(target=self._stop_heard, args=(run,), name="hub-cancel",
                             daemon=True).start()
        except BaseException:
            with self._wake:
                self._stopping.discard(task_id)
            raise

    def _stop_heard(self, run) -> None:
        try:
            self._stop(run)
        except Exception:  # noqa: BLE001 - a thread of its own: nothing above it logs
            logger.exception("task %s: stopping the run of a cancel heard failed; the next "
                             "mark check looks again", run.task_id)
        finally:
            with self._wake:
                self._stopping.discard(run.task_id)

    def _stop(self, run) -> None:
        """Stop ``run``, marked by another replica; an ended task ends it with that end."""
        try:
            if self.store.ended_of([(run.tenant, run.task_id)]):
                run.ended_elsewhere()
                return
        except StoreError:
            pass                        # the cancel stands; the next tick looks again
        run.request_stop(cancel=True)

    def lost(self) -> None:
        """The cancel channel is back after a loss (on the listener's thread, which must not
        block: no command here): the thread looks at its runs at once."""
        with self._wake:
            self._lost = True
            self._wake.notify_all()

    def _check_runs(self) -> None:
        """What the cancel channel tells, read: the runs' marks, and the runs another
        replica ended (its sweep took this one for dead). Two round trips; none without
        a run. When they fail, each tenant's runs are looked at on their own (a cluster
        serving without one primary fails only its tenants'), the first failure raised
        after them."""
        runs = self.hub.runs.in_flight()
        if not runs:
            return
        try:
            self._check(runs)
            return
        except StoreError:
            if len({run.tenant for run in runs}) < 2:
                raise
        tenants: dict = {}
        for run in runs:
            tenants.setdefault(run.tenant, []).append(run)
        each_then_raise(functools.partial(self._check, some) for some in tenants.values())

    def _check(self, runs: list) -> None:
        named = [(run.tenant, run.task_id) for run in runs]
        by_id = {run.task_id: run for run in runs}
        for task_id in self.store.cancel_marks(named):
            self._stop(by_id[task_id])
        ended = self.store.ended_of(named)
        for run in runs:
            if run.task_id in ended:
                run.ended_elsewhere()       # its sweep took this replica for dead

    def _loop(self) -> None:
        now = time.monotonic()
        self._renew_at, self._sweep_at = now + self.renew_every, now + self.sweep_every
        tick_at = now + self.tick
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._stopped or self._lost,
                                    tick_at - time.monotonic())
                if self._stopped:
                    return
                lost, self._lost = self._lost, False
            if time.monotonic() < tick_at:
                if lost:
                    self._turn(self._check_runs)    # the catch-up alone: the tick stays due
                continue
            self._turn(self._tick)
            tick_at = time.monotonic() + self.tick

    def _tick(self) -> None:
        """The turn's steps. A failing heartbeat (the store away) ends the turn; past it, a
        step that fails does not keep the others from their turn (a cluster serving without
        one primary fails the steps that reach its tenants), its failure raised after them."""
        now = time.monotonic()
        steps = []
        if now >= self._renew_at:
            self._beat(now)
            self._renew_at = now + self.renew_every
            steps.append(lambda: self.hub.admission.renew(self.hub.runs.leases()))
        steps += [self.hub.runs.retry_unwritten, self._check_runs, self.hub.store.keep_watching,
                  self.hub.store.settle_runs]
        if now >= self._sweep_at:
            self._sweep_at = now + self.sweep_every
            steps += [self._sweep, self.hub.store.expire_finished]
        each_then_raise(steps)

    def _beat(self, now: float) -> None:
        """Renew this replica's liveness. Written after a gap the store made (it refused a
        beat since the last, or held this one past ``renew_every``), the sweep waits
        ``hold_secs``: any replica's key may have expired during the outage (one renewed
        ``renew_every`` and a turn before it had less than the liveness left), and the live
        ones renew once the store is back. So while the store keeps refusing beats, the
        sweep waits: a dead replica's runs end once it has taken every beat for
        ``hold_secs``. A gap of this replica's own (its turns slow: a step waiting on a
        cluster's stalled primary, the hub's slot answering) holds nothing: held at each
        beat, the sweep would never run."""
        try:
            self.store.heartbeat()
        except StoreError:
            self._refused = True
            raise
        answered = time.monotonic()
        self._beaten = True
        if self._refused or answered - now > self.renew_every:
            self._sweep_at = max(self._sweep_at, now + self.hold_secs)
        self._refused = False

    def _sweep(self) -> None:
        for task_id in self.store.sweep(self.hub.config.sweep_max_age_secs, SWEPT):
            logger.warning("sweep: task %s ended FAILED (its replica is gone, or "
                           "it ran past sweep_max_age_secs)", task_id)

    def _turn(self, step) -> None:
        """``step()``, its failure logged: once when the store fails, once when it is back
        (the store's own line for each failed call at DEBUG). Only a turn that wrote a beat
        tells it is back: one that reached no store (no beat due, no run) tells nothing."""
        self._beaten = False
        try:
            with retried_quietly():
                step()
            if self._failing and self._beaten:
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
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(self.tick + 1)
