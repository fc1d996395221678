"""The door's streams on the wire: SendStreamingMessage, SubscribeToTask, WatchSession,
StopSession, closing, replay, lagged readers and disconnects.

Every event is read through ``tests.sse_util.SseStream``, which parses each
``data:`` line strictly as a JSON-RPC envelope around an a2a-sdk StreamResponse.
Test doors use a short heartbeat so that every read wakes up to check its
deadline; nothing sleeps.
"""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.uris import DOOR_URI, STREAM_URI
from tests.conftest import Rpc
from tests.sse_util import (CANCELED, COMPLETED, DEADLINE, EXT, INPUT_REQUIRED, SUBMITTED, WORKING,
                            GateAgent, is_state, msg, open_stream, shape, stream_door)

# --- SendStreamingMessage ----------------------------------------------------

def test_stream_with_extension_carries_text_frames():
    rpc = Rpc(stream_door())
    stream = open_stream(rpc, "SendStreamingMessage", msg("/stream 3"), EXT)
    assert stream.response.headers["A2A-Extensions"] == STREAM_URI
    events = stream.rest()
    assert shape(events) == ["task/TASK_STATE_SUBMITTED", "connection-ack",
                             "status/TASK_STATE_WORKING", "text", "text", "text",
                             "artifact/response", "status/TASK_STATE_COMPLETED"]
    assert [e.id is None for e in events] == [True, True] + [False] * 6
    assert events[1].frame == {"frame": "connection-ack", "role": "client",
                               "conversationMode": "stateless"}
    assert [e.frame for e in events[3:6]] == [
        {"frame": "text", "text": f"chunk {i}", "final": i == 3} for i in (1, 2, 3)]
    artifact = events[6].body
    assert artifact["lastChunk"] is True
    assert artifact["artifact"]["parts"][0]["text"] == "chunk 1\nchunk 2\nchunk 3"
    task_id = events[0].task_id
    assert all(e.task_id == task_id for e in events if e.frame_name != "connection-ack")
    assert rpc.door.session.ring.subscribers == 0


def test_stream_without_extension_carries_only_a2a_events():
    rpc = Rpc(stream_door())
    stream = open_stream(rpc, "SendStreamingMessage", msg("/stream 3"))
    assert "A2A-Extensions" not in stream.response.headers
    assert shape(stream.rest()) == ["task/TASK_STATE_SUBMITTED", "status/TASK_STATE_WORKING",
                                    "artifact/response", "status/TASK_STATE_COMPLETED"]


def test_no_event_is_lost_or_doubled_between_snapshot_and_live_reading():
    rpc = Rpc(stream_door())
    for _ in range(5):
        events = open_stream(rpc, "SendStreamingMessage", msg("/stream 40"), EXT).rest()
        assert shape(events) == (["task/TASK_STATE_SUBMITTED", "connection-ack",
                                  "status/TASK_STATE_WORKING"] + ["text"] * 40
                                 + ["artifact/response", "status/TASK_STATE_COMPLETED"])
        assert [e.frame["text"] for e in events[3:43]] == [f"chunk {i}" for i in range(1, 41)]
        numbered = [e.id for e in events if e.id is not None]
        assert numbered == list(range(numbered[0], numbered[0] + len(numbered)))


@pytest.mark.parametrize("metadata, headers, echo", [
    pytest.param(True, EXT, f"{DOOR_URI}, {STREAM_URI}", id="door-and-stream"),
    pytest.param(True, {}, DOOR_URI, id="door-only"),
    pytest.param(False, EXT, STREAM_URI, id="stream-only"),
    pytest.param(False, {"A2A-Extensions": f"urn:x, {STREAM_URI}"}, STREAM_URI, id="among"),
    pytest.param(False, {}, None, id="neither"),
])
def test_a2a_extensions_echo(metadata, headers, echo):
    rpc = Rpc(stream_door())
    extra = {"metadata": {DOOR_URI: {}}} if metadata else {}
    stream = open_stream(rpc, "SendStreamingMessage", msg("hi", **extra), headers)
    assert stream.response.headers.get("A2A-Extensions") == echo
    assert stream.rest()[-1].state == COMPLETED


