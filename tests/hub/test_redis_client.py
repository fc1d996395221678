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
import threading
import time
from pathlib import Path

import pytest
import redis

from murmur_wsgi.hub.store import redis_client, redis_commands
from murmur_wsgi.hub.store.redis_pool import WaitingPool
from tests.hub.conftest import wait_until
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
    pool = redis_client.connect(url, 1.0, max_connections=7).connection_pool
    cls = pool.connection_class
    assert issubclass(cls, base) and issubclass(cls, redis_client._PooledCheck)
    # Bounded, a call past the bound waiting (hub/store/redis_pool.py) for timeout_secs.
    assert (type(pool), pool.max_connections, pool.timeout) == (WaitingPool, 7, 1.0)


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


# --- Commands: the hot paths' commands on connections of their own ---------------------------


@pytest.fixture
def clients(redis_server):
    """How many clients the server has, less the one asking."""
    admin = redis_server.client()
    yield lambda: len(admin.client_list()) - 1
    admin.close()


def test_commands_reuse_one_connection(client, clients):
    client.set("k", "v")
    commands = redis_commands.Commands(client)
    before = clients()
    assert [commands("GET", "k") for _ in range(5)] == ["v"] * 5
    assert commands.idle == 1 and clients() == before + 1
    commands.close()
    assert commands.idle == 0
    wait_until(lambda: clients() == before)


def test_a_closed_connection_of_commands_is_replaced_at_once(client, redis_server):
    client.set("k", "v")
    commands = redis_commands.Commands(client)
    before = commands("CLIENT", "ID")                   # its one connection's
    assert redis_server.client().client_kill_filter(_id=before) == 1
    assert commands("GET", "k") == "v"                  # the one retry, on a new connection
    assert commands("CLIENT", "ID") != before and commands.idle == 1
    commands.close()


def test_a_refused_command_leaves_the_connection_usable(client):
    client.set("k", "v")
    commands = redis_commands.Commands(client)
    with pytest.raises(redis.ResponseError):
        commands("HMGET", "k", "field")                 # WRONGTYPE: read whole, not a failure
    assert commands("GET", "k") == "v" and commands.idle == 1
    commands.close()


def test_commands_open_at_most_max_open_connections_and_serve_the_rest_in_turn(client,
                                                                              clients):
    commands = redis_commands.Commands(client, max_open=2)
    client.ping()                                     # the client's own connection
    before = clients()
    got = []
    threads = [threading.Thread(target=lambda: got.append(commands("BLPOP", "q", 5)))
               for _ in range(5)]
    for thread in threads:
        thread.start()
    wait_until(lambda: clients() == before + 2)   # two waiting in Redis, three in turn
    for n in range(5):
        client.rpush("q", n)
        wait_until(lambda n=n: len(got) == n + 1)
        assert clients() == before + 2
    for thread in threads:
        thread.join(10)
    assert sorted(item for _, item in got) == ["0", "1", "2", "3", "4"]
    assert commands.idle == 2
    commands.close()
    wait_until(lambda: clients() == before)


@pytest.mark.timed
@pytest.mark.parametrize("back", ["given back", "closed"])
def test_a_connection_given_back_or_closed_wakes_a_waiter_at_once(client, back):
    """One connection at most, held: a caller waits for it. Given back (or closed: the
    caller opens one in its place), the caller is answered within a few ms, in 5 tries of
    5. Before, a closed one woke no waiter: it looked again every 50 ms (about 45 ms after
    the close)."""
    commands = redis_commands.Commands(client, max_open=1, wait_secs=5.0)
    lags = []
    for _ in range(5):
        held = commands._take()
        answered = []
        waiter = threading.Thread(
            target=lambda: answered.append((commands("PING"), time.monotonic())))
        waiter.start()
        wait_until(lambda: commands._turns.waiting == 1)
        at = time.monotonic()
        (commands._give if back == "given back" else commands._dropped)(held)
        waiter.join(5)
        assert answered[0][0] == "PONG"
        lags.append(answered[0][1] - at)
    commands.close()
    assert sorted(lags)[2] < 0.015, lags


def test_a_bursts_idle_connections_are_pruned_to_keep(client, clients):
    now = [0.0]
    commands = redis_commands.Commands(client, max_open=8, keep=2, idle_secs=5.0,
                                     clock=lambda: now[0])
    client.ping()
    before = clients()
    got = []
    threads = [threading.Thread(target=lambda: got.append(commands("BLPOP", "burst", 5)))
               for _ in range(6)]
    for thread in threads:
        thread.start()
    wait_until(lambda: clients() == before + 6)
    client.rpush("burst", *range(6))
    for thread in threads:
        thread.join(10)
    assert len(got) == 6 and commands.idle == 6
    assert commands.prune() == 0                      # not idle long enough yet
    now[0] = 6.0
    assert commands("PING") == "PONG"                 # the newest is taken and comes back
    assert commands.prune() == 4 and commands.idle == 2
    wait_until(lambda: clients() == before + 2)
    commands.close()


