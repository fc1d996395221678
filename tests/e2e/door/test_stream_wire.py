"""A stream's wire under gunicorn -k gevent: the headers the reference shows, then events."""
from __future__ import annotations

import http.client
import json

import pytest

from murmur_wsgi.uris import DOOR_URI, STREAM_URI

pytestmark = pytest.mark.e2e


def test_watch_session_headers_and_first_event(door_server):
    conn = http.client.HTTPConnection("127.0.0.1", door_server.port, timeout=10)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "murmur.WatchSession",
                       "params": {}})
    conn.request("POST", "/", body=body, headers={"Content-Type": "application/json",
                                                  "A2A-Version": "1.0"})
    response = conn.getresponse()
    try:
        assert response.status == 200
        headers = {k.lower(): v for k, v in response.getheaders()}
        assert headers["content-type"] == "text/event-stream"
        assert headers["cache-control"] == "no-cache"
        assert headers["connection"] == "keep-alive"
        assert headers["x-accel-buffering"] == "no"
        assert headers["a2a-extensions"] == f"{DOOR_URI}, {STREAM_URI}"
        assert "content-length" not in headers
        assert [k for k, _ in response.getheaders()].count("Connection") <= 1
        line = response.readline()                 # http.client undoes the chunking
        assert line.startswith(b"data: "), line
        event = json.loads(line[len(b"data: "):])
        assert event["id"] == 1
        meta = event["result"]["message"]["metadata"][STREAM_URI]
        assert meta == {"frame": "connection-ack", "role": "observer",
                        "conversationMode": "stateless"}
    finally:
        conn.close()
