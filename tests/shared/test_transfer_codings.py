"""A request whose Transfer-Encoding does not end in chunked is refused, as a body that
cannot be read (RFC 9112, section 6.3: 400, and the connection closed).

gunicorn refuses such a request before the application (400 for ``gzip`` and ``chunked,
gzip``, 501 for a coding it does not know: tests/e2e/hub/test_hub_unreadable_requests.py);
Werkzeug's server passes it, so both applications are tried on it.
Before, the hub answered ``gzip`` with a Content-Length as an empty body (200, -32700),
and ``chunked, gzip`` was dechunked until the client gave up.
"""
from __future__ import annotations

import io
import json
import socket

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.serving.body import BodyUnreadable, read_body
from tests.hub.conftest import KEY_A, hub_config
from tests.shared.test_client import ThreadedDoor

CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                   "params": {"id": "nope"}}).encode()
UNREAD = {"jsonrpc": "2.0", "id": None, "error": {
    "code": -32603,
    "message": "Internal error: the door could not hand the request to the session"}}
CODINGS = ["gzip", "chunked, gzip", "gzip,chunked,identity", "Chunked;x=1"]


class _NoRead:
    def read(self, *args):
        raise AssertionError("read a body whose length cannot be told")


@pytest.mark.parametrize("codings", CODINGS)
@pytest.mark.parametrize("length", [None, "5"])
def test_a_transfer_encoding_not_ending_in_chunked_is_unreadable_before_a_read(codings,
                                                                               length):
    environ = {"wsgi.input": _NoRead(), "HTTP_TRANSFER_ENCODING": codings,
               "wsgi.input_terminated": "chunked" in codings.lower()}
    if length is not None:
        environ["CONTENT_LENGTH"] = length
    with pytest.raises(BodyUnreadable, match="does not end in chunked"):
        read_body(environ, 100)


@pytest.mark.parametrize("codings", ["chunked", "gzip, chunked", " CHUNKED ", "gzip,,chunked,"])
def test_a_transfer_encoding_ending_in_chunked_is_read_to_its_end(codings):
    environ = {"wsgi.input": io.BytesIO(CALL), "HTTP_TRANSFER_ENCODING": codings,
               "CONTENT_LENGTH": "5", "wsgi.input_terminated": True}
    assert read_body(environ, 100) == CALL


def _exchange(port: int, path: str, headers: str, codings: str) -> tuple[list[str], bytes]:
    """The head's lines and the body of the answer to a POST whose Transfer-Encoding is
    ``codings`` and whose Content-Length is the call's; the server must close after it."""
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n{headers}"
               f"Content-Type: application/json\r\nTransfer-Encoding: {codings}\r\n"
               f"Content-Length: {len(CALL)}\r\n\r\n").encode() + CALL
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n"), body


@pytest.mark.parametrize("codings", ["gzip", "chunked, gzip"])
def test_the_hub_on_werkzeugs_server_answers_400_with_id_null(codings):
    with ThreadedDoor(app=create_hub(hub_config(store="memory"))) as served:
        lines, body = _exchange(served.server.server_port, "/a2a/v1/agents/echo",
                                f"X-API-Key: {KEY_A}\r\n", codings)
    assert lines[0] == "HTTP/1.1 400 Bad Request"
    assert "Connection: close" in lines
    assert json.loads(body) == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "the request body cannot be read: its Transfer-Encoding "
                                   "does not end in chunked (RFC 9112, section 6.3)"}}


@pytest.mark.parametrize("codings", ["gzip", "chunked, gzip"])
def test_the_door_on_werkzeugs_server_answers_as_a_broken_chunked_body(codings):
    """The door's answer to a body it cannot read, as under gunicorn for broken chunks
    (tests/e2e/door/test_limits_serve.py): the reference's -32603, id null."""
    with ThreadedDoor() as served:
        lines, body = _exchange(served.server.server_port, "/", "", codings)
    assert lines[0] == "HTTP/1.1 200 OK"
    assert "Connection: close" in lines
    assert json.loads(body) == UNREAD