@pytest.mark.parametrize("params, headers, code", [
    pytest.param({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}, EXT, -32602,
                 id="no-messageId"),
    pytest.param(msg("x", taskId="tsk_nope"), EXT, -32001, id="unknown-task"),
    pytest.param(dict(msg("x"), configuration={"taskPushNotificationConfig": {"url": "u"}}),
                 EXT, -32003, id="push-config"),
    pytest.param(msg("x", parts=[{"url": "http://x"}]), EXT, -32005, id="url-part"),
    pytest.param(msg("x"), {"A2A-Version": None, **EXT}, -32009, id="no-version"),
])
def test_refusals_are_one_json_body(params, headers, code):
    door = stream_door()
    rpc = Rpc(door)
    params["message"]["metadata"] = {DOOR_URI: {}}
    response = rpc.call("SendStreamingMessage", params, headers)
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.get_json()["error"]["code"] == code
    assert "A2A-Extensions" not in response.headers
    assert door.session.ring.subscribers == 0 and door.session.ring.last_id == 0


def test_a_message_to_an_ended_task_is_refused_with_its_state():
    rpc = Rpc(stream_door())
    task = rpc.result("SendMessage", msg("hi"))["task"]
    response = rpc.call("SendStreamingMessage", msg("again", taskId=task["id"]), EXT)
    error = response.get_json()["error"]
    assert error["code"] == -32004
    assert error["data"][0]["metadata"] == {"taskId": task["id"], "state": COMPLETED}


@pytest.mark.parametrize("headers", [pytest.param({}, id="plain"), pytest.param(EXT, id="ext")])
def test_busy_is_a_stream_of_one_rejected_task(headers):
    door = stream_door()
    rpc = Rpc(door)
    running = open_stream(rpc, "SendStreamingMessage", msg("/sleep 30"))
    task_id = running.next().task_id
    rejected = open_stream(rpc, "SendStreamingMessage", msg("hi"), headers)
    events = rejected.rest()
    assert shape(events) == ["task/TASK_STATE_REJECTED"] and events[0].id is None
    assert events[0].body["status"]["message"]["parts"][0]["text"] == \
        "task rejected: capsule is busy"
    assert rejected.heartbeats == 0
    # A canceled task's stream ends with its CANCELED status.
    assert rpc.result("CancelTask", {"id": task_id})["status"]["state"] == CANCELED
    assert shape(running.rest())[-1] == "status/TASK_STATE_CANCELED"
    assert door.session.ring.subscribers == 0


def test_a_closing_door_streams_a_rejected_task():
    door = stream_door()
    door.close()
    events = open_stream(Rpc(door), "SendStreamingMessage", msg("hi"), EXT).rest()
    assert shape(events) == ["task/TASK_STATE_REJECTED"]
    assert events[0].body["status"]["message"]["parts"][0]["text"] == \
        "task rejected: the session is closing"


def test_the_stream_stays_open_through_input_required_and_a_reply_continues_it():
    rpc = Rpc(stream_door())
    first = open_stream(rpc, "SendStreamingMessage", msg("/ask Which colour?"), EXT)
    head = first.until(is_state(INPUT_REQUIRED))
    assert shape(head) == ["task/TASK_STATE_SUBMITTED", "connection-ack",
                           "status/TASK_STATE_WORKING", "artifact/prompt",
                           "status/TASK_STATE_INPUT_REQUIRED"]
    task_id = head[0].task_id
    second = open_stream(rpc, "SendStreamingMessage", msg("blue", taskId=task_id), EXT)
    assert shape(second.rest()) == ["task/TASK_STATE_WORKING", "connection-ack",
                                    "artifact/response", "status/TASK_STATE_COMPLETED"]
    tail = first.rest()
    assert shape(tail) == ["status/TASK_STATE_WORKING", "artifact/response",
                           "status/TASK_STATE_COMPLETED"]
    assert tail[1].body["artifact"]["parts"][0]["text"] == "blue"


def test_last_event_id_on_a_new_task_is_ignored_and_on_a_reply_replays_only_frames():
    rpc = Rpc(stream_door())
    rpc.result("SendMessage", msg("hi"))                                   # events 1..4
    first = open_stream(rpc, "SendStreamingMessage", msg("/ask Which colour?"),
                        {"Last-Event-ID": "2"})
    head = first.until(is_state(INPUT_REQUIRED))
    assert shape(head) == ["task/TASK_STATE_SUBMITTED", "status/TASK_STATE_WORKING",
                           "artifact/prompt", "status/TASK_STATE_INPUT_REQUIRED"]
    assert [e.id for e in head[1:]] == [6, 7, 8]
    reply = open_stream(rpc, "SendStreamingMessage", msg("red", taskId=head[0].task_id),
                        {"Last-Event-ID": "6"})
    events = reply.rest()
    # Events 7..9 are older than the opening snapshot (and no frames): not replayed.
    assert shape(events) == ["task/TASK_STATE_WORKING", "artifact/response",
                             "status/TASK_STATE_COMPLETED"]
    assert [e.id for e in events[1:]] == [10, 11]
    assert [e.id for e in first.rest()] == [9, 10, 11]


