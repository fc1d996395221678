"""Identifiers: a prefix and the 32 hex digits of a UUIDv7."""
from __future__ import annotations

import os
import time


def uuid7_hex() -> str:
    """Return a fresh UUIDv7 (RFC 9562) as 32 lowercase hex digits."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x7 << 76                               # version 7
    value |= ((rand >> 64) & 0xFFF) << 64            # rand_a, 12 bits
    value |= 0b10 << 62                              # variant
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF            # rand_b, 62 bits
    return f"{value:032x}"


def new_id(prefix: str) -> str:
    """Return ``<prefix>_<uuid7 hex>``: ``ses``, ``tsk``, ``ctx``, ``msg``, ``wrk``, ``dlg``."""
    return f"{prefix}_{uuid7_hex()}"
