"""API keys that change while the hub runs: hub.yaml re-read, and Redis's table of keys.

``murmur-wsgi hub key TENANT`` records a new key's digest in hub.yaml and, on a
Redis hub, in the hash ``murmur:hub:api-keys`` (digest → tenant); ``--revoke``
removes it from hub.yaml and marks it revoked in that hash (digest →
``!revoked``), which wins over any host's file. Every worker checks the file's
stamp and the hash at most every ``REFRESH_SECS``, when a request presents a
key, so a change answers within seconds on every worker and replica, without a
restart. A tenant added to hub.yaml still needs a restart: only the keys of the
tenants the hub serves are read.

A file re-read is validated as at boot (``config.load_config_file``): one the hub would not
start with (empty, cut short, a digest that is not one), one that no longer names a
tenant the hub serves, or one over ``MAX_FILE_BYTES`` leaves the keys as they were, with
a warning, once per change of the file (its stamp), and again every ``RETRY_SECS`` while
it stays so (a rewrite in place may keep the stamp): a broken file is not parsed again
at every beat, in the requests that present keys.
"""
from __future__ import annotations

import logging
import os
import threading
import time

from murmur_wsgi.hub.config import load_config_file
from murmur_wsgi.hub.config_schema import ConfigError
from murmur_wsgi.hub.store.base import retried_quietly

logger = logging.getLogger(__name__)

REFRESH_SECS = 2.0
# NOTE: parsed in Python, in a request that presents a key: 1 MiB (about 14,000 keys)
# holds the worker about 1.3 s once a change; a larger file is read at the next restart.
MAX_FILE_BYTES = 1024 * 1024
RETRY_SECS = 30.0                   # a file that could not be read, read again this often
REDIS_KEYS = "murmur:hub:api-keys"
REVOKED = "!revoked"


class _Unreadable(Exception):
    pass


def file_keys(path: str, tenants) -> dict[str, str]:
    """``{digest: tenant}`` of hub.yaml's api_keys, for the tenants in ``tenants`` only;
    ``_Unreadable`` for a file the hub would not start with, or that lacks one of them."""
    try:
        config = load_config_file(path)
    except ConfigError as ex:
        raise _Unreadable(str(ex)) from None
    missing = sorted(set(tenants) - set(config.tenants))
    if missing:
        raise _Unreadable(f"{path}: tenants.{missing[0]} is missing (a tenant the hub "
                          "serves leaves it with a restart)")
    out = {}
    for tenant in sorted(tenants):
        for digest in config.tenants[tenant]["api_keys"]:
            out.setdefault(digest, tenant)
    return out


def redis_client(config):
    """A client of the hub's Redis (its own pool, bounded by ``redis.max_connections`` as
    the store's are; it uses one), or None on the memory store."""
    if not config.shared:
        return None
    from murmur_wsgi.hub.store.redis_client import connect

    return connect(config.store_url(), config.redis["timeout_secs"],
                   config.redis["max_connections"])


class KeyWatcher:
    """Keeps ``credentials``' keys current: hub.yaml's (``path``), then Redis's table.

    Redis's table that cannot be read (Redis away) keeps the keys as they are, logged in
    one line as it starts and one as it ends, not at each beat.

    Concurrency: ``refresh`` is called by every request that presents a key; one
    caller at a time refreshes (a non-blocking acquire: the others go on with the
    keys they have), and the table is replaced whole, never changed in place.
    """

    def __init__(self, credentials, path: str | None, tenants, redis=None,
                 every: float = REFRESH_SECS):
        self.credentials = credentials
        self.path = path
        self.tenants = frozenset(tenants)
        self.redis = redis
        self.every = every
        self._lock = threading.Lock()
        self._next = 0.0
        self._stamp = None
        self._retry = None               # when a file that could not be read is read again
        self._file: dict[str, str] = dict(credentials.keys())
        self._table: dict[str, str] = {}
        self._unread = False            # the last read of Redis's table failed (logged once)

    def refresh(self) -> None:
        now = time.monotonic()
        if now < self._next or not self._lock.acquire(blocking=False):
            return
        try:
            self._next = now + self.every
            changed = self._read_file()
            changed = self._read_redis() or changed
            if changed:
                self.credentials.replace_keys(self.merged())
        finally:
            self._lock.release()

    def merged(self) -> dict[str, str]:
        keys = dict(self._file)
        for digest, tenant in self._table.items():
            if tenant == REVOKED:
                keys.pop(digest, None)
            elif tenant in self.tenants:
                keys.setdefault(digest, tenant)
        return keys

    def _read_file(self) -> bool:
        if self.path is None:
            return False
        try:
            st = os.stat(self.path)
        except OSError as ex:
            logger.warning("api keys: cannot stat %s: %s; keeping the keys", self.path,
                           ex.strerror)
            return False
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        now = time.monotonic()
        if stamp == self._stamp and (self._retry is None or now < self._retry):
            return False
        self._stamp = stamp             # NOTE: read once a change, read well or not
        try:
            if st.st_size > MAX_FILE_BYTES:
                raise _Unreadable(f"{self.path}: is over {MAX_FILE_BYTES} bytes "
                                  f"({st.st_size}): its keys are read at the next restart")
            keys = file_keys(self.path, self.tenants)
        except _Unreadable as ex:
            self._retry = now + RETRY_SECS
            logger.warning("api keys: %s; keeping the keys", ex)
            return False
        self._retry = None
        if keys == self._file:
            return False
        logger.info("api keys: %s changed: %d keys", self.path, len(keys))
        self._file = keys
        return True

    def _read_redis(self) -> bool:
        if self.redis is None:
            return False
        try:
            table = self.redis.hgetall(REDIS_KEYS)
        except Exception as ex:  # noqa: BLE001 - Redis down: the keys stay as they are
            if not self._unread:                # one line as the outage starts
                self._unread = True
                logger.warning("api keys: reading Redis failed (%s); keeping the keys until "
                               "it answers", type(ex).__name__)
            return False
        if self._unread:                        # and one as it ends
            self._unread = False
            logger.info("api keys: Redis answers again")
        if table == self._table:
            return False
        self._table = table
        return True


def watch_keys(hub, path: str | None) -> KeyWatcher:
    """Keep ``hub``'s keys current from ``path`` (its hub.yaml) and its Redis, if any."""
    with retried_quietly():             # a cluster's state is told by the store's client
        client = redis_client(hub.config)
    watcher = KeyWatcher(hub.credentials, path, hub.config.tenants, client)
    hub.credentials.refresh = watcher.refresh
    return watcher