# --- SubscribeToTask -----------------------------------------------------------

@pytest.mark.parametrize("params, code, message", [
    pytest.param({}, -32602, "SubscribeToTask requires an id", id="no-id"),
    pytest.param({"id": ""}, -32602, "SubscribeToTask requires an id", id="empty-id"),
    pytest.param({"id": "tsk_never"}, -32001, None, id="never-held"),
])
def test_subscribe_refusals(params, code, message):
    rpc = Rpc(stream_door())
    response = rpc.call("SubscribeToTask", params, EXT)
    assert response.mimetype == "application/json"
    error = response.get_json()["error"]
    assert error["code"] == code
    if message:
        assert error["message"] == message
    if code == -32001:
        assert error["data"][0]["metadata"] == {"taskId": "tsk_never"}


def test_subscribe_to_an_ended_task_is_refused_with_its_state():
    rpc = Rpc(stream_door())
    task = rpc.result("SendMessage", msg("/fail boom"))["task"]
    response = rpc.call("SubscribeToTask", {"id": task["id"]}, EXT)
    assert response.mimetype == "application/json" and "A2A-Extensions" not in response.headers
    assert response.get_json() == {"jsonrpc": "2.0", "id": rpc.next_id, "error": {
        "code": -32004,
        "message": f"Task {task['id']} has ended in TASK_STATE_FAILED; it has no more events "
                   "to stream",
        "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                  "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org",
                  "metadata": {"taskId": task["id"], "state": "TASK_STATE_FAILED"}}]}}


def test_subscribe_to_a_task_another_credential_started_is_not_found():
    auth = {"scheme": "bearer", "credentials": {
        "alice": {"scopes": ["SendMessage", "SubscribeToTask"]},
        "bob": {"scopes": ["SubscribeToTask"]}}}
    door = stream_door(network={"authentication": auth})
    rpc = Rpc(door)
    bearer = {name: {"Authorization": f"Bearer {door.tokens.tokens[name]}"}
              for name in ("alice", "bob")}
    task = rpc.result("SendMessage", dict(msg("/ask why?")), bearer["alice"])["task"]
    error = rpc.call("SubscribeToTask", {"id": task["id"]}, bearer["bob"]).get_json()["error"]
    assert error["code"] == -32001
    stream = open_stream(rpc, "SubscribeToTask", {"id": task["id"]}, bearer["alice"])
    assert shape([stream.next()]) == ["task/TASK_STATE_INPUT_REQUIRED"]
    stream.close()
    assert door.session.ring.subscribers == 0
    door.close()


def test_subscribe_opens_with_the_task_and_follows_it_to_its_end():
    door = stream_door()
    rpc = Rpc(door)
    task = rpc.result("SendMessage", msg("/ask Which colour?"))["task"]
    plain = open_stream(rpc, "SubscribeToTask", {"id": task["id"]})
    with_ext = open_stream(rpc, "SubscribeToTask", {"id": task["id"]}, EXT)
    assert "A2A-Extensions" not in plain.response.headers
    assert with_ext.response.headers["A2A-Extensions"] == STREAM_URI
    opening = plain.next()
    assert opening.kind == "task" and opening.id is None
    assert opening.body == rpc.result("GetTask", {"id": task["id"]})
    rpc.result("SendMessage", msg("red", taskId=task["id"]))
    assert shape(plain.rest()) == ["status/TASK_STATE_WORKING", "artifact/response",
                                   "status/TASK_STATE_COMPLETED"]
    assert shape(with_ext.rest()) == ["task/TASK_STATE_INPUT_REQUIRED", "connection-ack",
                                      "status/TASK_STATE_WORKING", "artifact/response",
                                      "status/TASK_STATE_COMPLETED"]
    assert door.session.ring.subscribers == 0


def _frames_then_ask(ctx):
    ctx.write("a")
    ctx.write("b")
    return ctx.ask("Which colour?").text


