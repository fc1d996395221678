"""Behind Sentinel: following a failover the old primary outlives.

A graceful failover (``SENTINEL FAILOVER``, or one the sentinels call on a primary that was
only away) promotes a replica while the old primary answers as a primary until the
sentinels demote it, seconds later (11 s in a probe), and drops what was written to it
then. Its connections keep answering, so nothing in redis-py asks the sentinels again
meanwhile. And with more replicas than ``redis.wait_replicas``, a write the old primary
takes after the promotion is acknowledged by a replica not promoted, which drops it as it
follows the new primary: an acknowledged write lost (16-19 tasks in a probe of a
failover under load, two replicas, ``wait_replicas`` 1). So:

- ``SentinelNews``, one thread per sentinel in each worker, beside the event listener,
  each on a connection of its own, subscribed to the leader's ``+selected-slave`` (the
  replica it is about to promote: a *promise*), to ``+switch-master`` (the primary a
  sentinel names from now on) and to the failover's aborts. From the promise on, every
  connection to another node is ``stale``, and a new one connects to the promised node
  alone (``redis_client._SentinelManaged``), refused until it answers as a primary: the
  hub answers -32603 meanwhile (the promotion: 0.05-0.08 s in the tests), and writes
  nothing the failover drops. The promise ends once the sentinels the connections ask name the node,
  with an abort, or ``PROMISE_SECS`` on (the leader names the new primary once every
  other replica follows it: a second each).
- ``follow_primary``, each beat's first step (a third of ``redis.liveness_secs``): it asks
  the sentinels which primary they name, for the news a lost connection missed.

To follow a primary is to set it on the pool: every connection to another one is stale
from then on, made anew to the primary the sentinels name at its next command; the event
listener leaves the old one within a second (a new epoch: ``redis_feed``). With
``wait_replicas`` 0 what the old primary took before the promise is still lost with its
demotion if no replica had copied it (asynchronous replication).

Concurrency: each thread's every wait ends within ``block_secs`` (then it PINGs its
sentinel; an answer missing for ``stall_secs`` takes the connection for lost, and it
connects again); ``close()`` sets an Event they check after each. The pool's ``primary``
and ``promised`` are one attribute each, replaced whole (atomic under the GIL).
"""
from __future__ import annotations

import logging
import threading
import time

import redis

from murmur_wsgi.hub.store.redis_cluster import FAILURES

logger = logging.getLogger(__name__)

SWITCH = "+switch-master"       # "<service> <old ip> <old port> <new ip> <new port>"
SELECTED = "+selected-slave"    # "slave <ip>:<port> <ip> <port> @ <service> <ip> <port>"
ABORTS = ("-failover-abort-not-elected", "-failover-abort-no-good-slave",
          "-failover-abort-slave-timeout")      # "master <service> <ip> <port>"
RECONNECT_SECS = 1.0
PROMISE_SECS = 15.0             # a promise lasts at most this long


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


def promised(shared) -> tuple | None:
    """The node the sentinels are promoting, or have just named (see ``_promise``), for at
    most ``PROMISE_SECS``: a promise that outlives a failover the hub did not hear the
    end of (an abort, another failover) must not hold the writes for good."""
    node = getattr(shared, "promised", None)
    if node is not None and time.monotonic() - getattr(shared, "promised_at", 0.0) > \
            PROMISE_SECS:
        kept(shared, node)
        return None
    return node


def kept(shared, node: tuple) -> None:
    """The promise of ``node`` ends (the sentinels asked name it, or it lapsed): unless a
    newer one replaced it meanwhile."""
    if getattr(shared, "promised", None) == node:
        shared.promised = None


def _follow(shared, named: tuple) -> bool:
    primary = getattr(shared, "primary", None)
    if primary is None or named == primary:
        return False
    logger.warning("redis store: the sentinels name %s:%s the primary, not %s:%s: "
                   "following it", *named, *primary)
    shared.primary = named
    return True


