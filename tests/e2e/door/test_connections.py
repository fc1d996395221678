"""Connections against a real gunicorn: read deadlines, and a reserve against idle floods.

The door runs with short deadlines (limits.header_timeout_secs 0.5, body 0.5) and
``worker_connections`` lowered to 200 (GUNICORN_CMD_ARGS overrides the conf), so
that a flood of a few hundred idle connections fills it.
"""
from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import pytest
import requests

from tests.e2e.conftest import default_manifest, http_get, start_door
from tests.e2e.raw_http import Flood

pytestmark = [pytest.mark.e2e, pytest.mark.timed]    # asserts the deadlines, in seconds

# NOTE: half a second: a deadline is a timer of its own per connection (measured to within
# 20 ms of it), so the cut does not depend on its length; the flood's answer (about 70 ms)
# still comes well inside it, as it must to show that nobody waited for a cut.
HEADER_SECS = 0.5
BODY_SECS = 0.5
EARLY = 0.3 * HEADER_SECS       # a cut this much before its deadline is too early
WORKER_CONNECTIONS = 200
FLOOD = 320                     # idle connections: more than worker_connections
MARGIN = 2.0                    # seconds of scheduling slack on a shared 2-core machine


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    manifest = default_manifest()
    manifest["limits"] = {"header_timeout_secs": HEADER_SECS, "body_timeout_secs": BODY_SECS}
    manifest["observability"] = {"metrics": True}
    env = {"GUNICORN_CMD_ARGS": f"--worker-connections {WORKER_CONNECTIONS}"}
    with start_door(tmp_path_factory, manifest, env=env) as running:
        yield running


def cuts(door) -> dict:
    text = http_get(door.url + "/metrics").text
    found = {}
    for line in text.splitlines():
        if line.startswith("murmur_connections_cut_total{"):
            reason = line.split('"')[1]
            found[reason] = float(line.rsplit(" ", 1)[1])
    return found


def connect(door, timeout: float) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", door.port), timeout=timeout)
    return sock


def until_closed(sock: socket.socket) -> bytes:
    """Read until the server closes (or resets) the connection; what it sent before."""
    got = b""
    with contextlib.suppress(ConnectionResetError):
        while True:
            data = sock.recv(65536)
            if not data:
                break
            got += data
    return got


GET_TASK = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                       "params": {"id": "tsk_absent"}}).encode()


def post(body: bytes, length: int | None = None) -> bytes:
    length = len(body) if length is None else length
    return (b"POST / HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\n"
            b"A2A-Version: 1.0\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % length
            + body)


@pytest.mark.waits
def test_partial_headers_are_cut_at_the_header_deadline(door):
    before = cuts(door).get("header_timeout", 0)
    with connect(door, timeout=HEADER_SECS + MARGIN + 5) as sock:
        started = time.monotonic()
        sock.sendall(b"POST / HTTP/1.1\r\nHost: door\r\n")
        assert until_closed(sock) == b""
        elapsed = time.monotonic() - started
    assert HEADER_SECS - EARLY <= elapsed <= HEADER_SECS + MARGIN, elapsed
    assert cuts(door)["header_timeout"] >= before + 1


