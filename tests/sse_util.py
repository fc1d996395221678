"""A strict reader of the door's SSE bodies, used by every stream test.

Every event must be ``[id: <n>\\n]data: <JSON-RPC response>\\n\\n`` whose
envelope is exactly ``{"jsonrpc":"2.0","id":<request id>,"result":…}`` and
whose result parses as an a2a-sdk protobuf ``StreamResponse`` under a strict
parser; the only other block is the ``:heartbeat`` comment. Unnumbered events
are the task snapshot, a rejected task and the connection-ack / gap / lagged /
capsule-closed frames; numbered ones are everything else, ids rising.
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass

from a2a.types import a2a_pb2
from google.protobuf import json_format

from murmur_wsgi import create_app
from murmur_wsgi.agents.demo import demo_agent
from murmur_wsgi.uris import STREAM_URI
from tests.conftest import make_door

KINDS = ("task", "message", "statusUpdate", "artifactUpdate")
UNNUMBERED_FRAMES = frozenset({"connection-ack", "gap", "lagged", "capsule-closed"})
HEARTBEAT = ":heartbeat"
DEADLINE = 10.0


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"duplicate keys {keys}"
    return dict(pairs)


@dataclass
class SseEvent:
    """One parsed event: its SSE id, its envelope, and its result as dict and proto."""

    id: int | None
    envelope: dict
    result: dict
    proto: a2a_pb2.StreamResponse

    @property
    def kind(self) -> str:
        return next(iter(self.result))

    @property
    def body(self) -> dict:
        return self.result[self.kind]

    @property
    def frame(self) -> dict | None:
        """The murmur frame's metadata (``{"frame": name, …}``), or None."""
        if self.kind != "message":
            return None
        return (self.body.get("metadata") or {}).get(STREAM_URI)

    @property
    def frame_name(self) -> str | None:
        frame = self.frame
        return None if frame is None else frame["frame"]

    @property
    def state(self) -> str | None:
        if self.kind in ("task", "statusUpdate"):
            return self.body["status"]["state"]
        return None

    @property
    def task_id(self) -> str | None:
        if self.kind == "task":
            return self.body["id"]
        return self.body.get("taskId")

    def __repr__(self):
        what = self.frame_name or self.state or self.kind
        return f"<SseEvent {self.id} {self.kind} {what}>"


def parse_block(block: str, request_id) -> SseEvent | None:
    """Parse one event block (without its blank line); None for the heartbeat."""
    lines = block.split("\n")
    if lines == [HEARTBEAT]:
        return None
    event_id = None
    if len(lines) == 2:
        head, _, value = lines[0].partition(": ")
        assert head == "id" and value.isdigit() and value == str(int(value)), block
        event_id = int(value)
        lines = lines[1:]
    assert len(lines) == 1 and lines[0].startswith("data: "), f"bad SSE block {block!r}"
    envelope = json.loads(lines[0][len("data: "):], object_pairs_hook=_no_duplicates)
    assert list(envelope) == ["jsonrpc", "id", "result"], envelope
    assert envelope["jsonrpc"] == "2.0"
    assert envelope["id"] == request_id and type(envelope["id"]) is type(request_id)
    result = envelope["result"]
    assert isinstance(result, dict) and len(result) == 1 and next(iter(result)) in KINDS, result
    proto = json_format.Parse(json.dumps(result), a2a_pb2.StreamResponse())
    event = SseEvent(event_id, envelope, result, proto)
    frame = event.frame
    if event.kind == "message":
        assert frame is not None, "a message on a stream is a murmur frame"
        assert event.body["role"] == "ROLE_AGENT"
        assert len(event.body["parts"]) == 1 and isinstance(event.body["parts"][0]["text"], str)
    if event_id is None:
        assert event.kind == "task" or event.frame_name in UNNUMBERED_FRAMES, event
    else:
        assert event.kind != "task" and event.frame_name not in UNNUMBERED_FRAMES, event
    return event


def parse_body(data: bytes | str, request_id) -> tuple[list[SseEvent], int]:
    """Parse a whole body; return (events, heartbeat count). It must end on a blank line."""
    text = data.decode() if isinstance(data, bytes) else data
    assert text == "" or text.endswith("\n\n"), f"body does not end an event: {text[-40:]!r}"
    events, beats = [], 0
    for block in text.split("\n\n")[:-1]:
        event = parse_block(block, request_id)
        if event is None:
            beats += 1
        else:
            events.append(event)
    return events, beats


