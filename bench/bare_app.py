"""The baseline: the smallest WSGI app that does what the door must do on a POST.

It reads the request body and answers a small JSON body, so the difference to the door
is the door's own work (the layers, the dispatch, the method), not HTTP or gunicorn.
Served by bench/run.py as ``gunicorn -c conf/gunicorn.conf.py bench.bare_app:app``.

``redis_app`` is the floor of a GetTask on Redis: the same, plus one ``HGETALL`` of a
hash shaped like a hub task's record (the hub's own client, ``hub/store/redis_client``),
on the redis-server of ``BENCH_REDIS_URL``. What a hub on Redis pays above it is the hub.
"""
from __future__ import annotations

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'
HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]


def app(environ, start_response):
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    environ["wsgi.input"].read(length)
    start_response("200 OK", list(HEADERS))
    return [BODY]


RECORD_KEY = "bench:bare:record"
_client = None


def _record_client():
    global _client
    if _client is None:
        import os

        from murmur_wsgi.hub.store.redis_client import connect

        _client = connect(os.environ["BENCH_REDIS_URL"], 5.0)
        _client.hset(RECORD_KEY, mapping={       # the fields and sizes of a finished hub task
            "id": "0" * 36, "ctx": "1" * 36, "tenant": "acme", "agent": "echo", "msg": "m" * 20,
            "state": "TASK_STATE_COMPLETED", "text": '"echo: hello"', "ms": "1764600000000",
            "created": "1764600000000", "seq": "1",
            "hist": '[{"role":"ROLE_USER","parts":[{"text":"hello"}],"messageId":"m"}]',
            "arts": '[{"artifactId":"a","name":"response","parts":[{"text":"hello"}]}]'})
    return _client


def redis_app(environ, start_response):
    _record_client().hgetall(RECORD_KEY)
    return app(environ, start_response)
