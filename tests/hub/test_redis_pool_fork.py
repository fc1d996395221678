"""A waiting pool (hub/store/redis_pool.py) in a process forked from one that used it: redis-py
makes the pool anew there (``reset``, at its first call), and so must the waiting's lock and
counts, which were the parent's.

The child runs the check and exits 0 (passed), 1 (failed) or never (stuck: killed at the
deadline); the parent reads how it ended.
"""
from __future__ import annotations

import os
import signal
import threading
import time

from redis.exceptions import MaxConnectionsError

from murmur_wsgi.hub.store.redis_pool import WaitingPool
from tests.hub.conftest import wait_until

CHILD_DEADLINE = 10.0


def _in_child(check) -> int | None:
    """``check()`` run in a forked child: its exit code, None when it was stuck."""
    pid = os.fork()
    if pid == 0:                                            # the child
        try:
            code = 0 if check() else 1
        except BaseException:                               # noqa: BLE001 - told as 1
            code = 1
        os._exit(code)
    ended = []

    def reaped():
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            ended.append(os.waitstatus_to_exitcode(status))
        return bool(ended)
    try:
        wait_until(reaped, timeout=CHILD_DEADLINE)
    except AssertionError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return None
    return ended[0]


def test_a_forked_child_waits_on_a_lock_of_its_own_and_counts_none_of_the_parents_waiters(
        redis_server):
    """The parent forks while one caller waits for its one connection and another thread
    holds the waiting's lock (as a waiter does between its try and its wait). In the
    child, a call past the bound waits its timeout (0.5 s) and raises; before, it stopped
    for good on the parent's lock, and the child counted the parent's waiter as its own."""
    pool = WaitingPool.from_url(redis_server.url, max_connections=1, timeout=0.5)
    held = pool.get_connection()
    waiter = threading.Thread(target=lambda: _taken_or_none(pool))
    holding, forked = threading.Event(), threading.Event()

    def hold_lock():
        with pool._turns._lock:
            holding.set()
            forked.wait(CHILD_DEADLINE)
    holder = threading.Thread(target=hold_lock)
    try:
        waiter.start()
        wait_until(lambda: pool.waiting == 1)
        holder.start()
        assert holding.wait(CHILD_DEADLINE)

        def check():
            first = pool.get_connection()            # redis-py's pool made anew here
            began = time.monotonic()
            try:
                pool.get_connection()
                return False
            except MaxConnectionsError:
                pass
            waited = time.monotonic() - began
            pool.release(first)
            return 0.4 <= waited < 3 and pool.waiting == 0
        ended = _in_child(check)
    finally:
        forked.set()
        holder.join(CHILD_DEADLINE)
        pool.release(held)
        waiter.join(CHILD_DEADLINE)
        pool.disconnect()
    assert ended == 0, "stuck" if ended is None else "the child's pool misbehaved"


def _taken_or_none(pool):
    try:
        pool.release(pool.get_connection())
    except MaxConnectionsError:
        pass


def test_a_forked_child_counts_none_of_the_parents_waiters_before_its_first_call(
        redis_server):
    """``waiting`` read in the child before it asks for a connection: before, the
    parent's waiter (1); redis-py's pool is made anew only at the child's first call."""
    pool = WaitingPool.from_url(redis_server.url, max_connections=1, timeout=5)
    held = pool.get_connection()
    waiter = threading.Thread(target=lambda: _taken_or_none(pool))
    try:
        waiter.start()
        wait_until(lambda: pool.waiting == 1)
        ended = _in_child(lambda: pool.waiting == 0)
    finally:
        pool.release(held)
        waiter.join(CHILD_DEADLINE)
        pool.disconnect()
    assert ended == 0


def test_a_forked_childs_commands_start_empty(redis_server):
    """The store's own connections (``redis_commands.Commands``) in a child forked while a
    parent's thread held the only one (bound 1) and another waited for it: the child
    counts no waiter, opens its own connection and is answered at once. Before, it waited
    behind the parent's waiter, which never leaves the child's queue, for its whole
    ``wait_secs`` (5 s), then raised ConnectionError, every call alike."""
    import redis

    from murmur_wsgi.hub.store.redis_commands import Commands

    client = redis.Redis.from_url(redis_server.url)
    commands = Commands(client, max_open=1, wait_secs=5)
    held = commands._take()
    waiter = threading.Thread(target=lambda: commands("PING"))

    def check():
        began = time.monotonic()
        waiting = commands._turns.waiting
        return commands("PING") == b"PONG" and waiting == 0 and time.monotonic() - began < 2
    try:
        waiter.start()
        wait_until(lambda: commands._turns.waiting == 1)
        ended = _in_child(check)
    finally:
        commands._give(held)
        waiter.join(CHILD_DEADLINE)
        commands.close()
        client.close()
    assert ended == 0


def test_a_forked_child_never_sends_on_its_parents_connection(redis_server):
    """A connection the parent left idle is the parent's socket: the child's command goes on
    a connection of its own (another CLIENT ID). Before, the child took the parent's, whose
    answers the two processes would read in turn."""
    import redis

    from murmur_wsgi.hub.store.redis_commands import Commands

    client = redis.Redis.from_url(redis_server.url)
    commands = Commands(client)
    parents = commands("CLIENT", "ID")
    try:
        ended = _in_child(lambda: commands("CLIENT", "ID") != parents)
        assert ended == 0
        assert commands("CLIENT", "ID") == parents          # the parent's, still its own
    finally:
        commands.close()
        client.close()
