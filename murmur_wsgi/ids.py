"""Identifiers: a prefix and the 32 hex digits of a UUIDv7."""
from __future__ import annotations

import os
import random
import time


_random = random.Random()      # seeded from os.urandom; reseeded in a forked child


_prefix: tuple = (None, "")     # PERF: (ms, its 12 hex digits and the version): ids share it


def uuid7_hex() -> str:
    """Return a fresh UUIDv7 (RFC 9562) as 32 lowercase hex digits.

    PERF: 74 random bits from a seeded generator, not a getrandom() call per id:
    ids must be unique, not secret (tokens come from ``secrets``). The time's digits
    are formatted once per millisecond.
    """
    global _prefix
    ms = time.time_ns() // 1_000_000
    cached = _prefix                # NOTE: one tuple, swapped whole: safe across threads
    if cached[0] != ms:
        cached = _prefix = (ms, f"{ms & 0xFFFF_FFFF_FFFF:012x}7")      # version 7
    rand = _random.getrandbits(74)
    # rand_a (12 bits), then the variant (0b10) and rand_b (62 bits): 19 hex digits
    tail = (rand >> 62) << 64 | 0x8000_0000_0000_0000 | (rand & 0x3FFF_FFFF_FFFF_FFFF)
    return cached[1] + f"{tail:019x}"


def new_id(prefix: str) -> str:
    """Return ``<prefix>_<uuid7 hex>``: ``ses``, ``tsk``, ``ctx``, ``msg``, ``wrk``, ``dlg``."""
    return f"{prefix}_{uuid7_hex()}"


os.register_at_fork(after_in_child=_random.seed)
