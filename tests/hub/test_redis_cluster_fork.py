"""A Redis Cluster store's client (hub/store/redis_cluster.py) in a process forked from one
that used it: the locks a parent's thread may have held at the fork are made anew there, as
the single Redis's waiters and connections are (test_redis_pool_fork.py).

The child runs the check and exits 0 (passed), 1 (failed) or never (stuck: killed at the
deadline); the parent reads how it ended.
"""
from __future__ import annotations

import functools
import socket
import threading

from murmur_wsgi.hub.store.redis_cluster import ClusterCommands, connect_cluster
from murmur_wsgi.hub.store.redis_commands import Commands
from tests.hub.test_redis_pool_fork import CHILD_DEADLINE, _in_child


def _holding(lock) -> tuple[threading.Thread, threading.Event]:
    """A thread of the parent's holding ``lock`` until the returned Event is set."""
    holding, forked = threading.Event(), threading.Event()

    def hold():
        with lock:
            holding.set()
            forked.wait(CHILD_DEADLINE)
    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(CHILD_DEADLINE)
    return holder, forked


def test_a_forked_child_fills_its_own_map_of_nodes(redis_cluster):
    """The parent forks while a thread of its holds the map's lock (as one does while it
    adds a primary's ``Commands``). The child's first command to a primary is answered;
    before, it stopped for good on the parent's lock."""
    redis_cluster.flush()
    cluster = connect_cluster(redis_cluster.url, 2.0)
    commands = ClusterCommands(cluster, functools.partial(Commands, wait_secs=2.0))
    holder, forked = _holding(commands._lock)
    try:
        ended = _in_child(lambda: commands("SET", "{fork}k", "v") in ("OK", True))
    finally:
        forked.set()
        holder.join(CHILD_DEADLINE)
        commands.close()
        cluster.close()
    assert ended == 0, "stuck" if ended is None else "the child's command failed"


def test_a_child_forked_while_its_parent_reached_for_the_cluster_tries_it_again():
    """A hub whose cluster did not answer as it started tries it at its next use; the parent
    forks while a thread of its tries (its ``connect`` waits on a node that never answers).
    The child's own next use tries the node again (it connects); before, it raised
    RedisClusterUnreachableError at once, at every use, for good: the parent's try held
    the child's lock."""
    with socket.socket() as node:                           # accepts, never answers
        node.bind(("127.0.0.1", 0))
        node.listen(16)
        url = f"redis-cluster://127.0.0.1:{node.getsockname()[1]}"
        cluster = connect_cluster(url, 0.3)
        _drained(node)                                      # the connections of its first try
        holder, forked = _holding(cluster._making)          # the parent's try, under way
        cluster._make_at = 0.0                              # the next use tries at once

        def check():
            node.settimeout(3.0)                            # a try takes 0.3 s
            came = []
            accepting = threading.Thread(target=lambda: came.append(node.accept()))
            accepting.start()
            try:
                cluster.get_primaries()
            except Exception:  # noqa: BLE001 - the node never answers: the try fails
                pass
            accepting.join(5.0)
            return bool(came)
        try:
            ended = _in_child(check)
        finally:
            forked.set()
            holder.join(CHILD_DEADLINE)
            cluster.close()
    assert ended == 0, "stuck" if ended is None else "the child never tried the cluster"


def _drained(node: socket.socket) -> None:
    """Accept and close what connected to ``node`` so far."""
    node.setblocking(False)
    try:
        while True:
            node.accept()[0].close()
    except BlockingIOError:
        pass
    node.setblocking(True)
