"""A pool under sustained overload: more callers than connections, each taking one, using it
for a while on Redis (``BLPOP`` of a key that stays empty), giving it back and asking again
at once. The pool is a ``WaitingPool`` (hub/store/redis_pool.py) or the hot paths' own
(``redis_commands.Commands``); run on real threads, or in a child process patched as
gunicorn's gevent worker is (``in_gevent_worker``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import types

import redis

from murmur_wsgi.hub.store.redis_commands import Commands
from murmur_wsgi.hub.store.redis_pool import WaitingPool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def together(count: int, work, join_secs: float = 120) -> None:
    """``work(start)`` on ``count`` threads, each waiting on the Barrier ``start`` once ready
    (so that they begin together), all of them returned."""
    start = threading.Barrier(count)
    running = [threading.Thread(target=work, args=(start,)) for _ in range(count)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(join_secs)
    assert not any(thread.is_alive() for thread in running)


def lender(kind: str, url: str, bound: int, timeout: float):
    """What lends connections of ``url``, ``bound`` at most in use, each waited for up to
    ``timeout`` seconds, as a pool does (``get_connection``, ``release``, ``disconnect``):
    a ``WaitingPool`` ("pool") or the hot paths' ``Commands`` ("commands")."""
    if kind == "pool":
        return WaitingPool.from_url(url, max_connections=bound, timeout=timeout)
    commands = Commands(redis.Redis.from_url(url), max_open=bound, wait_secs=timeout)
    return types.SimpleNamespace(get_connection=commands._take, release=commands._give,
                                 disconnect=commands.close)


def overload(pool, callers: int, rounds: int, hold_secs: float) -> dict:
    """``callers`` threads, started together, each taking a connection of ``pool`` ``rounds``
    times and holding it ``hold_secs`` on Redis: the longest wait for one (seconds), and how
    many waits ended in ``MaxConnectionsError`` (``refused``), and how many of those were
    passed meanwhile by a caller that asked later and was lent one (``passed``)."""
    lock = threading.Lock()
    waits: list[float] = []
    refused: list[tuple] = []            # (when it asked, when it was refused)
    lent: list[tuple] = []               # (when it asked, when it was lent one)

    def caller(start):
        start.wait(timeout=30)
        for _ in range(rounds):
            asked = time.monotonic()
            try:
                conn = pool.get_connection()
            except redis.ConnectionError:       # MaxConnectionsError is one
                with lock:
                    refused.append((asked, time.monotonic()))
                continue
            now = time.monotonic()
            with lock:
                waits.append(now - asked)
                lent.append((asked, now))
            try:
                conn.send_command("BLPOP", "pool-util:never", hold_secs)
                conn.read_response()
            finally:
                pool.release(conn)
    together(callers, caller)
    return {"longest": max(waits), "refused": len(refused),
            "passed": sum(1 for asked, gave_up in refused
                          if any(asked < later and at < gave_up for later, at in lent))}


CHILD = textwrap.dedent("""
    import json
    import sys

    import murmur_wsgi.hub.store.redis_commands
    import murmur_wsgi.hub.store.redis_pool

    from gevent import monkey
    monkey.patch_all()

    from tests.hub.pool_util import lender, overload

    kind, url, bound, timeout, callers, rounds, hold = json.loads(sys.argv[1])
    print(json.dumps(overload(lender(kind, url, bound, timeout), callers, rounds, hold)))
""")


def in_gevent_worker(kind: str, url: str, bound: int, timeout: float, callers: int,
                     rounds: int, hold_secs: float) -> dict:
    """``overload`` of a ``lender`` in a child process loaded as gunicorn's gevent worker
    is: the store's modules imported, then threading patched."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD,
         json.dumps([kind, url, bound, timeout, callers, rounds, hold_secs])],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
