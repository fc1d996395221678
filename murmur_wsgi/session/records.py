"""The running record: ``<home>/running/<session_id>.json``, where a served door is.

A record is a hint, never a truth: a killed process writes no farewell. It
names the door's address, the process holding it and, on an authenticated
door, every token the session minted, so the folder is held at 0700 and each
record at 0600. A record is written whole (a staged file renamed onto it),
so a reader never sees half of one, and removed when the session ends.
"""
from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time

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


def rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def build_record(door, pid: int | None = None) -> dict:
    """The record of ``door``'s session: address, process, capsule and tokens."""
    record = {
        "session_id": door.session.id,
        "url": door.listen,
        "pid": pid if pid is not None else os.getpid(),
        "capsule_name": door.manifest.name,
        "capsule_version": door.manifest.version,
        "workdir": door.workdir,
        "started_at": rfc3339(door.session.started_at),
    }
    tokens = door.tokens
    if tokens.enabled:
        record["door_token"] = tokens.tokens["operator"]
        record["credentials"] = {name: token for name, token in tokens.tokens.items()
                                 if name != "operator"}
    return record


def write_record(door, pid: int | None = None, supersede: bool = False) -> str:
    """Write ``door``'s running record atomically at 0600; return its path.

    With ``supersede``, a record another session left under the same pid is
    removed first: a server that restarted its worker serves one session.
    """
    record = build_record(door, pid)
    folder = running_dir(create=True)
    if supersede:
        for other in _read_all():
            if other.get("pid") == record["pid"] and other.get("session_id") != door.session.id:
                remove_record(other["session_id"])
    data = (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode()
    fd, staged = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        path = record_path(door.session.id)
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


def _read_all() -> list[dict]:
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
    for record in _read_all():
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