@pytest.mark.parametrize("last_event_id, headers, replayed", [
    pytest.param("3", EXT, [4], id="after-3"),
    pytest.param("not-a-number", EXT, [3, 4], id="non-numeric"),
    pytest.param(" 0 ", EXT, [3, 4], id="zero"),
    pytest.param("0", None, [], id="no-extension-no-frames"),
])
def test_subscribe_with_last_event_id_replays_the_tasks_frames(last_event_id, headers,
                                                               replayed):
    door = stream_door(_frames_then_ask)
    rpc = Rpc(door)
    # events: 1 SUBMITTED, 2 WORKING, 3 and 4 text frames, 5 prompt, 6 INPUT_REQUIRED
    task = rpc.result("SendMessage", msg("go"))["task"]
    stream = open_stream(rpc, "SubscribeToTask", {"id": task["id"]},
                         {"Last-Event-ID": last_event_id, **(headers or {})})
    first = stream.next()
    assert first.kind == "task" and first.state == INPUT_REQUIRED
    rpc.result("SendMessage", msg("red", taskId=task["id"]))
    rest = stream.rest()
    numbered = [e.id for e in rest if e.id is not None]
    # The replay holds frames only: no status older than the opening snapshot.
    assert numbered == replayed + [7, 8, 9]
    assert [e.state for e in rest if e.kind == "statusUpdate"] == [WORKING, COMPLETED]


# --- murmur.WatchSession -------------------------------------------------------

def run(rpc, text):
    """Run a task to its end with a held SendMessage."""
    return rpc.result("SendMessage", msg(text))["task"]


@pytest.mark.parametrize("conversation", ["stateless", "threaded"])
def test_watch_opens_with_connection_ack_and_echoes_both_uris(conversation):
    door = stream_door(lifecycle={"conversation": conversation})
    watch = open_stream(Rpc(door), "murmur.WatchSession", {})
    assert watch.response.headers["A2A-Extensions"] == f"{DOOR_URI}, {STREAM_URI}"
    ack = watch.next()
    assert ack.id is None and ack.frame == {"frame": "connection-ack", "role": "observer",
                                           "conversationMode": conversation}
    watch.close()


def test_watch_follows_every_task_with_frames_and_stays_open():
    door = stream_door()
    rpc = Rpc(door)
    watch = open_stream(rpc, "murmur.WatchSession", {})
    first, second = run(rpc, "/stream 2"), run(rpc, "/think hmm")
    events = watch.until(lambda e: e.task_id == second["id"] and e.state == COMPLETED)
    assert shape(events) == ["connection-ack",
                             "status/TASK_STATE_SUBMITTED", "status/TASK_STATE_WORKING",
                             "text", "text", "artifact/response", "status/TASK_STATE_COMPLETED",
                             "status/TASK_STATE_SUBMITTED", "status/TASK_STATE_WORKING",
                             "thinking", "artifact/response", "status/TASK_STATE_COMPLETED"]
    assert [e.id for e in events[1:]] == list(range(1, 12))
    assert {e.task_id for e in events[1:7]} == {first["id"]}
    watch.wait_heartbeat()               # still open after both tasks ended
    assert not watch.ended
    watch.close()
    assert door.session.ring.subscribers == 0


@pytest.mark.parametrize("last_event_id, gap, replayed", [
    pytest.param(None, None, range(1, 8), id="absent-whole-buffer"),
    pytest.param("3", None, range(4, 8), id="after-3"),
    pytest.param("7", None, [], id="up-to-date"),
    pytest.param("x", None, range(1, 8), id="non-numeric-from-0"),
    pytest.param("8", 1, range(1, 8), id="never-issued"),
    pytest.param("9" * 5000, 1, range(1, 8), id="never-issued-too-long-for-int"),
    pytest.param("0" * 30 + "3", None, range(4, 8), id="after-3-with-leading-zeros"),
    pytest.param("0" * 5000 + "3", None, range(4, 8), id="after-3-with-many-leading-zeros"),
])
def test_watch_replay_without_wrap(last_event_id, gap, replayed):
    door = stream_door()
    rpc = Rpc(door)
    run(rpc, "/stream 3")                                                  # events 1..7
    watch = open_stream(rpc, "murmur.WatchSession", {}, {"Last-Event-ID": last_event_id})
    events = watch.wait_heartbeat()
    assert events[0].frame_name == "connection-ack"
    rest = events[1:]
    if gap is not None:
        assert rest[0].frame == {"frame": "gap", "firstAvailableId": gap}
        rest = rest[1:]
    assert [e.id for e in rest] == list(replayed)
    run(rpc, "hi")                                                         # live: 8..11
    assert [e.id for e in watch.until(lambda e: e.id == 11)] == [8, 9, 10, 11]
    watch.close()


