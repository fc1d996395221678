"""limits.max_body_bytes on a real ``murmur-wsgi hub``: a body over it is 413, never read to
its end; the connection closes after the answer (``Connection: close``), as it does after
any answer that leaves the body unread (a 401 before the body)."""
from __future__ import annotations

import json
import socket

import pytest

from tests.e2e.conftest import http_get
from tests.e2e.raw_http import Flood, answer_with_head
from tests.e2e.hub.test_hub_e2e import KEY, hub_process, hub_yaml
from tests.e2e.hub_process import PREFIX

pytestmark = pytest.mark.e2e

LIMIT = 1 << 20                 # limits.max_body_bytes
TOO_LARGE = {"jsonrpc": "2.0", "id": None, "error": {
    "code": -32600, "message": f"the JSON-RPC body is larger than {LIMIT} bytes"}}
SENT_AT_MOST = 64 << 20         # bytes: what loopback's socket buffers may take after the answer


def limit_yaml(port: int) -> dict:
    config = hub_yaml(port)
    config["limits"] = {"max_body_bytes": LIMIT}
    return config


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    server = hub_process(tmp_path_factory.mktemp("hub-body-limit"), limit_yaml)
    yield server
    server.stop_soon()


def head(length: int, key: str | None = KEY) -> bytes:
    lines = [f"POST {PREFIX}echo HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
             "A2A-Version: 1.0", f"Content-Length: {length}"]
    if key:
        lines.append(f"X-API-Key: {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def assert_a2a_head(lines: list) -> None:
    """A refusal that leaves the body unread: it closes the connection, and carries the
    headers of every /a2a/v1 answer."""
    head = [line.lower() for line in lines]
    for line in ("connection: close", "cache-control: private, no-store",
                 "vary: authorization, x-api-key, x-tenant-id"):
        assert line in head, (line, lines)


def closed(sock: socket.socket) -> bool:
    """The server closed ``sock`` after its answer: the next read sees the end."""
    sock.settimeout(5)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def test_a_declared_body_over_the_limit_is_413_and_the_connection_closes(hub):
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as sock:
        sock.sendall(head(1 << 40))                                  # and nothing after
        lines, body = answer_with_head(sock)
        assert lines[0] == "HTTP/1.1 413 Content Too Large"
        assert_a2a_head(lines)
        assert json.loads(body) == TOO_LARGE
        assert closed(sock)


@pytest.mark.parametrize("key, status", [(KEY, "413 Content Too Large"),
                                         (None, "401 Unauthorized")])
def test_a_body_still_coming_after_the_answer_is_cut_not_read(hub, key, status):
    """1 GiB declared and sent without pause: the answer closes the connection at once."""
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as sock:
        sock.sendall(head(1 << 30, key))
        flood = Flood(sock, 1 << 30)
        lines, _ = answer_with_head(sock)
        assert lines[0] == f"HTTP/1.1 {status}"
        assert_a2a_head(lines)
        card = http_get(hub.card_url(), {"X-API-Key": KEY}, timeout=2)   # served meanwhile
        assert card.status_code == 200
        assert flood.ended.wait(5), f"still sending after the answer: {flood.sent >> 20} MiB"
        flood.join(5)
    print(f"{status}: {flood.sent >> 20} MiB taken of the 1 GiB body before the close")
    assert flood.sent < SENT_AT_MOST, f"{flood.sent >> 20} MiB sent"


def test_a_body_within_the_limit_keeps_the_connection(hub):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                       "params": {"id": "nope"}}).encode()
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as sock:
        for _ in range(2):
            sock.sendall(head(len(body)) + body)
            lines, answered = answer_with_head(sock)
            assert lines[0] == "HTTP/1.1 200 OK"
            assert "connection: close" not in [line.lower() for line in lines]
            assert json.loads(answered)["error"]["code"] == -32001


CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}})


@pytest.mark.parametrize("chunks", [
    b"zz\r\n" + CALL.encode() + b"\r\n0\r\n\r\n",                         # size not hex
    b"-5\r\n" + CALL.encode() + b"\r\n0\r\n\r\n",                         # negative size
    b"%x\r\n" % len(CALL) + CALL.encode() + b"XX0\r\n\r\n",              # no CRLF after it
])
def test_a_chunked_body_with_broken_framing_is_400_not_an_internal_error(hub, chunks):
    """The client's framing, not the hub, is at fault: 400 with -32600 and id null, the
    connection closed (the rest is unread), and no traceback logged as the hub's failure."""
    head = (f"POST {PREFIX}echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"A2A-Version: 1.0\r\nX-API-Key: {KEY}\r\nTransfer-Encoding: chunked\r\n\r\n")
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as sock:
        sock.sendall(head.encode() + chunks)
        lines, body = answer_with_head(sock)
        assert lines[0] == "HTTP/1.1 400 Bad Request"
        assert_a2a_head(lines)
        error = json.loads(body)
        assert error["id"] is None and error["error"]["code"] == -32600, error
        assert closed(sock)
    assert "failed inside the hub" not in hub.log()


def test_a_body_that_ends_before_its_content_length_is_400(hub):
    """The client declares 50 bytes more than it sends, then closes its end: an incomplete
    request (RFC 9112, section 8), answered as a chunked body that ends early. Before, the
    bytes that came were read as the body and answered as the call (-32001)."""
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as sock:
        sock.sendall(head(len(CALL) + 50) + CALL.encode())
        sock.shutdown(socket.SHUT_WR)
        lines, body = answer_with_head(sock)
        assert closed(sock)
    assert lines[0] == "HTTP/1.1 400 Bad Request"
    assert {"cache-control: private, no-store",
            "vary: authorization, x-api-key, x-tenant-id"} <= {line.lower() for line in lines}
    error = json.loads(body)
    assert error["id"] is None and error["error"]["code"] == -32600, error
