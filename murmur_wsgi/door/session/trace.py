"""The session trace: JSON lines at ``<home>/records/<session_id>/trace.jsonl``.

Every line starts ``event_type``, ``event_id`` (``evt_`` + UUIDv7 hex),
``parent_id``, ``session_id`` and ``timestamp`` (unix ms), then the record's
own fields. ``session_start`` is the one record without a parent; a task's
records (``task_end``, ``harness_*``) name its ``task_start``; the others
name ``session_start``. A refused message writes nothing: only a started
task reaches ``task_start``. No record carries a token or a task's text.

Concurrency:
    A record is queued, then written. ``_lock`` guards the queue and the task
    table: a record is queued in the order of the calls, and the task
    manager queues ``task_start`` and ``task_end`` while it holds the store's
    lock, so they follow the task's changes. The disk is written by
    ``flush()`` only, never under the store's lock: the manager flushes once
    it released it, and every other record is flushed by the call that wrote
    it. ``_io`` (a ``Lock``) makes one flush at a time, taking the queue
    whole, so lines reach the file in the queue's order and never
    interleave. Writing never fails a task or a request: an I/O error is
    logged once and the trace turns itself off.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from json.encoder import encode_basestring

from murmur_wsgi import running
from murmur_wsgi.ids import new_id
from murmur_wsgi.wire.encode import compact_utf8

logger = logging.getLogger(__name__)

FILE_NAME = "trace.jsonl"
FILE_MODE = 0o600
# A task's state -> task_end's exit_status (murmur's words).
EXIT_STATUS = {"TASK_STATE_COMPLETED": "ok", "TASK_STATE_FAILED": "failed",
               "TASK_STATE_CANCELED": "canceled", "TASK_STATE_REJECTED": "rejected"}

# The refusals of steps 2 and 11 that write an auth_refused record.
AUTH_REFUSALS = frozenset({"unauthenticated", "invalid_token", "insufficient_scope"})

_str = encode_basestring        # one JSON string, exactly as compact_utf8 writes it
_HEAD = frozenset({"event_type", "event_id", "parent_id", "session_id", "timestamp"})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def trace_path(session_id: str) -> str:
    """``<home>/records/<session_id>/trace.jsonl`` (home: ``$MURMUR_WSGI_HOME``)."""
    return os.path.join(running.home(), "records", session_id, FILE_NAME)


class Trace:
    """The one writer of a session's trace; a disabled trace writes nothing.

    Args:
        session_id: the session's ``ses_…`` id.
        enabled: False makes every call a no-op that still returns an event id.
    """

    def __init__(self, session_id: str, enabled: bool = False):
        self.session_id = session_id
        self.enabled = enabled
        self.path = trace_path(session_id) if enabled else None
        self._session = _str(session_id)
        self._lock = threading.Lock()
        self._io = threading.Lock()             # held by the one flush() writing the file
        self._queue_lines: deque[bytes] = deque()  # guarded by _lock: lines not written yet
        self._queued = 0                        # guarded by _lock: lines ever queued
        self._written = 0                       # guarded by _io: lines ever taken and written
        self._fd: int | None = None             # guarded by _io: the open trace file
        self._refusals: dict[tuple, tuple] = {}  # guarded by _lock: kind -> (second, suppressed)
        self._tasks: dict[str, tuple] = {}      # guarded by _lock: task_id -> (event_id, ms)
        self.session_event = self.write("session_start", None)

    @property
    def pending(self) -> int:
        """Records queued and not yet written."""
        return self._queued - self._written

    # --- the records -----------------------------------------------------

    def task_start(self, record, message=None) -> str | None:
        """A task the door accepted: who sent it, its attachments and references.

        Queued only: the caller holds the store's lock and ``flush()``es after.
        """
        if not self.enabled:
            return None
        if message is None:
            parts_bytes, attachments, referenced = 0, "[]", "[]"
        else:
            parts_bytes = message.text_parts_bytes
            images, references = message.images, message.reference_task_ids
            attachments = compact_utf8([{"media_type": media_type, "bytes": len(data)}
                                        for media_type, data in images]) if images else "[]"
            referenced = compact_utf8(list(references)) if references else "[]"
        # PERF: the two records of every task are written as text, not through the
        # encoder (~3 µs each); tests/door/test_trace.py checks they read as compact_utf8 writes them.
        fields = (f',"task_id":{_str(record.id)},"context_id":{_str(record.context_id)},'
                  f'"source":"a2a","origin":{_str(record.origin or "event")},'
                  f'"trust":{_str(record.trust)},"message_parts_bytes":{parts_bytes},'
                  f'"attachments":{attachments},"referenced_tasks":{referenced}')
        return self._queue("task_start", self.session_event, fields, record.id)

    def task_end(self, record, state: str) -> None:
        """A task that had a ``task_start`` ends in ``state``: exit status and duration.

        Queued only, as ``task_start``.
        """
        if not self.enabled:
            return
        started = self._tasks.pop(record.id, None)     # NOTE: one pop: atomic under the GIL
        if started is None:
            return
        event_id, started_ms = started
        fields = (f',"task_id":{_str(record.id)},'
                  f'"exit_status":{_str(EXIT_STATUS.get(state, state))},'
                  f'"duration_ms":{max(0, now_ms() - started_ms)}')
        self._queue("task_end", event_id, fields)

    def task_event(self, task_id: str, event_type: str, fields: dict) -> str:
        """Write a record of a live task (``harness_start``, …) under its ``task_start``.

        ``fields`` is a dict, never keywords: an agent's field may be named like this
        method's or ``write``'s parameters (``task_id``, ``starts_task``, ``flush``).
        """
        with self._lock:
            started = self._tasks.get(task_id)
        parent = started[0] if started is not None else self.session_event
        return self._write(event_type, parent, None, True, fields)

    def auth_refused(self, status: int, error: str) -> str | None:
        """A request the door refused at step 2 or 11; never the token.

        At most one record per kind of refusal a second: anyone who reaches the
        port can send refusals, and the trace must not grow with them. The next
        record of that kind says how many were not written (``suppressed``).
        """
        key = (status, error)
        second = int(time.monotonic())
        with self._lock:
            last, suppressed = self._refusals.get(key, (None, 0))
            if last == second:
                self._refusals[key] = (second, suppressed + 1)
                return None
            self._refusals[key] = (second, 0)
        return self.write("auth_refused", self.session_event, status=status, error=error,
                          suppressed=suppressed)

    # --- the writer ------------------------------------------------------

    def write(self, event_type: str, parent_id: str | None, starts_task: str | None = None,
              flush: bool = True, **fields) -> str | None:
        """Queue one record, and write the queue; return its event id (None when off).

        ``starts_task``: the record is that task's ``task_start``, noted for its
        later records under the same lock as the queueing. ``flush=False``
        only queues it: for a caller holding a lock the disk must not hold up.
        """
        return self._write(event_type, parent_id, starts_task, flush, fields)

    def _write(self, event_type: str, parent_id: str | None, starts_task: str | None,
               flush: bool, fields: dict) -> str | None:
        """``write()``, its fields a dict."""
        if not self.enabled:
            return None
        if not _HEAD.isdisjoint(fields):
            # NOTE: a field named like one of the head's takes its place there.
            return self._write_dict(event_type, parent_id, starts_task, flush, fields)
        text = "," + compact_utf8(fields)[1:-1] if fields else ""
        event_id = self._queue(event_type, parent_id, text, starts_task)
        if flush:
            self.flush()
        return event_id

    def _write_dict(self, event_type, parent_id, starts_task, flush, fields) -> str | None:
        """``write()`` of a record whose fields overwrite its head's (kept in place)."""
        event_id = new_id("evt")
        stamp = now_ms()
        head = {"event_type": event_type, "event_id": event_id, "parent_id": parent_id,
                "session_id": self.session_id, "timestamp": stamp}
        head.update(fields)
        self._append_line((compact_utf8(head) + "\n").encode("utf-8"), starts_task, event_id, stamp)
        if flush:
            self.flush()
        return event_id

    def _queue(self, event_type: str, parent_id: str | None, fields: str,
               starts_task: str | None = None) -> str:
        """Queue the record ``{head…, fields}`` (``fields``: JSON members, each after a comma)."""
        event_id = new_id("evt")
        stamp = now_ms()
        parent = "null" if parent_id is None else _str(parent_id)
        line = (f'{{"event_type":{_str(event_type)},"event_id":"{event_id}",'
                f'"parent_id":{parent},"session_id":{self._session},"timestamp":{stamp}'
                f'{fields}}}\n')
        self._append_line(line.encode("utf-8"), starts_task, event_id, stamp)
        return event_id

    def _append_line(self, data: bytes, starts_task: str | None, event_id: str,
                     stamp: int) -> None:
        with self._lock:
            if starts_task is not None:
                self._tasks[starts_task] = (event_id, stamp)
            if self.enabled:
                self._queue_lines.append(data)
                self._queued += 1

    def flush(self) -> None:
        """Write every queued record, in order (returns at once when none is queued).

        Never call it holding the store's lock: it waits for the disk, and for
        another flush under way that took what was queued before this call.
        """
        target = self._queued
        if self._written >= target:
            return
        with self._io:
            if self._written >= target:
                return                          # the flush before this one wrote them
            with self._lock:
                lines, self._queue_lines = self._queue_lines, deque()
                upto = self._queued
            try:
                if self.enabled:
                    self._append(b"".join(lines))
            except OSError as ex:
                # NOTE: the trace is a record, not a gate: it never fails the work it records.
                logger.warning("the session trace is off: cannot write %s: %s", self.path,
                               ex.strerror)
                self.enabled = False
            finally:
                self._written = upto

    def _append(self, data: bytes) -> None:
        """Append one line with one write on a descriptor kept open (O_APPEND)."""
        # PERF: a few records per task; reopening the file for each cost ~20 µs a task.
        if self._fd is None:
            folder = os.path.dirname(self.path)
            os.makedirs(folder, mode=running.DIR_MODE, exist_ok=True)
            for path in (os.path.dirname(folder), folder):
                os.chmod(path, running.DIR_MODE)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def close(self) -> None:
        """Write what is queued and close the trace's file; a later record reopens it."""
        self.flush()
        with self._io:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def read_trace(session_id: str) -> list[dict]:
    """Every record of a session's trace, oldest first (an absent trace is empty)."""
    try:
        with open(trace_path(session_id), encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []
