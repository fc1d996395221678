"""The operator plane's sha256 digests: hashed off gevent's loop, cached by file identity.

A digest reads a file to its end, which for a large file takes seconds. Under
``gunicorn -k gevent`` that read would hold the hub, and with it every other
request of the worker, so ``off_loop`` runs it in a native thread of gevent's
threadpool while the request's greenlet waits (``murmur_wsgi/off_loop.py``).

Concurrency:
    ``DigestCache._digests`` is written only under ``_lock``, from the request's
    greenlet or thread. Work run ``off_loop`` takes no lock (a gevent lock is not
    for a native thread): it reads with ``peek``, one dict lookup, atomic under
    the GIL, and returns what it hashed for the caller to ``remember``.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time

from murmur_wsgi.off_loop import off_loop

CHUNK = 1 << 20
# NOTE: a file changed less than this before its hashing began may change again within
# the same timestamp tick (coarse clocks; 2 s on FAT), unseen in its key: not cached.
RACY_NS = 2_000_000_000

def file_key(st: os.stat_result) -> tuple:
    """What changes whenever a file's bytes may have: device, inode, size, mtime, ctime."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def hash_fd(fd: int, limit: int) -> tuple[str | None, int]:
    """Hash ``fd`` from offset 0 to its end: (sha256 hex, or None past ``limit``; bytes read).

    Safe to run off the hub: it reads with ``pread``, so it moves no shared offset.
    """
    digest = hashlib.sha256()
    size = 0
    while True:
        chunk = os.pread(fd, CHUNK, size)
        if not chunk:
            return digest.hexdigest(), size
        size += len(chunk)
        if size > limit:
            return None, size               # it grew past the limit: never hashed whole
        digest.update(chunk)


class DigestCache:
    """The last ``capacity`` digests by ``file_key``; the oldest used is dropped first."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.hashed = 0                         # guarded by _lock: files read to hash them
        self._digests: dict[tuple, str] = {}    # guarded by _lock (writes)
        self._lock = threading.Lock()

    def peek(self, key: tuple) -> str | None:
        """The digest of the file ``key`` names, if known (lock-free, safe off the hub)."""
        return self._digests.get(key)

    def remember(self, fresh: list[tuple[tuple, str, int]], used: list[tuple] = ()) -> None:
        """Store ``(key, sha256, hashing began ns)`` items; refresh the ``used`` keys."""
        with self._lock:
            self.hashed += len(fresh)
            for key in used:
                sha = self._digests.pop(key, None)
                if sha is not None:
                    self._digests[key] = sha
            for key, sha, began_ns in fresh:
                if key[4] < began_ns - RACY_NS:
                    self._digests.pop(key, None)
                    self._digests[key] = sha
            while len(self._digests) > self.capacity:
                del self._digests[next(iter(self._digests))]

    def digest(self, fd: int, st: os.stat_result, limit: int) -> tuple[str | None, int]:
        """Hash the open regular file ``fd`` (its ``fstat`` is ``st``) once: ``hash_fd``'s pair."""
        key = file_key(st)
        sha = self.peek(key)
        if sha is not None:
            self.remember([], [key])
            return sha, st.st_size
        began = time.time_ns()
        # NOTE: the thread reads (and closes) its own descriptor: were this greenlet killed
        # while it waits, closing ``fd`` must not hand the thread a number reused elsewhere.
        sha, size = off_loop(_hash_owned, os.dup(fd), limit)
        if sha is not None and size == st.st_size:
            self.remember([(key, sha, began)])
        return sha, size


def _hash_owned(fd: int, limit: int) -> tuple[str | None, int]:
    """``hash_fd``, then close ``fd``: the caller handed it over."""
    try:
        return hash_fd(fd, limit)
    finally:
        os.close(fd)