def read_answer(sock: socket.socket) -> bytes:
    """One HTTP answer with a Content-Length, read off a kept-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(rest) < length:
        rest += sock.recv(65536)
    return head + b"\r\n\r\n" + rest


@pytest.mark.waits
@pytest.mark.parametrize("pipelined", [False, True], ids=["after-the-answer", "pipelined"])
def test_a_kept_alive_connection_has_the_header_deadline_from_its_next_first_byte(door,
                                                                                   pipelined):
    before = cuts(door).get("header_timeout", 0)
    with connect(door, timeout=HEADER_SECS + MARGIN + 5) as sock:
        first, partial = (post(GET_TASK).replace(b"Connection: close\r\n", b""),
                          b"POST / HTTP/1.1\r\nHost: door\r\n")      # then nothing more
        started = time.monotonic()
        if pipelined:
            sock.sendall(first + partial)           # the parser reads both at once
            assert read_answer(sock).startswith(b"HTTP/1.1 200 ")
        else:
            sock.sendall(first)
            assert read_answer(sock).startswith(b"HTTP/1.1 200 ")
            started = time.monotonic()
            sock.sendall(partial)
        assert until_closed(sock) == b""
        elapsed = time.monotonic() - started
    assert HEADER_SECS - EARLY <= elapsed <= HEADER_SECS + MARGIN, elapsed
    assert cuts(door)["header_timeout"] >= before + 1


@pytest.mark.waits
def test_a_body_that_stops_is_cut_at_the_body_deadline(door):
    before = cuts(door).get("body_timeout", 0)
    with connect(door, timeout=BODY_SECS + MARGIN + 5) as sock:
        started = time.monotonic()
        sock.sendall(post(b'{"jsonrpc":', length=1000))      # 11 of 1,000 declared bytes
        until_closed(sock)
        elapsed = time.monotonic() - started
    assert BODY_SECS - EARLY <= elapsed <= BODY_SECS + MARGIN, elapsed
    assert cuts(door)["body_timeout"] >= before + 1


class Trickle:
    """Send ``pieces`` on ``sock`` from a thread, one every ``gap`` seconds, as a slow
    client does, until they run out or the server closes the connection."""

    def __init__(self, sock: socket.socket, pieces, gap: float):
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send, args=(sock, pieces, gap),
                                        daemon=True)
        self._thread.start()

    def _send(self, sock, pieces, gap: float) -> None:
        with contextlib.suppress(OSError):          # reset: the server closed the connection
            for piece in pieces:
                if self._stop.wait(gap):
                    return
                sock.sendall(piece)
                self.sent += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.mark.waits
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_that_trickles_is_cut_at_the_body_deadline(door, chunked):
    """A byte every 20 ms: each read of the body finds a byte, none waits long, and the
    whole body (200 bytes) would take 4 s; the deadline counts from the end of the
    headers, not from the last byte, and cuts it."""
    before = cuts(door).get("body_timeout", 0)
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"%s"}}' % (b"x" * 140)
    head = post(b"", length=len(body))
    if chunked:
        head = head.replace(b"Content-Length: %d" % len(body), b"Transfer-Encoding: chunked")
    pieces = [b"1\r\n%c\r\n" % byte if chunked else bytes([byte]) for byte in body]
    with connect(door, timeout=BODY_SECS + MARGIN + 5) as sock:
        started = time.monotonic()
        sock.sendall(head)
        trickle = Trickle(sock, pieces, 0.02)
        try:
            answer = until_closed(sock)
            elapsed = time.monotonic() - started
        finally:
            trickle.stop()
    assert answer == b"" and trickle.sent < len(body), (answer[:100], trickle.sent)
    assert BODY_SECS - EARLY <= elapsed <= BODY_SECS + MARGIN, elapsed
    assert cuts(door)["body_timeout"] >= before + 1


def test_a_request_is_answered_through_a_flood_of_idle_connections(door):
    """More idle connections than worker_connections; a GetTask is still answered at once."""
    before = cuts(door).get("reserve", 0)
    flood = []
    try:
        for _ in range(FLOOD):
            flood.append(connect(door, timeout=5))
        # The flood is connected (the first ones accepted, the rest in the listen backlog);
        # a ready request now comes after all of them.
        with connect(door, timeout=HEADER_SECS + MARGIN) as sock:
            started = time.monotonic()
            sock.sendall(post(GET_TASK))
            answer = until_closed(sock)
            elapsed = time.monotonic() - started
    finally:
        for sock in flood:
            sock.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == -32001
    assert elapsed < HEADER_SECS, f"answered after {elapsed:.2f}s"
    assert cuts(door)["reserve"] >= before + FLOOD - WORKER_CONNECTIONS


def card_within(door, seconds: float) -> float:
    """Seconds a GET of the card took from another connection; it must be answered."""
    started = time.monotonic()
    try:
        status = http_get(door.card_url, timeout=seconds).status_code
    except requests.RequestException as ex:
        pytest.fail(f"the card was not answered within {seconds}s: {type(ex).__name__}")
    assert status == 200
    return time.monotonic() - started


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)        # wait-ok: polling a counter the flood's thread moves
    return True


def test_a_body_of_one_byte_chunks_without_end_is_cut_and_others_are_answered_meanwhile(door):
    """Every read of the flood finds its bytes ready, so it never waited: the worker read it
    for as long as it came, answered nobody else, and its arbiter killed it at its timeout
    (60 s), the door's session with it. It now yields to the loop every TURN_SECS."""
    before = cuts(door).get("body_timeout", 0)
    with connect(door, timeout=5) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\n"
                     b"A2A-Version: 1.0\r\nTransfer-Encoding: chunked\r\n\r\n")
        flood = Flood(sock, 1 << 40, b"1\r\n \r\n" * 10000)
        assert wait_until(lambda: flood.sent > 1 << 20, MARGIN), flood.sent
        took = card_within(door, MARGIN)
        assert flood.ended.wait(BODY_SECS + MARGIN), "the flood was not cut"
    assert took < MARGIN
    assert cuts(door)["body_timeout"] >= before + 1


def test_requests_pipelined_without_end_leave_others_answered(door):
    """A client that pipelines requests and reads the answers as fast as they come held the
    worker as the flood of chunks did."""
    request = b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: door\r\n\r\n"
    with connect(door, timeout=5) as sock:
        answered = []
        reader = threading.Thread(target=lambda: answered.append(until_closed(sock)),
                                  daemon=True)
        reader.start()
        flood = Flood(sock, 1 << 40, request * 1000)
        try:
            assert wait_until(lambda: flood.sent > 1 << 20, MARGIN), flood.sent
            took = card_within(door, MARGIN)
        finally:
            sock.shutdown(socket.SHUT_RDWR)
            reader.join(5)
    assert took < MARGIN
    assert answered and answered[0].startswith(b"HTTP/1.1 200 ")
