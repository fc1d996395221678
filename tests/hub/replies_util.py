"""The cases of tests/hub/test_redis_replies.py: each read both ways, by
``redis_replies.read`` and by the connection's own ``read_response``; run in the test's
process and in a child patched as the worker is (``CHILD``).
"""
from __future__ import annotations

import redis

from murmur_wsgi.hub.store import redis_client, redis_commands, redis_replies

BIG = "x" * 100_000                     # several of a connection's reads


def case(url, name, send, reader):
    commands = redis_commands.Commands(redis_client.connect(url, 0.3))
    conn = commands._make()
    admin = redis.Redis.from_url(url, decode_responses=True)
    try:
        admin.set("big", BIG)
        admin.set("text", "v")
        conn.send_command("CLIENT", "ID")
        me = conn.read_response()
        for command in send:
            conn.send_command(*command)
        if name == "killed":
            admin.client_kill_filter(_id=me)
        outcome = [reader(conn) for _ in send]
        if name == "pushed":            # RESP3: an invalidation comes before the next reply
            admin.set("text", "w")
            conn.send_command("PING")
            outcome.append(reader(conn))
    except Exception as ex:
        outcome = [type(ex).__name__, str(ex)]
    finally:
        admin.close()
    outcome.append("open" if conn._sock is not None else "closed")
    if conn._sock is not None:          # still usable
        conn.send_command("GET", "text")
        outcome.append(reader(conn))
    conn.disconnect()
    return outcome


SENDS = {
    "replies": [("PING",), ("GET", "big"), ("HMGET", "nokey", "a", "b"), ("GET", "text")],
    "refused": [("HMGET", "text", "a")],
    "noscript": [("EVALSHA", "0" * 40, 0)],
    "error in a script": [("EVAL", "return redis.error_reply('BAD thing')", 0)],
    "pushed": [("CLIENT", "TRACKING", "ON"), ("GET", "text")],
    "timed out": [("BLPOP", "nothing", 5)],
    "killed": [("BLPOP", "nothing", 5)],
}


def outcomes(url):
    return {name: [case(url, name, send, reader)
                   for reader in (redis_replies.read, lambda conn: conn.read_response())]
            for name, send in SENDS.items()}



CHILD = ("from gevent import monkey; monkey.patch_all(); import json, sys; "
         "from tests.hub.replies_util import outcomes; print(json.dumps(outcomes(sys.argv[1])))")
