"""The Redis store's connection: the client, the parts' shared connection, failures as
``StoreError``; the hot paths' own connections are ``redis_commands.Commands``.

Every failure of Redis (``redis_cluster.FAILURES``: down, slow past ``timeout_secs``,
out of memory, a cluster without the slot's owner) is raised as ``StoreError``, whose
message is public. A command whose connection failed is sent once more at once (a
pooled connection can be stale after Redis restarts); one that timed out is not, so a
stalled Redis is answered within ``timeout_secs``.

With ``wait_replicas`` N above 0, every write the hub acknowledges (a task's
creation, which binds its message's claim, start, appends and end, a cancel mark,
a push config's save and delete) is sent with ``WAIT N ms`` on its connection
(``Commands.durable``), ms being ``WAIT_SHARE`` of ``timeout_secs``; fewer
replicas in time is ``Unreplicated``, a ``StoreError`` to the caller (the write
stays on the primary).
"""
from __future__ import annotations

import functools
import logging
import threading
import uuid
from urllib.parse import unquote_plus

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelManagedConnection, SentinelManagedSSLConnection
from redis.utils import str_if_bytes

from murmur_wsgi.hub.store import cluster_url, redis_cluster, sentinel_url
from murmur_wsgi.hub.store.base import StoreError, retrying_quietly
from murmur_wsgi.hub.store.redis_commands import Commands
from murmur_wsgi.hub.store.redis_feed import EventFeed
from murmur_wsgi.hub.store.redis_keys import CHANNEL, EVENTS, PUSH_WAKE, live_key
from murmur_wsgi.hub.store.redis_pool import MAX_CONNECTIONS, WaitingPool, WaitingSentinelPool
from murmur_wsgi.hub.store.redis_sentinels import SentinelNews, kept, promised

logger = logging.getLogger(__name__)

BLOCK_MAX_SECS = 1.0             # the longest single blocking wait (pub/sub, push's wait)
WAIT_SHARE = 0.8                 # of timeout_secs: the longest WAIT for the replicas


FAILURES = redis_cluster.FAILURES


def failed(name: str, ex: BaseException) -> StoreError:
    """The ``StoreError`` to raise for ``ex``, a failure of Redis in method ``name``, logged
    (at DEBUG for a background loop's call: the loop logs the outage once)."""
    logger.log(logging.DEBUG if retrying_quietly() else logging.WARNING,
               "redis store: %s failed: %s", name, type(ex).__name__)
    return StoreError()


def guarded(method):
    """Raise ``StoreError`` for any failure of Redis, logged once per method call.

    MEMORY: the wrapper is one more frame on the call's stack: a method a stream waits
    in, or opens through, catches ``FAILURES`` itself and raises ``failed(…)`` (the frames
    of a greenlet's deepest call stay resident while it lives, with every idle stream).
    """
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except FAILURES as ex:
            raise failed(method.__name__, ex) from None
    return call


def each_task(client: redis.Redis, task_ids: list, read) -> list:
    """``read(pipe, task_id)`` for every task, in one round trip: the answers, in order."""
    pipe = client.pipeline(transaction=False)
    for task_id in task_ids:
        read(pipe, task_id)
    return pipe.execute()


class _PooledCheck:
    """A connection whose pool-time check reads no socket.

    Before lending a connection, redis-py's pool asks ``can_read(0)``: is an
    answer left over? Its answer polls the socket, and under gevent that poll
    is a turn of gevent's loop: about a tenth of a worker's time per GetTask.
    A connection is disconnected whenever a read fails or times out, so what
    can be left is only what the parser already holds: that is checked, and a
    closed socket shows at the command, retried once on a new connection
    (``Retry`` below).

    A wait (``timeout`` above 0: the pub/sub listener, hub/store/redis_feed.py) reads
    the socket with that timeout, into the parser: redis-py polls it first, and under
    gevent a poll makes and drops its watchers each time (about 45 µs of a worker per
    message heard).
    """

    stale = False       # a connection to a primary of the past (``_SentinelManaged``)

    def can_read(self, timeout: float = 0) -> bool:
        reader = getattr(self._parser, "_reader", None)          # hiredis's reader
        if self._sock is None or reader is None:
            return super().can_read(timeout)
        if timeout == 0 or reader.has_data():
            return bool(reader.has_data())
        # NOTE: a closed socket raises ConnectionError here, as redis-py's read would.
        return bool(self._parser.read_from_socket(timeout=timeout, raise_on_timeout=False)) \
            and bool(reader.has_data())


