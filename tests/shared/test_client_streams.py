"""The client's stream reading and resuming, against a scripted fake door.

``Script`` is a WSGI app (a fake, not a mock) that answers each method with
the next answer scripted for it: SSE events, then a clean end, a dropped
connection, or silence. It lets these tests make what a real door does only
by chance: a gap in the replay buffer, a task that ends while the client is
away, a connection that never comes back.
"""
from __future__ import annotations

import json
import socket
import threading

import pytest

from murmur_wsgi.client import (DoorClient, HttpRefusal, ProtocolError, RpcError,
                                StreamBroken, TaskNotFound)
from murmur_wsgi.client.sse import SseEvent, SseParser, iter_events
from murmur_wsgi.uris import STREAM_URI

from tests.shared.test_client import WAIT, ThreadedDoor

TASK = "tsk_1"
CTX = "ctx_1"


def task(state="TASK_STATE_SUBMITTED", **extra):
    return {"task": {"id": TASK, "contextId": CTX, "status": {"state": state}, **extra}}


def status(state):
    return {"statusUpdate": {"taskId": TASK, "contextId": CTX, "status": {"state": state}}}


def frame(name, **fields):
    return {"message": {"messageId": f"msg-{name}", "role": "ROLE_AGENT",
                        "parts": [{"text": name}],
                        "metadata": {STREAM_URI: {"frame": name, **fields}}}}


ACK = frame("connection-ack", role="observer", conversationMode="stateless")
CLOSED = frame("capsule-closed")


def sse(*events, end="close", content_type="text/event-stream"):
    """An SSE answer: ``(id or None, result)`` pairs or ``":comment"`` strings, then ``end``."""
    def answer(environ, start_response, request_id, release):
        start_response("200 OK", [("Content-Type", content_type)])

        def body():
            for event in events:
                if isinstance(event, str):
                    yield event.encode() + b"\n\n"
                    continue
                event_id, result = event
                data = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
                head = f"id: {event_id}\n" if event_id is not None else ""
                yield f"{head}data: {data}\n\n".encode()
            if end == "drop":
                environ["werkzeug.socket"].shutdown(socket.SHUT_RDWR)
                raise ConnectionAbortedError("dropped by the script")
            if end == "stall":
                release.wait(WAIT)
        return body()
    return answer


def rpc(result=None, error=None, status_line="200 OK"):
    def answer(environ, start_response, request_id, release):
        body = {"jsonrpc": "2.0", "id": request_id}
        body.update({"error": error} if error is not None else {"result": result})
        data = json.dumps(body).encode()
        start_response(status_line, [("Content-Type", "application/json"),
                                     ("Content-Length", str(len(data)))])
        return [data]
    return answer


def raw(status_line, body: bytes, content_type="application/json"):
    def answer(environ, start_response, request_id, release):
        start_response(status_line, [("Content-Type", content_type),
                                     ("Content-Length", str(len(body)))])
        return [body]
    return answer


class Script:
    """A fake door answering each method with its next scripted answer."""

    def __init__(self, **answers):
        self.answers = {name.replace("_", "."): list(a) for name, a in answers.items()}
        self.calls: list[tuple[str, str | None]] = []
        self.release = threading.Event()

    def __call__(self, environ, start_response):
        body = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
        method = body["method"]
        self.calls.append((method, environ.get("HTTP_LAST_EVENT_ID")))
        return self.answers[method].pop(0)(environ, start_response, body["id"], self.release)


@pytest.fixture
def scripted():
    """``scripted(**answers)``: a client of a fake door serving that script."""
    doors = []

    def start(**answers):
        script = Script(**answers)
        door = ThreadedDoor(app=script).__enter__()
        client = DoorClient(door.url, timeout=WAIT, reconnect_delay=0, max_reconnects=2,
                            stream_timeout=WAIT)
        doors.append((door, client, script))
        return client, script
    yield start
    for door, client, script in doors:
        script.release.set()
        client.close()
        door.close()


