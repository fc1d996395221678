"""redis-py's pools, bounded, whose callers wait for a connection: ``WaitingPool`` (one Redis,
its unix socket, each node of a Redis Cluster) and ``WaitingSentinelPool`` (the primary the
sentinels name).

redis-py's ``ConnectionPool`` raises ``MaxConnectionsError`` at once when its
``max_connections`` (100 by default) are in use, so a burst of requests past it (ListTasks,
push, context reads: whatever does not go through ``redis_commands.Commands``) failed at
once, as if Redis were away. These pools let the caller wait up to ``timeout`` seconds for
a connection to come back, then raise ``MaxConnectionsError`` (a ``ConnectionError``, which
the client does not send again, nor a cluster take for a lost node): -32603, as Redis
being away answers. redis-py's ``BlockingConnectionPool`` waits as well, but no Sentinel
pool does, and its wait ends in a plain ``ConnectionError``, which a cluster takes for a
node that failed (it reads the slot map anew and sends the command once more, waiting
again).
"""
from __future__ import annotations

import functools
import os
import threading

from redis.connection import ConnectionPool
from redis.exceptions import MaxConnectionsError
from redis.sentinel import SentinelConnectionPool

from murmur_wsgi.hub.store.turns import Turns

MAX_CONNECTIONS = 64            # redis.max_connections' default
WAIT_SECS = 5.0                 # redis.timeout_secs' default


class _Waits:
    """A pool of at most ``max_connections`` in use, whose ``get_connection`` waits up to
    ``timeout`` seconds for one when they all are (see the module), first come, first
    served (``turns.Turns``): a caller that finds others waiting waits behind them, and a
    connection given back (``release``), or every one let go (``reset``), goes to the
    oldest waiter. A waiter connects the one it is lent once out of the queue
    (``ensure_connection``, skipped for the threads in ``_unconnected``): a connect that
    lasts (a Redis that does not answer yet) keeps the next waiter from none given back
    meanwhile. The common case, a connection free and nobody waiting, takes no lock of
    these."""

    def __init__(self, *args, timeout: float = WAIT_SECS,
                 max_connections: int = MAX_CONNECTIONS, **kwargs):
        self.timeout = timeout
        self._turns = Turns()           # a forked child's starts empty (``forks``)
        self._waits_pid = None          # the process whose ``_unconnected`` these are
        super().__init__(*args, max_connections=max_connections, **kwargs)

    def reset(self) -> None:
        """redis-py's (every connection let go), the oldest waiter told. Made and after a
        fork (``_checkpid``), no thread is taking one unconnected."""
        if self._waits_pid != os.getpid():
            self._unconnected: set[int] = set()     # threads taking one not to connect yet
            self._waits_pid = os.getpid()
        super().reset()
        self._turns.tell()

    def get_connection(self, *args, **kwargs):
        self._checkpid()                        # after a fork: this process's queue
        if not self._turns.waiting:
            found = self._lent(args, kwargs)
            if found is not None:
                return found
        found = self._turns.wait(functools.partial(self._reserved, args, kwargs), self.timeout)
        if found is None:
            raise MaxConnectionsError(
                f"every connection of the pool is in use ({self.max_connections})")
        try:
            self.ensure_connection(found)           # out of the queue: the next one is served
        except BaseException:
            self.release(found)                     # as redis-py's own does
            raise
        return found

    def _lent(self, args, kwargs):
        """redis-py's ``get_connection``, or None when every connection is in use."""
        try:
            return super().get_connection(*args, **kwargs)
        except MaxConnectionsError:
            return None

    def _reserved(self, args, kwargs):
        """``_lent``'s, not connected yet (its caller connects it), or None."""
        ident = threading.get_ident()
        self._unconnected.add(ident)
        try:
            return self._lent(args, kwargs)
        finally:
            self._unconnected.discard(ident)

    def ensure_connection(self, connection) -> None:
        """redis-py's (connect, and check the connection is ready), but in ``_reserved``."""
        if threading.get_ident() not in self._unconnected:
            super().ensure_connection(connection)

    @property
    def waiting(self) -> int:
        """The callers waiting for a connection now."""
        return self._turns.waiting

    def release(self, connection) -> None:
        super().release(connection)
        self._turns.tell()


class WaitingPool(_Waits, ConnectionPool):
    """redis-py's ``ConnectionPool``, bounded, waiting (``_Waits``)."""


class WaitingSentinelPool(_Waits, SentinelConnectionPool):
    """redis-py's ``SentinelConnectionPool``, bounded, waiting (``_Waits``)."""