class _Connection(_PooledCheck, redis.Connection):
    pass


class _SSLConnection(_PooledCheck, redis.SSLConnection):
    pass


class _UnixConnection(_PooledCheck, redis.UnixDomainSocketConnection):
    pass


class _SentinelManaged(_PooledCheck):
    """A connection to the primary the sentinels name, with two of redis-py's gaps closed.

    - The pool connects its connections as it lends them; ``Commands``' connect at
      their first command, where ``Connection`` would reach the address it last had
      (none yet, or a primary of the past): the sentinels are asked first, as
      ``connect`` does.
    - ``SentinelManagedConnection.read_response`` keeps its socket when a read fails
      (``disconnect_on_error`` False), so the next command would meet a closed socket,
      or a reply left unread after a timeout: it disconnects, as ``Connection`` does.

    And a connection to the primary asks the node its ``ROLE`` as it connects: a
    sentinel that has not yet heard of a failover names the old primary, which may be
    back as a replica, whose reads would answer from a replica's data. Such a
    connection is refused (``ConnectionError``: retried once, then -32603).

    The pool keeps the address of the primary its newest connection reached
    (``primary``): a connection to another one is ``stale``, closed before its next
    command (``connect``, ``Commands``) and made anew to the primary the sentinels
    name. An old primary that was only away (paused, cut off) while the sentinels
    promoted its replica is a primary still when it comes back, until they demote it
    (seconds later): the connections made before would write to it what its
    demotion drops. The first connection that reaches the new one (the listener's,
    which reconnects once the old one stops answering) retires them.
    """

    @property
    def stale(self) -> bool:
        primary = getattr(self.connection_pool, "primary", None)
        return self._sock is not None and primary is not None and \
            (self.host, self.port) != primary

    def connect(self):
        if self.stale:
            self.disconnect()
        return super().connect()

    def connect_to(self, address):
        super().connect_to(address)
        if not self.connection_pool.is_master:
            return
        self._refuse_unless_promised(address)
        self.send_command("ROLE", check_health=False)
        role = self.read_response()
        if not role or str_if_bytes(role[0]) != "master":
            self.disconnect()
            raise redis.ConnectionError(f"{address[0]}:{address[1]} is not the primary now")
        # NOTE: again: a promise may have come while ROLE was asked.
        self._refuse_unless_promised(address)
        self.connection_pool.primary = tuple(address)

    def _refuse_unless_promised(self, address) -> None:
        coming = promised(self.connection_pool)
        if coming is not None and tuple(address) != coming:
            # NOTE: the sentinels are promoting another node (``redis_sentinels``): what
            # this one takes now may be dropped with the failover, acknowledged or not.
            self.disconnect()
            raise redis.ConnectionError(f"{address[0]}:{address[1]} is being replaced by "
                                        f"{coming[0]}:{coming[1]}")

    def _connect_retry(self):
        """Connect to the primary the sentinels name; while a node is promised, to it alone
        (the sentinels asked may name the old primary for seconds: ``redis_sentinels``)."""
        pool = self.connection_pool
        coming = promised(pool)
        if self._sock is not None or coming is None or not pool.is_master:
            return super()._connect_retry()
        try:
            # NOTE: not the pool's get_master_address, which would take the old primary
            # for the pool's address: a connection to another is closed as it is released
            named = tuple(pool.sentinel_manager.discover_master(pool.service_name))
        except FAILURES:
            named = None
        if named == coming:
            kept(pool, coming)
            return super()._connect_retry()
        pool.master_address = coming        # the pool's: its connections are kept
        return self.connect_to(coming)

    def send_packed_command(self, command, check_health=True):
        if self._sock is None:
            self.connect()
        super().send_packed_command(command, check_health)

    def read_response(self, disable_decoding=False, *, disconnect_on_error=True, **kwargs):
        return super().read_response(disable_decoding, disconnect_on_error=disconnect_on_error,
                                     **kwargs)


class _SentinelConnection(_SentinelManaged, SentinelManagedConnection):
    pass


