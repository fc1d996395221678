"""The session's tasks: a dict, their order by last change, and a bound on finished ones.

Retention is per owner: each owner (a credential, or None for the session's own
tasks) keeps its ``keep_finished`` most recent finished tasks, and all owners
together at most ``keep_finished_total``; past that ceiling the owner holding the
most finished tasks loses its oldest. So a credential flooding the door with
tasks evicts its own results, never another's. Their sizes (``TaskRecord.size``)
are bounded the same way: ``keep_bytes`` per owner, ``keep_bytes_total`` together
(past it, the owner holding the most bytes loses its oldest); the task that has
just finished is never evicted for its size, so one larger than a bound alone
stays until the next one finishes.

Concurrency:
    ``_lock`` guards every field below. Each live task's ``runtime.cond`` is a
    ``Condition`` on that same lock; ``change()`` notifies it, so a held
    request waits for its own task only.
"""
from __future__ import annotations

import base64
import binascii
import heapq
import logging
import threading
import time
from collections import deque
from operator import attrgetter

from murmur_wsgi.door.tasks.order import TaskOrder
from murmur_wsgi.door.tasks.record import SETTLED, TERMINAL, TaskRecord, now_ms

logger = logging.getLogger(__name__)

_SEQ = attrgetter("seq")          # a task's place in the order: its latest change