def test_several_commands_are_one_round_trip_on_one_connection(client):
    commands = redis_commands.Commands(client)
    client.rpush("several", "a", "b")
    assert commands.several(("LRANGE", "several", 0, -1), ("EXISTS", "several"),
                            ("EXISTS", "none")) == [["a", "b"], 1, 0]
    with pytest.raises(redis.ResponseError):
        commands.several(("GET", "several"), ("PING",))    # WRONGTYPE: every answer read
    assert commands.several(("PING",), ("LLEN", "several")) == ["PONG", 2]
    assert commands.idle == 1
    commands.close()


@pytest.mark.timed
def test_commands_to_a_stopped_redis_fail_within_its_timeout(tmp_path):
    from tests.redis_util import RedisServer

    server = RedisServer(tmp_path).start()
    commands = redis_commands.Commands(redis_client.connect(server.url, 0.5))
    assert commands("PING") == "PONG"
    server.stop()
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        commands("PING")
    assert time.monotonic() - started < 3
    commands.close()


def test_a_script_runs_by_its_sha_and_again_after_redis_forgot_it(client, redis_server):
    commands = redis_commands.Commands(client)
    incr = commands.script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert incr(keys=["n"], args=[2]) == 2
    assert redis_server.client().script_flush() is True          # as after a restart
    assert incr(keys=["n"], args=[3]) == 5                       # EVAL, once
    assert incr(keys=["n"], args=[1]) == 6                       # EVALSHA again
    with pytest.raises(redis.ResponseError):
        commands.script("return redis.call('NOSUCH')")(keys=[], args=[])
    assert commands.idle == 1
    commands.close()


LONG = {"ascii": "a\"b" * 300_000, "wider": "ünï \U0001F600 " * 90_000}


@pytest.mark.parametrize("text", LONG.values(), ids=LONG.keys())
def test_a_long_argument_is_sent_in_pieces_as_redis_py_would_pack_it(client, text):
    """An argument past PIECE_CHARS is encoded a piece at a time, never whole: the same
    bytes as redis-py's packing, no piece larger than a piece of text's."""
    conn = client.connection_pool.get_connection()
    try:
        commands = (("SET", "long", text, "PX", 60_000), ("WAIT", 0, 10))
        pieces = list(redis_commands._pieces(conn, commands))
        assert b"".join(pieces) == b"".join(conn.pack_commands(commands))
        assert max(map(len, pieces)) <= redis_commands.PIECE_CHARS + 64
        assert len(pieces) > len(text.encode()) // redis_commands.PIECE_CHARS
    finally:
        client.connection_pool.release(conn)
    sent = redis_commands.Commands(client)
    assert sent("SET", "long", text) == "OK" and sent("GET", "long") == text
    assert sent.several(("APPEND", "long", text), ("STRLEN", "long")) == \
        [2 * len(text.encode())] * 2
    assert sent("GET", "long") == text + text and sent.idle == 1
    sent.close()


def test_commands_are_packed_as_redis_py_packs_them(client):
    """The hot paths' packing (one hiredis call a command) sends the bytes redis-py's
    packer would, for every kind of argument the store sends; a value Redis cannot take
    is refused as redis-py refuses it (``DataError``), nothing sent."""
    conn = client.connection_pool.get_connection()
    try:
        commands = (("EVALSHA", "0" * 40, 2, "k{t}:1", "k{t}:2", "ünï \U0001F600", b"\x00\xff",
                     12345678901234567, -3, 1.5, "", '{"a":"\\u00e9"}'),
                    ("ZADD", "z", 1796191365723, "bench/9f6f"), ("PING",))
        assert redis_commands._packed(conn, commands) == \
            [b"".join(conn.pack_commands(commands))]
        for bad in (None, ["list"], {"a": 1}):
            with pytest.raises(redis.DataError):
                redis_commands._packed(conn, (("SET", "k", bad),))
    finally:
        client.connection_pool.release(conn)
    sent = redis_commands.Commands(client)
    with pytest.raises(redis.DataError):
        sent("SET", "k", None)
    assert sent("SET", "k", "ünï") == "OK" and sent("GET", "k") == "ünï"
    assert sent.several(("SET", "n", 7), ("INCRBY", "n", 3), ("GET", "n")) == ["OK", 10, "10"]
    sent.close()