@pytest.mark.parametrize("last_event_id, gap", [
    pytest.param(None, True, id="absent"),
    pytest.param("15", True, id="two-before-oldest"),
    pytest.param("16", False, id="one-before-oldest"),
    pytest.param("20", False, id="inside"),
    pytest.param("abc", True, id="non-numeric"),
    pytest.param("999", True, id="never-issued"),
])
def test_watch_replay_with_wrap(last_event_id, gap):
    door = stream_door(stream={"replay_events": 8})
    rpc = Rpc(door)
    run(rpc, "/stream 20")                                  # 24 events; 17..24 held
    watch = open_stream(rpc, "murmur.WatchSession", {}, {"Last-Event-ID": last_event_id})
    events = watch.until(lambda e: e.id == 24)
    if gap:
        assert shape(events[:2]) == ["connection-ack", "gap"]
        assert events[1].frame["firstAvailableId"] == 17
        assert [e.id for e in events[2:]] == list(range(17, 25))
    else:
        after = int(last_event_id)
        assert [e.id for e in events[1:]] == list(range(after + 1, 25))
    watch.close()


def test_watch_of_an_empty_session_replays_nothing():
    watch = open_stream(Rpc(stream_door()), "murmur.WatchSession", {}, {"Last-Event-ID": "41"})
    watch.wait_heartbeat()
    assert shape(watch.events) == ["connection-ack"]
    watch.close()


def test_a_slow_reader_gets_lagged_then_the_newest_events():
    door = stream_door(stream={"replay_events": 64, "reader_queue": 4})
    rpc = Rpc(door)
    watch = open_stream(rpc, "murmur.WatchSession", {})
    assert watch.next().frame_name == "connection-ack"
    run(rpc, "/stream 20")                        # 24 events while the reader reads nothing
    events = watch.until(lambda e: e.id == 24)
    assert events[0].id is None and events[0].frame == {"frame": "lagged", "missed": 20}
    assert [e.id for e in events[1:]] == [21, 22, 23, 24]
    run(rpc, "hi")                                # a reader that keeps up loses nothing
    assert [e.id for e in watch.until(lambda e: e.id == 28)] == [25, 26, 27, 28]
    assert len(door.session.ring._slots) == 64
    watch.close()


def test_heartbeat_on_an_idle_stream():
    door = stream_door(stream={"heartbeat_secs": 0.05})
    watch = open_stream(Rpc(door), "murmur.WatchSession", {})
    watch.wait_heartbeat(DEADLINE)
    watch.wait_heartbeat(DEADLINE)
    assert watch.heartbeats == 2 and shape(watch.events) == ["connection-ack"]
    watch.close()


@pytest.mark.parametrize("method", ["SendStreamingMessage", "SubscribeToTask"])
def test_a_door_that_starts_no_task_streams_none(method):
    door = stream_door(lifecycle={"task_acceptance": "none"})
    response = Rpc(door).call(method, msg("hi") if method == "SendStreamingMessage"
                              else {"id": "tsk_x"}, EXT)
    assert response.mimetype == "application/json"
    assert response.get_json()["error"]["code"] == -32004


# --- murmur.StopSession ----------------------------------------------------------

def test_stop_session_cancels_every_live_task_and_ends_their_streams():
    door = stream_door(lifecycle={"task_acceptance": "queue", "queue_depth": 3},
                       capabilities={"shell": {"allow": ["sleep"]}})
    rpc = Rpc(door)
    background = run(rpc, "/background sleep 30")
    streams = [open_stream(rpc, "SendStreamingMessage", msg("/sleep 30"), EXT)
               for _ in range(3)]
    ids = [stream.next().task_id for stream in streams]
    response = rpc.call("murmur.StopSession", {})
    assert response.headers["A2A-Extensions"] == DOOR_URI
    result = response.get_json()["result"]
    assert list(result) == ["canceled", "residue", "session_id"]
    assert result["canceled"] == sorted(ids) and result["session_id"] == door.session.id
    [item] = result["residue"]
    assert item["kind"] == "detached_shell" and item["command"] == "sleep 30"
    assert background["id"] not in result["canceled"]
    for stream in streams:
        events = stream.rest()
        assert events[-1].kind == "statusUpdate" and events[-1].state == CANCELED
    assert rpc.result("murmur.StopSession", {})["canceled"] == []
    assert run(rpc, "still serving")["status"]["state"] == COMPLETED
    assert door.session.ring.subscribers == 0
    door.close()


