"""The hub's own worker under a real gunicorn: hub.yaml's read deadlines cut a slow client."""
from __future__ import annotations

import socket
import time

import pytest

from tests.e2e.hub.test_hub_e2e import KEY, hub_process, hub_yaml
from tests.e2e.hub_process import together

pytestmark = pytest.mark.e2e

HEADER_SECS = 1.0
BODY_SECS = 1.5


def deadline_yaml(port: int) -> dict:
    config = hub_yaml(port)
    config["limits"] = {"header_timeout_secs": HEADER_SECS, "body_timeout_secs": BODY_SECS}
    return config


def _closed_after(sock: socket.socket) -> float:
    """Seconds until the server closes ``sock`` (it reads the end), at most 10 s."""
    started = time.monotonic()
    sock.settimeout(10)
    while sock.recv(4096):
        pass
    return time.monotonic() - started


def test_hub_yaml_sets_the_header_and_body_deadlines(tmp_path):
    server = hub_process(tmp_path, deadline_yaml)
    try:
        assert "murmur-wsgi: header deadline 1.0s, body deadline 1.5s" in server.log()
        # NOTE: the two slow clients at once, each timed from its own last byte.
        with socket.create_connection(("127.0.0.1", server.port)) as slow_headers, \
                socket.create_connection(("127.0.0.1", server.port)) as slow_body:
            def headers_cut() -> float:
                slow_headers.sendall(b"POST /a2a/v1/agents/echo HTTP/1.1\r\nHost: x\r\n")
                return _closed_after(slow_headers)

            def body_cut() -> float:
                slow_body.sendall(b"POST /a2a/v1/agents/echo HTTP/1.1\r\nHost: x\r\n"
                                  b"X-API-Key: " + KEY.encode() + b"\r\nA2A-Version: 1.0\r\n"
                                  b"Content-Type: application/json\r\nContent-Length: 100\r\n"
                                  b"\r\n{")
                return _closed_after(slow_body)

            header_secs, body_secs = together(headers_cut, body_cut)
            assert header_secs < HEADER_SECS + 2
            assert BODY_SECS - 0.5 < body_secs < BODY_SECS + 2
        assert server.rpc("GetTask", {"id": "nope"}).json()["error"]["code"] == -32001
    finally:
        server.stop_soon()
