"""The rules around a run: idempotency, request limits, conversation, admission, timeout,
states and run usage."""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.hub import create_hub

from tests.hub.agents import SEEN, gate
from tests.hub.conftest import (KEY_B, HubClient, close_hub, hub_config, send_params, sse_events,
                                streaming, wait_until)


def _usage(task):
    return task["artifacts"][0]["parts"][-1]["data"]["usage"]


# --- idempotency ----------------------------------------------------------------


def test_repeated_message_id_returns_the_existing_task(rpc):
    first = rpc.send("once", message_id="same-id")
    again = rpc.send("twice?", message_id="same-id")
    assert again == first
    assert rpc.result("ListTasks", {})["totalSize"] == 1
    # Streamed, the repeat replays the existing task.
    events = [e["result"] for e in sse_events(rpc.call(
        "SendStreamingMessage", send_params("thrice?", message_id="same-id")))]
    assert events[0]["task"]["id"] == first["id"]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_message_ids_are_per_tenant_and_agent(hub, rpc):
    a = rpc.send("x", message_id="shared")
    b = rpc.result("SendMessage", send_params("x", message_id="shared"), agent="tokens")["task"]
    c = HubClient(hub, "echo", {"X-API-Key": KEY_B}).send("x", message_id="shared")
    assert len({a["id"], b["id"], c["id"]}) == 3


def test_repeat_while_the_first_has_no_task_yet(hub, rpc):
    hub.store.claim_message("acme", "echo", "racing")     # the first is being started
    for method in ("SendMessage", "SendStreamingMessage"):
        assert rpc.error(method, send_params("x", message_id="racing")) == {
            "code": -32600, "message": "a message with this messageId is still being "
                                       "started; ask again in a moment"}


def test_repeat_while_running_returns_the_task_as_it_stands(rpc):
    rpc.agent = "held"
    first = rpc.send("g-repeat", message_id="held-once",
                     configuration={"returnImmediately": True})
    wait_until(lambda: rpc.result("GetTask", {"id": first["id"]})["status"]["state"]
               == "TASK_STATE_WORKING")
    again = rpc.send("g-repeat", message_id="held-once")
    assert again["id"] == first["id"] and again["status"]["state"] == "TASK_STATE_WORKING"
    gate("g-repeat").set()


def test_a_refused_admission_frees_the_message_id(hub):
    client = HubClient(hub, "echo", {"X-API-Key": KEY_B})
    refused = client.send("beta", message_id="retry-me")
    assert refused["status"]["state"] == "TASK_STATE_REJECTED"
    # NOTE: the hook refuses on the text; a retry is a new admission.
    hub.admission._hooks.clear()
    retried = client.send("beta", message_id="retry-me")
    assert retried["id"] != refused["id"]
    assert retried["status"]["state"] == "TASK_STATE_COMPLETED"


# --- request limits ---------------------------------------------------------------


def test_body_over_the_limit_is_413(rpc):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                       "params": send_params("x" * (1024 ** 2))})
    response = rpc.post(body)
    assert response.status_code == 413
    assert response.get_json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "the JSON-RPC body is larger than 1048576 bytes"}}
    assert response.headers["Cache-Control"] == "private, no-store"
    assert rpc.result("ListTasks", {})["totalSize"] == 0


def test_body_at_the_limit_is_read(hub):
    hub = create_hub(hub_config(limits={"max_body_bytes": 300}))
    client = HubClient(hub)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})
    body = body[:-1] + " " * (300 - len(body)) + "}"
    assert len(body) == 300
    assert client.post(body).get_json()["error"]["code"] == -32001
    assert client.post(body + " ").status_code == 413
    hub.close(0)


NO_TEXT_OR_DATA = "the message needs a non-empty text or data part; this hub does not read files"


@pytest.mark.parametrize("parts, message", [
    pytest.param([], "message.parts must be a non-empty array of parts", id="no-parts"),
    pytest.param([{"text": ""}], NO_TEXT_OR_DATA, id="empty-text"),
    pytest.param([{"text": "  \n"}], NO_TEXT_OR_DATA, id="blank-text"),
    pytest.param([{"url": "https://x.io/f.pdf", "mediaType": "application/pdf"}],
                 NO_TEXT_OR_DATA, id="file-only"),
    pytest.param([{"raw": "aGk=", "mediaType": "text/plain"}], NO_TEXT_OR_DATA, id="raw-only"),
    pytest.param([{"data": None}], NO_TEXT_OR_DATA, id="null-data"),
    pytest.param([{"text": "x", "data": {}}], "message.parts[0] must be an object setting "
                 "exactly one of text, raw, url and data", id="two-kinds"),
])
def test_message_needs_text_or_data(rpc, parts, message):
    """The text: a file-only or empty message is InvalidParamsError, before admission."""
    for method in ("SendMessage", "SendStreamingMessage"):
        assert rpc.error(method, send_params("", parts=parts)) == {
            "code": -32602, "message": f"Invalid params: {message}"}
    assert rpc.result("ListTasks", {})["totalSize"] == 0