class TaskStore:
    """Every task the session holds, most recently changed first."""

    def __init__(self, keep_finished: int = 10_000, keep_finished_secs: float = 86_400.0,
                 clock=time.monotonic, keep_finished_total: int = 50_000,
                 keep_bytes: int = 256 * 1024 ** 2, keep_bytes_total: int = 1024 ** 3):
        # PERF: an RLock: a Condition on a plain Lock checks ownership with a trial
        # acquire, which yields to the hub under gevent. The session's ring shares it.
        self._lock = threading.RLock()
        self._clock = clock
        self._keep = keep_finished                     # per owner
        self._keep_total = keep_finished_total         # every owner together
        self._keep_secs = keep_finished_secs
        self._keep_bytes = keep_bytes                  # per owner
        self._keep_bytes_total = keep_bytes_total      # every owner together
        self._tasks: dict[str, TaskRecord] = {}       # guarded by _lock
        self._order = TaskOrder(self._tasks)           # guarded by _lock
        self._last_ms = 0                              # guarded by _lock: the last stamp
        # guarded by _lock: owner -> its finished records, oldest first (no empty deque)
        self._finished: dict[str | None, deque] = {}
        self._finished_count = 0                       # guarded by _lock: records in _finished
        self._bytes: dict[str | None, int] = {}        # guarded by _lock: owner -> held_size sum
        self._bytes_total = 0                          # guarded by _lock: every owner's together
        self._ended = 0                                # written under _lock: tasks ever finished
        # guarded by _lock: context id -> its one task's id, or a set of ids once it has more
        # PERF: most contexts hold one task; a set per context cost ~220 bytes a task.
        self._by_context: dict[str, str | set] = {}
        self.evicted = 0

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def finished_total(self) -> int:
        """How many tasks reached a terminal state in this session (held or evicted).

        NOTE: one counter, read without the lock: never the sum of two fields that
        ``_finish`` and ``_drop`` change one after the other.
        """
        return self._ended

    def condition(self) -> threading.Condition:
        """A new Condition on the store's lock (one per live task)."""
        return threading.Condition(self._lock)

    # --- writes ----------------------------------------------------------

    def add(self, record: TaskRecord) -> TaskRecord:
        """Hold a new task; it goes to the front of the order."""
        with self._lock:
            self.add_locked(record)
        return record

    def add_locked(self, record: TaskRecord) -> None:
        """``add()`` for a caller that already holds ``lock``."""
        # NOTE: stamped here, with its place in the order: timestamps follow the order.
        record.changed_ms = self._stamp()
        self._tasks[record.id] = record
        self._order.add(record)
        held = self._by_context.get(record.context_id)
        if held is None:
            self._by_context[record.context_id] = record.id
        elif isinstance(held, set):
            held.add(record.id)
        else:
            self._by_context[record.context_id] = {held, record.id}
        if record.state in TERMINAL:
            self._finish(record)
        self._evict_aged()

    def change(self, record: TaskRecord, **fields) -> TaskRecord:
        """Set fields of a task under the lock, move it to the front, wake its waiters."""
        with self._lock:
            self.change_locked(record, **fields)
        return record

    def change_locked(self, record: TaskRecord, **fields) -> None:
        """``change()`` for a caller that already holds ``lock``."""
        was_terminal = record.state in TERMINAL
        before = record.state
        for name, value in fields.items():
            setattr(record, name, value)
        record.changed_ms = self._stamp()
        record.touch()
        self._order.change(record, before)
        if record.state in TERMINAL and not was_terminal:
            self._finish(record)
        elif was_terminal:
            self._recount(record)
        runtime = record.runtime
        if runtime is not None:
            runtime.cond.notify_all()

    def _stamp(self) -> int:
        """Now, in ms, never before the last stamp: the order by change is the order by time."""
        stamp = self._last_ms = max(now_ms(), self._last_ms)
        return stamp

    def _finish(self, record: TaskRecord) -> None:
        record.finished_at = self._clock()
        queue = self._finished.get(record.owner)
        if queue is None:
            queue = self._finished[record.owner] = deque()
        queue.append(record)
        self._finished_count += 1
        self._ended += 1
        size = record.held_size = record.size()
        held = self._bytes[record.owner] = self._bytes.get(record.owner, 0) + size
        self._bytes_total += size
        if len(queue) > self._keep:
            self._drop(queue.popleft())        # PERF: the usual case past the bound
        self._shed(record, queue, held)

    def _shed(self, record: TaskRecord, queue: deque, held: int) -> None:
        """Drop finished tasks past the bytes' bounds, now that ``record`` counts ``held``."""
        if held > self._keep_bytes:
            # NOTE: never the owner's newest: the task that just finished is still being read.
            while len(queue) > 1 and self._bytes[record.owner] > self._keep_bytes:
                self._drop(queue.popleft())
        if (self._finished_count > self._keep_total
                or self._bytes_total > self._keep_bytes_total):
            self._evict(record)

    def _recount(self, record: TaskRecord) -> None:
        """Count a held finished task's size again: a read cached its wire form, or it changed.

        MEMORY: the first GetTask, ListTasks page or stream's end of a finished task
        caches its wire form, which holds its texts once more, escaped: retention counts
        it from then on, and drops the owner's oldest past a bound.
        """
        if record.finished_at is None or self._tasks.get(record.id) is not record:
            return
        size = record.size()
        grown = size - record.held_size
        if not grown:
            return
        record.held_size = size
        held = self._bytes[record.owner] = self._bytes[record.owner] + grown
        self._bytes_total += grown
        if grown > 0:
            self._shed(record, self._finished[record.owner], held)

    def _evict_aged(self) -> None:
        """``_evict()`` when some owner's oldest finished task is past its age."""
        cutoff = self._clock() - self._keep_secs
        for queue in self._finished.values():
            if queue[0].finished_at < cutoff:
                self._evict()
                return

    def _evict(self, newest: TaskRecord | None = None) -> None:
        """Drop finished tasks past their owner's bound, their age, or the ceilings.

        ``newest``, the task that has just finished, is not dropped for the bytes' ceiling.
        """
        cutoff = self._clock() - self._keep_secs
        keep = self._keep
        stale = [owner for owner, queue in self._finished.items()
                 if len(queue) > keep or queue[0].finished_at < cutoff]
        for owner in stale:
            queue = self._finished[owner]
            while queue and (len(queue) > keep or queue[0].finished_at < cutoff):
                self._drop(queue.popleft())
            if not queue:
                del self._finished[owner]
        while self._finished_count > self._keep_total:
            # NOTE: the owner holding the most pays, its oldest first: a flood evicts itself.
            owner, queue = max(self._finished.items(),
                               key=lambda item: (len(item[1]), -item[1][0].finished_at))
            self._drop(queue.popleft())
            if not queue:
                del self._finished[owner]
        while self._bytes_total > self._keep_bytes_total:
            # NOTE: as for the count: the owner holding the most bytes pays, its oldest first.
            held = [(self._bytes[owner], owner) for owner, queue in self._finished.items()
                    if queue[0] is not newest]
            if not held:
                break
            owner = max(held, key=lambda item: item[0])[1]
            queue = self._finished[owner]
            self._drop(queue.popleft())
            if not queue:
                del self._finished[owner]

    def _drop(self, record: TaskRecord) -> None:
        """Forget a finished task taken off its owner's queue."""
        self._finished_count -= 1
        size = record.held_size
        self._bytes_total -= size
        left = self._bytes[record.owner] - size
        if left:
            self._bytes[record.owner] = left
        else:
            del self._bytes[record.owner]
        task_id = record.id
        if self._tasks.pop(task_id, None) is not None:
            self._order.drop(record)
            held = self._by_context.get(record.context_id)
            if held == task_id:
                del self._by_context[record.context_id]
            elif isinstance(held, set):
                held.discard(task_id)
                if not held:
                    del self._by_context[record.context_id]
            self.evicted += 1

    # --- reads -----------------------------------------------------------

    def get(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    def wire(self, record: TaskRecord, artifacts: bool = True, cache: bool = True) -> str:
        """The task as GetTask answers it: the cached text, or built under the lock.

        NOTE: built under the lock so that, on OS threads, no half-changed task is
        read, nor stored in the cache after the change that should have cleared it.
        """
        cached = record._json if artifacts else record._json_bare
        if cached is not None:
            return cached
        if not cache and record.runtime is None and record.state in TERMINAL:
            # PERF: no lock: an ended task (its runtime dropped last) never changes again.
            return record.to_json(artifacts, cache)
        with self._lock:
            text = record.to_json(artifacts, cache)
            if cache:
                self._recount(record)           # the form it caches, once a task has ended
            return text

    def read(self, record: TaskRecord, view):
        """``view(record)`` under the lock: one consistent view of a task that may change.

        Handlers never take the lock themselves; what they read of a live task at
        one instant, they read through here.
        """
        with self._lock:
            return self._counting(record, view)

    def wait_settled(self, record: TaskRecord, timeout: float | None,
                     wake=lambda: False) -> bool:
        """Block until the task settles (or ``wake()`` turns true); True when settled."""
        with self._lock:
            runtime = record.runtime
            if runtime is None:
                return record.state in SETTLED
            return runtime.cond.wait_for(lambda: record.state in SETTLED or wake(), timeout) \
                and record.state in SETTLED

    def snapshot(self) -> list[TaskRecord]:
        """Every task, most recently changed first (for StopSession and metrics)."""
        with self._lock:
            return sorted(self._tasks.values(), key=lambda r: r.seq, reverse=True)

    def page(self, sees, state: str | None, cutoff_ms: float | None, context_id: str | None,
             page_size: int, after_seq: int | None, render) -> tuple[list[str], int | None, int]:
        """One ListTasks page: (rendered tasks, next seq or None, total matching).

        The filters and who sees a task (``sees(owner)``) apply afresh to every
        page. ``render(record)`` runs under the lock, so a page shows each task as
        it stood at one moment. PERF: ``totalSize`` comes from the per-(owner,
        state) counts; a contextId scans that context's tasks; otherwise the page
        walks the orders of the (owner, state) pairs its filters take, merged
        (``TaskOrder.walk``): it reads the tasks it shows and one more, whatever else
        the store holds; a timestamp cutoff's total walks the matching tasks changed
        since it (changes are stamped in order).
        """
        def match(rec) -> bool:
            return (sees(rec.owner) and (state is None or rec.state == state)
                    and (cutoff_ms is None or rec.changed_ms >= cutoff_ms))

        with self._lock:
            self._evict()
            if context_id:
                held = self._by_context.get(context_id, ())
                tasks_by_id = self._tasks
                hits = [rec for rec in map(tasks_by_id.__getitem__,
                                           (held,) if isinstance(held, str) else held)
                        if match(rec)]
                total = len(hits)
                if after_seq is not None:
                    hits = [rec for rec in hits if rec.seq < after_seq]
                # PERF: the page's newest, not the whole context sorted, under the lock: at
                # 10,000 tasks in one context 11.0 ms a page before (bench/list_tasks.py).
                tasks = heapq.nlargest(page_size + 1, hits, key=_SEQ)
                more = len(tasks) > page_size
                del tasks[page_size:]
                return self._rendered(tasks, render), (tasks[-1].seq if more else None), total
            order = self._order
            keys = order.keys(sees, state)
            if cutoff_ms is None:
                total = order.total(keys)
            else:
                total = 0
                for rec in order.walk(keys, None):
                    if rec.changed_ms < cutoff_ms:
                        break
                    total += 1
            tasks: list[TaskRecord] = []
            more = False
            for rec in order.walk(keys, after_seq):
                if cutoff_ms is not None and rec.changed_ms < cutoff_ms:
                    break
                if len(tasks) == page_size:
                    more = True
                    break
                tasks.append(rec)
            return self._rendered(tasks, render), (tasks[-1].seq if more else None), total

    def _rendered(self, tasks: list[TaskRecord], render) -> list[str]:
        """``render`` each task (under the lock), counting the wire forms it cached."""
        return [self._counting(rec, render) for rec in tasks]

    def _counting(self, record: TaskRecord, view):
        """``view(record)`` (under the lock), the record counted again if it cached a wire
        form meanwhile (``_recount``)."""
        forms = record._json, record._json_bare
        out = view(record)
        if forms[0] is not record._json or forms[1] is not record._json_bare:
            self._recount(record)
        return out


def encode_token(seq: int, session_id: str) -> str:
    """An opaque page token naming a position in the order."""
    raw = f"{seq}:{session_id[-12:]}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, session_id: str) -> int | None:
    """The position a token this door answered names, or None.

    Only the exact text ``encode_token`` writes is one: base64 decoding skips characters
    outside its alphabet and takes padding, and a position may be written with leading
    zeros, so a token with anything added to it decoded to the same position.
    """
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    seq, _, tag = raw.partition(":")
    if tag != session_id[-12:] or not (seq.isascii() and seq.isdigit()) or len(seq) > 18:
        return None
    position = int(seq)
    return position if encode_token(position, session_id) == token else None
