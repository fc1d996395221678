"""Behind Sentinel: following a failover the old primary outlives.

A graceful failover (``SENTINEL FAILOVER``, or one the sentinels call on a primary that was
only away) promotes the replica while the old primary answers as a primary until the
sentinels demote it, seconds later (11 s in a probe), and drops what was written to it
then. Its connections keep answering, so nothing in redis-py asks the sentinels again
meanwhile. Two things do here:

- ``follow_primary``, each beat's first step (a third of ``redis.liveness_secs``): it asks
  the sentinels which primary they name;
- ``SentinelNews``, one thread per worker beside the event listener: one connection to one
  sentinel, subscribed to ``+switch-master``, which a sentinel publishes as it names the
  new primary (the moment ``SENTINEL MASTERS``, which redis-py's connections ask, changes
  its answer). The primary it names is followed at once, not at the next beat.

To follow a primary is to set it on the pool: every connection to another one is
``stale`` from then on (``redis_client._SentinelManaged``), made anew to the primary the
sentinels name at its next command; the event listener leaves the old one within a second
(a new epoch: ``redis_feed``). What was written to the old primary between its
replica's promotion and the news is still lost with its demotion (with ``wait_replicas``
above 0 it was not acknowledged: the promoted replica no longer copies it). So is what a
connection writes there that asked, just before the news, a sentinel not yet told: the
old primary answers its ``ROLE`` as a primary, and the pool follows it back until a
connection made after asks one that was.

Concurrency: ``SentinelNews`` has one thread, whose every wait ends within ``block_secs``
(then it PINGs the sentinel; an answer missing for ``stall_secs`` takes the connection
for lost, and the next sentinel is tried); ``close()`` sets an Event it checks after each.
"""
from __future__ import annotations

import logging
import threading
import time

import redis

from murmur_wsgi.hub.store.redis_cluster import FAILURES

logger = logging.getLogger(__name__)

SWITCH = "+switch-master"       # "<service> <old ip> <old port> <new ip> <new port>"
RECONNECT_SECS = 1.0


def _pool_of(client):
    """The client's Sentinel pool and where its connections keep ``primary``, or None."""
    if isinstance(client, redis.RedisCluster):
        return None         # NOTE: not asked: one that no node answered yet raises
    pool = getattr(client, "connection_pool", None)
    if getattr(pool, "sentinel_manager", None) is None or not pool.is_master:
        return None
    # NOTE: the connections' pool is the pool's proxy (redis-py 5.1 and later): ``primary``
    # is kept there, where ``_SentinelManaged`` reads and writes it.
    return pool, getattr(pool, "proxy", pool)


def _follow(shared, named: tuple) -> bool:
    primary = getattr(shared, "primary", None)
    if primary is None or named == primary:
        return False
    logger.warning("redis store: the sentinels name %s:%s the primary, not %s:%s: "
                   "following it", *named, *primary)
    shared.primary = named
    return True


def follow_primary(client) -> bool:
    """On Sentinel, ask the sentinels which primary they name; when it is another than the
    one the connections reach, every connection to the old one is stale from now on:
    True. Elsewhere, or when no sentinel answers (the store may still: a beat is not
    refused for the sentinels' sake), nothing: False."""
    found = _pool_of(client)
    if found is None:
        return False
    pool, shared = found
    try:
        named = tuple(pool.sentinel_manager.discover_master(pool.service_name))
    except FAILURES:
        return False
    return _follow(shared, named)


def switched_to(data, service: str) -> tuple | None:
    """The new primary's address a ``+switch-master`` message names for ``service``."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    fields = str(data).split()
    if len(fields) != 5 or fields[0] != service or not fields[4].isdigit():
        return None
    return fields[3], int(fields[4])


class SentinelNews:
    """The sentinels' ``+switch-master`` for the client's service, followed as it comes.

    Args:
        client: the store's client (``redis_client.connect``); on anything but Sentinel,
            ``start()`` starts nothing.
        block_secs: the longest wait for a message (then a PING), and for a close.
        stall_secs: a PING unanswered this long takes the sentinel for lost.
    """

    def __init__(self, client, block_secs: float = 1.0, stall_secs: float = 5.0):
        self._client = client
        self._found = _pool_of(client)
        self._block = block_secs
        self._stall = stall_secs
        self._closed = threading.Event()
        self.listening = threading.Event()      # subscribed on a sentinel now
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._found is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._listen, name="hub-sentinels",
                                        daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        pool, shared = self._found
        turn = 0
        while not self._closed.is_set():
            sentinels = pool.sentinel_manager.sentinels
            sentinel = sentinels[turn % len(sentinels)]
            turn += 1
            pubsub = None
            try:
                pubsub = sentinel.pubsub()
                pubsub.subscribe(SWITCH)
                heard, pinged = time.monotonic(), None
                while not self._closed.is_set():
                    message = pubsub.get_message(timeout=self._block)
                    now = time.monotonic()
                    if message is not None:
                        heard, pinged = now, None
                        kind = message.get("type")
                        if kind == "subscribe":
                            self.listening.set()
                        elif kind == "message":
                            named = switched_to(message.get("data"), pool.service_name)
                            if named is not None:
                                _follow(shared, named)
                    elif pinged is not None and now - pinged > self._stall:
                        break                   # NOTE: a stalled sentinel: the next one
                    elif pinged is None and now - heard >= self._block:
                        pubsub.ping()
                        pinged = now
            except (*FAILURES, OSError, ValueError, TypeError, AttributeError) as ex:
                # NOTE: TypeError, AttributeError: a socket the store's close() dropped.
                if not self._closed.is_set():
                    logger.debug("redis store: listening to a sentinel failed (%s)",
                                 type(ex).__name__)
            finally:
                self.listening.clear()
                try:
                    if pubsub is not None:
                        pubsub.close()
                except FAILURES:
                    pass
            self._closed.wait(RECONNECT_SECS)

    def close(self) -> None:
        """The thread ends within ``block_secs`` (or at once, its connection dropped)."""
        self._closed.set()
