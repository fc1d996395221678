""""Continuing a task": how a message is routed by its taskId, every row at the wire.

The rows tests/door/test_tasks.py leaves open: a queued (TASK_STATE_SUBMITTED) task, the
exact -32001 of a never-held id, the exact refusals of an ended task and of a reply in
another context, a message naming no task while one waits for input, and a reply taken
whatever the door's capacity.
"""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.uris import DOOR_URI, STREAM_URI
from tests.tasks_util import NOW, send_params, wait_state

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def unsupported(task_id, state, why):
    """The -32004 refusal of a message naming a task in ``state``, exactly."""
    return {"code": -32004, "message": f"Task {task_id} {why}",
            "data": [{"@type": ERROR_INFO, "reason": "UNSUPPORTED_OPERATION",
                      "domain": "a2a-protocol.org",
                      "metadata": {"taskId": task_id, "state": state}}]}


def test_a_message_to_a_queued_task_is_refused_naming_its_state(queue_rpc):
    running = queue_rpc.result("SendMessage", send_params("/sleep 30", NOW))["task"]
    queued = queue_rpc.result("SendMessage", send_params("later", NOW))["task"]
    assert queued["status"]["state"] == "TASK_STATE_SUBMITTED"
    error = queue_rpc.error("SendMessage", send_params("more", taskId=queued["id"]))
    assert error == unsupported(queued["id"], "TASK_STATE_SUBMITTED",
                                "is TASK_STATE_SUBMITTED; a task takes a message only while "
                                "it waits in TASK_STATE_INPUT_REQUIRED")
    assert queue_rpc.result("GetTask", {"id": queued["id"]}) == queued
    queue_rpc.result("CancelTask", {"id": running["id"]})


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
def test_a_message_naming_a_task_never_held_is_task_not_found(rpc, method):
    response = rpc.call(method, send_params("x", taskId="tsk_never"), request_id=4)
    assert response.headers["Content-Type"] == "application/json"
    assert response.get_json() == {"jsonrpc": "2.0", "id": 4, "error": {
        "code": -32001, "message": "Task not found",
        "data": [{"@type": ERROR_INFO, "reason": "TASK_NOT_FOUND",
                  "domain": "a2a-protocol.org", "metadata": {"taskId": "tsk_never"}}]}}
    assert len(rpc.door.session.store) == 0


def test_a_message_naming_no_task_never_reaches_the_waiting_one(queue_rpc):
    waiting = queue_rpc.result("SendMessage", send_params("/ask Which branch?"))["task"]
    for task_id in (None, ""):
        extra = {} if task_id is None else {"taskId": task_id}
        new = queue_rpc.result("SendMessage", send_params("main", NOW,
                                                          contextId=waiting["contextId"],
                                                          **extra))["task"]
        assert new["id"] != waiting["id"]
        assert queue_rpc.result("GetTask", {"id": waiting["id"]}) == waiting
        queue_rpc.result("CancelTask", {"id": new["id"]})


def test_a_reply_is_taken_whatever_the_doors_capacity(queue_rpc):
    waiting = queue_rpc.result("SendMessage", send_params("/ask Which branch?"))["task"]
    queued = queue_rpc.result("SendMessage", send_params("second", NOW))["task"]
    busy = queue_rpc.result("SendMessage", send_params("third", NOW))["task"]
    assert [queued["status"]["state"], busy["status"]["state"]] == [
        "TASK_STATE_SUBMITTED", "TASK_STATE_REJECTED"]              # the door has no room
    reply = queue_rpc.result("SendMessage", send_params("main", NOW, taskId=waiting["id"]))
    assert reply["task"]["id"] == waiting["id"]
    assert reply["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert wait_state(queue_rpc.door, waiting["id"], "TASK_STATE_COMPLETED").response == "main"
    assert wait_state(queue_rpc.door, queued["id"], "TASK_STATE_COMPLETED").response == "second"


def _ended(rpc):
    task = rpc.result("SendMessage", send_params("done"))["task"]
    return task, {}, unsupported(task["id"], "TASK_STATE_COMPLETED",
                                 "has ended in TASK_STATE_COMPLETED; send a new message "
                                 "without taskId, in the same contextId, to start a new task")


def _waiting_in_another_context(rpc):
    task = rpc.result("SendMessage", send_params("/ask Which branch?"))["task"]
    return task, {"contextId": "ctx_other"}, {
        "code": -32602,
        "message": f"Invalid params: message.contextId ctx_other is not the context of task "
                   f"{task['id']}, which waits in {task['contextId']}"}


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
@pytest.mark.parametrize("case", [pytest.param(_ended, id="ended"),
                                  pytest.param(_waiting_in_another_context, id="other-context")])
def test_a_routing_refusal_is_one_exact_body_naming_no_extension(queue_rpc, method, case):
    # The message holds the door URI and the request asks for the stream extension: the
    # refusal is still one JSON body, key by key, with no A2A-Extensions, and the task is
    # left as it was.
    task, extra, error = case(queue_rpc)
    params = send_params("more", taskId=task["id"], metadata={DOOR_URI: {}}, **extra)
    response = queue_rpc.call(method, params, {"A2A-Extensions": STREAM_URI}, request_id=5)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert "A2A-Extensions" not in response.headers
    assert response.data == json.dumps({"jsonrpc": "2.0", "id": 5, "error": error},
                                       separators=(",", ":")).encode()
    assert queue_rpc.result("GetTask", {"id": task["id"]}) == task
