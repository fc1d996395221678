"""The Redis store on a Redis Cluster (``store: redis-cluster://HOST:PORT[,HOST:PORT…]``).

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
of the first key of a call. A MOVED answer refreshes the slot map and sends
the call once more, to the new owner; an ASK answer sends it to the node named,
each command after an ``ASKING``. A node that cannot be reached (a primary lost,
whose replica may have taken its slots) refreshes the map too, at most once a
second, and the call goes once more to its slot's owner if that changed.
"""
from __future__ import annotations

import logging
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ClusterDownError, RedisClusterException, SlotNotCoveredError
from redis.retry import Retry

from murmur_wsgi.hub.store.cluster_url import cluster_nodes
from murmur_wsgi.hub.store.redis_commands import Commands

logger = logging.getLogger(__name__)

REFRESH_SECS = 1.0              # the shortest time between two refreshes a failure asks for

# What a failure of Redis is: every ``RedisError``, and a cluster's own (no node reachable,
# a slot no node serves), which redis-py raises as ``RedisClusterException``.
FAILURES = (redis.RedisError, RedisClusterException)


class _Cluster(RedisCluster):
    """A ``RedisCluster`` whose timed-out command is not sent again (as on one Redis: a
    stalled primary is answered within the timeout); one whose connection failed, or that
    met a cluster without the slot's owner, is sent once more after a refresh.

    Its ``pipeline()`` is ``NodePipeline``."""

    ERRORS_ALLOW_RETRY = (redis.ConnectionError, ClusterDownError, SlotNotCoveredError)

    def pipeline(self, transaction=None, shard_hint=None):
        return NodePipeline(self)


class NodePipeline(redis.client.Pipeline):
    """A pipeline (no transaction) whose commands may be in several slots: each node's
    commands (by the slot of each command's first key) go to it in one pipeline of its
    own, node after node, each sent once, so a timed-out one is not sent again
    (redis-py's cluster pipeline sends each command of a failed one again, one by one,
    each with its own timeout). The answers come back in the order queued. A MOVED or ASK
    answer refreshes the slot map and sends that node's commands once more, each to its
    slot's owner then (a slot still migrating fails as Redis being away does). A node
    whose connection fails (a lost primary) raises once the other nodes' commands are
    sent; one that times out raises at once. A
    script queued (``Script(keys, args, client=pipe)``) is loaded on each node first.

    It queues as a node's pipeline does and is never sent itself: ``execute`` sends."""

    def __init__(self, cluster: RedisCluster):
        node = cluster.get_default_node().redis_connection
        super().__init__(node.connection_pool, node.response_callbacks, transaction=False,
                         shard_hint=None)
        self._cluster = cluster

    def _groups(self, indexed) -> dict:
        groups: dict = {}
        for i, (args, options) in indexed:
            key = _key_of(args)
            node = self._cluster.get_default_node() if key is None else \
                self._cluster.get_node_from_key(key)
            groups.setdefault(node.name, (node, []))[1].append((i, (args, options)))
        return groups

    def _send(self, node, commands, scripts) -> list:
        pipe = node.redis_connection.pipeline(transaction=False)
        pipe.scripts = set(scripts)
        for _, (args, options) in commands:
            pipe.execute_command(*args, **options)
        return pipe.execute()

    def execute(self, raise_on_error: bool = True) -> list:
        stack = list(enumerate(self.command_stack))
        scripts = set(self.scripts)
        self.reset()
        answers: dict = {}
        lost = None
        for node, commands in self._groups(stack).values():
            try:
                found = self._send(node, commands, scripts)
            except (redis.exceptions.MovedError, redis.exceptions.AskError):
                self._cluster.nodes_manager.initialize()
                for again, some in self._groups(commands).values():
                    answers.update(zip((i for i, _ in some), self._send(again, some, scripts)))
                continue
            except redis.ConnectionError as ex:
                # NOTE: a lost primary (its connection refused at once) does not keep the
                # other nodes' commands from being sent: a replica's turn renews every other
                # tenant's slots. A timed-out one still raises at once (a stalled node costs
                # its timeout once).
                lost = lost or ex
                continue
            answers.update(zip((i for i, _ in commands), found))
        if lost is not None:
            raise lost
        return [answers[i] for i in range(len(stack))]


