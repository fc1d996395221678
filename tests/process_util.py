"""Waiting on a process the test did not start: its pidfd, readable once it exits (Linux)."""
from __future__ import annotations

import os
import select


def exits_within(pid: int, timeout: float) -> bool:
    """Wait on the process's pidfd, readable once it exits; True when it did (or was gone)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)