# --- closing the door ------------------------------------------------------------

def test_close_writes_capsule_closed_on_every_stream_and_answers_held_requests():
    agent = GateAgent()
    door = stream_door(agent, lifecycle={"task_acceptance": "queue", "queue_depth": 2})
    rpc = Rpc(door)
    watch = open_stream(rpc, "murmur.WatchSession", {})
    task_stream = open_stream(rpc, "SendStreamingMessage", msg("/gate"), EXT)
    task_id = task_stream.next().task_id
    assert agent.started.wait(DEADLINE)
    plain = open_stream(rpc, "SubscribeToTask", {"id": task_id})
    held = {}

    def hold():
        held["task"] = Rpc(door).result("SendMessage", msg("queued behind the gate"))["task"]

    holder = threading.Thread(target=hold)
    holder.start()
    assert watch.until(lambda e: e.task_id != task_id and e.state == SUBMITTED)
    closer = threading.Thread(target=door.close)
    closer.start()
    # The test thread reads while another thread closes the door.
    assert watch.rest()[-1].frame_name == "capsule-closed"
    assert shape(task_stream.rest())[-1] == "capsule-closed"
    assert all(e.kind != "message" for e in plain.rest())
    for thread in (closer, holder):
        thread.join(DEADLINE)
        assert not thread.is_alive()
    # The queued task never started: it ends rejected, and its held request says so.
    assert held["task"]["status"]["state"] == "TASK_STATE_REJECTED"
    assert held["task"]["status"]["message"]["parts"][0]["text"] == \
        "task rejected: the session ended before this task started"
    assert door.session.ring.subscribers == 0
    agent.gate.set()


def test_a_stream_opened_after_close_ends_at_once():
    door = stream_door()
    run(Rpc(door), "hi")
    door.close()
    events = open_stream(Rpc(door), "murmur.WatchSession", {}).rest()
    assert shape(events) == ["connection-ack", "status/TASK_STATE_SUBMITTED",
                             "status/TASK_STATE_WORKING", "artifact/response",
                             "status/TASK_STATE_COMPLETED", "capsule-closed"]
    assert door.session.ring.subscribers == 0


# --- disconnects -----------------------------------------------------------------

def test_a_hundred_clients_that_leave_mid_stream_leave_no_subscriber():
    door = stream_door()
    rpc = Rpc(door)
    task = rpc.result("SendMessage", msg("/ask wait"))["task"]
    watches = [open_stream(rpc, "murmur.WatchSession", {}) for _ in range(60)]
    subs = [open_stream(rpc, "SubscribeToTask", {"id": task["id"]}, EXT) for _ in range(40)]
    ring = door.session.ring
    assert ring.subscribers == 100
    for stream in watches[::2]:
        stream.until(lambda e: e.state == INPUT_REQUIRED)        # mid-replay
    for stream in subs[::2]:
        stream.next()
    for stream in watches + subs:
        stream.close()
    assert ring.subscribers == 0
    rpc.result("SendMessage", msg("done", taskId=task["id"]))
    assert ring.subscribers == 0
    door.close()


@pytest.mark.parametrize("headers", [None, {"A2A-Extensions": STREAM_URI}],
                         ids=["plain", "extension"])
def test_a_task_stream_ends_even_when_its_terminal_event_was_lost(headers):
    door = stream_door(stream={"replay_events": 16, "reader_queue": 4},
                       lifecycle={"task_acceptance": "queue", "queue_depth": 4})
    rpc = Rpc(door)
    task = rpc.result("SendMessage", msg("/ask Which?"))["task"]
    stream = open_stream(rpc, "SubscribeToTask", {"id": task["id"]}, headers)
    rpc.result("SendMessage", msg("red", taskId=task["id"]))    # completes, unread
    run(rpc, "/stream 40")                                       # the ring wraps past it
    events = stream.rest()
    assert stream.ended
    # Its terminal status fell out of the reader's queue: the stream ends with the
    # ended task, unnumbered, as GetTask answers it.
    assert events[-1].kind == "task" and events[-1].id is None
    assert events[-1].body == rpc.result("GetTask", {"id": task["id"]})
    assert events[-1].body["status"]["state"] == COMPLETED
    assert door.session.ring.subscribers == 0