def _promise(shared, node: tuple) -> None:
    """``node`` is the primary to be (a leader's ``+selected-slave``) or just named (a
    sentinel's ``+switch-master``): no other node is written to until the sentinels the
    connections ask name it (``redis_client._SentinelManaged``), however long the leader
    takes to say so (it names the old primary until its failover's end, after it has
    pointed every other replica at the new one: seconds with several)."""
    primary, promise = getattr(shared, "primary", None), getattr(shared, "promised", None)
    if primary is None or promise == node or (promise is None and primary == node):
        return                          # NOTE: followed already (each sentinel's switch)
    logger.warning("redis store: the sentinels are making %s:%s the primary: writes go "
                   "there alone", *node)
    shared.promised_at = time.monotonic()
    shared.promised = node
    shared.primary = node


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
    coming = promised(shared)
    if coming is not None:
        if named != coming:
            return False                # NOTE: the sentinels asked have not named it yet
        kept(shared, coming)
    return _follow(shared, named)


def switched_to(data, service: str) -> tuple | None:
    """The new primary's address a ``+switch-master`` message names for ``service``."""
    fields = _fields(data)
    if len(fields) != 5 or fields[0] != service or not fields[4].isdigit():
        return None
    return fields[3], int(fields[4])


def selected(data, service: str) -> tuple | None:
    """The replica's address a ``+selected-slave`` message names for ``service``."""
    fields = _fields(data)
    if len(fields) != 8 or fields[0] != "slave" or fields[4] != "@" or \
            fields[5] != service or not fields[3].isdigit():
        return None
    return fields[2], int(fields[3])


def aborted(data, service: str) -> bool:
    """Whether a failover's abort message is of ``service``."""
    fields = _fields(data)
    return len(fields) >= 2 and fields[0] == "master" and fields[1] == service


def _fields(data) -> list[str]:
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return str(data).split()


class SentinelNews:
    """The sentinels' news of a failover of the client's service, followed as it comes.

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
        self._lock = threading.Lock()
        self._subscribed = 0                    # under _lock: sentinels listened to now
        self._threads: list[threading.Thread] = []

    @property
    def listening(self) -> int:
        """How many sentinels it is subscribed on now."""
        return self._subscribed

    def start(self) -> None:
        if self._found is None or self._threads:
            return
        pool, _ = self._found
        for sentinel in list(pool.sentinel_manager.sentinels):
            thread = threading.Thread(target=self._listen, args=(sentinel,),
                                      name="hub-sentinels", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _heard(self, message: dict) -> None:
        pool, shared = self._found
        channel, data = message.get("channel"), message.get("data")
        if isinstance(channel, bytes):
            channel = channel.decode("utf-8", "replace")
        if channel == SWITCH:
            named = switched_to(data, pool.service_name)
            if named is not None:
                _promise(shared, named)
        elif channel == SELECTED:
            node = selected(data, pool.service_name)
            if node is not None:
                _promise(shared, node)
        elif channel in ABORTS and aborted(data, pool.service_name):
            if getattr(shared, "promised", None) is not None:
                logger.warning("redis store: the sentinels gave up their failover")
            shared.promised = None

    def _count(self, step: int) -> None:
        with self._lock:
            self._subscribed += step

    def _listen(self, sentinel) -> None:
        while not self._closed.is_set():
            pubsub, counted = None, False
            try:
                pubsub = sentinel.pubsub()
                pubsub.subscribe(SWITCH, SELECTED, *ABORTS)
                heard, pinged = time.monotonic(), None
                while not self._closed.is_set():
                    message = pubsub.get_message(timeout=self._block)
                    now = time.monotonic()
                    if message is not None:
                        heard, pinged = now, None
                        kind = message.get("type")
                        if kind == "subscribe" and not counted:
                            counted = True
                            self._count(1)
                        elif kind == "message":
                            self._heard(message)
                    elif pinged is not None and now - pinged > self._stall:
                        break                   # NOTE: a stalled sentinel: connect again
                    elif pinged is None and now - heard >= self._block:
                        pubsub.ping()
                        pinged = now
            except (*FAILURES, OSError, ValueError, TypeError, AttributeError) as ex:
                # NOTE: TypeError, AttributeError: a socket the store's close() dropped.
                if not self._closed.is_set():
                    logger.debug("redis store: listening to a sentinel failed (%s)",
                                 type(ex).__name__)
            finally:
                if counted:
                    self._count(-1)
                try:
                    if pubsub is not None:
                        pubsub.close()
                except FAILURES:
                    pass
            self._closed.wait(RECONNECT_SECS)

    def close(self) -> None:
        """The threads end within ``block_secs`` (or at once, their connections dropped)."""
        self._closed.set()
