"""A stream's resumes against a server that accepts each and drops it: real sockets.

Each server is a ``Hostile`` (tests/shared/hostile_server.py) that answers every
stream with a script of SSE events for that connection, then drops it (no last chunk).
A resume that hands over nothing new counts as a failure toward ``max_reconnects``;
one that hands over a new event does not. What is counted is the server's connections;
``reconnect_delay=0``, so no back-off waits.
"""
from __future__ import annotations

import json
import time

import pytest

from murmur_wsgi.client import A2AClient, StreamBroken
from murmur_wsgi.uris import STREAM_URI
from tests.shared.hostile_server import Hostile, answer, card, run_in_thread

WAIT = 10.0
MAX_RECONNECTS = 3
TASK = "tsk_1"


def snapshot(state="TASK_STATE_WORKING"):
    return {"task": {"id": TASK, "contextId": "ctx_1", "status": {"state": state}}}


def status(state):
    return {"statusUpdate": {"taskId": TASK, "contextId": "ctx_1", "status": {"state": state}}}


# A client that resumes forever meets the stream's end there instead of StreamBroken.
GIVE_UP = 10 * MAX_RECONNECTS


def frame(name):
    return {"message": {"messageId": f"m-{name}", "role": "ROLE_AGENT",
                        "parts": [{"text": name}], "metadata": {STREAM_URI: {"frame": name}}}}


def resuming_door(script, hold=None):
    """A server whose ``n``-th stream (0 first) writes ``script(n)``'s ``(id, result)``
    events, then drops the connection (``hold(n)`` seconds later, if given); past
    ``GIVE_UP`` streams, the stream's end."""
    streams, opened = [], []                    # each stream's request, and when it came

    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        sent = json.loads(request.body)
        opened.append(time.monotonic())
        streams.append((sent["method"], request.headers.get("last-event-id")))
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        events = script(len(streams) - 1) if len(streams) <= GIVE_UP else [
            (None, snapshot("TASK_STATE_COMPLETED")), (None, frame("capsule-closed"))]
        for event_id, result in events:
            data = json.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": result})
            head = f"id: {event_id}\n" if event_id is not None else ""
            event = f"{head}data: {data}\n\n".encode()
            conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
        if hold is not None:
            time.sleep(hold(len(streams) - 1))  # wait-ok: the connection held quiet, as a proxy's
        # dropped: the connection closes without the last chunk
    door = Hostile(handler)
    door.streams, door.opened = streams, opened
    return door


def client_of(door) -> A2AClient:
    return A2AClient(door.url, timeout=WAIT, stream_timeout=WAIT,
                     max_reconnects=MAX_RECONNECTS, reconnect_delay=0)


def read_until_broken(stream) -> tuple[list, Exception | None]:
    events = []
    try:
        for event in stream:
            events.append(event)
    except StreamBroken as ex:
        return events, ex
    return events, None


def test_resumes_that_hand_over_only_the_snapshot_end_the_stream():
    def script(n):
        return [(None, snapshot())] + ([(4, status("TASK_STATE_WORKING"))] if n == 0 else [])
    with resuming_door(script) as door, client_of(door) as client:
        stream = client.subscribe(TASK)
        events, broken = read_until_broken(stream)
        assert isinstance(broken, StreamBroken)
        assert "dropped 4 times without a new event between" in str(broken)
        assert door.streams == [("SubscribeToTask", None)] + [
            ("SubscribeToTask", "4")] * MAX_RECONNECTS
        assert stream.reconnects == MAX_RECONNECTS
        # each resume hands over the task as it stands, then nothing more
        assert [e.kind for e in events] == ["task", "statusUpdate"] + ["task"] * MAX_RECONNECTS


def test_resumes_that_replay_only_events_already_seen_end_the_stream():
    def script(n):
        return [(None, snapshot()), (1, status("TASK_STATE_WORKING")),
                (2, status("TASK_STATE_WORKING"))]
    with resuming_door(script) as door, client_of(door) as client:
        stream = client.subscribe(TASK)
        events, broken = read_until_broken(stream)
        assert isinstance(broken, StreamBroken)
        assert len(door.streams) == MAX_RECONNECTS + 1
        assert [e.id for e in events if e.id is not None] == [1, 2]


@pytest.mark.parametrize("numbered", [True, False], ids=["numbered", "unnumbered"])
def test_a_stream_making_progress_resumes_as_often_as_it_drops(numbered):
    rounds = 4 * MAX_RECONNECTS

    def script(n):
        if n == rounds:
            return [(None, snapshot()), (n + 1 if numbered else None,
                                         status("TASK_STATE_COMPLETED"))]
        return [(None, snapshot()), (n + 1 if numbered else None, status("TASK_STATE_WORKING"))]
    with resuming_door(script) as door, client_of(door) as client:
        stream = client.stream("hi")
        events, broken = read_until_broken(stream)
        assert broken is None and stream.ended == "terminal"
        assert stream.reconnects == rounds and len(door.streams) == rounds + 1
        assert door.streams[0] == ("SendStreamingMessage", None)
        assert door.streams[-1] == ("SubscribeToTask", str(rounds) if numbered else None)
        assert [e.kind for e in events] == ["task", "statusUpdate"] * (rounds + 1)