@pytest.mark.parametrize("parts", [
    pytest.param([{"data": {}}], id="empty-object"),
    pytest.param([{"data": []}], id="empty-array"),
    pytest.param([{"data": ""}], id="empty-string"),
    pytest.param([{"data": " \n"}], id="blank-string"),
    pytest.param([{"text": " "}, {"data": {}}, {"url": "https://x.io/f.pdf"}], id="all-empty"),
])
def test_an_empty_data_part_is_no_part_to_read(rpc, parts):
    """"At least one non-empty text or data part": a data part holding nothing (an empty
    object, array or string, as a blank text) does not count."""
    # NOTE: before, each was read: the agent ran on a fence holding nothing ("{}").
    for method in ("SendMessage", "SendStreamingMessage"):
        response = rpc.call(method, send_params("", parts=parts))
        assert response.get_json() == {"jsonrpc": "2.0", "id": rpc.next_id, "error": {
            "code": -32602, "message": f"Invalid params: {NO_TEXT_OR_DATA}"}}
    assert rpc.result("ListTasks", {})["totalSize"] == 0


@pytest.mark.parametrize("value", [0, False, {"k": None}, [None], "x"])
def test_a_data_part_of_a_value_is_read(rpc, value):
    task = rpc.send("", parts=[{"data": value}])
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"


def test_an_empty_data_part_beside_a_text_is_read_as_it_is(rpc):
    task = rpc.send("", parts=[{"text": "options:"}, {"data": {}}])
    assert task["artifacts"][0]["parts"][0]["text"] == "options:\n```data\n{}\n```"


def test_file_beside_text_is_ignored(rpc):
    task = rpc.send("", parts=[{"url": "https://x.io/f.pdf"}, {"text": "read this"}])
    assert task["artifacts"][0]["parts"][0]["text"] == "read this"


def test_data_part_reaches_the_agent(rpc):
    rpc.send("", parts=[{"data": {"k": 1}}], agent="echo")
    task = rpc.result("ListTasks", {"includeArtifacts": True})["tasks"][0]
    assert '"k": 1' in task["artifacts"][0]["parts"][0]["text"]


def test_context_id_at_most_256_bytes(rpc):
    assert rpc.send("x", context_id="c" * 256)["contextId"] == "c" * 256
    assert rpc.send("x", context_id="é" * 128)["contextId"] == "é" * 128     # 256 bytes
    for method in ("SendMessage", "SendStreamingMessage"):
        assert rpc.error(method, send_params("x", context_id="é" * 129)) == {
            "code": -32602, "message": "Invalid params: message.contextId is longer than 256 "
                                       "bytes"}
    assert rpc.result("ListTasks", {})["totalSize"] == 2


@pytest.mark.parametrize("params, what", [
    ({"message": "hi"}, "message must be an object"), ({}, "message is required"),
    ({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}},
     "message.messageId must be a non-empty string"),
    ({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}},
     "message.role must be ROLE_USER"),
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}],
                  "contextId": 5}}, "message.contextId must be a string"),
    ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
      "configuration": {"returnImmediately": "yes"}},
     "configuration.returnImmediately must be a boolean"),
])
def test_message_shape(rpc, params, what):
    assert rpc.error("SendMessage", params) == {"code": -32602,
                                                "message": f"Invalid params: {what}"}


# --- conversation -----------------------------------------------------------------


