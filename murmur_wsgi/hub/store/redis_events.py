"""The Redis task store's reads of a task's events and its cancel marks (``TaskEvents``).

Mixed into ``redis.RedisTaskStore``: each method names a task by id alone, so it takes
the task's ``tenant`` (its keys are in its tenant's slot), or finds it among the tasks
the store knows (``_tenant_of``). Events are read through the connection's one listener
(``redis_feed``): a stream waiting for its task's next event costs no command, an event
one read per process that streams its task.
"""
from __future__ import annotations

import time

from redis.exceptions import DataError

from murmur_wsgi.hub.store.base import StoredEvent
from murmur_wsgi.hub.store.redis_client import FAILURES, failed
from murmur_wsgi.hub.store.redis_client import guarded as _guarded
from murmur_wsgi.hub.store.redis_feed import PAGE_BYTES, PAGE_EVENTS
from murmur_wsgi.hub.store.redis_keys import CHANNEL, events_key, mark_key, task_key
from murmur_wsgi.wire.stream import task_event

MARK_TTL_MS = 3_600_000          # a cancel mark outlives any run it could reach
WATCH_MS = 300_000               # a read watches its task this long (redis_scripts.READ)
REWATCH_SECS = 60.0              # … marked again this often while a stream here reads it


def _payload_and_end(fields: list) -> tuple[str, bool]:
    """An event entry's raw fields (``p`` its payload, ``t`` "1" when it is the last)."""
    found = dict(zip(fields[::2], fields[1::2]))
    if "p" not in found:        # written by hand: the task's read fails as Redis's would
        raise DataError("an event entry without its payload")
    return found["p"], found.get("t") == "1"


