"""The hub's SSE write deadline under a real gunicorn: a client that stops reading is cut
and its run CANCELED ("each SSE write has a 10 s deadline", stream.write_timeout_secs)."""
from __future__ import annotations

import json
import select
import socket
import time
import uuid

import pytest

from tests.e2e.hub_process import WAIT
from tests.e2e.hub.test_hub_e2e import KEY, hub_process, hub_yaml

pytestmark = pytest.mark.e2e

WRITE_SECS = 0.5


def slow_yaml(port: int) -> dict:
    config = hub_yaml(port)
    config["stream"] = {"write_timeout_secs": WRITE_SECS}
    config["tenants"]["acme"]["agents"]["flood"] = {
        "agent": "tests.hub.agents:flood", "publish": True, "description": "floods"}
    return config


def posted_unread(server, agent: str, method: str, params: dict) -> socket.socket:
    """A socket that posted one call to ``agent`` and reads nothing yet: a receive buffer
    of 4 KiB, so the hub's writes fill it soon."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(WAIT)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(f"POST /a2a/v1/agents/{agent} HTTP/1.1\r\nHost: x\r\n".encode()
                 + b"X-API-Key: " + KEY.encode() + b"\r\nA2A-Version: 1.0\r\n"
                 b"Content-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def test_a_streaming_client_that_stops_reading_is_cut_and_its_run_canceled(tmp_path):
    server = hub_process(tmp_path, slow_yaml)
    try:
        sock = posted_unread(server, "flood", "SendStreamingMessage", {"message": {
            "messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER", "parts": [{"text": "go"}]}})
        deadline = time.monotonic() + WAIT

        def newest() -> dict:
            answer = server.rpc("ListTasks", {"pageSize": 1}, agent="flood").json()
            tasks = answer["result"]["tasks"]
            return tasks[0] if tasks else {"status": {"state": ""}}

        # The client never reads: the run goes on until a write misses its deadline.
        while newest()["status"]["state"] != "TASK_STATE_WORKING":
            assert time.monotonic() < deadline, server.log()
        working_at = time.monotonic()
        while newest()["status"]["state"] != "TASK_STATE_CANCELED":
            assert time.monotonic() < deadline, (newest()["status"], server.log())
        # Cut within the write deadline plus the time to fill the socket buffers, not WAIT.
        assert time.monotonic() - working_at < WRITE_SECS + 8
        # The hub still serves everyone else.
        assert server.rpc("ListTasks", {"pageSize": 1}).status_code == 200
        sock.close()
    finally:
        server.stop_soon()


LARGE_TEXT = "y" * 400_000      # characters: each task's message, as ListTasks answers it
LARGE_TASKS = 20                # a page of them: about 8 MB, past loopback's socket buffers
CUT_LOGGED = "did not take a write within the write deadline"


@pytest.mark.timed
def test_a_client_that_never_reads_a_large_answer_is_cut(tmp_path):
    """Not a stream: a ListTasks page of large tasks, never read, is cut at the write deadline
    as a stream is; the hub neither holds the answer nor the connection for good."""
    server = hub_process(tmp_path, slow_yaml)
    try:
        for _ in range(LARGE_TASKS):
            server.result("SendMessage", {"message": {
                "messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER",
                "parts": [{"text": LARGE_TEXT}]}})
        size = len(server.rpc("ListTasks", {"pageSize": LARGE_TASKS}).content)
        assert size > LARGE_TASKS * len(LARGE_TEXT)
        with posted_unread(server, "echo", "ListTasks", {"pageSize": LARGE_TASKS}) as sock:
            sent_at = time.monotonic()
            deadline = sent_at + WAIT
            # The client never reads: the write that fills the buffers misses its deadline.
            while CUT_LOGGED not in server.log():
                assert time.monotonic() < deadline, server.log()[-2000:]
            # NOTE: the answers that fill the buffers first are the hub's CPU (about 14,000
            # HEADs: 8.9 s once with the machine at load 10); held, it was never cut
            # (GET) or after 25 s (HEAD).
            assert time.monotonic() - sent_at < WRITE_SECS + 15
            received = 0
            while chunk := sock.recv(1 << 20):      # what the buffers held, then the end
                received += len(chunk)
            assert received < size
        assert server.rpc("ListTasks", {"pageSize": 1}).status_code == 200
    finally:
        server.stop_soon()


@pytest.mark.parametrize("request_", [
    # a card (about 2 KB): the buffers fill after about 1,500 answers, not 14,000 404s
    "GET /a2a/v1/agents/echo/.well-known/agent-card.json HTTP/1.1\r\nHost: x\r\n"
    f"X-API-Key: {KEY}\r\n\r\n",
    "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n",        # no credential, headers only
], ids=["GET", "HEAD"])
def test_a_client_that_pipelines_small_requests_and_never_reads_is_cut(tmp_path, request_):
    """Small answers (a 404, a card, a GetTask) are written whole, but under the deadline
    too: a client pipelining requests without reading fills the send buffer with their
    answers; the next write waited for good, holding the connection and its buffers with
    no credential at all (before: still held after 60 s; HEADs' headers after 25 s)."""
    server = hub_process(tmp_path, slow_yaml)
    try:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.setblocking(False)
            requests_ = request_.encode() * 40_000
            sent, sent_at = 0, time.monotonic()
            deadline = sent_at + WAIT
            while CUT_LOGGED not in server.log():
                assert time.monotonic() < deadline, server.log()[-2000:]
                select.select([], [sock] if sent < len(requests_) else [], [], 0.05)
                try:
                    sent += sock.send(requests_[sent:sent + 65536])
                except (BlockingIOError, ConnectionError):
                    pass                # the hub takes no more, or has cut it
            # NOTE: the answers that fill the buffers first are the hub's CPU (about 14,000
            # HEADs: 8.9 s once with the machine at load 10); held, it was never cut
            # (GET) or after 25 s (HEAD).
            assert time.monotonic() - sent_at < WRITE_SECS + 15
        assert server.rpc("ListTasks", {"pageSize": 1}).status_code == 200
    finally:
        server.stop_soon()