class SseStream:
    """Reads a streaming test response chunk by chunk, parsing each event strictly.

    Each pull blocks until the door writes something: an event, or at worst
    the heartbeat, so a test door with a short ``stream.heartbeat_secs`` lets
    every read check its deadline.
    """

    def __init__(self, response, request_id):
        self.response = response
        self.request_id = request_id
        self._chunks = iter(response.response)
        self._buffer = ""
        self.events: list[SseEvent] = []
        self.heartbeats = 0
        self.ended = False
        self._read = 0
        self._last_id = 0

    def _pull(self, deadline: float) -> bool:
        assert time.monotonic() < deadline, f"no end before the deadline; got {self.events}"
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self.ended = True
            assert self._buffer == "", f"body ended mid-event: {self._buffer!r}"
            return False
        self._buffer += chunk.decode()
        *blocks, self._buffer = self._buffer.split("\n\n")
        for block in blocks:
            event = parse_block(block, self.request_id)
            if event is None:
                self.heartbeats += 1
                continue
            if event.id is not None:
                assert event.id > self._last_id, f"id {event.id} after {self._last_id}"
                self._last_id = event.id
            self.events.append(event)
        return True

    def next(self, timeout: float = DEADLINE) -> SseEvent | None:
        """The next event, or None when the body ended."""
        deadline = time.monotonic() + timeout
        while self._read == len(self.events):
            if self.ended or not self._pull(deadline):
                return None
        self._read += 1
        return self.events[self._read - 1]

    def until(self, predicate, timeout: float = DEADLINE) -> list[SseEvent]:
        """Events up to and including the first that matches ``predicate``."""
        deadline = time.monotonic() + timeout
        got = []
        while True:
            event = self.next(max(0.0, deadline - time.monotonic()) or 1e-9)
            assert event is not None, f"ended before a match; got {got}"
            got.append(event)
            if predicate(event):
                return got

    def rest(self, timeout: float = DEADLINE) -> list[SseEvent]:
        """Every event until the body ends."""
        deadline = time.monotonic() + timeout
        got = []
        while (event := self.next(max(1e-9, deadline - time.monotonic()))) is not None:
            got.append(event)
        return got

    def wait_heartbeat(self, timeout: float = DEADLINE) -> list[SseEvent]:
        """Pull until one more heartbeat arrived; return the events not read yet."""
        deadline = time.monotonic() + timeout
        seen = self.heartbeats
        while self.heartbeats == seen:
            assert self._pull(deadline), "ended while waiting for a heartbeat"
        unread, self._read = self.events[self._read:], len(self.events)
        return unread

    def close(self) -> None:
        self.response.close()


# --- doors and requests for stream tests ------------------------------------

TEST_HEARTBEAT = 0.2       # every read wakes at least this often to check its deadline
EXT = {"A2A-Extensions": STREAM_URI}
SUBMITTED, WORKING, INPUT_REQUIRED = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                                      "TASK_STATE_INPUT_REQUIRED")
COMPLETED, CANCELED, REJECTED = ("TASK_STATE_COMPLETED", "TASK_STATE_CANCELED",
                                 "TASK_STATE_REJECTED")
_ids = itertools.count(1)


def stream_door(agent=None, **overrides):
    """A door with a short heartbeat; ``agent`` replaces the demo agent."""
    stream = dict(overrides.pop("stream", {}))
    stream.setdefault("heartbeat_secs", TEST_HEARTBEAT)
    if agent is None:
        return make_door(stream=stream, **overrides)
    manifest = {"name": "test-agent", "version": "0.1.0", "stream": stream, **overrides}
    return create_app(manifest, agent)


def msg(text, **extra):
    """SendMessage params with one text part (a fresh messageId each time)."""
    message = {"messageId": f"m-{next(_ids)}", "role": "ROLE_USER", "parts": [{"text": text}]}
    message.update(extra)
    return {"message": message}


def open_stream(rpc, method, params, headers=None) -> SseStream:
    """Call a streaming method and check that the answer is a stream."""
    response = rpc.call(method, params, headers)
    assert response.status_code == 200, response.get_data()
    assert response.mimetype == "text/event-stream", response.get_data()
    assert "Content-Length" not in response.headers
    return SseStream(response, rpc.next_id)


def is_state(*states):
    return lambda event: event.kind == "statusUpdate" and event.state in states


def shape(events):
    """A readable summary: task/<state>, status/<state>, artifact/<id>, or the frame name."""
    out = []
    for e in events:
        if e.kind == "task":
            out.append(f"task/{e.state}")
        elif e.kind == "statusUpdate":
            out.append(f"status/{e.state}")
        elif e.kind == "artifactUpdate":
            out.append(f"artifact/{e.body['artifact']['artifactId']}")
        else:
            out.append(e.frame_name)
    return out


class GateAgent:
    """The demo agent, except that ``/gate`` works until the test opens the gate."""

    def __init__(self):
        self.gate = threading.Event()
        self.started = threading.Event()

    def __call__(self, ctx):
        if "/gate" in ctx.text:
            self.started.set()
            self.gate.wait(DEADLINE)
            return "released"
        return demo_agent(ctx)
