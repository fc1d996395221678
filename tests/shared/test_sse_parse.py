"""The SSE body itself: framing, the strict parser, heartbeat timing on a fake clock."""
from __future__ import annotations

import json
import tracemalloc
from collections import deque

import pytest
from google.protobuf import json_format

from murmur_wsgi.door.tasks import frames
from murmur_wsgi.door.streams.sse import HEARTBEAT, SSE_HEADERS, EventStream
from murmur_wsgi.door.tasks.record import TaskRecord
from murmur_wsgi.door.tasks.ring import Event, EventRing, Gap, Lagged
from tests.sse_util import parse_block, parse_body

RECORD = TaskRecord("tsk_" + "1" * 32, "ctx_" + "2" * 32)
STATUS = frames.status_update(RECORD, "working on it")
TASK = frames.task_event(RECORD)
TEXT = frames.frame("text", "chunk 1", {"text": "chunk 1", "final": False}, RECORD)


class FakeClock:
    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class ScriptedReader:
    """A ring reader on a fake clock: items arrive at scripted times.

    ``next(timeout)`` moves the clock to the next arrival when it falls within
    the timeout, else by the whole timeout: the stream's wait, without waiting.
    """

    def __init__(self, clock, script, close_at=None, frames=True):
        self.clock = clock
        self.script = deque(script)          # (time, item), in time order
        self.close_at = close_at
        self.frames = frames
        self.open = True
        self.timeouts = []

    def next(self, timeout):
        self.timeouts.append(timeout)
        now = self.clock.now
        if self.script and self.script[0][0] <= now + timeout:
            at = max(now, self.script[0][0])
            self.clock.now = at
            items = []
            while self.script and self.script[0][0] <= at:
                items.append(self.script.popleft()[1])
            return items, False
        if self.close_at is not None and self.close_at <= now + timeout:
            self.clock.now = max(now, self.close_at)
            return [], True
        self.clock.now = now + timeout
        return [], False

    def close(self):
        self.open = False


def event(event_id, payload=STATUS, terminal=False):
    return Event(event_id, RECORD.id, payload, terminal=terminal)


# --- the parser ------------------------------------------------------------

def envelope(result, request_id=1):
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result},
                      separators=(",", ":"))


@pytest.mark.parametrize("block", [
    pytest.param("data: " + envelope(json.loads(STATUS)), id="status-without-id"),
    pytest.param("id: 3\ndata: " + envelope(json.loads(TASK)), id="task-with-id"),
    pytest.param("id: 03\ndata: " + envelope(json.loads(STATUS)), id="leading-zero"),
    pytest.param("event: x\ndata: " + envelope(json.loads(STATUS)), id="event-field"),
    pytest.param("id: 1\ndata: " + envelope({"statusUpdate": {"bogus": 1}}), id="unknown-field"),
    pytest.param("id: 1\ndata: " + envelope({}), id="empty-result"),
    pytest.param("id: 1\ndata: " + envelope(json.loads(STATUS), "1"), id="other-request-id"),
    pytest.param('id: 1\ndata: {"id":1,"jsonrpc":"2.0","result":{}}', id="key-order"),
    pytest.param("data: " + envelope(json.loads(frames.frame("text", "x", {}))), id="text-no-id"),
    pytest.param("id: 1\ndata: " + envelope(json.loads(frames.lagged(2))), id="lagged-with-id"),
    pytest.param(":heartbeat\nid: 1", id="heartbeat-and-more"),
])
def test_the_parser_refuses(block):
    with pytest.raises((AssertionError, json_format.ParseError, ValueError)):
        parse_block(block, 1)


def test_the_parser_reads_a_body():
    body = ("data: " + envelope(json.loads(TASK)) + "\n\n:heartbeat\n\n"
            + "id: 7\ndata: " + envelope(json.loads(TEXT)) + "\n\n")
    events, beats = parse_body(body, 1)
    assert beats == 1
    assert [(e.id, e.kind) for e in events] == [(None, "task"), (7, "message")]
    assert events[1].frame == {"frame": "text", "text": "chunk 1", "final": False}
    assert events[1].proto.message.parts[0].text == "chunk 1"


