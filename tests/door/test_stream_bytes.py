"""Streams byte for byte: the reference's murmur.WatchSession reconnect, and the statuses a
task's stream carries against GetTask's.

The reference writes "the first two events of a reconnect from id 41": an unnumbered
connection-ack, then event 42, a WORKING status carrying "inference turn 2". Its ids,
timestamps and event number are the session's own; everything else — every key, its
order, the SSE lines — is compared as the reference writes it.
"""
from __future__ import annotations

import re

from murmur_wsgi.uris import DOOR_URI, STREAM_URI
from tests.conftest import Rpc
from tests.sse_util import COMPLETED, EXT, INPUT_REQUIRED, is_state, msg, open_stream, stream_door
from tests.tasks_util import DEADLINE

# Copied from murmur-door.txt, "murmur.WatchSession".
RECONNECT = (
    'data: {"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"msg_01a131fc15437521b334719530864c4f","role":"ROLE_AGENT","parts":[{"mediaType":"text/plain","text":"connection-ack"}],"metadata":{"https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1":{"frame":"connection-ack","role":"observer","conversationMode":"stateless"}}}}}\n'  # noqa: E501
    "\n"
    "id: 42\n"
    'data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"tsk_0199c4e2f1b7712a9d3e4f5061728394","contextId":"ctx_0199c4e2f1b7712a9d3e4f50617283a1","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"msg_0199c4e2f1b87a01b2c3d4e5f6071829","contextId":"ctx_0199c4e2f1b7712a9d3e4f50617283a1","taskId":"tsk_0199c4e2f1b7712a9d3e4f5061728394","role":"ROLE_AGENT","parts":[{"mediaType":"text/plain","text":"inference turn 2"}]},"timestamp":"2026-10-13T09:00:00.123Z"}}}}\n'  # noqa: E501
    "\n")
IDS = re.compile(r"\b(msg|tsk|ctx)_[0-9a-f]{32}\b")
TIMESTAMP = re.compile(r'"timestamp":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"')


def normalised(text: str, event_id: int) -> str:
    """The session's ids, timestamps and event number spelled as the reference's."""
    reference = iter(["msg_01a131fc15437521b334719530864c4f",
                      "tsk_0199c4e2f1b7712a9d3e4f5061728394",
                      "ctx_0199c4e2f1b7712a9d3e4f50617283a1",
                      "msg_0199c4e2f1b87a01b2c3d4e5f6071829"])
    names = {}

    def rename(found) -> str:
        if found.group(0) not in names:
            names[found.group(0)] = next(reference)
        return names[found.group(0)]

    text = IDS.sub(rename, text)
    text = TIMESTAMP.sub('"timestamp":"2026-10-13T09:00:00.123Z"', text)
    return text.replace(f"id: {event_id}\n", "id: 42\n")


def test_a_watch_reconnect_writes_the_references_first_two_events():
    def agent(ctx):
        ctx.progress("inference turn 2")
        return ctx.ask("Which colour?").text

    door = stream_door(agent)
    rpc = Rpc(door)
    task = rpc.result("SendMessage", msg("go"))["task"]       # 1 SUBMITTED, 2 WORKING,
    assert task["status"]["state"] == INPUT_REQUIRED          # 3 "inference turn 2", …
    response = rpc.call("murmur.WatchSession", {}, {"Last-Event-ID": "2"}, request_id=1)
    try:
        assert response.headers["Content-Type"] == "text/event-stream"
        assert response.headers["Cache-Control"] == "no-cache"
        assert response.headers["A2A-Extensions"] == f"{DOOR_URI}, {STREAM_URI}"
        assert "Content-Length" not in response.headers
        first = next(iter(response.response)).decode()     # the opening and the replay
        head = "\n\n".join(first.split("\n\n")[:2]) + "\n\n"
        assert normalised(head, 3) == RECONNECT
    finally:
        response.close()
        door.close()


def test_a_tasks_stream_opens_and_ends_with_the_task_as_get_task_reports_it():
    rpc = Rpc(stream_door())
    stream = open_stream(rpc, "SendStreamingMessage", msg("/ask Which colour?"), EXT)
    opening = stream.next()
    paused = stream.until(is_state(INPUT_REQUIRED))[-1]
    task_id = opening.task_id
    assert opening.body == {"id": task_id, "contextId": opening.body["contextId"],
                            "status": {"state": "TASK_STATE_SUBMITTED",
                                       "timestamp": opening.body["status"]["timestamp"]}}
    assert paused.body["status"] == rpc.result("GetTask", {"id": task_id})["status"]
    rpc.result("SendMessage", msg("blue", taskId=task_id))
    events = stream.rest(DEADLINE)
    assert events[-1].state == COMPLETED
    assert events[-1].body == {"taskId": task_id, "contextId": opening.body["contextId"],
                               "status": rpc.result("GetTask", {"id": task_id})["status"]}
    rpc.door.close()
