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

import collections
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
    ``timeout`` seconds for one when they all are (see the module), first come, first
    served: a caller that finds others waiting waits behind them, and a connection given
    back goes to the oldest waiter. Before, a caller that gave one back and asked again at
    once took it ahead of those waiting: under sustained overload a waiter could wait its
    whole ``timeout`` while later callers were lent one.

    Concurrency: ``_turns`` (a deque under ``_turns_lock``) holds each waiter's Event, the
    oldest first. Only the oldest tries the pool; a connection given back (``release``),
    or every one let go (``reset``), sets its Event; one that leaves (lent a connection,
    out of time, failed) sets the next one's, which tries then. The common case, a
    connection free and nobody waiting, takes no lock of these."""

    def __init__(self, *args, timeout: float = WAIT_SECS,
                 max_connections: int = MAX_CONNECTIONS, **kwargs):
        self.timeout = timeout
        self._waits_pid = None          # the process whose waiters these are
        super().__init__(*args, max_connections=max_connections, **kwargs)

    def reset(self) -> None:
        """redis-py's (every connection let go), the oldest waiter told. Made and after a
        fork (``_checkpid``), the lock and queue are made anew: the parent's waiters are not
        this process's, and a thread of the parent may have held the lock."""
        if self._waits_pid != os.getpid():
            self._turns_lock = threading.Lock()
            self._turns: collections.deque = collections.deque()
            self._waits_pid = os.getpid()
        super().reset()
        self._tell_oldest()

    def get_connection(self, *args, **kwargs):
        self._checkpid()                        # after a fork: this process's queue
        if not self._turns:
            try:
                return super().get_connection(*args, **kwargs)
            except MaxConnectionsError:
                pass
        deadline = time.monotonic() + self.timeout
        turn = threading.Event()
        with self._turns_lock:
            self._turns.append(turn)
            if self._turns[0] is turn:
                turn.set()                      # nobody ahead: try at once
        try:
            while turn.wait(max(0.0, deadline - time.monotonic())):
                turn.clear()                    # a give-back after the try sets it again
                try:
                    return super().get_connection(*args, **kwargs)
                except MaxConnectionsError:
                    pass
            raise MaxConnectionsError(
                f"every connection of the pool is in use ({self.max_connections})")
        finally:
            with self._turns_lock:
                self._turns.remove(turn)
                if self._turns:
                    self._turns[0].set()        # the next one tries: one may be free

    @property
    def waiting(self) -> int:
        """The callers waiting for a connection now."""
        return len(self._turns)

    def release(self, connection) -> None:
        super().release(connection)
        if self._turns:
            self._tell_oldest()

    def _tell_oldest(self) -> None:
        with self._turns_lock:
            if self._turns:
                self._turns[0].set()


class WaitingPool(_Waits, ConnectionPool):
    """redis-py's ``ConnectionPool``, bounded, waiting (``_Waits``)."""


class WaitingSentinelPool(_Waits, SentinelConnectionPool):
    """redis-py's ``SentinelConnectionPool``, bounded, waiting (``_Waits``)."""
