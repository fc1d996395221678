"""Identifiers: a prefix and the 32 hex digits of a UUIDv7."""
from __future__ import annotations

import os
import random
import time


_random = random.Random()      # seeded from os.urandom; reseeded in a forked child


def uuid7_hex() -> str:
    """Return a fresh UUIDv7 (RFC 9562) as 32 lowercase hex digits.

    PERF: 74 random bits from a seeded generator, not a getrandom() call per id:
    ids must be unique, not secret (tokens come from ``secrets``).
    """
    ms = time.time_ns() // 1_000_000
    rand = _random.getrandbits(80)
    value = (ms & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x7 << 76                               # version 7
    value |= ((rand >> 64) & 0xFFF) << 64            # rand_a, 12 bits
    value |= 0b10 << 62                              # variant
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF            # rand_b, 62 bits
    return f"{value:032x}"


def new_id(prefix: str) -> str:
    """Return ``<prefix>_<uuid7 hex>``: ``ses``, ``tsk``, ``ctx``, ``msg``, ``wrk``, ``dlg``."""
    return f"{prefix}_{uuid7_hex()}"


os.register_at_fork(after_in_child=_random.seed)
