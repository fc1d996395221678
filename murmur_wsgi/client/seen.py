"""What the client remembers of names a server gave: each as a 16-byte digest.

A page's token (``A2AClient._pages``: has it come back?) and an artifact's id (a
stream's printer: does this update replace what was shown?) may each be as long as one
answer; what is kept of one is its digest, whatever its length.
"""
from __future__ import annotations

import hashlib
import logging

logger = logging.getLogger(__name__)


def digest(name: str) -> bytes:
    """What a name is kept as: 16 bytes, whatever its length."""
    return hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class Recent:
    """The latest ``limit`` names seen, as digests.

    MEMORY: at most ``limit`` digests, however many names a server gives; a name seen
    before the latest ``limit`` others is forgotten.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self._digests: dict[bytes, None] = {}      # oldest first

    def __len__(self) -> int:
        return len(self._digests)

    def seen(self, name: str) -> bool:
        """Whether ``name`` is among the latest seen; it is the latest from now on."""
        key = digest(name)
        known = self._digests.pop(key, False) is None
        self._digests[key] = None
        if len(self._digests) > self.limit:
            del self._digests[next(iter(self._digests))]
        return known
