"""A stream whose headers the server refuses releases its reader."""
from __future__ import annotations

import io
import json

import pytest

from murmur_wsgi.door.dispatch import StreamNotStarted
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


def test_a_stream_ends_at_the_first_heartbeat_after_its_client_left():
    import socket

    from werkzeug.test import Client

    from murmur_wsgi.door.methods.streams import peer_gone
    from tests.sse_util import SseStream, stream_door

    server, client = socket.socketpair()
    try:
        door = stream_door()
        gone = peer_gone({"gunicorn.socket": server})
        assert gone() is False
        body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "murmur.WatchSession"})
        response = Client(door).post("/", data=body, content_type="application/json",
                                     headers={"A2A-Version": "1.0"},
                                     environ_overrides={"gunicorn.socket": server})
        watch = SseStream(response, 7)
        assert watch.next().frame_name == "connection-ack"
        client.close()
        assert gone() is True
        watch.rest()                      # ends at the next heartbeat, without writing it
        assert watch.ended
        assert door.session.ring.subscribers == 0
    finally:
        server.close()
