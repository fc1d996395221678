"""The Redis store's connection (hub/store/redis_client.py), against a real redis-server.

The pool lends a connection after checking only what hiredis already holds,
not the socket (a poll is a turn of gevent's loop): these tests show a
connection the server closed is replaced at its next command, and that a
reply left in the parser is still refused, as redis-py does.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from murmur_wsgi.hub.store import redis_client
from tests.process_util import exits_within


@pytest.fixture
def client(redis_server):
    redis_server.flush()
    found = redis_client.connect(redis_server.url, 2.0)
    yield found
    found.connection_pool.disconnect()


@pytest.mark.parametrize("url, base", [
    ("redis://127.0.0.1:6379/0", redis.Connection),
    ("rediss://127.0.0.1:6379/0", redis.SSLConnection),
    ("unix:///tmp/redis.sock", redis.UnixDomainSocketConnection),
])
def test_every_scheme_keeps_its_connection_class(url, base):
    cls = redis_client.connect(url, 1.0).connection_pool.connection_class
    assert issubclass(cls, base) and issubclass(cls, redis_client._PooledCheck)


def test_a_connection_the_server_closed_is_replaced_at_its_next_command(client, redis_server):
    client.set("k", "v")
    before = client.client_id()
    killed = redis_server.client().client_kill_filter(_id=before)
    assert killed == 1
    assert client.get("k") == "v"                     # the one retry, on a new connection
    assert client.client_id() != before


def test_a_reply_left_in_the_parser_is_still_seen_by_the_pool(client):
    client.ping()
    conn = client.connection_pool.get_connection()
    try:
        conn.send_command("PING")
        # Read the socket into hiredis without taking the reply out of it.
        conn._parser.read_from_socket()
        assert conn.can_read(0) is True
        assert conn.read_response() == "PONG"
        assert conn.can_read(0) is False
    finally:
        client.connection_pool.release(conn)


def test_a_wait_with_a_timeout_still_reads_the_socket(client):
    pubsub = client.pubsub()
    pubsub.subscribe("chan")
    assert pubsub.get_message(timeout=2.0)["type"] == "subscribe"
    client.publish("chan", "hello")
    message = pubsub.get_message(timeout=2.0)
    assert message["type"] == "message" and message["data"] == "hello"
    pubsub.close()


def test_the_fixtures_redis_server_dies_with_a_killed_suite(tmp_path):
    """A suite killed with SIGKILL leaves no redis-server behind (PR_SET_PDEATHSIG)."""
    repo = Path(__file__).resolve().parents[2]
    suite = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from tests.redis_util import RedisServer; "
         f"s = RedisServer(Path({str(tmp_path)!r})).start(); print(s.proc.pid, flush=True); "
         "sys.stdin.read()"],                                 # until killed
        cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with suite.stdin, suite.stdout:
        server = int(suite.stdout.readline())
        os.kill(suite.pid, signal.SIGKILL)
        suite.wait(timeout=10)
    assert exits_within(server, 10.0), "redis-server outlived the killed suite"