class _SentinelSSLConnection(_SentinelManaged, SentinelManagedSSLConnection):
    """``_SentinelManaged`` over TLS (``rediss-sentinel://``)."""


_CLASSES = {redis.Connection: _Connection, redis.SSLConnection: _SSLConnection,
            redis.UnixDomainSocketConnection: _UnixConnection,
            SentinelManagedConnection: _SentinelConnection,
            SentinelManagedSSLConnection: _SentinelSSLConnection}


def connect(url: str, timeout_secs: float,
            max_connections: int = MAX_CONNECTIONS) -> redis.Redis:
    """A client of ``url`` (thread-safe, pooled) whose every wait ends within ``timeout_secs``.

    Its pool (each node's, on a cluster) holds at most ``max_connections`` in use; a call
    past them waits up to ``timeout_secs`` for one (``redis_pool``), then raises
    ``MaxConnectionsError``.

    ``redis-cluster://…`` (``redis_cluster``): a ``RedisCluster``.
    ``redis-sentinel://…`` (``sentinel_url``; ``rediss-sentinel://`` over TLS to the
    sentinels and the primary): the primary the sentinels name. Its
    connections (``SentinelManagedConnection``) ask the sentinels at each connect, so
    one that failed reconnects to the primary of now; one still open to a demoted
    primary fails its next write with READONLY, which it raises as ``ConnectionError``
    (it disconnects first): the command is sent once more on a new connection.
    """
    if cluster_url.is_cluster(url):
        return redis_cluster.connect_cluster(url, timeout_secs, max_connections)
    settings = dict(decode_responses=True, socket_timeout=timeout_secs,
                    socket_connect_timeout=timeout_secs,
                    retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                    health_check_interval=30, max_connections=max_connections,
                    timeout=timeout_secs)
    if sentinel_url.is_sentinel(url):
        client = _sentinel_client(sentinel_url.parse(url), timeout_secs, settings)
    else:
        client = redis.Redis.from_pool(WaitingPool.from_url(url, **settings))
    pool = client.connection_pool
    pool.connection_class = _CLASSES.get(pool.connection_class, pool.connection_class)
    return client


def _sentinel_client(parts, timeout_secs: float, settings: dict) -> redis.Redis:
    # NOTE: a connect asks the sentinels in turn until one names a primary: they share
    # timeout_secs, so sentinels that are away cost a connect no more than that.
    # Each primary connection connecting holds one connection of a sentinel's client while
    # it asks: the pool's and the hot paths' (Commands) at once, at most twice the bound.
    # redis-py's default of 100 refused the 101st at once, as if that sentinel were away.
    share = timeout_secs / len(parts.sentinels)
    watchers = Sentinel(list(parts.sentinels),
                        sentinel_kwargs={"socket_timeout": share,
                                         "socket_connect_timeout": share,
                                         "max_connections": 2 * settings["max_connections"],
                                         "username": parts.sentinel_username,
                                         "password": parts.sentinel_password,
                                         **parts.tls})
    return watchers.master_for(parts.service, connection_pool_class=WaitingSentinelPool,
                               db=parts.db, username=parts.username,
                               password=parts.password, **parts.tls, **settings)


