"""The Redis store on a Redis Cluster (``store: redis-cluster://HOST:PORT[,HOST:PORT…]``, or
``rediss-cluster://…`` over TLS).

Every key of the store carries a hash tag (``redis_keys``): a tenant's keys the tag
of that tenant, the hub's own ``{hub}``, so tenants spread over the primaries while
each script touches one slot (docs/hub.md, "Key layout"). A pipeline may hold
commands of several slots: each node's go to it together (``NodePipeline``; the
store sends no transaction). The client is
redis-py's ``RedisCluster``: it learns the slots from any node named, follows
MOVED and ASK, and its ``pubsub()`` listens on one node, which hears every
``PUBLISH`` of the cluster (a published message is broadcast to every node).

``ClusterCommands`` is ``redis_commands.Commands`` routed by key: one
``Commands`` per primary, on the connections of that node, chosen by the slot
of each command's first key. A command answered MOVED, ASK or TRYAGAIN (a slot
that moves: a resharding, a failover) is sent again where that says, and only it
(``redis_redirects``), as ``NodePipeline``'s are. A node that cannot be reached (a
primary lost, whose replica may have taken its slots) refreshes the map too, at most
once a second, and the call goes once more to its slot's owner if that changed.
"""
from __future__ import annotations

import logging
import ssl
import threading
import time

import redis
from redis._parsers import Encoder
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import (AskError, AuthenticationError, AuthorizationError,
                              ClusterDownError, MovedError, RedisClusterException,
                              RedisClusterUnreachableError, SlotNotCoveredError)
from redis.retry import Retry

from murmur_wsgi.hub.store.base import StoreRefused, retrying_quietly
from murmur_wsgi.hub.store.cluster_url import cluster_nodes, tls_settings
from murmur_wsgi.hub.store.forks import anew_in_child
from murmur_wsgi.hub.store.redis_cluster_pipeline import NodePipeline, key_of
from murmur_wsgi.hub.store.redis_commands import Commands
from murmur_wsgi.hub.store.redis_pool import MAX_CONNECTIONS, WaitingPool
from murmur_wsgi.hub.store.redis_redirects import REDIRECTED, follow, raised

logger = logging.getLogger(__name__)

REFRESH_SECS = 1.0              # the shortest time between two refreshes a failure asks for

# What a failure of Redis is: every ``RedisError``, and a cluster's own (no node reachable,
# a slot no node serves), which redis-py raises as ``RedisClusterException``.
FAILURES = (redis.RedisError, RedisClusterException)