def test_a_watch_resumed_to_its_connection_ack_alone_ends():
    with resuming_door(lambda n: [(None, frame("connection-ack"))]) as door, client_of(door) as client:
        stream = client.watch()
        events, broken = read_until_broken(stream)
        assert isinstance(broken, StreamBroken)
        assert len(door.streams) == MAX_RECONNECTS + 1 and len(events) == MAX_RECONNECTS + 1


def test_a_quiet_stream_a_proxy_cuts_after_a_while_is_followed(monkeypatch):
    """Each connection is held past ``HELD_SECS`` with nothing new, then cut: no failure."""
    from murmur_wsgi.client import streams
    held = 0.2
    monkeypatch.setattr(streams.EventStream, "HELD_SECS", held)
    rounds = MAX_RECONNECTS + 2

    def script(n):
        if n == rounds:
            return [(None, snapshot()), (2, status("TASK_STATE_COMPLETED"))]
        return [(None, snapshot())] + ([(1, status("TASK_STATE_WORKING"))] if n == 0 else [])

    def hold(n):
        return held * 1.5 if n < rounds else 0
    with resuming_door(script, hold) as door, client_of(door) as client:
        stream = client.subscribe(TASK)
        events, broken = read_until_broken(stream)
        assert broken is None and stream.ended == "terminal"
        assert stream.reconnects == rounds and len(door.streams) == rounds + 1
        assert [e.id for e in events if e.id is not None] == [1, 2]


@pytest.mark.parametrize("state", [["TASK_STATE_COMPLETED"], {"s": 1}])
def test_a_refused_resume_naming_a_state_of_another_shape_is_the_servers_error(state):
    """A resume the server refuses -32004 with ErrorInfo metadata whose ``state`` is not a
    text is that UnsupportedOperation. NOTE: before, ``state in TERMINAL`` raised
    TypeError (unhashable) out of the stream's iterator: no error of the client's."""
    from murmur_wsgi.client import UnsupportedOperation
    from murmur_wsgi.codes import ERROR_INFO_TYPE

    def handler(conn, request, server):
        if request.method == "GET":
            answer(conn, "200 OK", json.dumps(card(server.url + "/")).encode())
            return
        sent = json.loads(request.body)
        if sent["method"] == "SubscribeToTask" and server.resumed:
            answer(conn, "200 OK", json.dumps({"jsonrpc": "2.0", "id": sent["id"], "error": {
                "code": -32004, "message": "no", "data": [
                    {"@type": ERROR_INFO_TYPE, "metadata": {"state": state}}]}}).encode())
            return
        server.resumed = True
        data = json.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": snapshot()})
        answer(conn, "200 OK", f"data: {data}\n\n".encode(), "text/event-stream")

    with Hostile(handler) as door:
        door.resumed = False
        with A2AClient(door.url, timeout=WAIT, reconnect_delay=0) as client:
            stream = client.subscribe(TASK)
            assert next(stream).state == "TASK_STATE_WORKING"
            with pytest.raises(UnsupportedOperation):
                next(stream)


def test_a_stream_that_drops_after_each_new_looking_event_is_resumed_ever_more_slowly():
    """A server that numbers no event hands over the same status on each connection and
    drops it at once: each counts as news, so the client resumed as fast as the server
    answered, forever. Now the pause doubles with each quick drop: the gaps between the
    connections are at least 0, d, 2d, 4d, 8d (a slower machine only widens them); before,
    every one was about 0. The server ends the stream at its 7th connection."""
    delay, quick = 0.02, 6

    def script(n):
        if n < quick:
            return [(None, snapshot()), (None, status("TASK_STATE_WORKING"))]
        return [(None, snapshot("TASK_STATE_COMPLETED")), (None, frame("capsule-closed"))]
    with resuming_door(script) as door, A2AClient(door.url, timeout=WAIT, stream_timeout=WAIT,
                                                   max_reconnects=MAX_RECONNECTS,
                                                   reconnect_delay=delay) as client:
        stream = client.subscribe(TASK)
        finished, kinds = run_in_thread(lambda: [e.kind for e in stream], WAIT)
        stream.close()
    assert finished and kinds[-2:] == ["statusUpdate", "task"], kinds
    gaps = [b - a for a, b in zip(door.opened, door.opened[1:])]
    assert len(gaps) == quick, gaps
    assert all(gap >= delay * 2 ** (i - 1) for i, gap in enumerate(gaps) if i), gaps
