"""What an open stream holds while it waits: its client's JSON-RPC id once, as text, and
of the events the ring dropped, at most ``stream.pending_bytes``."""
from __future__ import annotations

import gc
import json
import tracemalloc

from werkzeug.test import EnvironBuilder

from tests.conftest import Rpc, make_door
from tests.tasks_util import send_params

ID_CHARS = 2_000_000


def open_watch(door, request_id, event=True):
    """A murmur.WatchSession body and its first event (its first chunk: not ``event``);
    nothing else of the request kept."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "murmur.WatchSession",
                       "params": {}})
    builder = EnvironBuilder(method="POST", path="/", data=body, headers={"A2A-Version": "1.0"},
                             content_type="application/json")
    answer = door(builder.get_environ(), lambda status, headers, exc_info=None: None)
    chunks = iter(answer)
    first = next(chunks)
    while event and not first.endswith(b"\n\n"):
        first += next(chunks)
    return answer, first


def test_a_stream_holds_a_long_id_once_not_encoded_copies():
    """An id as long as the body lets it be was held three times a stream (as text and
    twice encoded) for the stream's life: 42 MB a stream for an id of 16 MB under
    gunicorn. Its events still echo it whole."""
    door = make_door()
    request_id = "i" * ID_CHARS
    try:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            answer, first = open_watch(door, request_id)
            assert json.loads(first.removeprefix(b"data: "))["id"] == request_id
            del first
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        answer.close()
    finally:
        door.close()
    assert held < 1.5 * ID_CHARS, held


MESSAGE_CHARS = 100_000
PENDING_BYTES = 256 * 1024


def send(door, count, start=0):
    """``count`` messages of ``MESSAGE_CHARS``, numbered from ``start``, each echoed by the
    demo agent."""
    rpc = Rpc(door)
    for n in range(start, start + count):
        rpc.result("SendMessage", send_params(str(n) + "m" * MESSAGE_CHARS))


def test_a_slow_stream_holds_what_the_ring_dropped_only_within_stream_pending_bytes():
    """A stream took its whole replay, or up to 128 live events, at once and held them
    until it had written them: a reader that took a chunk now and then kept 3 MB the ring
    had dropped (64 MiB at the defaults). It takes them within ``stream.pending_bytes``
    (or one larger event), and those the ring drops before it takes them are lagged."""
    door = make_door(stream={"replay_bytes": "4Mi", "pending_bytes": PENDING_BYTES})
    gc.collect()
    tracemalloc.start()             # before the events are made: their memory is traced
    try:
        send(door, 30)
        answer, first = open_watch(door, 1, event=False)
        chunks = iter(answer)
        assert b'"connection-ack"' in first
        next(chunks)                    # the client takes a chunk, then nothing
        send(door, 50, 30)                  # 5 MB more: the ring drops every event before them
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        answer.close()
        gc.collect()
        held -= tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        door.close()
    assert 0 < held < PENDING_BYTES + 2 * MESSAGE_CHARS, held


def test_a_stream_that_takes_its_replay_late_is_told_what_the_ring_dropped():
    """The replay is read from the ring as the client takes it: what the ring dropped
    meanwhile comes as a ``lagged`` frame, then the stream goes on with what it holds."""
    door = make_door(stream={"replay_bytes": "4Mi", "pending_bytes": PENDING_BYTES,
                             "heartbeat_secs": 0.05})
    try:
        send(door, 30)
        answer, first = open_watch(door, 1, event=False)
        chunks = iter(answer)
        send(door, 50, 30)
        body, beats = first, 0
        while b'"text":"79m' not in body[-2 * MESSAGE_CHARS:] and beats < 100:
            chunk = next(chunks)
            beats += chunk == b":heartbeat\n\n"
            body += chunk
        answer.close()
    finally:
        door.close()
    lagged = body.index(b'"frame":"lagged"')
    assert b'"text":"29m' not in body          # replayed, dropped before the stream took it
    assert b'"text":"79m' in body[lagged:]
