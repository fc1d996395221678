"""A stream whose headers the server refuses releases its reader."""
from __future__ import annotations

import io
import json

import pytest

from murmur_wsgi.dispatch import StreamNotStarted
from tests.conftest import make_door


def test_refused_stream_headers_release_the_reader():
    door = make_door()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "murmur.WatchSession"}).encode()
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/", "CONTENT_TYPE": "application/json",
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
               "HTTP_A2A_VERSION": "1.0", "wsgi.url_scheme": "http", "HTTP_HOST": "x"}

    def start_response(status, headers, exc_info=None):
        raise AssertionError("hop-by-hop header")           # what wsgiref does

    with pytest.raises(StreamNotStarted):
        door(environ, start_response)
    assert door.session.ring.subscribers == 0