class _Cluster(RedisCluster):
    """A ``RedisCluster`` whose timed-out command is not sent again (as on one Redis: a
    stalled primary is answered within the timeout); one whose connection failed, or that
    met a cluster without the slot's owner, is sent once more after a refresh.

    Made even when no node answers: redis-py's client (the slot map, the commands' table)
    is made then at the first use that finds a node (``__getattr__``), as a client of one
    Redis connects at its first command. Its ``pipeline()`` is ``NodePipeline``.

    What it logs of the cluster's state is one line as a state starts: no node answers
    (as the hub starts), the nodes refuse the URL's user or password (once, however many
    tries meet it), the cluster answers. A client made inside ``retried_quietly`` (the
    API-key watcher's, beside the store's) logs them at DEBUG: the store's tells them.

    Concurrency: one thread at a time makes redis-py's client (``_making``); the others
    meanwhile raise ``RedisClusterUnreachableError`` at once. A make that ends after the
    client closed (``closing``) closes what it connected. A forked child makes its locks
    anew (``forked``): a parent's thread making the client held ``_making`` for good there."""

    ERRORS_ALLOW_RETRY = (redis.ConnectionError, ClusterDownError, SlotNotCoveredError)

    def __init__(self, *args, timeout_secs: float = 5.0, **kwargs):
        self.timeout_secs = timeout_secs        # the longest a TRYAGAIN is sent again
        self.closing = threading.Event()        # set by ``disconnect``: no more pauses
        self._asked: dict[str, ClusterNode] = {}     # nodes an ASK named that the map lacks
        self._settings = (args, kwargs)
        self._made = False                      # redis-py's client made: the map read
        self.forked()                           # _asked_lock, _making, _maker
        anew_in_child(self)
        self._make_at = 0.0                     # the next try, after one that failed
        self._quiet = retrying_quietly()        # its state told at DEBUG (the class)
        self._refused = None                    # the refusal told, while the tries meet it
        # NOTE: as redis-py's makes it: a script registered before the client is made
        # (the store's parts register theirs as the hub starts) asks for it.
        self.encoder = Encoder(kwargs.get("encoding", "utf-8"),
                               kwargs.get("encoding_errors", "strict"),
                               kwargs.get("decode_responses", False))
        try:
            self._make()
        except FAILURES as ex:
            self._make_at = time.monotonic() + REFRESH_SECS
            self._tell(logging.WARNING, "redis store: no node of the Redis Cluster answers "
                       "(%s); the hub answers -32603 until one does", type(ex).__name__)

    def forked(self) -> None:
        """Its locks, made; and in a forked child (``forks``), where a parent's thread may
        have held one (a make under way, waiting on a node that does not answer)."""
        self._asked_lock = threading.Lock()
        self._making = threading.Lock()
        self._maker = None                      # the thread making it

    def _tell(self, level: int, message: str, *args) -> None:
        logger.log(logging.DEBUG if self._quiet else level, message, *args)

    def _make(self) -> None:
        """Make redis-py's client (it reads the slot map, and the commands' table): nodes
        that refuse the URL's user or password, or whose certificates are not verified,
        raise ``StoreRefused``; none reachable, a ``RedisClusterException``. What a failed
        try made is dropped."""
        before = set(self.__dict__)
        self._maker = threading.get_ident()
        try:
            args, kwargs = self._settings
            RedisCluster.__init__(self, *args, **kwargs)
            if self.closing.is_set():
                # NOTE: closed while made (``disconnect`` waits for a make a while, not for
                # good): what this make connected is closed here, not left open.
                raise RedisClusterUnreachableError("the Redis Cluster's client is closed")
            self._made = True
        except (RedisClusterException, AuthenticationError, AuthorizationError) as ex:
            self._drop(before)
            refusal = _refusal(ex)
            if refusal:
                raise StoreRefused(refusal) from None
            raise
        except BaseException:
            self._drop(before)
            raise
        finally:
            self._maker = None

    def _drop(self, before: set) -> None:
        manager = self.__dict__.get("nodes_manager")
        for name in set(self.__dict__) - before:
            del self.__dict__[name]
        if manager is not None:
            for node in list(manager.nodes_cache.values()):
                if node.redis_connection is not None:
                    node.redis_connection.connection_pool.disconnect()

    def __getattr__(self, name: str):
        """What redis-py's client holds, once made: a cluster that no node answered as the
        hub started is tried again here, at most once in ``REFRESH_SECS``; until then every
        use raises ``RedisClusterUnreachableError`` (a failure of Redis: -32603)."""
        state = self.__dict__
        if state.get("_made", True) or state.get("_maker") == threading.get_ident():
            raise AttributeError(name)          # made, or being made by this very call
        if self.closing.is_set() or time.monotonic() < self._make_at or \
                not self._making.acquire(blocking=False):
            raise RedisClusterUnreachableError("no node of the Redis Cluster answered")
        try:
            if not self._made:
                self._make_at = time.monotonic() + REFRESH_SECS
                try:
                    self._make()
                except StoreRefused as ex:
                    if str(ex) != self._refused:        # told as it starts, not each try
                        self._refused = str(ex)
                        self._tell(logging.WARNING, "redis store: %s", ex)
                    raise RedisClusterUnreachableError(str(ex)) from None
                except FAILURES:
                    self._refused = None                # none answers: a refusal is new
                    raise
                self._tell(logging.INFO, "redis store: the Redis Cluster answers")
        finally:
            self._making.release()
        return object.__getattribute__(self, name)

    def close(self) -> None:
        self.closing.set()
        if self._made:
            super().close()

    def asked_node(self, host: str, port: int, origin: ClusterNode) -> ClusterNode:
        """The node an ASK from ``origin`` names, connected: one the map does not hold (a
        primary just added owns no slot until its first one has moved, and the map lists
        only owners) is made once and kept."""
        host = host or origin.host
        node = self.get_node(host=host, port=port)
        if node is None:
            with self._asked_lock:
                node = self._asked.setdefault(f"{host}:{port}", ClusterNode(host, port))
        self.get_redis_connection(node)
        return node

    def pipeline(self, transaction=None, shard_hint=None):
        return NodePipeline(self)


