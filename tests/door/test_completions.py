"""Completions (step 9): -31001, -32601, -31002, and delivery to the waiting task."""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi import create_app
from murmur_wsgi.uris import DOOR_URI
from tests.conftest import Rpc
from tests.tasks_util import NOW, send_params, wait_state

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


class Delegator:
    """An agent that opens a delegation, reports its id, and answers with the completion."""

    def __init__(self):
        self.opened = threading.Event()
        self.delegation_id = None

    def __call__(self, ctx):
        self.delegation_id = ctx.delegate()
        self.opened.set()
        payload = ctx.wait_completion(self.delegation_id, timeout=30)
        return f"child said: {payload}"


@pytest.fixture
def delegating():
    agent = Delegator()
    door = create_app({"name": "parent", "version": "0.1.0"}, agent=agent)
    yield Rpc(door), agent
    door.close()


def completion_headers(door, delegation_id, session_id=None, trust="trusted"):
    return {"x-murmur-task-origin": "completion", "x-murmur-task-trust": trust,
            "x-murmur-completion-session": door.session.id if session_id is None else session_id,
            "x-murmur-delegation-id": delegation_id}


def test_a_completion_reaches_the_waiting_task(delegating):
    rpc, agent = delegating
    task = rpc.result("SendMessage", send_params("delegate", NOW))["task"]
    assert agent.opened.wait(10)
    dlg = agent.delegation_id
    assert dlg.startswith("dlg_")
    headers = completion_headers(rpc.door, dlg)
    answer = rpc.result("SendMessage", send_params("status: ok"), headers)
    assert answer == {"message": {
        "messageId": f"msg_{dlg}_received", "contextId": task["contextId"], "role": "ROLE_AGENT",
        "parts": [{"data": {"delegation_id": dlg, "received": True},
                   "mediaType": "application/json"}]}}
    done = wait_state(rpc.door, task["id"], "TASK_STATE_COMPLETED")
    assert done.response == "child said: status: ok"
    # A completion for a delegation already answered is not awaited any more.
    error = rpc.error("SendMessage", send_params("again"), headers)
    assert error == {"code": -31002,
                     "message": f"no task in this session is waiting for delegation {dlg}",
                     "data": [{"@type": ERROR_INFO, "reason": "COMPLETION_NOT_AWAITED",
                               "domain": "murmur.nexus", "metadata": {"delegationId": dlg}}]}


def test_a_completion_whose_metadata_holds_the_door_uri_names_it_in_a2a_extensions(delegating):
    # The reference's echo table: a SendMessage whose message.metadata holds the door URI
    # is answered with it in A2A-Extensions, and a completion is a SendMessage. Its answer
    # carried no A2A-Extensions; its refusal still carries none.
    rpc, agent = delegating
    rpc.result("SendMessage", send_params("delegate", NOW))
    assert agent.opened.wait(10)
    headers = completion_headers(rpc.door, agent.delegation_id)
    params = send_params("status: ok", metadata={DOOR_URI: {}})
    answer = rpc.call("SendMessage", params, headers)
    assert answer.headers["A2A-Extensions"] == DOOR_URI
    assert "message" in answer.get_json()["result"]
    refused = rpc.call("SendMessage", params, headers)           # no longer awaited
    assert refused.get_json()["error"]["code"] == -31002
    assert "A2A-Extensions" not in refused.headers


def test_an_untrusted_completion_is_fenced(delegating):
    rpc, agent = delegating
    task = rpc.result("SendMessage", send_params("delegate", NOW))["task"]
    assert agent.opened.wait(10)
    rpc.result("SendMessage", send_params("hi"),
               completion_headers(rpc.door, agent.delegation_id, trust="untrusted"))
    done = wait_state(rpc.door, task["id"], "TASK_STATE_COMPLETED")
    assert done.response == ("child said: <untrusted-content source=task:completion>\nhi\n"
                             "</untrusted-content>")


def test_misaddressed_completion_names_the_session_it_named(rpc):
    error = rpc.error("SendMessage", send_params("x"),
                      completion_headers(rpc.door, "dlg_x", session_id="ses_other"))
    assert error["code"] == -31001
    assert error["data"][0]["reason"] == "COMPLETION_MISADDRESSED"
    assert error["data"][0]["domain"] == "murmur.nexus"
    assert error["data"][0]["metadata"] == {"addressedSession": "ses_other"}
    assert rpc.door.session.id not in str(error)