class RedisConnection:
    """What every part of the Redis store shares: the client, the hot-path ``Commands``,
    this replica's id and liveness, the longest blocking read, whether it closed, and
    the one listener of the process (``feed``: every stream's events, and the cancel
    channel, whose messages go to ``on_cancel``; push's wake channel to ``on_wake``, and
    every event notified to ``on_event``). Once the listener is subscribed again after a
    loss, what those channels carried meanwhile reached nobody: ``on_cancels_lost`` (the
    replicas') and ``on_wakes_lost`` (push's) are called, and each looks once for itself.

    Concurrency: the client and its pool are thread-safe; ``closed`` is an Event; the
    feed starts once (``start_feed``, under a lock).
    """

    def __init__(self, url: str, *, timeout_secs: float = 5.0, liveness_secs: float = 10.0,
                 replica_id: str | None = None, wait_replicas: int = 0,
                 max_connections: int = MAX_CONNECTIONS):
        self.url = public_url(url)
        self.replica = replica_id or uuid.uuid4().hex
        self.liveness_ms = max(1, int(liveness_secs * 1000))
        self.block = min(BLOCK_MAX_SECS, timeout_secs / 2)
        self.redis = connect(url, timeout_secs, max_connections)
        self.cluster = isinstance(self.redis, redis.RedisCluster)
        self.wait_replicas = wait_replicas
        # The hot paths, on connections of their own (on a cluster, each primary's), as
        # many and waited for as long as the client's; a WAIT ends before the socket's
        # timeout.
        make = functools.partial(Commands, max_open=max_connections, wait_secs=timeout_secs,
                                 replicas=wait_replicas,
                                 replicas_ms=int(timeout_secs * 1000 * WAIT_SHARE))
        self.command = redis_cluster.ClusterCommands(self.redis, make) \
            if self.cluster else make(self.redis)
        self.closed = threading.Event()
        self.feed = EventFeed(self.redis, EVENTS, block_secs=self.block,
                              stall_secs=timeout_secs,
                              lost=self.command.refresh if self.cluster else None)
        self.feed.also(CHANNEL, self._cancelled)
        self.feed.also(PUSH_WAKE, self._woken)
        self.feed.observe(self._evented)
        self.feed.resubscribed(self._resubscribed)
        self.news = SentinelNews(self.redis, block_secs=self.block, stall_secs=timeout_secs)
        self.on_cancel = None                   # the replicas' callback, once they listen
        self.on_wake = None                     # push's (a config saved, deleted, released)
        self.on_event = None                    # push's (an event written: task id, n)
        self.on_cancels_lost = None             # the replicas' (a gap: look at the marks)
        self.on_wakes_lost = None               # push's (a gap: look at every config)
        self._feed_lock = threading.Lock()
        self._feed_started = False

    def _cancelled(self, task_id: str) -> None:
        if self.on_cancel is not None:
            self.on_cancel(task_id)

    def _woken(self, name: str) -> None:
        if self.on_wake is not None:
            self.on_wake(name)

    def _evented(self, task_id: str, n: int) -> None:
        if self.on_event is not None:
            self.on_event(task_id, n)

    def _resubscribed(self) -> None:
        # NOTE: on the listener's thread: each callback only wakes its own thread.
        for lost in (self.on_cancels_lost, self.on_wakes_lost):
            if lost is not None:
                lost()

    def start_feed(self) -> None:
        """Start the one listener (at the first stream, or when the replicas listen)."""
        if self._feed_started:
            return
        with self._feed_lock:
            if not self._feed_started and not self.closed.is_set():
                self.feed.start()
                self.news.start()           # behind Sentinel: its failovers as they come
                self._feed_started = True

    def close(self) -> None:
        """Drop this replica's liveness and every connection; idempotent."""
        if self.closed.is_set():
            return
        self.closed.set()
        # NOTE: the feed's listener is not joined: it ends within ``block`` by itself, or
        # at once when the pool's disconnect below closes its connection.
        self.feed.close()
        self.news.close()
        try:
            self.redis.delete(live_key(self.replica))
        except redis_cluster.FAILURES:
            pass
        self.command.close()
        release(self.redis)


def release(client: redis.Redis) -> None:
    """Close every connection of a client of ``connect``: behind Sentinel, the sentinels'
    clients' too (each connect asked one, whose connection stayed open)."""
    if isinstance(client, redis.RedisCluster):
        # NOTE: the nodes' connections only, as on one Redis: the client keeps its slot
        # map, so a late call (an agent that outlived the drain giving its slot back)
        # reconnects or fails as Redis would, never on a client without nodes.
        redis_cluster.disconnect(client)
        return
    client.close()
    client.connection_pool.disconnect()
    watchers = getattr(client.connection_pool, "sentinel_manager", None)
    for sentinel in watchers.sentinels if watchers is not None else ():
        sentinel.connection_pool.disconnect()


def public_url(url: str) -> str:
    """The URL without its password (``user:password@``, a socket's ``password=``, the
    sentinels' ``sentinel_password=``), for logs.

    A query field is masked by its name as redis-py and the hub read it (percent-decoded:
    ``pass%77ord=`` is ``password=``), whole to the next ``&`` (a ``#`` in it too)."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    rest, mark, query = rest.partition("?")
    return scheme + sep + rest + mark + "&".join(map(_masked, query.split("&")))


def _masked(field: str) -> str:
    name, equals, _ = field.partition("=")
    return name + "=***" if equals and "password" in unquote_plus(name).lower() else field
