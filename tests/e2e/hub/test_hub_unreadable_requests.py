"""Requests gunicorn refuses before the hub sees them, on a real ``murmur-wsgi hub``: gunicorn's
status and reason, a JSON body ``{"error": "<reason>"}`` as the hub's other HTTP refusals.

Before, each was gunicorn's HTML page (``Content-Type: text/html``, ``<html>…``), the only
answers of the hub that were not JSON. The door keeps gunicorn's page (its wire is its
text's): the last test.
"""
from __future__ import annotations

import json
import socket
import threading

import pytest

from tests.e2e.hub.test_hub_e2e import KEY, hub_process, hub_yaml
from tests.e2e.hub_process import PREFIX
from tests.e2e.raw_http import answer_with_head

pytestmark = pytest.mark.e2e

POST = (f"POST {PREFIX}echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"A2A-Version: 1.0\r\nX-API-Key: {KEY}\r\n")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    server = hub_process(tmp_path_factory.mktemp("hub-unreadable"))
    yield server
    server.stop_soon()


def exchange(port: int, request: bytes) -> tuple[list[str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        return answer_with_head(sock)


UNREADABLE = {
    "request-line": (b"NOT A REQUEST\r\n\r\n", "400 Bad Request"),
    "header-name": ((POST + "Bad Header\x01: x\r\nContent-Length: 0\r\n\r\n").encode(),
                    "400 Bad Request"),
    "uri-too-long": (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", "414 URI Too Long"),
    "header-too-large": (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n",
                         "431 Request Header Fields Too Large"),
    "transfer-gzip": ((POST + "Transfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}").encode(),
                      "400 Bad Request"),
    "transfer-unknown": ((POST + "Transfer-Encoding: br\r\nContent-Length: 2\r\n\r\n{}").encode(),
                         "501 Not Implemented"),
    "transfer-chunked-gzip": ((POST + "Transfer-Encoding: chunked, gzip\r\n\r\n").encode(),
                              "400 Bad Request"),
}


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_gunicorns_refusal_is_json_with_its_status(hub, case):
    request, status = UNREADABLE[case]
    lines, body = exchange(hub.port, request)
    assert lines[0] == f"HTTP/1.1 {status}"
    head = [line.lower() for line in lines[1:]]
    assert "content-type: application/json" in head and "connection: close" in head, lines
    assert "cache-control: private, no-store" in head, lines
    assert json.loads(body) == {"error": status.split(" ", 1)[1].lower()}


def test_the_door_keeps_gunicorns_page(door_server):
    lines, body = exchange(door_server.port, b"NOT A REQUEST\r\n\r\n")
    assert lines[0] == "HTTP/1.1 400 Bad Request"
    assert "Content-Type: text/html" in lines and body.startswith(b"<html>")


# Werkzeug's own refusals (``hub --dev``): its status, the same JSON body.
DEV_UNREADABLE = {
    "request-line": (b"NOT A REQUEST\r\n\r\n", "400 Bad Request"),
    "version": (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", "505 HTTP Version Not Supported"),
    "uri-too-long": (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                     "414 URI Too Long"),
    "header-too-large": (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 70000 + b"\r\n\r\n",
                         "431 Request Header Fields Too Large"),
}


@pytest.fixture(scope="module")
def dev_hub():
    """The hub on the server of ``hub --dev`` (in this process, on a thread of its own)."""
    from werkzeug.serving import make_server

    from murmur_wsgi.hub.app import create_hub
    from murmur_wsgi.hub.dev_server import JsonRefusals

    hub = create_hub(hub_yaml(1))
    server = make_server("127.0.0.1", 0, hub, threaded=True, request_handler=JsonRefusals)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    yield server.server_port
    server.shutdown()
    server.server_close()
    serving.join(10)
    hub.close()


@pytest.mark.parametrize("case", list(DEV_UNREADABLE))
def test_the_dev_servers_refusal_is_json_with_its_status(dev_hub, case):
    request, status = DEV_UNREADABLE[case]
    lines, body = exchange(dev_hub, request)
    assert lines[0].split(" ", 1)[1] == status, lines
    head = [line.lower() for line in lines[1:]]
    assert "content-type: application/json" in head and "connection: close" in head, lines
    assert "cache-control: private, no-store" in head, lines
    assert json.loads(body) == {"error": status.split(" ", 1)[1].lower()}


def test_a_chunk_size_past_the_limit_on_the_dev_server_is_400_and_the_server_lives(dev_hub):
    """A chunk declared past the body's limit, of which 2 bytes came before the client
    sent no more: Werkzeug's server dechunks it itself, and read through its own ``read``
    the body was the limit's bytes from past the chunk's end, which killed this process
    (SIGSEGV) or answered 413. Now 400, and the next request is answered."""
    with socket.create_connection(("127.0.0.1", dev_hub), timeout=10) as sock:
        sock.sendall((POST + "Transfer-Encoding: chunked\r\n\r\n" + "f" * 99
                      + "\r\nab").encode())
        sock.shutdown(socket.SHUT_WR)           # the client sends no more
        lines, _ = answer_with_head(sock)
    assert lines[0].split(" ", 1)[1] == "400 Bad Request", lines
    lines, _ = exchange(dev_hub, b"NOT A REQUEST\r\n\r\n")
    assert lines[0].split(" ", 1)[1] == "400 Bad Request", lines
