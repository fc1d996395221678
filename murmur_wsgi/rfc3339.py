"""RFC 3339 timestamps with a zone (``2026-01-01T00:00:00Z``, ``…+02:00``): ListTasks'
statusTimestampAfter, read by the servers' wire and checked by the client's ``--since``.
Imports nothing of either side."""
from __future__ import annotations

import re
from datetime import datetime

_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")


def rfc3339_us(value) -> int | None:
    """An RFC 3339 timestamp with a zone as epoch microseconds; None when it is not one."""
    if not isinstance(value, str) or not _RFC3339.match(value):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return None
    return int(parsed.timestamp()) * 1_000_000 + parsed.microsecond
