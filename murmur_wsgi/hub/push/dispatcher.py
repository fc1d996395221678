"""The dispatcher: off the request path, each config's events in order, under a lease.

One loop per hub waits for configs with events past their cursor
(``store.push_due``), takes each one's lease (one replica at a time, at
most two configs of a tenant at once: the store's rule) and delivers it on
a thread of its own (a greenlet under gevent) until it has caught up,
advancing the cursor event by event. A dropped event is logged with the
host only. A config whose delivery fails unexpectedly (a bug, or a store
that fails mid-way) is logged without the exception's message and not taken
again before the retry delays (1 s, 2 s, then 4 s each time) have passed.

Concurrency:
    ``_lock`` guards ``_working`` (the configs this replica delivers now),
    ``_cooling`` (those that failed unexpectedly: until when they wait) and ``_finals``
    (the last final bodies built, shared by a task's configs).
    ``_stop`` (an Event) ends the loop and every retry wait at ``close()``; ``_ended``
    (an Event) is set while no loop runs: ``close()`` waits for it, then for the
    deliveries (the loop starts none after), so neither makes a call on the store after
    ``close()`` returned (the hub closes the store next).
"""
from __future__ import annotations

import _thread
import collections
import logging
import threading
import time
import uuid
from urllib.parse import urlsplit

from murmur_wsgi.errors import StoreError
from murmur_wsgi.hub.push.body import event_body, final_body
from murmur_wsgi.hub.push.delivery import unexpected
from murmur_wsgi.hub.store.base import retried_quietly
from murmur_wsgi.hub.store.push_base import DELIVERED, DROPPED, SKIPPED

logger = logging.getLogger(__name__)

IDLE_WAIT_SECS = 1.0
CLOSE_GRACE_SECS = 2.0         # how long close() lets due notifications go out
COOLING_KEPT_SECS = 60.0       # a failed config's count is forgotten this long after its wait
FINALS_KEPT = 64               # final bodies kept for a task's other configs (64 KiB at most each)


class Dispatcher:
    def __init__(self, store, tasks, sender):
        self.store = store              # push configs (store.push_base)
        self.tasks = tasks              # their tasks and events (store.base)
        self.sender = sender
        # NOTE: on a shared store the lease's owner is the replica (its liveness key tells
        # other replicas whether the lease still counts).
        self.owner = getattr(store, "replica", None) or f"replica-{uuid.uuid4()}"
        self._stop = threading.Event()
        self._lock = threading.RLock()    # NOTE: an RLock under a Condition (docs/architecture.md)
        self._working: set[tuple] = set()        # guarded by _lock
        self._cooling: dict[tuple, tuple[float, int]] = {}   # guarded by _lock: key ->
        #                                                      (until, failures in a row)
        self._finals: collections.OrderedDict = collections.OrderedDict()   # guarded by
        #                                        _lock: (tenant, task id, seq) -> its body
        self._idle = threading.Condition(self._lock)
        self._ended = threading.Event()
        self._ended.set()

    def start(self) -> None:
        self._ended.clear()
        _thread.start_new_thread(self._loop, ())

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds``; False at once when the hub closes."""
        return not self._stop.wait(seconds)

    def close(self, grace: float = CLOSE_GRACE_SECS, timeout: float = 5.0) -> None:
        """Deliver what is due for up to ``grace`` (the drain's final states), then stop:
        wait up to ``timeout`` for the deliveries and the loop to end. A dispatcher
        already stopped delivers nothing more: it waits no grace."""
        deadline = time.monotonic() + (0.0 if self._stop.is_set() else grace)
        while time.monotonic() < deadline and not self._caught_up():
            with self._idle:
                self._idle.wait(0.02)
        self._stop.set()
        self.store.notify_push()
        deadline = time.monotonic() + timeout
        # NOTE: the loop first, then the deliveries: a lease the loop took as it stopped
        # starts one more delivery, whose release is a call on the store too.
        self._ended.wait(timeout)
        with self._idle:
            self._idle.wait_for(lambda: not self._working, max(0.0, deadline - time.monotonic()))

    def _caught_up(self) -> bool:
        with self._lock:
            if self._working:
                return False
        try:
            return not self.store.push_due(self.owner, 0)
        except Exception:  # noqa: BLE001 - a shared store down at shutdown: nothing to wait for
            logger.warning("push: the store did not answer at shutdown; what is due stays "
                           "due for the other replicas")
            return True

    def idle(self) -> bool:
        with self._lock:
            return not self._working

    def _loop(self) -> None:
        try:
            self._turns()
        finally:
            self._ended.set()

    def _turns(self) -> None:
        blocked: set[tuple] = set()
        failing = False
        while not self._stop.is_set():
            try:
                with retried_quietly():
                    self._turn(blocked)
                if failing:
                    logger.warning("push: the dispatcher reads the store again")
                    failing = False
            except Exception as ex:  # noqa: BLE001 - the loop must outlive a store hiccup
                if not failing:        # once per outage: a shared store may be down a while
                    # NOTE: an outage is one line; anything else (a bug) its traceback.
                    logger.warning("push: the dispatcher could not read the store (%s); "
                                   "retrying every %g s", type(ex).__name__, IDLE_WAIT_SECS,
                                   exc_info=not isinstance(ex, StoreError))
                failing = True
                self._stop.wait(IDLE_WAIT_SECS)

    def _turn(self, blocked: set) -> None:
        """One wait for due configs; each one leased is delivered on a thread of its own."""
        now = time.monotonic()
        with self._lock:
            for key in [k for k, (until, _) in self._cooling.items()
                        if until + COOLING_KEPT_SECS < now]:
                del self._cooling[key]
            waits = {k: until - now for k, (until, _) in self._cooling.items() if until > now}
            skip = frozenset(self._working | blocked | set(waits))
        due = self.store.push_due(self.owner, min([IDLE_WAIT_SECS, *waits.values()]), skip)
        if not due:
            blocked.clear()
        full: set[str] = set()          # tenants whose lease was refused in this turn
        for record in due:
            if self._stop.is_set():
                break
            # PERF: a refused lease is mostly its tenant's slots taken: the tenant's other
            # configs wait for the next turn untried, so a backlog of due configs behind a
            # slow receiver costs a turn one refusal, not a round trip each.
            if record.tenant in full or not self.store.push_lease(record, self.owner):
                full.add(record.tenant)
                blocked.add(record.key)
                continue
            blocked.discard(record.key)
            with self._lock:
                self._working.add(record.key)
            _thread.start_new_thread(self._deliver, (record,))

    def _deliver(self, record) -> None:
        first = record
        try:
            self._catch_up(record)
            with self._lock:
                self._cooling.pop(first.key, None)
        except Exception as ex:  # noqa: BLE001 - one config's failure never stops the others
            # NOTE: without the wait the config was due again at once: the dispatcher
            # took it, failed and logged in a loop.
            delay = self._cool(first.key)
            logger.error("push: delivering to config %s of task %s failed unexpectedly (%s); "
                         "tried again in %g s", record.id, record.task_id, unexpected(ex),
                         delay)
        finally:
            self.store.push_release(first, self.owner)
            with self._idle:
                self._working.discard(first.key)
                self._idle.notify_all()

    def _cool(self, key) -> float:
        """Hold ``key`` back for the next retry delay; returns it."""
        delays = self.sender.delays or (IDLE_WAIT_SECS,)
        with self._lock:
            failures = self._cooling.get(key, (0.0, 0))[1]
            delay = delays[min(failures, len(delays) - 1)]
            self._cooling[key] = (time.monotonic() + delay, failures + 1)
        return delay

    def _final(self, record, seq: int) -> bytes | None:
        """The body of the task's final event ``seq`` (None: the task is gone), built once
        for its configs: the task is read for it only, once that event is (so it is read
        final).

        PERF: read for every page of events, a config catching up on a finished task of a
        59 MB answer read it whole 50 times on Redis (10.8 s of the worker's CPU, for one
        config); and each of a task's configs read it again for the same body."""
        key = (record.tenant, record.task_id, seq)
        with self._lock:
            body = self._finals.get(key)
        if body is not None:
            return body
        task = self.tasks.get(record.tenant, record.agent, record.task_id)
        if task is None:
            return None
        body = final_body(self.tasks, task)
        with self._lock:
            self._finals[key] = body
            while len(self._finals) > FINALS_KEPT:
                self._finals.popitem(last=False)
        return body

    def _catch_up(self, record) -> None:
        store = self.store
        while record is not None and not self._stop.is_set():
            events, available = self.tasks.events(record.task_id, record.cursor, 0,
                                                  tenant=record.tenant)
            if not available or not events:
                return
            for event in events:
                if event.seq <= record.cursor:
                    continue
                if event.terminal:
                    body = self._final(record, event.seq)
                    if body is None:
                        return
                else:
                    body = event_body(self.tasks, None, event)
                if body is None:
                    record = store.push_advance(record, self.owner, event.seq, SKIPPED)
                else:
                    delivered, reason = self.sender.send(record, event.seq, body)
                    if delivered is None:
                        return
                    if not delivered:
                        logger.warning("push: event %d of task %s dropped for config %s "
                                       "(host %s): %s", event.seq, record.task_id, record.id,
                                       urlsplit(record.url).hostname, reason)
                    record = store.push_advance(record, self.owner, event.seq,
                                                DELIVERED if delivered else DROPPED, reason)
                    if record is not None and record.disabled:
                        logger.warning("push: config %s of task %s disabled after %d failed "
                                       "events in a row", record.id, record.task_id,
                                       record.failures)
                if record is None or record.disabled or self._stop.is_set():
                    return
