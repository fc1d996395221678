"""The running record's format: where a served door's record lives, and reading it.

``<home>/running/<session_id>.json`` is written by the door (``session/records.py``)
and read by the client (``murmur-wsgi ps``, ``--session``): both use this module,
and the client imports nothing else of the server. A record is one JSON object::

    session_id       ses_<32 hex>
    url              the address the door listens on, as gunicorn binds it (host:port)
    pid              the process that serves it
    capsule_name, capsule_version, workdir, started_at (RFC 3339, seconds)
    door_token       the operator's token (authenticated doors only)
    credentials      {name: token} for every declared credential (authenticated doors only)

A record is a hint, never a truth: a killed process writes no farewell, so a
record whose pid no process holds is stale and pruned when read.
"""
from __future__ import annotations

import json
import logging
import os
import re
import tempfile

logger = logging.getLogger(__name__)

HOME_ENV = "MURMUR_WSGI_HOME"
# Set by ``murmur-wsgi serve`` to the pid of the process that serves: the door records itself.
RECORD_ENV = "MURMUR_WSGI_RECORD"
DIR_MODE = 0o700
FILE_MODE = 0o600
SESSION_ID = re.compile(r"^ses_[0-9a-f]{32}$")


def home() -> str:
    """``$MURMUR_WSGI_HOME``, or ``~/.murmur-wsgi``."""
    return os.environ.get(HOME_ENV) or os.path.join(os.path.expanduser("~"), ".murmur-wsgi")


def running_dir(create: bool = False) -> str:
    """``<home>/running``; with ``create``, made if missing and held at 0700."""
    path = os.path.join(home(), "running")
    if create:
        os.makedirs(path, mode=DIR_MODE, exist_ok=True)
        os.chmod(path, DIR_MODE)
    return path


def record_path(session_id: str) -> str:
    return os.path.join(running_dir(), f"{session_id}.json")


def write_file(session_id: str, record: dict) -> str:
    """Write a record whole at 0600 (a staged file renamed onto it); return its path."""
    folder = running_dir(create=True)
    data = (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode()
    fd, staged = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        path = record_path(session_id)
        os.replace(staged, path)
    except BaseException:
        try:
            os.unlink(staged)
        except OSError:
            pass
        raise
    return path


def remove_record(session_id: str) -> None:
    """Remove a session's record; a record already gone is not an error."""
    try:
        os.unlink(record_path(session_id))
    except FileNotFoundError:
        pass
    except OSError as ex:
        logger.warning("could not remove the running record of %s: %s", session_id, ex.strerror)


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True                      # held, by a process we may not signal
    return True


def _load(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "session_id" in record else None


def read_all() -> list[dict]:
    try:
        names = os.listdir(running_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    records = []
    for name in names:
        if name.endswith(".json") and not name.startswith("."):
            record = _load(os.path.join(running_dir(), name))
            if record is not None:
                records.append(record)
    return records


def running_records() -> list[dict]:
    """Every record whose process is alive, most recent session first.

    A record whose pid no process holds is stale and is pruned on the way.
    """
    live = []
    for record in read_all():
        if _alive(record.get("pid")):
            live.append(record)
        else:
            remove_record(record["session_id"])
    live.sort(key=lambda record: str(record["session_id"]), reverse=True)
    return live


def find_record(session_id: str) -> dict | None:
    """The record of a running session, or None (unknown, malformed id, or stale)."""
    if not SESSION_ID.match(session_id):
        return None
    record = _load(record_path(session_id))
    if record is None or not _alive(record.get("pid")):
        return None
    return record
