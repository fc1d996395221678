"""Identifiers: a prefix and the 32 hex digits of a UUIDv7 (the door's), or a random UUID
in its canonical form (the hub's tasks, contexts and push configs)."""
from __future__ import annotations

import itertools
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


POOL_BYTES = 4096              # random bytes read at once: 256 UUIDs a getrandom() call
_VARIANT = "89ab89ab89ab89ab"  # a hex digit's low 2 bits under the variant's 0b10
# (the bytes, a count of the UUIDs taken from them): swapped whole, never changed
_pool: tuple = (b"", itertools.count())


def random_uuid() -> str:
    """Return a fresh random UUID (version 4), as ``str(uuid.uuid4())`` does.

    PERF: its 16 bytes come from the system's randomness as ``uuid4``'s do (unpredictable
    ids), but read ``POOL_BYTES`` at a time: ``uuid4`` makes a getrandom() call per id,
    two of a blocking SendMessage's dozen system calls. Its text is the bytes' hex with the
    version and variant written in, as ``uuid.UUID`` sets their bits, without the UUID.
    Threads need no lock: ``next`` on a count hands each of its numbers out once, and a
    thread that finds the pool spent puts a new one in its place (two may: each its own).
    """
    pool, taken = _pool
    at = next(taken) * 16
    if at >= len(pool):
        pool, taken = _new_pool()
        at = next(taken) * 16
    h = pool[at:at + 16].hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16)]}{h[17:20]}-{h[20:]}"


def _new_pool() -> tuple:
    global _pool
    _pool = (os.urandom(POOL_BYTES), itertools.count())
    return _pool


def _forked() -> None:
    """A forked child draws its own: none of its parent's numbers or bytes again."""
    global _pool
    _random.seed()
    _pool = (b"", itertools.count())


os.register_at_fork(after_in_child=_forked)
