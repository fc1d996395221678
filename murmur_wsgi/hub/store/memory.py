"""The in-memory store (``store: memory``): one process, lost at restart.

Concurrency:
    ``lock`` (an RLock: a Condition on it checks ownership without a trial
    acquire, which would yield under gevent) guards every field below.
    ``changed`` (on ``lock``) is notified by every write of a task or an
    event and by ``close()``; the push dispatcher waits on it with a timeout.
    A reader of a task's events (a subscriber, a held request) waits with a
    timeout on a condition of that task's own (on ``lock`` too: ``memory_waits``),
    notified by its task's events, the end of its log and ``close()``: an
    event wakes its own task's readers, not every reader of every tenant.
    Every read-modify-write holds the lock and ends by notifying.
    A listing holds it for one index's bisect and slice (``memory_index``).

Retention (``memory_retain.Retaining``): a finished task is forgotten after
``tasks.retention_secs``, or past its tenant's ``tasks.max_per_tenant`` or
``tasks.max_bytes_per_tenant``, the oldest first. A task refused at its creation keeps its
message once, in its wire form (its first event is rendered from it when read).

MEMORY: a finished task is kept in values Python's garbage collector does not track
(``HubTask.record``: a tuple of strings and numbers, its wire form among them; its event
log a tuple of its payloads, the texts its wire form holds as their places in it,
``memory_logs``; an index of one task a tuple, ``memory_index``), where it was
sixteen objects the collector tracks: a full collection with a tenant at its cap no
longer stops the worker for hundreds of milliseconds (docs/performance.md). ``get`` hands
out a finished task as a new, frozen ``HubTask``.
"""
from __future__ import annotations

import collections
import logging
import threading
import time

from murmur_wsgi.hub.store.base import (PENDING, Page, StoredEvent, TaskStore, first_within,
                                        newest_within)
from murmur_wsgi.hub.store.memory_index import TaskIndexes, filtered_page
from murmur_wsgi.hub.store.memory_logs import (QUOTE_CHARS, kept_form, quoted, stored,
                                               text_of)
from murmur_wsgi.hub.store.memory_retain import Retaining
from murmur_wsgi.hub.store.memory_waits import KeyedWaits
from murmur_wsgi.hub.store.pages import decode_token, encode_token
from murmur_wsgi.hub.store.retention import Retention
from murmur_wsgi.hub.task import REJECTED, SUBMITTED, TERMINAL, WORKING, HubTask, as_task
from murmur_wsgi.wire.encode import compact_utf8, utf8_bytes

logger = logging.getLogger(__name__)


def _running_form(task: HubTask, artifacts: list) -> tuple[str, str]:
    """A running task's stored form as a Redis record holds it: its history's JSON (encoded
    once, ``history_json``) and its artifacts' (``hist``, ``arts``)."""
    return task.history_json(), compact_utf8(artifacts) if artifacts else "[]"


