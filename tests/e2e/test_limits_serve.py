"""limits.max_body_bytes under gunicorn -k gevent: a body over it is 413, never read to its end."""
from __future__ import annotations

import json
import socket

import pytest

pytestmark = pytest.mark.e2e

TOO_LARGE = {"jsonrpc": "2.0", "id": None,
             "error": {"code": -32600, "message": "Request payload validation error"}}
HEAD = ("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "A2A-Version: 1.0\r\n")


def answer(sock: socket.socket) -> tuple[str, bytes]:
    """Read one response with a Content-Length off ``sock``: (status line, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines
                  if line.lower().startswith("content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, body
        body += chunk
    return lines[0], body[:length]


def test_declared_body_over_the_limit_is_413_without_sending_it(door_server):
    with socket.create_connection(("127.0.0.1", door_server.port), timeout=10) as sock:
        sock.sendall((HEAD + f"Content-Length: {1 << 40}\r\n\r\n").encode())   # and nothing
        status, body = answer(sock)
    assert status == "HTTP/1.1 413 Content Too Large"
    assert json.loads(body) == TOO_LARGE


def test_chunked_body_is_refused_once_past_the_limit_before_it_ends(door_server):
    limit = 64 * 1024 ** 2
    piece = b" " * (1024 ** 2)
    with socket.create_connection(("127.0.0.1", door_server.port), timeout=10) as sock:
        sock.sendall((HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode())
        # NOTE: 64 KiB past the limit, and never the last chunk; what the door does not
        # read stays in loopback's socket buffers.
        for chunk in [piece] * (limit // len(piece)) + [piece[:65536]]:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        status, body = answer(sock)
    assert status == "HTTP/1.1 413 Content Too Large"
    assert json.loads(body) == TOO_LARGE