def test_context_continues_the_conversation(rpc):
    rpc.agent = "history"
    first = rpc.send("hello")
    assert first["artifacts"][0]["parts"][0]["text"] == "(none)"
    second = rpc.send("again", context_id=first["contextId"])
    assert second["contextId"] == first["contextId"] and second["id"] != first["id"]
    assert second["artifacts"][0]["parts"][0]["text"] == "user:hello | agent:(none)"
    third = rpc.send("third", context_id=first["contextId"])
    assert third["artifacts"][0]["parts"][0]["text"] == (
        "user:hello | agent:(none) | user:again | agent:user:hello | agent:(none)")
    # Another agent's (or tenant's) context of the same id is another conversation.
    other = rpc.send("elsewhere", context_id=first["contextId"], agent="echo")
    assert other["contextId"] == first["contextId"]
    assert rpc.send("fresh", context_id="new-one")["artifacts"][0]["parts"][0]["text"] == \
        "(none)"


def test_the_agents_turn_is_its_answer_not_its_first_named_artifact(store):
    """A task's agent turn is its ``answer`` artifact's text, listed after the named ones:
    the first artifact was read, a named one (its text, or an IndexError when it had no
    parts, which made every later message of the context -32603)."""
    config = hub_config(store=store)
    config["tenants"]["acme"]["agents"]["recalls"] = {"agent": "tests.hub.agents:recalls",
                                                      "publish": True}
    h = create_hub(config)
    try:
        client = HubClient(h, "recalls")
        first = client.send("hello")
        assert [a["artifactId"] for a in first["artifacts"]] == ["scratch", "notes", "answer"]
        second = client.send("again", context_id=first["contextId"])
        assert second["artifacts"][-1]["parts"][0]["text"] == "user:hello | agent:(none)"
        third = client.send("third", context_id=first["contextId"])
        assert third["artifacts"][-1]["parts"][0]["text"] == (
            "user:hello | agent:(none) | user:again | agent:user:hello | agent:(none)")
    finally:
        close_hub(h)


def test_the_history_holds_the_newest_turns_within_history_bytes(store):
    """limits.history_bytes bounds what a message reads of its context's earlier tasks,
    newest first: a task past it ends the turns handed to the run (it and those before)."""
    config = hub_config(store=store)
    config["tenants"]["acme"]["limits"] = {"history_bytes": "16Ki"}
    h = create_hub(config)
    try:
        client = HubClient(h, "history")
        context = client.send("small")["contextId"]
        client.send("x" * 20_000, context_id=context)           # its task alone is past 16 KiB
        after = client.send("after", context_id=context)
        assert after["artifacts"][0]["parts"][0]["text"] == "(none)"
        last = client.send("last", context_id=context)
        assert last["artifacts"][0]["parts"][0]["text"] == "user:after | agent:(none)"
    finally:
        close_hub(h)


def test_the_run_knows_its_caller_and_origin(rpc):
    SEEN.clear()
    rpc.agent = "held"
    gate("g-ctx").set()
    rpc.send("g-ctx")
    ctx = SEEN[-1]
    assert ctx.origin == "a2a"
    assert (ctx.identity.tenant, ctx.identity.subject, ctx.identity.agent) == (
        "acme", "api-key", "held")
    assert ctx.message.text_parts == ["g-ctx"] and ctx.message.task_id is not None
    assert ctx.caller == "acme" and ctx.owner == "acme"


# --- admission ----------------------------------------------------------------------


