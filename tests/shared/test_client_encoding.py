"""Answers a server compresses: the client asks for gzip and deflate (requests' default
``Accept-Encoding``), so it reads them decompressed, and within ``max_answer_bytes``
as decompressed bytes, however small the compressed ones."""
from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib

import pytest

from murmur_wsgi.client import A2AClient, ProtocolError
from tests.shared.hostile_server import Hostile, answer, card

WAIT = 4.0
MIB = 1024 * 1024


def deflate(data: bytes) -> bytes:
    return zlib.compress(data)


def compressing(encoding: str, compress, result=None):
    """A server answering its card, and every call with ``result``, compressed."""
    def handler(conn, request, server):
        if request.method == "GET":
            body = json.dumps(card(server.url + "/")).encode()
        else:
            call = json.loads(request.body)
            body = json.dumps({"jsonrpc": "2.0", "id": call["id"], "result": result}).encode()
        answer(conn, "200 OK", compress(body), extra=f"Content-Encoding: {encoding}\r\n")
    return Hostile(handler)


@pytest.mark.parametrize("encoding, compress", [("gzip", gzip.compress), ("deflate", deflate)])
def test_a_compressed_answer_is_read(encoding, compress):
    """The client read the compressed bytes as they came: every call to a server that
    compresses (nginx with gzip on for JSON) was 'not JSON'."""
    task = {"id": "tsk_1", "contextId": "ctx_1", "status": {"state": "TASK_STATE_COMPLETED"}}
    with compressing(encoding, compress, task) as server, \
            A2AClient(server.url, timeout=WAIT) as client:
        assert client.card()["name"]
        assert client.get("tsk_1") == task
        assert server.requests[0].headers["accept-encoding"] == "gzip, deflate"


def test_a_compressed_answer_past_the_limit_is_refused_within_it():
    """64 MiB of zeros in 64 KiB of gzip, against a 1 MiB limit: refused once 1 MiB is
    decompressed, never decompressed whole."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(squeeze.compress(b"0" * MIB) for _ in range(64)) + squeeze.flush()
    assert len(bomb) < 128 * 1024

    def handler(conn, request, server):
        answer(conn, "200 OK", bomb, extra="Content-Encoding: gzip\r\n")

    with Hostile(handler) as server, \
            A2AClient(server.url, timeout=WAIT, max_answer_bytes=MIB) as client:
        tracemalloc.start()
        try:
            with pytest.raises(ProtocolError, match=r"more than 1048576 bytes \(max_answer_bytes\)"):
                client.card()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 8 * MIB, peak
