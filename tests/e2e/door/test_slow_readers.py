"""Readers that never read, against a real gunicorn: memory bounded in bytes, then cut.

A task holds an 8 MiB artifact (the demo agent's /ask prompt). Twenty clients with a tiny receive buffer open a
SubscribeToTask stream on it (whose opening is the whole task) and never read.
The worker's resident memory (``/proc/<pid>/status``) must stay within a bound
far below what twenty rendered copies would take, and every reader must be cut
at the write deadline (stream.write_timeout_secs, 0.5 s here), its stream
released and the cut counted on /metrics. The same for answers: twenty clients
that never read a GetTask or a ListTasks(includeArtifacts) of an 8 MiB task.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import default_manifest, http_get, http_post, start_door

pytestmark = pytest.mark.e2e

MESSAGE_BYTES = 8 * 1024 * 1024
READERS = 20
WRITE_SECS = 0.5
# Twenty rendered copies of the task would be 160 MiB or more; the door may hold a
# pending chunk (256 KiB) per reader and its own working set: 40 MiB is the bound.
RSS_BOUND = 40 * 1024 * 1024
DEADLINE = 30.0
HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    manifest = default_manifest()
    manifest["stream"] = {"write_timeout_secs": WRITE_SECS, "heartbeat_secs": 0.5}
    manifest["observability"] = {"metrics": True}
    with start_door(tmp_path_factory, manifest) as running:
        yield running


def rpc(door, method: str, params: dict) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    response = http_post(door.url + "/", body, HEADERS, timeout=30)
    assert response.status_code == 200, response.text[:300]
    return response.json()


def worker_pid(door) -> int:
    """The gunicorn worker: the one child of the door's master."""
    children = Path(f"/proc/{door.proc.pid}/task/{door.proc.pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def metric(door, sample: str) -> float:
    for line in http_get(door.url + "/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {sample} on /metrics")


def unread_subscriber(door, task_id: str) -> socket.socket:
    """A client that asks for the task's stream and never reads a byte of it."""
    return unread_client(door, "SubscribeToTask", {"id": task_id})


def unread_client(door, method: str, params: dict) -> socket.socket:
    """A client that sends one request and never reads a byte of the answer."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)     # before connect
    sock.settimeout(10)
    sock.connect(("127.0.0.1", door.port))
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method,
                       "params": params}).encode()
    sock.sendall(b"POST / HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\n"
                 b"A2A-Version: 1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return sock


def peak_until_cut(door, pid: int, readers: int, cut_before: float, open_streams=None) -> int:
    """The worker's peak RSS until ``readers`` more clients are cut at the write deadline."""
    deadline = time.monotonic() + DEADLINE
    peak = rss(pid)
    while True:
        peak = max(peak, rss(pid))
        if open_streams is not None:
            open_streams.append(metric(door, "murmur_open_streams"))
        cut = metric(door, 'murmur_connections_cut_total{reason="write_timeout"}')
        if cut - cut_before >= readers and (open_streams is None or open_streams[-1] == 0):
            return max(peak, rss(pid))
        assert time.monotonic() < deadline, f"{cut - cut_before:.0f} of {readers} readers cut"


def assert_grown_within_bound(baseline: int, peak: int, what: str) -> None:
    grown = peak - baseline
    print(f"worker RSS {baseline / 2**20:.1f} MiB -> peak {peak / 2**20:.1f} MiB "
          f"(+{grown / 2**20:.1f} MiB) with {READERS} unread {what} of an "
          f"{MESSAGE_BYTES / 2**20:.0f} MiB task")
    assert grown < RSS_BOUND, f"the worker grew {grown / 2**20:.1f} MiB"


def test_readers_that_never_read_hold_no_copies_and_are_cut(door):
    question = "x" * MESSAGE_BYTES                # the demo agent's prompt artifact: the task's
    text = "/ask " + question
    task = rpc(door, "SendMessage", {"message": {
        "role": "ROLE_USER", "messageId": "m-big", "parts": [{"text": text}]}})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    got = rpc(door, "GetTask", {"id": task["id"]})["result"]     # its wire form is now cached
    assert got["artifacts"][0]["parts"][0]["text"] == question
    pid = worker_pid(door)
    cut_before = metric(door, 'murmur_connections_cut_total{reason="write_timeout"}')
    baseline = peak = rss(pid)
    readers = [unread_subscriber(door, task["id"]) for _ in range(READERS)]
    streams: list[float] = []
    try:
        peak = max(peak, peak_until_cut(door, pid, READERS, cut_before, streams))
    finally:
        for sock in readers:
            sock.close()
    assert max(streams) > 0                 # the streams were open
    assert_grown_within_bound(baseline, peak, "streams")
    # The door still answers, and a reading client still gets the whole task.
    assert rpc(door, "GetTask", {"id": task["id"]})["result"]["id"] == task["id"]
    assert os.path.exists(f"/proc/{pid}"), "the worker is the same"
    rpc(door, "CancelTask", {"id": task["id"]})     # the session takes its next task


@pytest.mark.parametrize("method", ["ListTasks", "GetTask"])
def test_large_answers_to_clients_that_never_read_hold_no_copies(door, method):
    """A page of 8 MiB (ListTasks with includeArtifacts) or an 8 MiB task, twenty times unread."""
    task = rpc(door, "SendMessage", {"message": {               # echoed: its answer artifact
        "role": "ROLE_USER", "messageId": f"m-{method}",
        "parts": [{"text": "y" * MESSAGE_BYTES}]}})["result"]["task"]
    params = {"includeArtifacts": True, "pageSize": 1} if method == "ListTasks" else {
        "id": task["id"]}
    answer = rpc(door, method, params)["result"]                 # the task's text is cached
    got = answer["tasks"][0] if method == "ListTasks" else answer
    assert got["id"] == task["id"] and len(json.dumps(got)) > MESSAGE_BYTES
    pid = worker_pid(door)
    cut_before = metric(door, 'murmur_connections_cut_total{reason="write_timeout"}')
    baseline = rss(pid)
    readers = [unread_client(door, method, params) for _ in range(READERS)]
    try:
        peak = peak_until_cut(door, pid, READERS, cut_before)
    finally:
        for sock in readers:
            sock.close()
    assert_grown_within_bound(baseline, peak, f"{method} answers")
    assert rpc(door, "GetTask", {"id": task["id"]})["result"]["id"] == task["id"]