class TaskEvents:
    """A task's event log (``ev:<id>``) and cancel mark (``cancel:<id>``) on Redis."""

    def events(self, task_id, after, timeout, tenant=None, finished=False):
        try:            # NOTE: not ``guarded``: every waiting stream waits in this call
            tenant = self._tenant_of(task_id, tenant)
            if tenant is None or self.conn.closed.is_set():
                return [], False
            self.conn.start_feed()
            return self.conn.feed.events(
                task_id, after, timeout,
                lambda t, a: self._read_events(tenant, t, a, finished))
        except FAILURES as ex:
            raise failed("events", ex) from None

    def _read_events(self, tenant: str, task_id: str, after: int,
                     finished: bool = False) -> tuple[list, bool, bool]:
        """The task's events after position ``after`` (a page: at most ``PAGE_EVENTS``, and
        none after the one that brings their payloads to ``PAGE_BYTES``), whether its log
        exists, and whether the page stopped at a bound: one round trip (the feed's read, for
        one stream or for all of a task's), which marks the task watched: its next events
        are announced (``redis_scripts.READ``). A task ``finished`` (its log whole), or
        marked by this process a while ago, is read by a read-only script (``PAGE``), which
        a primary's write pause lets through (``RecordReads._read_only``).

        MEMORY: a page, never the whole log: each stream replaying a long log (up to
        ``limits.max_output_bytes``) would hold its own copy of it in the worker; bounded in
        bytes too, as 64 events of a log of large ones (artifact chunks) are most of it."""
        key, start, now = events_key(tenant, task_id), f"{after + 1}-0", time.monotonic()
        if finished or \
                now - self._marked.get(task_id, (tenant, -REWATCH_SECS))[1] < REWATCH_SECS:
            page = self._read_only(*self._page, 1, key, start, PAGE_EVENTS, PAGE_BYTES)
        else:                   # marked by this process long enough ago: marked again
            page = self._scripts["READ"](keys=[task_key(tenant, task_id), key],
                                         args=[start, WATCH_MS, PAGE_EVENTS, PAGE_BYTES])
            self._marked[task_id] = (tenant, now)
        entries, exists, more = page[:3]
        if len(page) > 3:
            # MEMORY: an event larger than a page (an artifact of many MiB), read once the
            # worker has room for it: every stream opening on a large event read a copy of
            # its own at once, however many (``large_reads``).
            with self.large_reads.room(page[3], tenant):
                entries = self._command("XRANGE", key, start, "+", "COUNT", 1)
        # NOTE: a raw reply: each entry is [id, [field, value, …]].
        return self._filled(tenant, task_id, [
            StoredEvent(int(entry_id.split("-", 1)[0]), *_payload_and_end(fields))
            for entry_id, fields in entries]), bool(exists), bool(more)

    def _filled(self, tenant: str, task_id: str, events: list) -> list:
        """``events`` with a refused task's first event read from its record's wire form
        (left out when the record has just been forgotten); one larger than a page once
        the worker has room for it, as a large event (``_read_events``)."""
        if events and events[0].payload == "":
            key = task_key(tenant, task_id)
            size = self._redis.hstrlen(key, "wire")
            if size > PAGE_BYTES:
                with self.large_reads.room(size, tenant):
                    wire = self._redis.hget(key, "wire")
            else:
                wire = self._redis.hget(key, "wire")
            if wire is None:
                return events[1:]
            events[0] = StoredEvent(events[0].seq, task_event(wire), events[0].terminal)
        return events

    @_guarded
    def keep_watching(self):
        """Renew the watch of every task a stream of this process reads (the replica's turn):
        the scripts announce a task's events while it is watched (``redis_scripts``)."""
        now = time.monotonic()
        feed = self.conn.feed
        reading = set(feed.reading())
        # NOTE: a mark made since ``reading`` was taken is a new reader's: kept.
        dropped = {task_id: mark for task_id, mark in list(self._marked.items())
                   if task_id not in reading and mark[1] < now}
        for task_id in dropped:
            self._marked.pop(task_id, None)         # no stream here reads it any more
        # … and the feed forgets them, or a stream between two reads (writing) would trust
        # its buffer after its task's watch lapsed; one a reader came to keeps its mark.
        for task_id in feed.forget(dropped):
            self._marked.setdefault(task_id, dropped[task_id])
        for task_id in reading:
            tenant, at = self._marked.get(task_id, (None, -REWATCH_SECS))
            if tenant is not None and now - at >= REWATCH_SECS:
                if not self._scripts["WATCH"](keys=[task_key(tenant, task_id)],
                                              args=[WATCH_MS]):
                    # NOTE: its record is gone (a Redis flushed, or restarted empty with
                    # this connection kept): nothing will announce its end, so its
                    # readers read for themselves, and find its log gone.
                    feed.lapsed(task_id)
                self._marked[task_id] = (tenant, now)

    @_guarded
    def final_event(self, task_id, tenant=None):
        tenant = self._tenant_of(task_id, tenant)
        if tenant is None:
            return None
        for _, fields in self._redis.xrevrange(events_key(tenant, task_id), "+", "-", count=1):
            if fields.get("t") == "1":
                filled = self._filled(tenant, task_id, [StoredEvent(1, fields["p"], True)])
                return filled[0].payload if filled else None
        return None

    def logged(self, task_id: str, tenant: str):
        """Every payload of the task's log, oldest first, read ``PAGE_EVENTS`` at a time as
        they are taken, not through the feed (whose reader waits while another reads): the
        stale sweep's, for the artifacts of a run its replica left."""
        key, start = events_key(tenant, task_id), "-"
        while True:
            try:
                entries = self._redis.xrange(key, start, "+", count=PAGE_EVENTS)
            except FAILURES as ex:
                raise failed("events", ex) from None
            for _, fields in entries:
                # NOTE: an entry without its payload (written by hand) reads as none, not
                # a KeyError that stops the sweep for every other run.
                yield fields.get("p", "")
            if len(entries) < PAGE_EVENTS:
                return
            start = f"{int(entries[-1][0].split('-', 1)[0]) + 1}-0"

    @_guarded
    def last_position(self, task_id, tenant=None):
        tenant = self._tenant_of(task_id, tenant)
        if tenant is None:
            return 0
        # NOTE: the record counts the events written (``nev``); entry n is ``<n>-1``.
        found = self._redis.hget(task_key(tenant, task_id), "nev")
        return int(found) if found else 0

    @_guarded
    def has_events(self, task_id, tenant=None):
        tenant = self._tenant_of(task_id, tenant)
        return tenant is not None and bool(self._redis.exists(events_key(tenant, task_id)))

    # --- cancel marks ----------------------------------------------------

    @_guarded
    def mark_cancel(self, task_id, tenant=None):
        tenant = self._tenant_of(task_id, tenant)
        if tenant is not None:
            self._scripts["MARK"](keys=[task_key(tenant, task_id), mark_key(tenant, task_id)],
                                  args=[CHANNEL, task_id, MARK_TTL_MS])

    @_guarded
    def cancel_marked(self, task_id, tenant=None):
        tenant = self._tenant_of(task_id, tenant)
        return tenant is not None and bool(self._redis.exists(mark_key(tenant, task_id)))