def test_watch_resumes_and_hands_over_the_doors_gap(scripted):
    client, script = scripted(murmur_WatchSession=[
        sse((None, ACK), (1, status("TASK_STATE_WORKING")), (2, status("TASK_STATE_WORKING")),
            end="drop"),
        sse((None, ACK), (None, frame("gap", firstAvailableId=5)),
            (5, status("TASK_STATE_COMPLETED")), (None, CLOSED))])
    stream = client.watch()
    events = list(stream)
    assert [e.frame or e.id for e in events] == [
        "connection-ack", 1, 2, "connection-ack", "gap", 5, "capsule-closed"]
    assert script.calls == [("murmur.WatchSession", None), ("murmur.WatchSession", "2")]
    assert stream.gaps == [(2, 5)]
    assert stream.reconnects == 1 and stream.ended == "capsule-closed"


def test_watch_reports_numbers_that_jump_as_a_synthetic_gap(scripted):
    client, _ = scripted(murmur_WatchSession=[
        sse((None, ACK), (1, status("TASK_STATE_WORKING")), (4, status("TASK_STATE_WORKING")),
            (None, CLOSED))])
    events = list(client.watch())
    gap = events[2]
    assert gap.synthetic and gap.frame == "gap"
    assert gap.fields == {"firstAvailableId": 4, "afterId": 1}
    assert [e.id for e in events[3:]] == [4, None]


def test_replayed_events_are_handed_over_once(scripted):
    client, _ = scripted(murmur_WatchSession=[
        sse((1, status("TASK_STATE_WORKING")), (2, status("TASK_STATE_WORKING")), end="drop"),
        sse((None, ACK), (2, status("TASK_STATE_WORKING")),
            (3, status("TASK_STATE_COMPLETED")), (None, CLOSED))])
    assert [e.id for e in client.watch() if e.id is not None] == [1, 2, 3]


def test_a_task_that_ended_while_away_is_fetched(scripted):
    client, script = scripted(
        SendStreamingMessage=[sse((None, task()), (7, status("TASK_STATE_WORKING")),
                                  end="drop")],
        SubscribeToTask=[rpc(error={"code": -32004, "message": "ended", "data": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
             "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org",
             "metadata": {"taskId": TASK, "state": "TASK_STATE_COMPLETED"}}]})],
        GetTask=[rpc(task("TASK_STATE_COMPLETED")["task"])])
    stream = client.stream("hi")
    events = list(stream)
    assert events[-1].synthetic and events[-1].kind == "task"
    assert events[-1].state == "TASK_STATE_COMPLETED"
    assert stream.ended == "terminal" and stream.state == "TASK_STATE_COMPLETED"
    assert script.calls == [("SendStreamingMessage", None), ("SubscribeToTask", "7"),
                            ("GetTask", None)]


@pytest.mark.parametrize("content_type", ["Text/Event-Stream; charset=UTF-8",
                                          "TEXT/EVENT-STREAM", "text/event-stream ;x=1"])
def test_a_stream_of_text_event_stream_in_any_case_is_read(scripted, content_type):
    """Media types are case-insensitive (RFC 9110, section 8.3.1): ``Text/Event-Stream``
    was refused as "not application/json: not a JSON-RPC answer"."""
    client, _ = scripted(SendStreamingMessage=[
        sse((None, task()), (1, status("TASK_STATE_COMPLETED")), content_type=content_type)])
    stream = client.stream("hi")
    assert [e.id for e in stream] == [None, 1]
    assert stream.state == "TASK_STATE_COMPLETED"


def test_a_stream_of_another_media_type_is_refused(scripted):
    """``text/event-streamer`` is not ``text/event-stream``: it was read as a stream."""
    client, _ = scripted(SendStreamingMessage=[
        sse((None, task()), (1, status("TASK_STATE_COMPLETED")),
            content_type="text/event-streamer")])
    with pytest.raises(ProtocolError, match="text/event-streamer"):
        list(client.stream("hi"))