def test_every_frame_builder_parses():
    payloads = [frames.connection_ack("observer", "stateless"), frames.gap(13),
                frames.lagged(4), frames.capsule_closed()]
    body = "".join("data: " + envelope(json.loads(p)) + "\n\n" for p in payloads)
    events, _ = parse_body(body, 1)
    assert [e.frame_name for e in events] == ["connection-ack", "gap", "lagged",
                                              "capsule-closed"]
    assert events[1].frame["firstAvailableId"] == 13 and events[2].frame["missed"] == 4


# --- the body --------------------------------------------------------------

def test_headers_and_framing():
    assert dict(SSE_HEADERS) == {"Content-Type": "text/event-stream",
                                 "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    stream = EventStream("req-1", [(None, TASK)])
    assert stream.event(5, "{}") == b'id: 5\ndata: {"jsonrpc":"2.0","id":"req-1","result":{}}\n\n'
    assert stream.event(None, "{}") == b'data: {"jsonrpc":"2.0","id":"req-1","result":{}}\n\n'


def test_the_opening_is_the_first_chunk_and_without_a_reader_the_end():
    stream = EventStream(1, [(None, TASK)])
    chunks = list(stream)
    assert len(chunks) == 1
    events, _ = parse_body(chunks[0], 1)
    assert [e.kind for e in events] == ["task"]


def test_heartbeat_every_interval_from_open_events_do_not_reset_it():
    clock = FakeClock(100.0)
    reader = ScriptedReader(clock, [(105, event(1)), (110, event(2)), (120, event(3))],
                            close_at=131)
    stream = EventStream(1, [(None, frames.connection_ack("observer", "stateless"))], reader,
                         heartbeat_secs=15, clock=clock)
    out = []
    for chunk in stream:
        out.append((clock.now, chunk))
    kinds = [(at, "hb" if chunk == HEARTBEAT else
              [e.id or e.frame_name for e in parse_body(chunk, 1)[0]]) for at, chunk in out]
    assert kinds == [(100, ["connection-ack"]), (105, [1]), (110, [2]), (115, "hb"),
                     (120, [3]), (130, "hb"), (131, ["capsule-closed"])]
    assert reader.timeouts == [0, 15, 10, 5, 15, 10, 15]
    assert not reader.open


def test_a_write_that_blocked_past_several_beats_owes_one():
    clock = FakeClock(0.0)
    reader = ScriptedReader(clock, [])
    stream = EventStream(1, [(None, TASK)], reader, heartbeat_secs=15, clock=clock)
    next(stream)
    clock.now = 55.0                      # the first write took 55 s
    assert next(stream) == HEARTBEAT
    assert next(stream) == HEARTBEAT and clock.now == 60.0
    assert next(stream) == HEARTBEAT and clock.now == 75.0
    stream.close()
    assert not reader.open


def test_a_task_stream_ends_after_its_terminal_event():
    clock = FakeClock()
    reader = ScriptedReader(clock, [(1, event(1)), (2, event(2, terminal=True)), (3, event(3))])
    stream = EventStream(1, [(None, TASK)], reader, follow_task=RECORD.id, clock=clock)
    events, _ = parse_body(b"".join(stream), 1)
    assert [e.id for e in events] == [None, 1, 2]
    assert not reader.open


@pytest.mark.parametrize("with_frames, expect", [
    pytest.param(True, ["gap", 4, "lagged", 9, "capsule-closed"], id="extension"),
    pytest.param(False, [4, 9], id="no-extension"),
])
def test_markers_and_closing_are_frames_only_with_the_extension(with_frames, expect):
    clock = FakeClock()
    reader = ScriptedReader(clock, [(0, Gap(4)), (0, event(4)), (1, Lagged(3)), (1, event(9))],
                            close_at=2, frames=with_frames)
    stream = EventStream(1, [(None, TASK)], reader, follow_task=RECORD.id, clock=clock)
    events, _ = parse_body(b"".join(stream), 1)
    assert [e.id or e.frame_name for e in events[1:]] == expect


def test_close_before_the_body_started_releases_the_reader():
    ring = EventRing(8)
    stream = EventStream(1, [(None, TASK)], ring.reader())
    assert ring.subscribers == 1
    stream.close()
    stream.close()
    assert ring.subscribers == 0


def test_close_mid_stream_releases_the_reader():
    ring = EventRing(8)
    stream = EventStream(1, [(None, TASK)], ring.reader(), heartbeat_secs=60)
    next(stream)
    ring.publish(RECORD.id, STATUS)
    assert parse_body(next(stream), 1)[0][0].id == 1
    stream.close()
    assert ring.subscribers == 0
    with pytest.raises(StopIteration):
        next(stream)


def test_a_real_ring_heartbeat_on_a_short_interval():
    ring = EventRing(8)
    stream = EventStream(1, [(None, TASK)], ring.reader(), heartbeat_secs=0.01)
    next(stream)
    assert next(stream) == HEARTBEAT
    stream.close()


def test_a_lone_surrogate_is_written_as_its_json_escape():
    stream = EventStream("\ud800x", [(None, '{"task":{"id":"a\ud800b"}}')])
    assert next(stream) == (b'data: {"jsonrpc":"2.0","id":"\\ud800x",'
                            b'"result":{"task":{"id":"a\\ud800b"}}}\n\n')


@pytest.mark.parametrize("char", ["x", "é", "\U0001f600"], ids=["ascii", "2-byte", "4-byte"])
def test_an_event_larger_than_the_budget_is_written_in_chunks_within_it(char):
    """What a stream renders before a write is taken is at most stream.pending_bytes."""
    ring = EventRing(8)
    big = '{"task":{"id":"' + char * 50_000 + '"}}'
    stream = EventStream("r", [(None, ('{"task":', '{"id":"t"}', "}"))], ring.reader(),
                         heartbeat_secs=60, pending_bytes=4096)
    assert next(stream) == b'data: {"jsonrpc":"2.0","id":"r","result":{"task":{"id":"t"}}}\n\n'
    ring.publish(RECORD.id, big)
    ring.publish(RECORD.id, STATUS)
    chunks = []
    end = STATUS.encode() + b"}\n\n"
    while not (chunks and (chunks[-2:][0] + chunks[-1]).endswith(end)):
        chunks.append(next(stream))
    stream.close()
    # NOTE: less than half: the server's chunked framing copies each chunk once more.
    assert max(len(chunk) for chunk in chunks) < 4096 // 2
    assert len(chunks) >= len(big.encode()) // 4096
    assert b"".join(chunks) == stream.event(1, big) + stream.event(2, STATUS)
    assert b"".join(chunks).decode().count(char * 50_000) == 1


def test_a_stream_whose_client_takes_nothing_holds_its_budget():
    # NOTE: before, a stream held a chunk of the whole budget and the next piece encoded
    # ahead while its write waited, and gunicorn copies the chunk to frame it: three times
    # stream.pending_bytes (788 KB a stream at 256 KiB; 10,200 such streams took 7 GB).
    budget = 1024 ** 2
    ring = EventRing(8)
    ring.publish(RECORD.id, '{"task":{"id":"' + "x" * 10_000_000 + '"}}')
    streams = [EventStream("r", [], ring.reader(replay=True), heartbeat_secs=60,
                           pending_bytes=budget) for _ in range(10)]
    tracemalloc.start()
    try:
        writing = [[next(stream) for _ in range(3)][-1] for stream in streams]
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for stream in streams:
        stream.close()
    # What each holds as its chunk waits, with the server's copy of that chunk.
    assert (held + sum(map(len, writing))) / len(streams) <= budget