def connect_cluster(url: str, timeout_secs: float,
                    max_connections: int = MAX_CONNECTIONS) -> RedisCluster:
    """A cluster client of ``url`` whose every wait ends within ``timeout_secs``; each node's
    pool holds at most ``max_connections`` in use, a call past them waits for one
    (``redis_pool``).

    It reads the slot map now: nodes that refuse the URL's user or password (a wrong one,
    or none where one is asked) raise ``StoreRefused``; none reachable, the client is made
    all the same, and reads the map at its first use that finds a node (``_Cluster``)."""
    nodes, user, password = cluster_nodes(url)
    return _Cluster(
        startup_nodes=[ClusterNode(host, port) for host, port in nodes],
        username=user, password=password, decode_responses=True,
        socket_timeout=timeout_secs, socket_connect_timeout=timeout_secs,
        retry=Retry(NoBackoff(), 1), health_check_interval=30, timeout_secs=timeout_secs,
        connection_pool_class=WaitingPool, max_connections=max_connections,
        timeout=timeout_secs, **tls_settings(url))


def _refusal(ex: BaseException) -> str | None:
    """What is wrong when the nodes refused the client (a password, a certificate), or
    None: none answered."""
    refused = (AuthenticationError, AuthorizationError)
    if isinstance(ex, refused) or isinstance(ex.__cause__, refused):
        return (f"the Redis Cluster's nodes refused the URL's user or password "
                f"({type(ex.__cause__ or ex).__name__})")
    unverified = _unverified(ex)
    if unverified is None:
        return None
    if unverified.verify_code in MISMATCHES:
        return (f"the Redis Cluster's nodes' TLS certificates are not for the host the URL "
                f"names ({unverified.verify_message})")
    return ("the Redis Cluster's nodes' TLS certificates are not signed by the URL's "
            "ssl_ca_certs (or the system's CAs)")


# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH: a certificate
# signed by a trusted CA, for another name.
MISMATCHES = (62, 64)


