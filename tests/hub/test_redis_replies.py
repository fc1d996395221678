"""The hot paths' replies (hub/store/redis_replies.py) answer as redis-py's ``read_response``.

Each case is read both ways on connections ``Commands`` makes, against a real
redis-server: by ``read`` and by the connection's own ``read_response``. The two
outcomes (the reply, or the exception's class and message, and whether the
connection stayed open) must be the same: replies in one piece or in many reads,
several in a row, error replies (the connection kept), a script Redis does not hold, a
push before a reply (RESP3, redis-py's default),
a read that times out and a connection Redis closed (the connection closed). In this
process (blocking sockets) and in a child patched as the worker is (gevent's).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.hub.replies_util import CHILD, outcomes


def _check(found: dict, port: int) -> None:
    for name, (fast, redis_py) in found.items():
        assert fast == redis_py, name
    assert found["replies"][0] == ["PONG", "x" * 100_000, [None, None], "v", "open", "v"]
    assert found["refused"][0][:1] == ["ResponseError"] and found["refused"][0][-2:] == \
        ["open", "v"]
    assert found["noscript"][0][0] == "NoScriptError"
    assert found["pushed"][0] == ["OK", "v", "PONG", "open", "w"]
    assert found["timed out"][0] == ["TimeoutError", f"Timeout reading from 127.0.0.1:{port}",
                                     "closed"]
    assert found["killed"][0][0] == "ConnectionError" and found["killed"][0][-1] == "closed"


def test_replies_are_read_as_redis_py_reads_them(redis_server):
    redis_server.flush()
    _check(outcomes(redis_server.url), redis_server.port)


def test_replies_are_read_as_redis_py_reads_them_under_gevent(redis_server):
    redis_server.flush()
    done = subprocess.run([sys.executable, "-c", CHILD, redis_server.url],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    _check(json.loads(done.stdout), redis_server.port)
