"""Identifiers: a prefix and the 32 hex digits of a UUIDv7 (the door's), or a random UUID
in its canonical form (the hub's tasks, contexts and push configs)."""
from __future__ import annotations

import os
import random
import threading
import time
import uuid


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
_pool_lock = threading.Lock()
_pool: list = [b"", 0]          # the bytes, the next one to hand out; guarded by _pool_lock


def random_uuid() -> str:
    """Return a fresh random UUID (version 4), as ``str(uuid.uuid4())`` does.

    PERF: its 16 bytes come from the system's randomness as ``uuid4``'s do (unpredictable
    ids), but read ``POOL_BYTES`` at a time: ``uuid4`` makes a getrandom() call per id,
    two of a blocking SendMessage's dozen system calls.
    """
    with _pool_lock:
        pool, at = _pool
        if at >= len(pool):
            pool, at = os.urandom(POOL_BYTES), 0
            _pool[0] = pool
        _pool[1] = at + 16
    return str(uuid.UUID(bytes=pool[at:at + 16], version=4))


def _forked() -> None:
    """A forked child draws its own: none of its parent's numbers or bytes again (and a
    lock of its own: another thread of the parent may have held it as it forked)."""
    global _pool_lock
    _random.seed()
    _pool_lock = threading.Lock()
    _pool[:] = [b"", 0]


os.register_at_fork(after_in_child=_forked)
