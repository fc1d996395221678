"""A waiting pool (hub/store/redis_pool.py), and the hot paths' own (``redis_commands.Commands``),
lend their connections first come, first served, on real threads and under gevent (a child
process patched as gunicorn's worker is).

Sustained overload: 8 callers, a bound of 2, each holding its connection 50 ms on Redis
(``BLPOP``; the server ticks every 10 ms) and asking again at once, 8 times. Before, a
caller that gave a connection back took it again ahead of those waiting: 6 of 64 waits
ended in -32603 (the 0.6 s wait over) while callers that asked after them were lent one,
and the longest wait was 0.44 s (the hot paths' pool: 6 and 0.46 s); first come, first
served, none, and the longest 0.2 s (the 7 callers ahead, 2 at a time, 50 ms each).
"""
from __future__ import annotations

import math

import pytest

from tests.hub.pool_util import in_gevent_worker, lender, overload
from tests.redis_util import RedisServer

BOUND, TIMEOUT, CALLERS, ROUNDS, HOLD = 2, 0.6, 8, 8, 0.05


@pytest.fixture(scope="module")
def ticking(tmp_path_factory):
    """A redis-server whose blocking commands time out within 10 ms (``hz`` 100)."""
    server = RedisServer(tmp_path_factory.mktemp("ticking"), extra=("--hz", "100")).start()
    yield server
    server.stop()


KINDS = [(kind, gevent) for kind in ("pool", "commands") for gevent in (False, True)]
IDS = [f"{kind}-{'gevent' if gevent else 'threads'}" for kind, gevent in KINDS]


def _overloaded(kind: str, url: str, gevent: bool) -> dict:
    if gevent:
        return in_gevent_worker(kind, url, BOUND, TIMEOUT, CALLERS, ROUNDS, HOLD)
    pool = lender(kind, url, BOUND, TIMEOUT)
    try:
        return overload(pool, CALLERS, ROUNDS, HOLD)
    finally:
        pool.disconnect()


@pytest.mark.parametrize(("kind", "gevent"), KINDS, ids=IDS)
def test_no_waiter_runs_out_of_time_while_later_callers_are_lent_one(ticking, kind, gevent):
    found = _overloaded(kind, ticking.url, gevent)
    assert (found["refused"], found["passed"]) == (0, 0), found


@pytest.mark.timed
@pytest.mark.parametrize(("kind", "gevent"), KINDS, ids=IDS)
def test_the_longest_wait_is_the_callers_ahead_times_the_hold(ticking, kind, gevent):
    found = _overloaded(kind, ticking.url, gevent)
    ahead = math.ceil((CALLERS - 1) / BOUND) * HOLD
    assert found["longest"] < 1.5 * ahead, found
