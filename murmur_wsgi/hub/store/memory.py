"""The in-memory store (``store: memory``): one process, lost at restart.

Concurrency:
    ``lock`` (an RLock: a Condition on it checks ownership without a trial
    acquire, which would yield under gevent) guards every field below.
    ``changed`` (on ``lock``) is notified by every write of a task or an
    event and by ``close()``; subscribers and held requests wait on it with a
    timeout. Every read-modify-write holds the lock and ends by notifying.
"""
from __future__ import annotations

import collections
import logging
import threading
import time

from murmur_wsgi.hub.store.base import PENDING, Page, StoredEvent, TaskStore
from murmur_wsgi.hub.store.pages import decode_token, encode_token
from murmur_wsgi.hub.task import SUBMITTED, TERMINAL, WORKING

logger = logging.getLogger(__name__)


class MemoryTaskStore(TaskStore):
    """Tasks, their index, their event logs and claims, in this process's memory."""

    def __init__(self, retention_secs: float = 86_400.0, clock=time.monotonic):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)   # notified: every write, close()
        self._retention = retention_secs
        self.clock = clock
        self._tasks: dict[str, object] = {}               # guarded by lock
        self._index: dict[tuple, list] = {}              # (tenant, agent) -> tasks, oldest first
        self._contexts: dict[tuple, list] = {}           # (tenant, agent, ctx) -> tasks
        self._claims: dict[tuple, str] = {}              # (tenant, agent, msg) -> task id | PENDING
        self._events: dict[str, list] = {}               # task id -> [StoredEvent]
        self._expiry: collections.deque = collections.deque()   # (deadline, task id), in order
        self._marks: set[str] = set()
        self.closed = False

    # --- idempotency -------------------------------------------------------

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
            tasks = self._index.setdefault((task.tenant, task.agent), [])
            task.seq = len(tasks) + 1
            tasks.append(task)
            self._contexts.setdefault((task.tenant, task.agent, task.context_id), []).append(task)
            self._tasks[task.id] = task
            key = (task.tenant, task.agent, task.message_id)
            if bind:
                self._claims[key] = task.id
            elif self._claims.get(key) == PENDING:
                del self._claims[key]
            self._events[task.id] = [StoredEvent(1, event, task.terminal)]
            if task.terminal:
                self._expiry.append((self.clock() + self._retention, task.id))
            self.changed.notify_all()

    def get(self, tenant, agent, task_id):
        task = self._tasks.get(task_id)
        if task is None or task.tenant != tenant or task.agent != agent:
            return None
        return task

    def _append_locked(self, task_id: str, payload: str, terminal: bool = False) -> None:
        log = self._events.get(task_id)
        if log is not None:
            log.append(StoredEvent(len(log) + 1, payload, terminal))

    def start(self, task_id):
        with self.changed:
            task = self._tasks[task_id]
            if task.state != SUBMITTED:
                return None
            task.set_state(WORKING)
            payload = task.status_event()
            self._append_locked(task_id, payload)
            self.changed.notify_all()
            return payload

    def append(self, task_id, event):
        with self.changed:
            if self._tasks[task_id].terminal:
                return False
            self._append_locked(task_id, event)
            self.changed.notify_all()
            return True

    def end(self, task_id, state, text, artifacts, events):
        with self.changed:
            task = self._tasks[task_id]
            if task.terminal:
                return None
            if artifacts is not None:
                task.set_artifacts(artifacts)
            task.set_state(state, text)
            written = list(events) + [task.status_event()]
            for i, payload in enumerate(written):
                self._append_locked(task_id, payload, terminal=i == len(written) - 1)
            self._expiry.append((self.clock() + self._retention, task_id))
            self.changed.notify_all()
            return written

    def render(self, task, history_length=None, artifacts=True, cache=True, as_read=False):
        with self.lock:
            return task.to_json(history_length, artifacts, cache)

    def list(self, tenant, agent, *, context_id=None, state=None, after_ms=None, page_size=50,
             token=None):
        before = decode_token(token) if token else None
        with self.lock:
            tasks = self._index.get((tenant, agent), [])
            if context_id is not None:
                tasks = self._contexts.get((tenant, agent, context_id), [])
            if before is not None:
                # NOTE: seq is a task's place in its agent's index (1-based); a context's
                # list is in the same order, so a bisect on seq finds the cut in both.
                lo, hi = 0, len(tasks)
                while lo < hi:
                    mid = (lo + hi) // 2
                    if tasks[mid].seq < before:
                        lo = mid + 1
                    else:
                        hi = mid
                candidates = tasks[:lo]
            else:
                candidates = tasks
            filtered = state is not None or after_ms is not None

            def keep(task) -> bool:
                return (state is None or task.state == state) and \
                    (after_ms is None or task.status_ms > after_ms)

            page = []
            for task in reversed(candidates):
                if keep(task):
                    page.append(task)
                    if len(page) > page_size:
                        break
            more = len(page) > page_size
            page = page[:page_size]
            total = sum(1 for task in tasks if keep(task)) if filtered else len(tasks)
            next_token = encode_token(page[-1].seq) if more else ""
            return Page(page, next_token, total)

    def context_tasks(self, tenant, agent, context_id, limit):
        with self.lock:
            return list(self._contexts.get((tenant, agent, context_id), [])[-limit:])

    # --- events ----------------------------------------------------------

    def events(self, task_id, after, timeout):
        deadline = self.clock() + timeout
        with self.changed:
            while True:
                self.expire_locked()
                log = self._events.get(task_id)
                if log is None:
                    return [], False
                if len(log) > after:
                    return log[after:], True
                if self.closed:
                    return [], False
                left = deadline - self.clock()
                if left <= 0:
                    return [], True
                self.changed.wait(left)

    def expire_locked(self) -> None:
        now = self.clock()
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            _, task_id = expiry.popleft()
            self._events.pop(task_id, None)
            self._marks.discard(task_id)

    def log_locked(self, task_id: str) -> list | None:
        """The task's event log (the caller holds ``lock``), None once it expired."""
        return self._events.get(task_id)

    def has_events(self, task_id: str) -> bool:
        with self.lock:
            self.expire_locked()
            return task_id in self._events

    # --- cancel marks ----------------------------------------------------

    def mark_cancel(self, task_id):
        with self.changed:
            task = self._tasks.get(task_id)
            if task is not None and task.state not in TERMINAL:
                self._marks.add(task_id)
            self.changed.notify_all()

    def cancel_marked(self, task_id):
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