class MemoryTaskStore(Retaining, TaskStore):
    """Tasks, their indexes, their event logs and claims, in this process's memory."""

    def __init__(self, retention_secs: float = 86_400.0, clock=time.monotonic,
                 retention: Retention | None = None):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)   # notified: every write, close()
        self._retention = retention_secs                 # of the event logs
        self._keep = retention or Retention()           # of the finished tasks
        self.clock = clock
        # task id -> its HubTask while it runs, its record once finished (a tuple)
        self._tasks: dict[str, HubTask | tuple] = {}      # guarded by lock
        self._indexes = TaskIndexes()
        self._seqs: dict[tuple, int] = {}                 # (tenant, agent) -> the last seq
        # tenant -> {id: (ended at, its bytes)}, and the sum of those bytes
        self._finished: dict[str, collections.OrderedDict] = {}
        self._finished_bytes: dict[str, int] = {}
        self._push_bytes: dict[str, int] = {}    # a running task's configs' bytes, by id
        self._claims: dict[tuple, str] = {}     # (tenant, agent, msg) -> task id | PENDING
        # task id -> [StoredEvent], or a finished task's payloads (a tuple, ``_stored``)
        self._events: dict[str, list | tuple] = {}
        # task id -> its events' deadline, in deadline order (one retention for all)
        self._expiry: collections.OrderedDict = collections.OrderedDict()
        self._marks: set[str] = set()
        # A task's readers, by task id. PERF: they waited on ``changed``: each event of any
        # task woke every waiting reader of every task, about 7 us each under gevent.
        self._readers = KeyedWaits(self.lock)
        self._forget_hooks: list = []
        self._retained_at = clock()
        self.closed = False

    # --- idempotency -------------------------------------------------------

    def open(self, task, event, counters, concurrency, rate, claimed=False):
        # One step, as the Redis store's OPEN script: under threads (``--dev``) a reader
        # found the task between its creation and its start, SUBMITTED. The counters' lock
        # is taken under this one, never the other way round.
        with self.lock:
            return super().open(task, event, counters, concurrency, rate, claimed)

    def claim_message(self, tenant, agent, message_id):
        key = (tenant, agent, message_id)
        with self.lock:
            found = self._claims.get(key)
            if found is None:
                self._claims[key] = PENDING
            return found

    def release_message(self, tenant, agent, message_id):
        with self.lock:
            if self._claims.get((tenant, agent, message_id)) == PENDING:
                del self._claims[(tenant, agent, message_id)]

    # --- tasks -----------------------------------------------------------

    def create(self, task, event, bind=True):
        with self.changed:
            self.expire_locked()
            owner = (task.tenant, task.agent)
            task.seq = self._seqs[owner] = self._seqs.get(owner, 0) + 1
            self._tasks[task.id] = task
            self._indexes.add(task)
            key = (task.tenant, task.agent, task.message_id)
            if bind:
                self._claims[key] = task.id
            elif self._claims.get(key) == PENDING:
                del self._claims[key]
            if task.terminal:
                self._keep_finished_locked(task)   # the message once: in its wire form only
                self._events[task.id] = (None,)    # rendered from the record when read
                self._expiry[task.id] = self.clock() + self._retention
                self._finish_locked(task)
            else:
                self._events[task.id] = [StoredEvent(1, event, False)]
            self.changed.notify_all()

    def get(self, tenant, agent, task_id):
        found = self._tasks.get(task_id)
        if found is None:
            return None
        task = as_task(found)
        if task.tenant != tenant or task.agent != agent:
            return None
        return task

    def task_json(self, tenant, agent, task_id):
        found = self._tasks.get(task_id)
        if type(found) is tuple:           # PERF: a finished task's wire form, as kept
            return HubTask.record_json(found, tenant, agent)
        return super().task_json(tenant, agent, task_id)

    def kept(self, task_id, text):
        found = self._tasks.get(task_id)         # a finished task's wire form, as kept
        return type(found) is tuple and found[10] is text

    def _running_locked(self, task_id: str) -> HubTask | None:
        """The task, unless it finished (kept as a record) or is unknown."""
        found = self._tasks.get(task_id)
        return None if type(found) is tuple else found

    def _keep_finished_locked(self, task, last: str | None = None) -> None:
        """Keep the finished ``task`` as its record (``HubTask.record``: ``last``, its last
        artifact's JSON, when encoded already), in the indexes too.

        NOTE: the task itself is frozen: a caller that holds it (a run, its held request)
        reads it as it is, from its wire form."""
        record = task.record(last)
        self._tasks[task.id] = record
        self._indexes.kept(task, record)

    def _append_locked(self, task_id: str, payload: str, terminal: bool = False) -> None:
        log = self._events.get(task_id)
        if log is not None:
            log.append(StoredEvent(len(log) + 1, payload, terminal))
            self._readers.wake(task_id)

    def _set_state_locked(self, task, state: str, text: str | None = None) -> None:
        old_state, old_ms = task.state, task.status_ms
        task.set_state(state, text)
        self._indexes.moved(task, old_state, old_ms)

    def start(self, task_id):
        with self.changed:
            task = self._running_locked(task_id)
            if task is None or task.state != SUBMITTED:
                return None
            self._set_state_locked(task, WORKING)
            payload = task.status_event()
            self._append_locked(task_id, payload)
            self.changed.notify_all()
            return payload

    def append(self, task_id, event, n=0):
        with self.changed:
            task = self._running_locked(task_id)
            if task is None or task.terminal:
                return False
            if n:
                if n <= task.written:
                    return True                     # written already
                task.written = n
            self._append_locked(task_id, event)
            self.changed.notify_all()
            return True

    def end(self, task_id, state, text, artifacts, events, numbered=(0, 0), answer=None,
            keep=False):
        with self.changed:
            task = self._running_locked(task_id)
            if task is None or task.terminal:
                return None
            if artifacts is not None:
                task.set_artifacts(artifacts)
            else:
                answer = None
            self._set_state_locked(task, state, text)
            written = [*map(kept_form, events), task.status_event()]
            first, count = numbered
            for i, payload in enumerate(written):
                if i < count and first + i <= task.written:
                    continue                        # a numbered event written already
                self._append_locked(task_id, payload, terminal=i == len(written) - 1)
            log = self._events.get(task_id)
            if log is not None:
                self._events[task_id] = tuple(event.payload for event in log)
            self._keep_finished_locked(task, answer)
            self._expiry[task_id] = self.clock() + self._retention
            self._finish_locked(task)            # its bytes counted as the texts they are
            self._quote_locked(task_id, answer, len(written))
            self.changed.notify_all()
            return written

    def _quote_locked(self, task_id: str, answer: str | None, ended: int) -> None:
        """Keep the finished task's long events as their places in its wire form
        (``memory_logs.quoted``; ``ended``: how many events its end wrote, at most)."""
        log, record = self._events.get(task_id), self._tasks.get(task_id)
        # PERF: a wire form shorter than a quote holds none (most tasks: no look at the log)
        if type(log) is tuple and type(record) is tuple and len(record[10]) >= QUOTE_CHARS:
            self._events[task_id] = quoted(log, record[10], record[13], answer, ended)

    def render(self, task, history_length=None, artifacts=True, cache=True, as_read=False):
        with self.lock:
            return task.to_json(history_length, artifacts, cache and task.state != REJECTED)

    def list(self, tenant, agent, *, context_id=None, state=None, after_ms=None, page_size=50,
             token=None, max_bytes=None):
        before = decode_token(token) if token else None
        with self.lock:
            found = self._indexes.page(tenant, agent, context_id, state, after_ms, page_size,
                                       before)
        if isinstance(found, tuple):               # the tasks changed after after_ms
            found = filtered_page(found, page_size, before)
        if max_bytes is None or len(found.tasks) < 2:
            return found
        tasks = found.tasks
        count = first_within(self._stored_sizes(tasks), max_bytes)
        if count == len(tasks):
            return found
        return Page(tasks[:count], encode_token(tasks[count - 1].seq), found.total)

    def context_tasks(self, tenant, agent, context_id, limit, max_bytes):
        with self.lock:
            tasks = self._indexes.context_tasks(tenant, agent, context_id, limit)
        return newest_within(tasks, self._stored_sizes(tasks), max_bytes)

    def _stored_sizes(self, tasks: list) -> list[int]:
        """The UTF-8 bytes of the tasks' stored forms, as the Redis store counts them (its
        records' ``HSTRLEN``): a finished task's full wire form (what retention counts of
        each), a running one's history and artifacts (a record's ``hist`` and ``arts``;
        before, its whole wire form: its ids and status counted too, so a page of running
        tasks, or a context's turns, ended one task sooner than on Redis).

        NOTE: a finished task's wire form is read under the lock, encoded outside it, and
        cached only if the task has not changed meanwhile (``HubTask.draft``): cached
        outside it, a task started or ended meanwhile under real threads (``--dev``) kept
        its old form, and GetTask answered its old state. A running task's history and
        artifacts are replaced by a change, never altered: taken under the lock (its
        artifacts) or once (its history), encoded outside it, and no wire form is kept."""
        with self.lock:
            drafts = [(True, task.draft()) if task.terminal else (False, task.contents()[1])
                      for task in tasks]
        texts = [HubTask.drafted(draft) if whole else _running_form(task, draft)
                 for task, (whole, draft) in zip(tasks, drafts)]
        if any(whole and type(draft) is tuple for whole, draft in drafts):
            with self.lock:
                for task, (whole, draft), text in zip(tasks, drafts, texts):
                    if whole:
                        task.keep_json(draft, text)
        return [sum(map(utf8_bytes, text)) if type(text) is tuple else utf8_bytes(text)
                for text in texts]

    # --- events ----------------------------------------------------------

    def events(self, task_id, after, timeout, tenant=None, finished=False):
        deadline = self.clock() + timeout
        with self.changed:
            while True:
                self.expire_locked()
                log = self._events.get(task_id)
                if log is None:
                    return [], False
                if len(log) > after:
                    events = stored(log, after)
                    if type(log) is tuple:
                        wire = self._tasks[task_id][10]
                        break
                    return events, True
                if self.closed:
                    return [], False
                left = deadline - self.clock()
                if left <= 0:
                    return [], True
                self._readers.wait(task_id, left)
        # A finished task's: its events' texts made outside the lock.
        # MEMORY: at most one made text a read, its first: a stream writes a read's events a
        # batch at a time (holding the batch's large ones counted, hub/held.py), and one made
        # behind them (a long answer behind its message, or behind its streamed tokens) was a
        # copy the stream kept uncounted, its client reading slowly, until its batch came.
        read: list = []
        for event in events:
            if type(event.payload) is not str:
                if read:
                    break
                event = StoredEvent(event.seq, text_of(event.payload, wire), event.terminal)
            read.append(event)
        return read, True

    def expire_locked(self) -> None:
        now = self.clock()
        expiry = self._expiry
        while expiry and next(iter(expiry.values())) <= now:
            task_id, _ = expiry.popitem(last=False)
            self._events.pop(task_id, None)
            self._marks.discard(task_id)
            self._readers.wake(task_id)

    def kept_locked(self, task_id: str) -> bool:
        """Whether the task is kept (the caller holds ``lock``)."""
        return task_id in self._tasks

    def log_locked(self, task_id: str) -> tuple[int, bool] | None:
        """``(how many events the task's log holds, whether the last ends it)`` (the caller
        holds ``lock``), None once it expired."""
        log = self._events.get(task_id)
        if log is None:
            return None
        if type(log) is tuple:
            return len(log), True
        return len(log), bool(log) and log[-1].terminal

    def last_position(self, task_id: str, tenant: str | None = None) -> int:
        with self.lock:
            self.expire_locked()
            return len(self._events.get(task_id, ()))

    def final_event(self, task_id, tenant=None):
        """PERF: the last event alone: a finished log's others are texts made at each read."""
        events, _ = self.events(task_id, max(0, self.last_position(task_id) - 1), 0)
        return events[-1].payload if events and events[-1].terminal else None

    def kept_event(self, task_id, seq, payload):
        """PERF: the log's entry at ``seq`` alone (a log's positions are its indexes + 1):
        a look through the log before it, under the lock, took 36 ms for an event after
        100,000 others, each large event of each stream's read."""
        with self.lock:
            log = self._events.get(task_id, ())
            if not 0 < seq <= len(log):
                return False
            entry = log[seq - 1]
            return entry is payload or type(entry) is StoredEvent and entry.payload is payload

    def has_events(self, task_id: str, tenant: str | None = None) -> bool:
        with self.lock:
            self.expire_locked()
            return task_id in self._events

    # --- cancel marks ----------------------------------------------------

    def mark_cancel(self, task_id, tenant=None):
        with self.changed:
            task = self._running_locked(task_id)
            if task is not None and task.state not in TERMINAL:
                self._marks.add(task_id)
            self.changed.notify_all()

    def cancel_marked(self, task_id, tenant=None):
        return task_id in self._marks

    # --- lifetime --------------------------------------------------------

    def wait(self, predicate, timeout: float) -> bool:
        """Wait until ``predicate()`` (called under the lock) holds; False past ``timeout``."""
        with self.changed:
            return self.changed.wait_for(lambda: predicate() or self.closed, timeout)

    def notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def close(self):
        with self.changed:
            self.closed = True
            self.changed.notify_all()
            self._readers.wake_all()
