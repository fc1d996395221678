"""Structured logs: the door's records as JSON lines, and the access record of each request.

The door logs through the standard ``logging`` module only: every module
under the logger ``murmur_wsgi``, one record per request under
``murmur_wsgi.access``. Nothing is configured at import: an embedding
application routes those loggers where it wants. ``murmur-wsgi serve`` (the
gunicorn conf's ``post_fork``, or ``--dev``) calls ``configure()``, which
writes them to stderr as one JSON object per line.

An access record carries ``method``, ``task_id`` (when known), ``status``,
``outcome``, ``duration_ms``, ``path`` and ``remote_addr`` as fields of the
record (``extra={"murmur": {...}}``): never the query string, a header, a
token or the message.

Every field of a record, and every string put into its message, is cut to
``field_chars()`` characters (``observability.log_field_chars``, 256 by
default) and marked (``…[cut: <n> chars]``); a message as a whole, to four
times that: a caller's 50 MB id makes a line of a few hundred bytes. A
traceback is kept whole. The bound is each application's own, however many
a process holds: an application sets its bound on the thread (or greenlet)
that answers a request while it answers it (``APP_BOUND``), a door on each of
its tasks' threads, and an access record carries its door's. A thread started
from one of those for the shared parts (a timer's callback, an agent's pipe
readers) carries it too (``carrying_bound``). Outside them (a server's own
records) the process's bound holds: 256, or what ``set_field_chars`` set (a
door its process's only application, served by ``murmur-wsgi serve`` or gunicorn
on ``murmur_wsgi.wsgi:app``, sets its own).
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from contextvars import ContextVar

logger = logging.getLogger(__name__)

ROOT = "murmur_wsgi"
ACCESS = "murmur_wsgi.access"
LEVEL_ENV = "MURMUR_WSGI_LOGLEVEL"
FIELDS = "murmur"              # the record attribute holding a record's structured fields

FIELD_CHARS = 256             # a logged field, or a value in a message, is cut past this
_bounds = [FIELD_CHARS]       # the process's (a message's is 4 times a field's)
# The field bound of the application answering in this thread or greenlet (None: the
# process's): each application sets it as it answers a request, and resets it with the
# token ``set`` gave; a door in each of its tasks' threads too. (PERF: its C methods, called
# inline, cost a request no Python call.)
APP_BOUND: ContextVar = ContextVar("murmur_wsgi_log_field_chars", default=None)
BOUND = "murmur_field_chars"    # the record attribute an access record carries its bound in

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode
_SCALARS = (int, float, bool, type(None))


def set_field_chars(chars: int) -> None:
    """Cut every logged field past ``chars`` from now on, a record's message past 4 times
    that, where no application has set its own (``APP_BOUND``)."""
    _bounds[0] = chars


def field_chars() -> int:
    """The bound in force on a field logged here: the answering application's, or the
    process's."""
    chars = APP_BOUND.get()
    return _bounds[0] if chars is None else chars


def carrying_bound(fn):
    """``fn``, to run on a thread (or greenlet) started here, under the field bound in
    force here: an application's records on a thread the shared parts start for it (a
    timer's callback, an agent's pipe readers) are cut to its bound, as its own threads'
    are. A new thread starts with no context: they were cut to the process's. Only the
    bound is carried (not the context: a step's key and turn, ``keyed_turns.py``, stay
    its own); ``fn`` itself where no application set one here."""
    chars = APP_BOUND.get()
    if chars is None:
        return fn

    def bound(*args):
        APP_BOUND.set(chars)
        return fn(*args)
    return bound


def cut(value, limit: int | None = None):
    """``value`` as it is logged: a string (or the JSON of a structure) of at most ``limit``
    (the field bound in force when None)."""
    if limit is None:
        limit = field_chars()
    if isinstance(value, _SCALARS):
        return value
    if not isinstance(value, str):
        text = _dumps(value)
        if len(text) <= limit:
            return value
        value = text
    if len(value) <= limit:
        return value
    mark = f"…[cut: {len(value)} chars]"
    return value[:max(0, limit - len(mark))] + mark     # at most ``limit``: cut once only