def test_completion_without_a_session_header(rpc):
    headers = completion_headers(rpc.door, "dlg_x")
    del headers["x-murmur-completion-session"]
    error = rpc.error("SendMessage", send_params("x"), headers)
    assert error["data"][0]["metadata"] == {"addressedSession": ""}


def test_completion_with_another_method_is_method_not_found(rpc):
    error = rpc.error("GetTask", {"id": "x"}, completion_headers(rpc.door, "dlg_x"))
    assert error == {"code": -32601, "message": "Method not found"}


def test_completion_naming_no_delegation(rpc):
    headers = completion_headers(rpc.door, "")
    error = rpc.error("SendMessage", send_params("x"), headers)
    assert error["code"] == -31002
    assert error["data"][0]["metadata"] == {}


def test_completion_of_an_unknown_delegation_is_refused_before_params(rpc):
    error = rpc.error("SendMessage", "not an object", completion_headers(rpc.door, "dlg_nope"))
    assert error["code"] == -31002
    assert error["data"][0]["metadata"] == {"delegationId": "dlg_nope"}


def test_a_canceled_task_no_longer_awaits(delegating):
    rpc, agent = delegating
    task = rpc.result("SendMessage", send_params("delegate", NOW))["task"]
    assert agent.opened.wait(10)
    rpc.result("CancelTask", {"id": task["id"]})
    assert rpc.door.session.manager.wait_agent_returned(task["id"], 10)
    error = rpc.error("SendMessage", send_params("late"),
                      completion_headers(rpc.door, agent.delegation_id))
    assert error["code"] == -31002


def test_a_closing_session_no_longer_awaits(delegating):
    rpc, agent = delegating
    rpc.result("SendMessage", send_params("delegate", NOW))
    assert agent.opened.wait(10)
    rpc.door.session.manager.close()
    assert not rpc.door.session.delegations.awaits(agent.delegation_id)


def test_a_completion_is_held_to_limits_data_text_bytes():
    # A completion's data parts were rendered for the agent without the bound a message's
    # have: 2 MiB of nested arrays (the bench's data-deep) was delivered as ~113 MiB of
    # text after ~5 s of CPU, under a limit of 1 MiB. Now it is refused as a message is.
    agent = Delegator()
    door = create_app({"name": "parent", "version": "0.1.0",
                       "limits": {"data_text_bytes": 200}}, agent=agent)
    try:
        rpc = Rpc(door)
        task = rpc.result("SendMessage", send_params("delegate", NOW))["task"]
        assert agent.opened.wait(10)
        headers = completion_headers(door, agent.delegation_id)
        params = send_params("rows")
        params["message"]["parts"].append({"data": [[[i]] for i in range(20)]})
        error = rpc.error("SendMessage", params, headers)
        assert error == {"code": -32602, "message": (
            "Invalid params: message.parts[1] is data that, pretty-printed for the agent, "
            "makes the message's data parts more than limits.data_text_bytes (200) bytes")}
        assert door.session.store.get(task["id"]).state == "TASK_STATE_WORKING"
        # Refused, nothing was delivered: the task still awaits, and a completion within
        # the bound reaches it.
        params["message"]["parts"][1] = {"data": [1, 2]}
        assert "message" in rpc.result("SendMessage", params, headers)
        done = wait_state(door, task["id"], "TASK_STATE_COMPLETED")
        assert done.response == "child said: rows\n```data\n[\n  1,\n  2\n]\n```"
    finally:
        door.close()


def test_a_completion_naming_a_tenant_is_refused_and_delivers_nothing(delegating):
    # "A request to any method the door serves ... whose params.tenant is present and is
    # anything but "" is answered -32602 at step 13, before anything starts": a completion
    # is a SendMessage, whose params and message the door reads like any other's.
    rpc, agent = delegating
    task = rpc.result("SendMessage", send_params("delegate", NOW))["task"]
    assert agent.opened.wait(10)
    headers = completion_headers(rpc.door, agent.delegation_id)
    params = dict(send_params("status: ok"), tenant="acme")
    response = rpc.call("SendMessage", params, headers, request_id=3)
    assert response.data == (b'{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":'
                             b'"Invalid params: tenant \\"acme\\" names a tenant; this agent '
                             b'serves no tenants, so omit tenant"}}')
    assert rpc.door.session.delegations.awaits(agent.delegation_id)
    assert rpc.door.session.store.get(task["id"]).state == "TASK_STATE_WORKING"
    # "", the unset value, is served as if the member were absent.
    assert "message" in rpc.result("SendMessage", dict(params, tenant=""), headers)
    assert wait_state(rpc.door, task["id"], "TASK_STATE_COMPLETED").response == \
        "child said: status: ok"
