"""SubscribeToTask: a task's stored events from the start, then live until its end."""
from __future__ import annotations

import logging
import time

from murmur_wsgi.errors import InvalidRequestError, StoreError
from murmur_wsgi.hub.errors import SubscriptionExpiredError
from murmur_wsgi.hub.held import LARGE_CHARS
from murmur_wsgi.hub.live import TAKE_BYTES
from murmur_wsgi.hub.methods.tasks import find
from murmur_wsgi.hub.sse import HubStream
from murmur_wsgi.hub.store.base import StoredEvent
from murmur_wsgi.wire.stream import task_event

logger = logging.getLogger(__name__)

EXTRA_LIFETIME_SECS = 2.0         # a subscription lives run timeout + this


class EventSource:
    """Replay the task's log from its first event; once expired, the stored Task.

    ``read(timeout) -> (payloads, done)``. What one read of the log brings is handed
    over about ``TAKE_BYTES`` at a time, the worker's other greenlets running between
    pieces (a long log is one read, not one write).

    MEMORY: an open stream keeps the task's names, not the task (a Redis store's copy of
    it, history included, would be each stream's own), in slots: no closure's cells, no
    deque's block (about 1 KiB of each idle stream); ``read`` is a method, so the
    stream's wait calls it with no level of C stack of its own (an instance's ``__call__``
    would take one, kept with every waiting stream).
    """

    __slots__ = ("_store", "_tenant", "_agent", "_task_id", "_finished", "_read", "_waiting",
                 "_at", "_hold", "_held")

    def __init__(self, store, task, hold=None):
        self._store = store
        self._tenant, self._agent, self._task_id = task.tenant, task.agent, task.id
        # … and whether it was finished when found: its log is read as a whole one
        # (``TaskStore.events``: a Redis primary's write pause lets the reads through).
        self._finished = task.terminal
        self._read = 0
        self._waiting: list | tuple = ()    # events read from the log, from _at not handed over
        self._at = 0
        # ``hold(payload)``: a large event's release, until it is written (hub/held.py), or
        # -32603; None: nothing held. An event the store keeps (``kept_event``) is not held.
        self._hold = hold
        self._held: list = []               # the releases of the batch being written

    def close(self) -> None:
        """The stream ended: what it held is given back."""
        held, self._held = self._held, []
        for release in held:
            release()

    def read(self, timeout: float):
        if self._held:                      # the batch before this read is written
            self.close()
        if self._at >= len(self._waiting):
            store = self._store
            events, available = store.events(self._task_id, self._read, timeout,
                                             tenant=self._tenant, finished=self._finished)
            if not available:
                return self._last(), True
            if events and events[-1].seq - events[0].seq != len(events) - 1:
                events = _contiguous(events)
            if events and events[0].seq > self._read + 1:
                events = self._trimmed(events)
                if events is None:
                    return self._last(), True
            if events:
                self._read = events[-1].seq     # a log's positions (a trimmed one starts later)
            self._waiting, self._at = events, 0
        waiting, at = self._waiting, self._at
        first = at
        batch, size, done = [], 0, False
        while at < len(waiting) and (size < TAKE_BYTES or not batch):
            event = waiting[at]
            at += 1
            batch.append(event.payload)
            size += len(event.payload)
            done = done or event.terminal
        if at < len(waiting):
            self._at = at
        else:
            self._waiting, self._at = (), 0     # every event handed over: none kept
        if size > LARGE_CHARS and self._hold is not None:
            self._held_for(waiting[first:at])
        if at < len(waiting):
            time.sleep(0)                       # NOTE: under gevent, the others' turn
        return batch, done

    def _held_for(self, events: list) -> None:
        """Hold the batch's large events (StoredEvents; one at position 0 is no log's) while
        it is written; past the bounds, -32603 (the stream's last event), none held."""
        try:
            for event in events:
                payload = event.payload
                if len(payload) > LARGE_CHARS and not (event.seq and self._store.kept_event(
                        self._task_id, event.seq, payload)):
                    self._held.append(self._hold(payload))
        except BaseException:
            self.close()
            raise

    def _trimmed(self, events: list) -> list | None:
        """A read of a log trimmed past the stream's position (Redis keeps
        ``redis.max_events_per_task``): the events before ``events`` are gone, the Task as
        created among them when the stream has read none, and the stream goes on from the
        stored Task instead; a finished task's is whole, so it ends the stream (None), as
        when the log expired.

        NOTE: not only a first read: a stream that read the start of a log and then fell
        behind its trim (its client slow, the run's events fast) went on from the events
        the log still held, every event between silently missing."""
        current = self._store.get(self._tenant, self._agent, self._task_id)
        if current is None or current.terminal:
            return None
        opening = StoredEvent(0, task_event(self._store.render(current, as_read=True)), False)
        return [opening, *events]

    def _last(self) -> list:
        """``_vanished``'s Task, rendered for this stream (a copy of its own): held as a
        large event is."""
        batch = self._vanished()
        if self._hold is not None and len(batch[0]) > LARGE_CHARS:
            self._held_for([StoredEvent(0, batch[0], True)])
        return batch

    def _vanished(self) -> list:
        """The log is gone (expired, or the store closed): the stored Task ends the stream
        if it can (before any event was read, or once the task is over). Otherwise the
        events read so far would end with no final one: the store's -32603 instead."""
        store = self._store
        current = store.get(self._tenant, self._agent, self._task_id)
        if current is not None and (self._read == 0 or current.terminal):
            return [task_event(store.render(current, as_read=True))]
        logger.warning("SubscribeToTask %s: the task's log is gone after position %d, "
                       "its task %s", self._task_id, self._read,
                       "unfinished" if current is not None else "gone too")
        raise StoreError()


def _contiguous(events: list) -> list:
    """``events`` up to a gap among their positions (exclusive): the log trimmed between
    two reads of a task's shared buffer (``redis_watched.Watched.merge`` appends what the
    second read found), so that a stream behind the buffer's end was handed the events
    before the trim and after it as one batch. The next read starts past the gap, which
    ``read`` then meets as a trimmed log's (the stored Task first)."""
    for i in range(1, len(events)):
        if events[i].seq != events[i - 1].seq + 1:
            return events[:i]
    return events


def subscription(hub, call, task) -> HubStream:
    """A SubscribeToTask stream of ``task``, or -32600 past the tenant's limit."""
    if not hub.subscribe(call.tenant):
        limit = hub.limits(call.tenant)["max_subscriptions"]
        raise InvalidRequestError(f"this tenant already has {limit} SubscribeToTask streams "
                                  "open on this replica; close one, or poll with GetTask")
    stream = hub.config.stream
    limits = hub.limits(call.tenant)
    lifetime = limits["run_timeout_secs"] + EXTRA_LIFETIME_SECS

    def hold(payload, tenant=call.tenant, most=limits["answer_bytes"]):
        return hub.held.event(payload, tenant, most)
    # NOTE: a shared store's events are copies read for the worker; the memory store's are
    # the ones it keeps, quoted, but for a finished task's that quote its wire form.
    source = EventSource(hub.store, task, hold)

    def closed():
        try:
            source.close()
        finally:
            hub.unsubscribe(call.tenant)
    try:
        return HubStream(call.id, [], source.read, environ=call.environ,
                         keepalive=stream["keepalive_secs"],
                         write_timeout=stream["write_timeout_secs"], lifetime=lifetime,
                         expired=SubscriptionExpiredError(lifetime).error_object(),
                         on_close=closed)
    except BaseException:
        hub.unsubscribe(call.tenant)
        raise


def subscribe_to_task(hub, call):
    return subscription(hub, call, find(hub, call))