def _message(record: logging.LogRecord, chars: int) -> str:
    """The record's message, each string argument cut to ``chars`` first, then the whole to
    four times that."""
    args = record.args
    if isinstance(args, tuple) and args:
        record.args = tuple(cut(a, chars) if isinstance(a, str) else a for a in args)
        try:
            text = record.getMessage()
        finally:
            record.args = args
    else:
        text = record.getMessage()
    return cut(text, 4 * chars)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, then the record's fields."""

    _second = (None, "")             # PERF: the last second formatted, and its text

    def format(self, record: logging.LogRecord) -> str:
        secs = int(record.created)
        millis = int((record.created - secs) * 1000)
        second, text = self._second
        if second != secs:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
            self._second = (secs, text)
        chars = getattr(record, BOUND, None) or field_chars()
        out = {"ts": f"{text}.{millis:03d}Z",
               "level": record.levelname.lower(), "logger": record.name,
               "msg": _message(record, chars)}
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                out.setdefault(cut(str(key), chars), cut(value, chars))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        # NOTE: json escapes every line break, so a record is always one line.
        return _dumps(out)


class _JsonHandler(logging.StreamHandler):
    """The handler ``configure()`` installs (found again by its class: configure is idempotent)."""


def level_from_env(default: str = "info") -> int:
    """``$MURMUR_WSGI_LOGLEVEL`` (debug, info, warning, error) as a logging level."""
    name = (os.environ.get(LEVEL_ENV) or default).upper()
    level = logging.getLevelName(name)
    return level if isinstance(level, int) else logging.INFO


def configure(level: int | str | None = None, stream=None) -> logging.Handler:
    """Write the ``murmur_wsgi`` loggers to ``stream`` (stderr) as JSON lines.

    Idempotent: a second call replaces the first's handler. The loggers stop
    propagating to the root logger, so a host's own handlers do not repeat
    the lines.
    """
    if level is None:
        level = level_from_env()
    elif isinstance(level, str):
        level = logging.getLevelName(level.upper())
    root = logging.getLogger(ROOT)
    for old in [h for h in root.handlers if isinstance(h, _JsonHandler)]:
        root.removeHandler(old)
    handler = _JsonHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
    return handler


access_log = logging.getLogger(ACCESS)


def access_enabled() -> bool:
    """Whether an access record would be written (cheap: checked before building one)."""
    return access_log.isEnabledFor(logging.INFO)


def log_access(fields: dict) -> None:
    """Write one access record: ``<method> <status> <outcome> <ms>ms`` and its fields.

    Each field is cut here (see ``cut``), so a host's own handlers get them bounded too, and
    the record carries the bound it was cut to.
    """
    chars = field_chars()
    fields = {key: cut(value, chars) for key, value in fields.items()}
    # PERF: a record built here skips logging's search of the caller's frame.
    record = access_log.makeRecord(
        ACCESS, logging.INFO, __file__, 0, "%s %s %s %.1fms",
        (fields.get("method") or "-", fields.get("status"), fields.get("outcome"),
         fields.get("duration_ms", 0.0)), None, extra={FIELDS: fields, BOUND: chars})
    access_log.handle(record)


class Sparse:
    """A repeated warning logged at most once per ``secs`` per key (a tenant): ``due(key)``
    is the count of those left out since the last one logged, or None while not due. A
    client that repeats a refused request many times a second writes a line a minute, not
    one per request.

    Concurrency: ``_lock`` guards ``_last``; held for the check alone, never while logging.
    """

    def __init__(self, secs: float = 60.0, keys: int = 1024):
        self._secs = secs
        self._keys = keys
        self._lock = threading.Lock()
        self._last: dict = {}           # key -> (when logged, left out since)

    def due(self, key=None) -> int | None:
        now = time.monotonic()
        with self._lock:
            when, left_out = self._last.get(key, (None, 0))
            if when is not None and now - when < self._secs:
                self._last[key] = (when, left_out + 1)
                return None
            if len(self._last) >= self._keys and key not in self._last:
                self._last.clear()      # bounded: many keys forget their last time
            self._last[key] = (now, 0)
            return left_out
