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

import os
import threading
import time

from redis.connection import ConnectionPool
from redis.exceptions import MaxConnectionsError
from redis.sentinel import SentinelConnectionPool

MAX_CONNECTIONS = 64            # redis.max_connections' default
WAIT_SECS = 5.0                 # redis.timeout_secs' default


class _Waits:
    """A pool of at most ``max_connections`` in use, whose ``get_connection`` waits up to
    ``timeout`` seconds for one when they all are (see the module).

    Concurrency: ``_returned`` (a condition on an RLock) guards ``_returns`` (connections
    given back while a caller waited) and ``_waiting``; a caller that found every connection
    in use counts itself waiting before it tries once more, so a connection given back
    after that try tells it (``release``), as does a ``reset`` (every connection let go).
    The common case, a connection free, takes no lock of these."""

    def __init__(self, *args, timeout: float = WAIT_SECS,
                 max_connections: int = MAX_CONNECTIONS, **kwargs):
        self.timeout = timeout
        self._waits_pid = None          # the process whose waiters these are
        super().__init__(*args, max_connections=max_connections, **kwargs)

    def reset(self) -> None:
        """redis-py's (every connection let go), each waiter told. Made and after a fork
        (``_checkpid``), the lock and counts are made anew: the parent's waiters are not
        this process's, and a thread of the parent may have held the lock."""
        if self._waits_pid != os.getpid():
            self._returned = threading.Condition(threading.RLock())
            self._returns = 0
            self._waiting = 0
            self._waits_pid = os.getpid()
        super().reset()
        with self._returned:
            self._returns += 1
            self._returned.notify_all()

    def get_connection(self, *args, **kwargs):
        try:
            return super().get_connection(*args, **kwargs)
        except MaxConnectionsError:
            pass
        deadline = time.monotonic() + self.timeout
        with self._returned:
            self._waiting += 1
        try:
            while True:
                seen = self._returns
                try:
                    return super().get_connection(*args, **kwargs)
                except MaxConnectionsError:
                    pass
                with self._returned:
                    if self._returns != seen:
                        continue                # one came back since the try: try again
                    left = deadline - time.monotonic()
                    if left <= 0:
                        # NOTE: a notify this caller took and did not use goes on.
                        self._returned.notify()
                        raise MaxConnectionsError(
                            f"every connection of the pool is in use ({self.max_connections})")
                    self._returned.wait(left)
        finally:
            with self._returned:
                self._waiting -= 1

    @property
    def waiting(self) -> int:
        """The callers waiting for a connection now."""
        return self._waiting

    def release(self, connection) -> None:
        super().release(connection)
        if self._waiting:
            with self._returned:
                self._returns += 1
                self._returned.notify()


class WaitingPool(_Waits, ConnectionPool):
    """redis-py's ``ConnectionPool``, bounded, waiting (``_Waits``)."""


class WaitingSentinelPool(_Waits, SentinelConnectionPool):
    """redis-py's ``SentinelConnectionPool``, bounded, waiting (``_Waits``)."""