def test_a_stream_that_never_comes_back_breaks(scripted):
    client, script = scripted(
        SendStreamingMessage=[sse((None, task()), (3, status("TASK_STATE_WORKING")),
                                  end="drop")],
        SubscribeToTask=[sse(end="drop") for _ in range(3)])
    stream = client.stream("hi")
    with pytest.raises(StreamBroken) as info:
        list(stream)
    assert client.url in str(info.value)
    assert [c[0] for c in script.calls].count("SubscribeToTask") == 2


def test_a_stream_dropped_before_naming_its_task_cannot_resume(scripted):
    client, _ = scripted(SendStreamingMessage=[sse(":heartbeat", end="drop")])
    with pytest.raises(StreamBroken, match="ListTasks"):
        list(client.stream("hi"))


def test_silence_past_the_read_timeout_reconnects_and_heartbeats_count(scripted):
    client, script = scripted(murmur_WatchSession=[
        sse((None, ACK), ":heartbeat", (1, status("TASK_STATE_WORKING")), end="stall"),
        sse((None, CLOSED))])
    client.stream_timeout = 0.3
    stream = client.watch()
    assert [e.frame or e.id for e in stream] == ["connection-ack", 1, "capsule-closed"]
    assert stream.heartbeats == 1 and stream.reconnects == 1
    assert script.calls[-1] == ("murmur.WatchSession", "1")


def test_refusals_on_opening_a_stream_raise(scripted):
    client, _ = scripted(SubscribeToTask=[
        rpc(error={"code": -32001, "message": "Task not found", "data": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
             "domain": "a2a-protocol.org", "metadata": {"taskId": "tsk_x"}}]}),
        raw("401 Unauthorized", b'{"error": "unauthenticated", "message": "no token"}')])
    with pytest.raises(TaskNotFound) as info:
        next(client.subscribe("tsk_x"))
    assert info.value.metadata == {"taskId": "tsk_x"}
    with pytest.raises(HttpRefusal) as refused:
        next(client.subscribe("tsk_x"))
    assert (refused.value.status, refused.value.message) == (401, "no token")


def test_an_error_event_inside_a_stream_raises(scripted):
    def answer(environ, start_response, request_id, release):
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        error = {"jsonrpc": "2.0", "id": request_id,
                 "error": {"code": -32603, "message": "Internal error"}}
        return [f"data: {json.dumps(error)}\n\n".encode()]
    client, _ = scripted(SubscribeToTask=[answer])
    with pytest.raises(RpcError) as info:
        list(client.subscribe(TASK))
    assert info.value.code == -32603 and info.value.reason is None


def test_an_answer_that_is_not_json_rpc_is_a_protocol_error(scripted):
    client, _ = scripted(GetTask=[raw("200 OK", b"<html>proxy</html>", "text/html"),
                                  raw("200 OK", b"[1, 2]")])
    with pytest.raises(ProtocolError, match="HTTP 200 with Content-Type 'text/html', not "
                                            "application/json"):
        client.get(TASK)
    with pytest.raises(ProtocolError, match="not a JSON-RPC response"):
        client.get(TASK)


# --- the SSE parser -------------------------------------------------------------------

STREAM = (b": hello\r\n\r\nid: 4\r\nevent: note\r\ndata: a\r\ndata: b\r\n\r\n"
          b"data: {\"x\": 1}\n\nretry: 10\nid\nunknown: z\ndata:c\r\r")


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(STREAM)], ids=lambda n: f"chunks-of-{n}")
def test_sse_parser_is_indifferent_to_chunking_and_line_endings(size):
    chunks = [STREAM[i:i + size] for i in range(0, len(STREAM), size)]
    assert list(iter_events(chunks)) == [
        SseEvent(event="comment", comment="hello"),
        SseEvent("a\nb", "note", "4"),
        SseEvent('{"x": 1}'),
        SseEvent("c", id="", retry=10),
    ]


def test_sse_parser_holds_an_unfinished_event():
    parser = SseParser()
    assert list(parser.feed(b"id: 1\ndata: par")) == []
    assert list(parser.feed(b"tial\n")) == []
    assert list(parser.feed(b"\n")) == [SseEvent("partial", id="1")]