def _unverified(ex: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate's failed verification ``ex`` came of, or None."""
    while ex is not None:
        if isinstance(ex, ssl.SSLCertVerificationError):
            return ex
        ex = ex.__cause__ or ex.__context__
    return None


class ClusterCommands:
    """``Commands`` (``make``, the class) per primary of ``cluster``, each call sent to the
    owner of its first key's slot (every command of one call is in that slot), and each
    command of it where a redirection says (``redis_redirects``), within the cluster's
    ``timeout_secs``; a pause between two sends ends when the cluster closes (``closing``).

    Concurrency: the per-node map is filled under a lock (one of its own in a forked
    child: ``forked``); each ``Commands`` is thread-safe.
    """

    def __init__(self, cluster: _Cluster, make):
        self._cluster = cluster
        self._make = make
        self._nodes: dict[str, object] = {}
        self._refresh_at = 0.0                  # the next refresh after a failed connection
        self.forked()
        anew_in_child(self)

    def forked(self) -> None:
        """The map's lock, made; and in a forked child (``forks``), where a parent's thread
        may have held it. Each node's ``Commands`` makes itself anew."""
        self._lock = threading.Lock()

    def _of_node(self, node):
        found = self._nodes.get(node.name)
        if found is None:
            with self._lock:
                found = self._nodes.get(node.name)
                if found is None:
                    found = self._nodes[node.name] = self._make(node.redis_connection)
        return found

    def _node_of(self, commands: tuple):
        key = key_of(commands[0])
        if key is None:
            return self._cluster.get_random_node()
        return self._cluster.get_node_from_key(key)

    def __call__(self, *args):
        return self.several(args)[0]

    def _send(self, node, commands: list, asked: bool, durable: bool) -> list:
        """``commands``' answers from ``node`` (``Commands.answers``); when its connection
        fails, once more from their slot's owner after a refresh of the map, if that is
        another node (a replica took over a primary that is gone: such a node answers no
        MOVED)."""
        try:
            return self._of_node(node).answers(*commands, asked=asked, durable=durable)
        except redis.ConnectionError:
            if asked:
                raise
            self.refresh()
            again = self._node_of(commands)
            if again.name == node.name:
                raise
            return self._of_node(again).answers(*commands, durable=durable)

    def _followed(self, commands: tuple, asking: bool = True, durable: bool = False) -> list:
        """Each command's answer, errors in place: all sent to the slot's owner, then each
        one redirected (MOVED, ASK, TRYAGAIN) where the cluster says (``redis_redirects``).

        PERF: the first round is this call's own (one route, no bookkeeping): a slot that
        does not move costs no more than before redirections were followed one by one."""
        found = self._send(self._node_of(commands), list(commands), False, durable)
        again = [i for i, answer in enumerate(found) if isinstance(answer, REDIRECTED)
                 and (asking or not type(answer) is AskError)]
        if not again:
            return found
        if any(isinstance(found[i], MovedError) for i in again):
            self._cluster.nodes_manager.initialize()
        followed = follow(
            [commands[i] for i in again], lambda command: self._node_of((command,)),
            lambda node, some, asked: self._send(node, some, asked, durable),
            asked_node=self._cluster.asked_node, moved=self._cluster.nodes_manager.initialize,
            pause=self._cluster.closing.wait,
            deadline=time.monotonic() + self._cluster.timeout_secs,
            asking=asking)
        for i, answer in zip(again, followed):
            found[i] = answer
        return found

    def refresh(self) -> None:
        """The slot map read anew from the nodes, at most once in ``REFRESH_SECS`` (every
        request to a node that is gone asks for it, and the listener's every failure); a
        refresh that fails keeps the map (logged at DEBUG for a background loop's call:
        the loop logs the outage once)."""
        with self._lock:
            now = time.monotonic()
            if now < self._refresh_at:
                return
            self._refresh_at = now + REFRESH_SECS
        try:
            self._cluster.nodes_manager.initialize()
        except FAILURES as ex:
            logger.log(logging.DEBUG if retrying_quietly() else logging.WARNING,
                       "redis store: the cluster's slot map could not be read: %s",
                       type(ex).__name__)

    def several(self, *commands: tuple, asking: bool = True) -> list:
        """Each command's answer (``Commands.several``), each sent to its slot's owner, and
        where a MOVED, ASK or TRYAGAIN says (``redis_redirects``); ``asking`` False: an ASK
        raises its ``AskError`` (the importing node answers nothing for a key it does not
        hold yet)."""
        return raised(self._followed(commands, asking))

    def durable(self, *args):
        """As ``Commands.durable`` (the write and its ``WAIT`` on one connection), routed."""
        return raised(self._followed((args,), durable=True))[0]

    def script(self, source: str, durable: bool = False):
        """As ``Commands.script`` (``EVALSHA``, ``EVAL`` once when missing), routed."""
        return Commands.script(self, source, durable)

    def after(self, before, command: tuple, durable: bool = False, then=()):
        """As ``Commands.after``, but ``before`` and ``then`` (every command of each in one
        slot) go to their own slot's primary, each in a round trip of its own: ``before``,
        then ``command`` to its slot's, then ``then`` (once ``command`` is answered)."""
        if before:
            self.several(*before)
        answer = self.durable(*command) if durable else self(*command)
        if then:
            self.several(*then)
        return answer

    @property
    def idle(self) -> int:
        return sum(commands.idle for commands in list(self._nodes.values()))

    def prune(self) -> int:
        return sum(commands.prune() for commands in list(self._nodes.values()))

    def close(self) -> None:
        self._cluster.closing.set()
        for commands in list(self._nodes.values()):
            commands.close()


def disconnect(cluster: RedisCluster) -> None:
    """Close every node's connections (the listener's included)."""
    asked = []
    if isinstance(cluster, _Cluster):
        cluster.closing.set()           # no make starts after this
        # NOTE: one under way ends within its connects' timeouts: its nodes are closed too.
        making = cluster._making.acquire(timeout=cluster.timeout_secs)
        if making:
            cluster._making.release()
        if not cluster._made:
            return                          # no node answered: nothing connected
        asked = list(cluster._asked.values())
    for node in [*cluster.get_nodes(), *asked]:
        if node.redis_connection is not None:
            node.redis_connection.connection_pool.disconnect()
