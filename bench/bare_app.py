"""The baseline: the smallest WSGI app that does what the door must do on a POST.

It reads the request body and answers a small JSON body, so the difference to the door
is the door's own work (the layers, the dispatch, the method), not HTTP or gunicorn.
Served by bench/run.py as ``gunicorn -c conf/gunicorn.conf.py bench.bare_app:app``.

``redis_app`` is the floor of a GetTask on Redis: what no GetTask can leave out. It reads
the body, sends the one command a hub's GetTask sends (``HMGET`` of a finished task's
record, shaped and sized as the hub writes it) through the hub's own client and helper
(``hub/store/redis_commands.Commands``) on the redis-server of ``BENCH_REDIS_URL``, and
answers what it read as the hub does: the record's wire form in the JSON-RPC envelope,
with the hub's headers. ``make bench`` posts it the hub's request (its path, its
``X-API-Key``, a GetTask of a task id as long). What a hub on Redis pays above it is the hub.
"""
from __future__ import annotations

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'
HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]


def _read_body(environ) -> bytes:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    return environ["wsgi.input"].read(length)


def app(environ, start_response):
    _read_body(environ)
    start_response("200 OK", list(HEADERS))
    return [BODY]


RECORD_KEY = "bench:bare:record"
_client = _floor = None


def _record_read():
    """``(the HMGET's call, the wire form's place in its answer, the hub's headers)``."""
    global _client, _floor
    if _client is None:
        import os

        import functools

        from murmur_wsgi.hub.errors import A2A_HEADERS
        from murmur_wsgi.hub.store.redis import RECORD_FIELDS, WIRE
        from murmur_wsgi.hub.store.redis_client import connect
        from murmur_wsgi.hub.store.redis_commands import Commands

        _client = connect(os.environ["BENCH_REDIS_URL"], 5.0)
        wire = ('{"id":"%s","contextId":"%s","status":{"state":"TASK_STATE_COMPLETED",'
                '"timestamp":"2026-12-01T15:00:00.000Z"},"artifacts":[{"artifactId":"answer",'
                '"name":"answer","parts":[{"text":"hi","mediaType":"text/plain"},{"data":'
                '{"usage":{"input_tokens":0,"output_tokens":0,"credits":0.0,"credits_micros":0,'
                '"pricing_status":"priced"}},"mediaType":"application/json"}]}],"history":'
                '[{"messageId":"m1","contextId":"%s","taskId":"%s","role":"ROLE_USER","parts":'
                '[{"text":"hi"}]}]}') % ("0" * 36, "1" * 36, "1" * 36, "0" * 36)
        _client.hset(RECORD_KEY, mapping={       # the fields and sizes of a finished hub task
            "id": "0" * 36, "ctx": "1" * 36, "tenant": "acme", "agent": "echo", "msg": "m1",
            "state": "TASK_STATE_COMPLETED", "text": "null", "ms": "1764600000000",
            "created": "1764600000000", "seq": "1", "owner": "r" * 32, "nev": "3",
            "wire": wire})
        _floor = (functools.partial(Commands(_client), "HMGET", RECORD_KEY, *RECORD_FIELDS),
                  WIRE, A2A_HEADERS)
    return _floor


def redis_app(environ, start_response):
    read, at, headers = _record_read()
    _read_body(environ)
    wire = read()[at]                         # the one command a GetTask sends; its wire form
    body = b'{"jsonrpc":"2.0","id":1,"result":%s}' % wire.encode()
    start_response("200 OK", [HEADERS[0], ("Content-Length", str(len(body))), *headers])
    return [body]