def test_concurrency_limit(hub):
    client = HubClient(hub, "held", {"X-API-Key": KEY_B})        # globex: concurrency 1
    first = client.send("g-conc", configuration={"returnImmediately": True})
    second = client.send("g-conc", configuration={"returnImmediately": True})
    assert first["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert second["status"]["state"] == "TASK_STATE_REJECTED"
    assert second["status"]["message"]["parts"][0]["text"] == (
        "concurrency limit reached: 1 runs at once for this tenant")
    gate("g-conc").set()
    wait_until(lambda: hub.admission.running("globex") == 0)
    assert client.send("g-conc")["status"]["state"] == "TASK_STATE_COMPLETED"


def test_rate_limit(hub):
    client = HubClient(hub, "echo", {"X-API-Key": KEY_B})        # globex: 3 per minute
    states = [client.send(f"n{i}")["status"]["state"] for i in range(4)]
    assert states == ["TASK_STATE_COMPLETED"] * 3 + ["TASK_STATE_REJECTED"]
    last = client.result("ListTasks", {"pageSize": 1})["tasks"][0]
    assert last["status"]["message"]["parts"][0]["text"] == (
        "rate limit reached: 3 runs per minute for this tenant")


def test_rate_bucket_refills():
    from murmur_wsgi.hub.admission import Admission
    from murmur_wsgi.hub.config import load_config

    now = [0.0]
    admission = Admission(load_config(hub_config(), environ={}), clock=lambda: now[0])
    for i in range(3):
        assert admission.admit("globex", "echo", "x", f"t{i}") is None
        admission.release("globex", f"t{i}")
    assert admission.admit("globex", "echo", "x", "t3").startswith("rate limit")
    now[0] += 20.0                         # 3 per minute: one token every 20 s
    assert admission.admit("globex", "echo", "x", "t4") is None


def test_a_failing_hook_refuses_and_logs(hub, caplog):
    hub.admission._hooks["globex"] = lambda *args: 1 / 0
    task = HubClient(hub, "echo", {"X-API-Key": KEY_B}).send("x")
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert task["status"]["message"]["parts"][0]["text"] == "admission is not available right now"
    assert "ZeroDivisionError" in caplog.text


class _Unprintable:
    def __str__(self):
        raise ValueError("no text of its own")


@pytest.mark.parametrize("reason", ["closed \ud800 today", _Unprintable()],
                         ids=["lone-surrogate", "str-raises"])
def test_a_hook_reason_that_is_not_text_refuses_as_a_failing_hook(hub, reason, caplog):
    """A reason no UTF-8 holds was stored as the REJECTED task's status: its SendMessage
    and every ListTasks page holding it raised out of the hub (memory store), or -32603
    (Redis); a reason whose ``str`` raised answered -32603."""
    hub.admission._hooks["globex"] = lambda *args: reason
    client = HubClient(hub, "echo", {"X-API-Key": KEY_B})
    task = client.send("x")
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert task["status"]["message"]["parts"][0]["text"] == "admission is not available right now"
    assert client.result("ListTasks", {})["tasks"][0]["id"] == task["id"]
    assert "the admission hook of tenant globex failed" in caplog.text


# --- failures, timeout, one final state --------------------------------------------


def test_failed_message_is_public_details_in_the_log(rpc, caplog):
    task = rpc.send("x", agent="crashes")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert text == "the agent failed; the details are in the hub's log"
    assert "secret internal detail" not in json.dumps(task)
    assert "secret internal detail" in caplog.text
    assert "artifacts" not in task
    failed = rpc.send("x", agent="fails")
    assert failed["status"]["message"]["parts"][0]["text"] == "public reason"


def test_run_timeout_fails_the_task_once(store):
    hub = create_hub(hub_config(store=store, limits={"run_timeout_secs": 0.2}))
    try:
        client = HubClient(hub, "stubborn")
        task = client.send("g-timeout")
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"]["parts"][0]["text"] == (
            "the run took longer than 0.2 s and was stopped")
        gate("g-timeout").set()            # the agent returns now: its answer is dropped
        run_gone = lambda: not hub.runs.in_flight()   # noqa: E731
        wait_until(run_gone)
        events = sse_events(client.call("SubscribeToTask", {"id": task["id"]}))
        states = [e["result"]["statusUpdate"]["status"]["state"] for e in events
                  if "statusUpdate" in e["result"]]
        assert states == ["TASK_STATE_WORKING", "TASK_STATE_FAILED"]
        assert client.result("GetTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_FAILED"
    finally:
        close_hub(hub)


def test_a_task_reads_working_from_its_creation_submitted_only_in_the_reply(rpc):
    """SUBMITTED is the SendMessage reply's (and a stream's first event); the task itself,
    in GetTask and in ListTasks' status filter, is WORKING from the moment it exists."""
    rpc.agent = "held"
    task = rpc.send("g-states", configuration={"returnImmediately": True})
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert rpc.result("GetTask", {"id": task["id"]})["status"]["state"] == "TASK_STATE_WORKING"
    submitted = rpc.result("ListTasks", {"status": "TASK_STATE_SUBMITTED"})
    assert (submitted["tasks"], submitted["totalSize"]) == ([], 0)
    working = rpc.result("ListTasks", {"status": "TASK_STATE_WORKING"})
    assert [t["id"] for t in working["tasks"]] == [task["id"]]
    gate("g-states").set()


def test_a_background_run_has_the_run_timeout_of_a_blocking_one(store):
    config = hub_config(store=store)
    config["tenants"]["acme"]["limits"] = {"run_timeout_secs": 0.2}
    h = create_hub(config)
    try:
        client = HubClient(h, "held")
        task = client.send("g-bg-timeout", configuration={"returnImmediately": True})
        assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
        wait_until(lambda: client.result("GetTask", {"id": task["id"]})["status"]["state"]
                   == "TASK_STATE_FAILED")
        status = client.result("GetTask", {"id": task["id"]})["status"]
        assert status["message"]["parts"] == [
            {"text": "the run took longer than 0.2 s and was stopped", "mediaType": "text/plain"}]
    finally:
        close_hub(h)


# --- run usage ----------------------------------------------------------------------


def test_usage_exactly_as_the_text(rpc):
    usage = _usage(rpc.send("a b", agent="tokens"))
    assert list(usage) == ["input_tokens", "output_tokens", "cached_tokens", "credits",
                           "credits_micros", "pricing_status", "model"]
    assert usage == {"input_tokens": 1500, "output_tokens": 500, "cached_tokens": 100,
                     "credits": 0.0025, "credits_micros": 2500, "pricing_status": "priced",
                     "model": "gpt-4o"}


def test_usage_cached_absent_when_zero_and_models_when_several(rpc):
    usage = _usage(rpc.send("x", agent="models"))
    # "big": (1001 * 1000 + 501 * 2000) / 1e6 = 2.003 micros → 2; "small" has no price.
    assert usage == {"input_tokens": 1011, "output_tokens": 506, "credits": 2e-06,
                     "credits_micros": 2, "pricing_status": "unpriced", "model": "big",
                     "models": 2}
    assert list(usage) == ["input_tokens", "output_tokens", "credits", "credits_micros",
                           "pricing_status", "model", "models"]          # the text's order


def test_usage_only_on_completed_tasks(rpc):
    for agent in ("fails", "crashes"):
        assert "artifacts" not in rpc.send("x", agent=agent)


SPENT = [{"artifactId": "answer", "name": "answer",
          "parts": [{"text": "spent", "mediaType": "text/plain"}]}]   # what it wrote: no usage


def test_the_subscribe_replay_carries_the_usage_part_before_the_final_status(rpc):
    task = rpc.send("a b", agent="tokens")
    events = [e["result"] for e in sse_events(rpc.call("SubscribeToTask", {"id": task["id"]},
                                                       agent="tokens"))]
    assert [next(iter(e)) for e in events[-2:]] == ["artifactUpdate", "statusUpdate"]
    assert events[-2]["artifactUpdate"] == {
        "taskId": task["id"], "contextId": task["contextId"],
        "artifact": {"artifactId": "answer", "name": "answer", "parts": [
            {"data": {"usage": _usage(task)}, "mediaType": "application/json"}]},
        "append": True, "lastChunk": True}
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def _no_usage_anywhere(rpc, task_id) -> None:
    """Neither the task nor any event of its log carries a usage part."""
    events = sse_events(rpc.call("SubscribeToTask", {"id": task_id}, agent="charged"))
    assert '"usage"' not in json.dumps(events)
    assert rpc.result("GetTask", {"id": task_id}, agent="charged")["artifacts"] == SPENT


def test_a_run_that_spent_then_failed_is_not_charged(rpc):
    task = rpc.send("fail", agent="charged")
    assert task["status"]["state"] == "TASK_STATE_FAILED" and task["artifacts"] == SPENT
    streamed = sse_events(rpc.call("SendStreamingMessage", send_params("fail"), agent="charged"))
    assert streamed[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"
    assert '"usage"' not in json.dumps(streamed)
    _no_usage_anywhere(rpc, task["id"])


def test_a_canceled_run_that_spent_is_not_charged(rpc):
    rpc.agent = "charged"
    task = streaming(rpc, "hold g-spent")
    canceled = rpc.result("CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert canceled["artifacts"] == SPENT
    _no_usage_anywhere(rpc, task["id"])


def test_a_run_that_returns_after_its_timeout_is_not_charged(store):
    """A task has one final state: the run's answer and usage after its timeout's FAILED
    change nothing ("it is not charged")."""
    config = hub_config(store=store)
    config["tenants"]["acme"]["limits"] = {"run_timeout_secs": 0.2}
    h = create_hub(config)
    try:
        client = HubClient(h, "charged")
        task = client.send("late g-overtime")
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert gate("g-overtime-in").wait(5)             # its agent executes on
        gate("g-overtime").set()
        wait_until(lambda: not h.runs.overdue() and not h.runs.in_flight())
        assert client.result("GetTask", {"id": task["id"]}) == task
        _no_usage_anywhere(client, task["id"])
    finally:
        close_hub(h)
