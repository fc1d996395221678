"""The baseline: the smallest WSGI app that does what the door must do on a POST.

It reads the request body and answers a small JSON body, so the difference to the door
is the door's own work (the layers, the dispatch, the method), not HTTP or gunicorn.
Served by bench/run.py as ``gunicorn -c conf/gunicorn.conf.py bench.bare_app:app``.
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
