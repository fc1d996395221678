"""The door's side of the running record: what a served door writes about itself.

The format, the paths and the readers live in ``murmur_wsgi/running.py``,
which the client uses too. A record names the door's address, the process
holding it and, on an authenticated door, every token the session minted, so
the folder is held at 0700 and each record at 0600. A record is written whole (a staged file renamed onto it),
so a reader never sees half of one, and removed when the session ends.
"""
from __future__ import annotations

import logging
import os
import time

from murmur_wsgi.running import (DIR_MODE, FILE_MODE, HOME_ENV, RECORD_ENV, SESSION_ID,  # noqa: F401
                                 find_record, home, read_all, record_path, remove_record,
                                 running_dir, running_records, write_file)

logger = logging.getLogger(__name__)


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
    if supersede:
        for other in read_all():
            if other.get("pid") == record["pid"] and other.get("session_id") != door.session.id:
                remove_record(other["session_id"])
    return write_file(door.session.id, record)
