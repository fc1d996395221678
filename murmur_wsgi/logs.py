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
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time

logger = logging.getLogger(__name__)

ROOT = "murmur_wsgi"
ACCESS = "murmur_wsgi.access"
LEVEL_ENV = "MURMUR_WSGI_LOGLEVEL"
FIELDS = "murmur"              # the record attribute holding a record's structured fields

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


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
        out = {"ts": f"{text}.{millis:03d}Z",
               "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage()}
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                out.setdefault(key, value)
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
    """Write one access record: ``<method> <status> <outcome> <ms>ms`` and its fields."""
    # PERF: a record built here skips logging's search of the caller's frame.
    record = access_log.makeRecord(
        ACCESS, logging.INFO, __file__, 0, "%s %s %s %.1fms",
        (fields.get("method") or "-", fields.get("status"), fields.get("outcome"),
         fields.get("duration_ms", 0.0)), None, extra={FIELDS: fields})
    access_log.handle(record)
