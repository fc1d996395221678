"""RFC 3339 timestamps with a zone (``2026-01-01T00:00:00Z``, ``…+02:00``): ListTasks'
statusTimestampAfter, read by the servers' wire and checked by the client's ``--since``.
Imports nothing of either side."""
from __future__ import annotations

import re
from datetime import datetime

# NOTE: ASCII digits only (``\d`` takes every script's), and an offset's minute 00-59:
# ``+00:99`` was read as +01:39, digits of another script in the fraction as their values.
_RFC3339 = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:)([0-9]{2})(\.[0-9]+)?"
                      r"([Zz]|[+-][0-9]{2}:[0-5][0-9])\Z")
_CYCLE_SECS = 146_097 * 86_400          # a Gregorian cycle of 400 years, in seconds


def rfc3339_us(value) -> int | None:
    """An RFC 3339 timestamp with a zone as epoch microseconds; None when it is not one.

    The value is the first microsecond at or after the instant named, so that a cutoff
    compares exactly with a stamp of whole milliseconds or microseconds: digits past the
    microsecond round up. A leap second (second 60, which RFC 3339 allows at 23:59 UTC)
    reads as the end of its minute: no clock stamps anything inside it.
    """
    found = _RFC3339.match(value) if isinstance(value, str) else None
    if found is None:
        return None
    minute, second, fraction, zone = found.groups()
    leap = second == "60"
    # NOTE: RFC 3339's years run from 0000, which datetime cannot hold: year 0 is read as
    # year 400, the same day of the same 400-year Gregorian cycle, and moved back a cycle.
    shift = _CYCLE_SECS if minute.startswith("0000") else 0
    if shift:
        minute = "0400" + minute[4:]
    try:
        parsed = datetime.fromisoformat(
            f"{minute.replace('t', 'T')}{'59' if leap else second}{zone.replace('z', 'Z')}")
    except ValueError:
        return None
    if leap:
        minute_start = int(parsed.timestamp()) - shift - 59
        if minute_start // 60 % 1440 != 1439:          # not 23:59 UTC
            return None
        return (minute_start + 60) * 1_000_000
    digits = (fraction or ".")[1:]
    micro = int(digits[:6].ljust(6, "0"))
    if digits[6:].strip("0"):
        micro += 1                          # past the microsecond: the next one
    return (int(parsed.timestamp()) - shift) * 1_000_000 + micro
