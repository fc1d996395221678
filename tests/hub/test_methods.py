"""The "Methods" table at the wire: every row on one hub."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub

from tests.hub.agents import gate
from tests.hub.conftest import HubClient, hub_config, send_params, sse_events, wait_until

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

USAGE_ZERO = {"usage": {"input_tokens": 0, "output_tokens": 0, "credits": 0.0,
                        "credits_micros": 0, "pricing_status": "priced"}}


def _json(part):
    return {"data": part, "mediaType": "application/json"}


@pytest.mark.parametrize("value", [None, "", "1.1", "1.0.1", "0.3", "1", "1.0, 1.0", "v1.0"])
def test_version_must_be_exactly_1_0(rpc, value):
    response = rpc.call("GetTask", {"id": "x"}, headers={"A2A-Version": value})
    error = response.get_json()["error"]
    assert error["code"] == -32009
    assert error["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert response.headers["Cache-Control"] == "private, no-store"


def test_blocking_send(rpc):
    params = send_params("hello, hub", context_id=None)
    task = rpc.result("SendMessage", params)["task"]
    message = params["message"]
    assert task == {
        "id": task["id"], "contextId": task["contextId"],
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": task["status"]["timestamp"]},
        "artifacts": [{"artifactId": "answer", "name": "answer", "parts": [
            {"text": "hello, hub", "mediaType": "text/plain"}, _json(USAGE_ZERO["usage"]
                                                                   and USAGE_ZERO)]}],
        "history": [{"messageId": message["messageId"], "contextId": task["contextId"],
                     "taskId": task["id"], "role": "ROLE_USER", "parts": [{"text": "hello, hub"}]}],
    }
    assert rpc.result("GetTask", {"id": task["id"]}) == task


def test_data_returned_is_a_data_part(rpc):
    task = rpc.result("SendMessage", send_params("x"), agent="data")["task"]
    assert task["artifacts"][0]["parts"][:2] == [{"text": "", "mediaType": "text/plain"},
                                                _json({"answer": 42})]


def test_return_immediately(hub, rpc):
    rpc.agent = "held"
    task = rpc.send("g-immediate", configuration={"returnImmediately": True})
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert "artifacts" not in task
    wait_until(lambda: rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_WORKING")
    gate("g-immediate").set()
    wait_until(lambda: rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_COMPLETED")
    done = rpc.result("GetTask", {"id": task["id"]})
    assert done["artifacts"][0]["parts"][0]["text"] == "released"


def test_refused_admission_is_rejected_and_nothing_runs(hub):
    client = HubClient(hub, "echo", {"X-API-Key": "mhk_tenant-b-key"})
    task = client.send("let me into the beta", configuration={"returnImmediately": True})
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert task["status"]["message"]["parts"] == [
        {"text": "beta is closed for this tenant", "mediaType": "text/plain"}]
    assert "artifacts" not in task
    assert hub.runs.in_flight() == [] and hub.admission.running("globex") == 0
    assert client.result("GetTask", {"id": task["id"]})["status"]["state"] == \
        "TASK_STATE_REJECTED"


def test_get_task_history_length(rpc):
    task = rpc.send("one")
    assert len(rpc.result("GetTask", {"id": task["id"], "historyLength": 1})["history"]) == 1
    assert "history" not in rpc.result("GetTask", {"id": task["id"], "historyLength": 0})
    assert rpc.error("GetTask", {"id": task["id"], "historyLength": -1})["code"] == -32602
    assert rpc.error("GetTask", {"id": task["id"], "historyLength": "2"})["code"] == -32602
    sent = rpc.send("two", configuration={"historyLength": 0})
    assert "history" not in sent


@pytest.mark.parametrize("params", [{}, {"id": ""}, {"id": 5}])
def test_get_task_needs_an_id(rpc, params):
    assert rpc.error("GetTask", params)["code"] == -32602


def test_unknown_task(rpc):
    error = rpc.error("GetTask", {"id": "no-such-task"})
    assert error["code"] == -32001 and error["data"][0]["metadata"] == {"taskId": "no-such-task"}


def test_continuing_a_task_is_unsupported(rpc):
    task = rpc.send("first")
    params = send_params("again")
    params["message"]["taskId"] = task["id"]
    error = rpc.error("SendMessage", params)
    assert error["code"] == -32004
    assert rpc.error("SendStreamingMessage", params)["code"] == -32004


@pytest.mark.parametrize("method", ["CreateTaskPushNotificationConfig",
                                    "GetTaskPushNotificationConfig",
                                    "ListTaskPushNotificationConfigs",
                                    "DeleteTaskPushNotificationConfig"])
def test_push_methods_unsupported(rpc, method):
    assert rpc.error(method, {"taskId": "x"})["code"] == -32004


def test_push_config_on_a_message_is_unsupported(rpc):
    params = send_params("x", configuration={"taskPushNotificationConfig": {
        "url": "https://x.io/h"}})
    assert rpc.error("SendMessage", params)["code"] == -32004


def test_unknown_method(rpc):
    assert rpc.error("tasks/get", {})["code"] == -32601
    assert rpc.error("GetExtendedAgentCard", {})["code"] == -32007


@pytest.mark.parametrize("body, code, echo", [
    (b"{not json", -32700, None), (b"[]", -32600, None),
    (b'{"jsonrpc":"2.0","id":7}', -32600, 7), (b'{"jsonrpc":"1.0","id":7,"method":"GetTask"}',
                                               -32600, 7),
    (b'{"jsonrpc":"2.0","id":7,"method":"GetTask","params":[1]}', -32602, 7),
])
def test_envelope(rpc, body, code, echo):
    response = rpc.post(body)
    assert response.status_code == 200
    payload = response.get_json()
    assert payload["error"]["code"] == code and payload["id"] == echo


# --- SendStreamingMessage ------------------------------------------------------


def test_streaming_send_tokens_then_usage_then_final(rpc):
    response = rpc.call("SendStreamingMessage", send_params("alpha beta gamma"), agent="tokens")
    assert response.headers["Content-Type"] == "text/event-stream"
    assert response.headers["Cache-Control"] == "private, no-store"
    events = [e["result"] for e in sse_events(response)]
    task = events[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert events[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
    chunks = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    assert [(c["append"], c["lastChunk"], c["artifact"]["parts"]) for c in chunks[:3]] == [
        (False, False, [{"text": "alpha", "mediaType": "text/plain"}]),
        (True, False, [{"text": " beta", "mediaType": "text/plain"}]),
        (True, False, [{"text": " gamma", "mediaType": "text/plain"}])]
    usage = {"usage": {"input_tokens": 1500, "output_tokens": 500, "cached_tokens": 100,
                       "credits": 0.0025, "credits_micros": 2500, "pricing_status": "priced",
                       "model": "gpt-4o"}}
    assert chunks[3] == {"taskId": task["id"], "contextId": task["contextId"],
                         "artifact": {"artifactId": "answer", "name": "answer",
                                      "parts": [_json(usage)]},
                         "append": True, "lastChunk": True}
    assert len(chunks) == 4
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(events) == 7
    got = rpc.result("GetTask", {"id": task["id"]}, agent="tokens")
    assert got["artifacts"][0]["parts"] == [{"text": "alpha beta gamma",
                                             "mediaType": "text/plain"}, _json(usage)]


def test_streaming_last_chunk_replaces_when_the_answer_differs(rpc):
    response = rpc.call("SendStreamingMessage", send_params("! quiet words"), agent="tokens")
    events = [e["result"] for e in sse_events(response)]
    last = [e["artifactUpdate"] for e in events if "artifactUpdate" in e][-1]
    assert last["append"] is False and last["lastChunk"] is True
    assert last["artifact"]["parts"][0] == {"text": "QUIET WORDS", "mediaType": "text/plain"}
    assert "usage" in last["artifact"]["parts"][1]["data"]


def test_streaming_tool_frames_not_forwarded():
    hub = create_hub(hub_config())
    client = HubClient(hub, "echo")
    for text in ("/tool search", "/think about it"):
        events = [e["result"] for e in sse_events(client.call("SendStreamingMessage",
                                                              send_params(text)))]
        kinds = [next(iter(e)) for e in events]
        assert kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"], kinds
        assert all("metadata" not in e.get("artifactUpdate", {}) for e in events)
    hub.close(0)


def test_streaming_failure(rpc):
    events = [e["result"] for e in sse_events(rpc.call("SendStreamingMessage",
                                                       send_params("x"), agent="fails"))]
    assert [next(iter(e)) for e in events] == ["task", "statusUpdate", "statusUpdate"]
    status = events[-1]["statusUpdate"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"][0]["text"] == "public reason"


def test_streaming_rejected_is_one_task_event(hub):
    client = HubClient(hub, "echo", {"X-API-Key": "mhk_tenant-b-key"})
    events = sse_events(client.call("SendStreamingMessage", send_params("beta please")))
    assert len(events) == 1
    assert events[0]["result"]["task"]["status"]["state"] == "TASK_STATE_REJECTED"


def test_named_artifacts_and_a_status_message(rpc):
    events = [e["result"] for e in sse_events(rpc.call("SendStreamingMessage", send_params("x"),
                                                       agent="named"))]
    updates = [(u["artifact"]["artifactId"], u["append"], u["lastChunk"],
                [p.get("text") for p in u["artifact"]["parts"]])
               for u in (e["artifactUpdate"] for e in events if "artifactUpdate" in e)]
    assert updates == [("notes", False, True, ["a note"]), ("log", False, False, ["line 1"]),
                       ("log", True, False, ["line 2"]), ("log", True, True, []),
                       ("answer", False, True, ["with artifacts", None])]
    final = events[-1]["statusUpdate"]["status"]
    assert final["state"] == "TASK_STATE_COMPLETED"
    assert final["message"]["parts"][0]["text"] == "all done"
    task = rpc.result("GetTask", {"id": events[0]["task"]["id"]}, agent="named")
    assert [(a["artifactId"], [p.get("text") for p in a["parts"]]) for a in task["artifacts"]] \
        == [("notes", ["a note"]), ("log", ["line 1", "line 2"]),
            ("answer", ["with artifacts", None])]


def test_an_agent_that_rejects(rpc):
    task = rpc.send("x", agent="rejects")
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert task["status"]["message"]["parts"][0]["text"] == "not for this agent"
    assert "artifacts" not in task


def test_raw_part_must_be_base64(rpc):
    error = rpc.error("SendMessage", send_params("", parts=[{"text": "x"}, {"raw": "%%%"}]))
    assert error["code"] == -32602 and "base64" in error["message"]


def test_an_artifact_stream_left_open_is_closed_as_the_agent_returns(rpc):
    events = [e["result"] for e in sse_events(rpc.call("SendStreamingMessage", send_params("x"),
                                                       agent="open"))]
    drafts = [(u["append"], u["lastChunk"], u["artifact"]["parts"])
              for u in (e["artifactUpdate"] for e in events if "artifactUpdate" in e)
              if u["artifact"]["artifactId"] == "draft"]
    assert drafts == [(False, False, [{"text": "half", "mediaType": "text/plain"}]),
                      (True, True, [])]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_run_that_reported_no_usage_has_the_usage_part_of_an_empty_report():
    """A run makes its RunUsage at its first report: none is read as an empty one."""
    from murmur_wsgi.agents.usage import RunUsage
    from murmur_wsgi.hub.usage import usage_part
    from murmur_wsgi.wire.encode import compact_utf8

    pricing = {"m": {"input": 1, "output": 2, "cached": None}}
    assert compact_utf8(usage_part(None, pricing)) == compact_utf8(
        usage_part(RunUsage(), pricing)) == compact_utf8(USAGE_ZERO)