def connect_cluster(url: str, timeout_secs: float) -> RedisCluster:
    """A cluster client of ``url`` whose every wait ends within ``timeout_secs``."""
    nodes, user, password = cluster_nodes(url)
    return _Cluster(
        startup_nodes=[ClusterNode(host, port) for host, port in nodes],
        username=user, password=password, decode_responses=True,
        socket_timeout=timeout_secs, socket_connect_timeout=timeout_secs,
        retry=Retry(NoBackoff(), 1), health_check_interval=30)


def _key_of(command: tuple) -> str | None:
    """The first key a command names (a script's first of ``KEYS``), None when it has none."""
    name = str(command[0]).upper()
    if name in ("EVAL", "EVALSHA"):
        return command[3] if int(command[2]) > 0 else None
    return command[1] if len(command) > 1 else None


class ClusterCommands:
    """``Commands`` (``make``, the class) per primary of ``cluster``, each call sent to the
    owner of its first key's slot; every command of one call is in that slot.

    Concurrency: the per-node map is filled under a lock; each ``Commands`` is
    thread-safe.
    """

    def __init__(self, cluster: RedisCluster, make):
        self._cluster = cluster
        self._make = make
        self._nodes: dict[str, object] = {}
        self._lock = threading.Lock()
        self._refresh_at = 0.0                  # the next refresh after a failed connection

    def _of_node(self, node):
        found = self._nodes.get(node.name)
        if found is None:
            with self._lock:
                found = self._nodes.get(node.name)
                if found is None:
                    found = self._nodes[node.name] = self._make(node.redis_connection)
        return found

    def _node_of(self, commands: tuple):
        key = _key_of(commands[0])
        if key is None:
            return self._cluster.get_random_node()
        return self._cluster.get_node_from_key(key)

    def __call__(self, *args):
        return self.several(args)[0]

    def _followed(self, commands: tuple, call):
        """``call(commands_of_the_node)``, on the owner of the commands' slot; when its
        connection fails, once more on the slot's owner after a refresh of the map, if that
        is another node (a replica took over a primary that is gone: such a node answers
        no MOVED)."""
        node = self._node_of(commands)
        try:
            return call(self._of_node(node))
        except redis.ConnectionError:
            self.refresh()
            again = self._node_of(commands)
            if again.name == node.name:
                raise
            return call(self._of_node(again))

    def refresh(self) -> None:
        """The slot map read anew from the nodes, at most once in ``REFRESH_SECS`` (every
        request to a node that is gone asks for it, and the listener's every failure); a
        refresh that fails keeps the map."""
        with self._lock:
            now = time.monotonic()
            if now < self._refresh_at:
                return
            self._refresh_at = now + REFRESH_SECS
        try:
            self._cluster.nodes_manager.initialize()
        except FAILURES as ex:
            logger.warning("redis store: the cluster's slot map could not be read: %s",
                           type(ex).__name__)

    def several(self, *commands: tuple, asking: bool = True) -> list:
        """Each command's answer (``Commands.several``), routed; ``asking`` False: a slot
        that migrates raises its ``AskError`` (every command is sent again to the node
        that imports it otherwise, which answers nothing for a key it does not hold yet)."""
        try:
            return self._followed(commands, lambda node: node.several(*commands))
        except redis.exceptions.MovedError:
            self._cluster.nodes_manager.initialize()       # the slot moved: ask anew
            return self._of_node(self._node_of(commands)).several(*commands)
        except redis.exceptions.AskError as ex:            # the slot is migrating
            if not asking:
                raise
            node = self._cluster.get_node(host=ex.host, port=ex.port)
            if node is None or node.redis_connection is None:
                self._cluster.nodes_manager.initialize()
                node = self._cluster.get_node(host=ex.host, port=ex.port)
                if node is None or node.redis_connection is None:
                    raise
            asked = [part for command in commands for part in (("ASKING",), command)]
            return self._of_node(node).several(*asked)[1::2]

    def durable(self, *args):
        """As ``Commands.durable`` (the write and its ``WAIT`` on one connection), routed."""
        return self._followed((args,), lambda node: node.durable(*args))

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
        for commands in list(self._nodes.values()):
            commands.close()


def disconnect(cluster: RedisCluster) -> None:
    """Close every node's connections (the listener's included)."""
    for node in cluster.get_nodes():
        if node.redis_connection is not None:
            node.redis_connection.connection_pool.disconnect()
