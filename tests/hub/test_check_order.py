"""Which answer wins when a request is wrong in two ways, at the wire.

The hub's steps (hub/routes.py): the route → the credential → the agent → the body (413)
→ JSON → envelope → ``A2A-Version`` → method → params; then, for a message, the request
limits before idempotency and admission. So nothing about an agent is told before the
credential, a refusal of the request's own shape takes no admission, and a repeated
``messageId`` answers its task whatever admission would say now.
"""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.hub import create_hub

from tests.hub.agents import gate
from tests.hub.conftest import (KEY_A, KEY_B, HubClient, close_hub, hub_config, send_params,
                                token, wait_until)

A2A = {"Cache-Control": "private, no-store", "Vary": "Authorization, X-API-Key, X-Tenant-ID"}
CHALLENGE = 'Bearer realm="murmur-hub"'
UNAUTHENTICATED = {"error": "unauthenticated"}
VERSION = {"code": -32009, "message": "A2A version '' is not supported; this agent speaks 1.0",
           "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                     "reason": "VERSION_NOT_SUPPORTED", "domain": "a2a-protocol.org",
                     "metadata": {"requestedVersion": "", "supportedVersions": "1.0"}}]}
NO_VERSION = {"A2A-Version": None}
TOO_LARGE = {"jsonrpc": "2.0", "id": None, "error": {
    "code": -32600, "message": "the JSON-RPC body is larger than 1048576 bytes"}}


def _a2a_answer(response, status: int, body: dict) -> None:
    assert (response.status_code, response.get_json()) == (status, body)
    for name, value in A2A.items():
        assert response.headers[name] == value
    assert response.headers.get("WWW-Authenticate") == (CHALLENGE if status == 401 else None)


def _oversized() -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                       "params": send_params("x" * (1024 ** 2))})


# --- the HTTP tier: route, credential, agent, body ------------------------------------


@pytest.mark.one_store
@pytest.mark.parametrize("agent", ["echo", "nobody", "hidden", "stubborn"])
@pytest.mark.parametrize("headers", [{}, {"X-API-Key": "mhk_wrong"},
                                     {"Authorization": "Bearer not.a.jwt"}],
                         ids=["anonymous", "unknown-key", "bad-jwt"])
def test_nothing_about_an_agent_is_told_before_the_credential(hub, agent, headers):
    """Known, unknown, unpublished, or only another tenant's: one 401, card and RPC alike,
    and an oversized body is never read for it."""
    client = HubClient(hub, agent, headers)
    for response in (client.card(), client.call("GetTask", {"id": "x"}),
                     client.post(_oversized())):
        _a2a_answer(response, 401, UNAUTHENTICATED)


@pytest.mark.one_store
@pytest.mark.parametrize("jwt_token, expected", [
    (lambda: "not.a.jwt", UNAUTHENTICATED), (lambda: token(exp_in=-60), UNAUTHENTICATED),
    (lambda: token(tenants=["globex"]), {"error": "no tenant in context"}),
], ids=["garbage", "expired", "valid"])
def test_a_jwt_without_x_tenant_id_is_verified_first(hub, jwt_token, expected):
    """Only a JWT that verifies hears "no tenant in context"; one that fails is
    unauthenticated, with or without X-Tenant-ID."""
    client = HubClient(hub, "echo", {"Authorization": f"Bearer {jwt_token()}"})
    for response in (client.card(), client.call("GetTask", {"id": "x"})):
        _a2a_answer(response, 401, expected)


@pytest.mark.one_store
def test_without_public_url_the_group_is_404_before_any_credential():
    hub = create_hub(hub_config(public_url=""))
    try:
        for headers in ({}, {"X-API-Key": "mhk_wrong"}, {"X-API-Key": KEY_A}):
            client = HubClient(hub, "echo", headers)
            for response in (client.card(), client.call("GetTask", {"id": "x"})):
                _a2a_answer(response, 404, {"error": "not found"})
    finally:
        hub.close(0)


@pytest.mark.one_store
def test_the_body_is_read_after_the_agent_and_before_the_version(hub):
    _a2a_answer(HubClient(hub, "hidden").post(_oversized()), 404, {"error": "agent not found"})
    _a2a_answer(HubClient(hub, "echo", {"X-API-Key": KEY_B}).post(_oversized(), agent="named"),
                404, {"error": "agent not found"})
    _a2a_answer(HubClient(hub).post(_oversized(), headers=NO_VERSION), 413, TOO_LARGE)


# --- the RPC tier: JSON, envelope, version, method, params -------------------------------


@pytest.mark.one_store
def test_json_and_envelope_come_before_the_version(hub):
    rpc = HubClient(hub)
    _a2a_answer(rpc.post(b"{nope", headers=NO_VERSION), 200, {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32700,
                                                "message": "Invalid JSON payload"}})
    _a2a_answer(rpc.post(b'{"jsonrpc":"2.0","id":3}', headers=NO_VERSION), 200, {
        "jsonrpc": "2.0", "id": 3, "error": {"code": -32600,
                                             "message": "Request payload validation error"}})


@pytest.mark.one_store
@pytest.mark.parametrize("method, params, with_version", [
    ("Nope", {}, {"code": -32601, "message": "Method not found"}),
    ("CreateTaskPushNotificationConfig", {}, {
        "code": -32004, "message": "push notifications are not enabled on this hub",
        "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                  "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org",
                  "metadata": {}}]}),
    ("GetTask", [1], {"code": -32602, "message": "Invalid params: params must be an object"}),
    ("SendMessage", send_params("", parts=[]), {
        "code": -32602, "message": "Invalid params: message.parts must be a non-empty array "
                                   "of parts"}),
], ids=["unknown-method", "push-without-push", "params-not-an-object", "empty-message"])
def test_the_version_is_checked_before_the_method_and_its_params(hub, method, params,
                                                                 with_version):
    """Every call must carry ``A2A-Version: 1.0``: without it the answer is -32009, whatever
    else is wrong; with it, the other fault answers."""
    rpc = HubClient(hub)
    response = rpc.call(method, params, headers=NO_VERSION)
    _a2a_answer(response, 200, {"jsonrpc": "2.0", "id": rpc.next_id, "error": VERSION})
    response = rpc.call(method, params)
    _a2a_answer(response, 200, {"jsonrpc": "2.0", "id": rpc.next_id, "error": with_version})
    assert rpc.result("ListTasks", {})["totalSize"] == 0


# --- a message: request limits, then idempotency, then admission -------------------------


def _globex(store, hook: bool):
    config = hub_config(store=store)                  # globex: 3 runs a minute, 1 at once
    if not hook:
        del config["tenants"]["globex"]["admission"]
    return create_hub(config)


def _message_with(**fields) -> dict:
    params = send_params("beta, please")              # the hook would refuse this text
    params["message"].update(fields)
    return params


MESSAGE_REFUSALS = [
    ({"parts": []}, {"code": -32602, "message": "Invalid params: message.parts must be a "
                                                "non-empty array of parts"}),
    ({"parts": [{"url": "https://x.io/f.pdf", "mediaType": "application/pdf"}]}, {
        "code": -32602, "message": "Invalid params: the message needs a non-empty text or "
                                   "data part; this hub does not read files"}),
    ({"contextId": "c" * 257}, {"code": -32602, "message": "Invalid params: message.contextId "
                                                           "is longer than 256 bytes"}),
    ({"taskId": "t-1"}, {"code": -32004, "message": (
        "this hub never asks for input, so a task cannot be continued: send the message "
        "without taskId (the same contextId continues the conversation)"),
        "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                  "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org",
                  "metadata": {"taskId": "t-1"}}]}),
]


def _refusals_answer_exactly(rpc) -> None:
    for fields, error in MESSAGE_REFUSALS:
        for method in ("SendMessage", "SendStreamingMessage"):
            response = rpc.call(method, _message_with(**fields))
            _a2a_answer(response, 200, {"jsonrpc": "2.0", "id": rpc.next_id, "error": error})
    _a2a_answer(rpc.post(_oversized()), 413, TOO_LARGE)


@pytest.mark.parametrize("hook", [True, False], ids=["hook", "no-hook"])
def test_request_limits_come_before_admission_and_take_nothing(store, hook):
    """"Request limits, checked before admission (nothing runs or is charged)": a refused
    message is refused the same with the tenant's bucket full or empty, and takes none of
    its runs a minute."""
    h = _globex(store, hook)
    try:
        rpc = HubClient(h, "echo", {"X-API-Key": KEY_B})
        _refusals_answer_exactly(rpc)                 # 9 refusals: no token taken
        states = [rpc.send(f"n{i}")["status"]["state"] for i in range(4)]
        assert states == ["TASK_STATE_COMPLETED"] * 3 + ["TASK_STATE_REJECTED"]
        _refusals_answer_exactly(rpc)                 # the bucket is empty: still refused
        assert rpc.result("ListTasks", {})["totalSize"] == 4
    finally:
        close_hub(h)


@pytest.mark.parametrize("hook", [True, False], ids=["hook", "no-hook"])
def test_a_repeated_message_id_answers_its_task_whatever_admission_says_now(store, hook):
    """"The same messageId never starts two invocations": a repeat is answered its task
    with the tenant's one slot taken and its bucket empty, and takes neither."""
    h = _globex(store, hook)
    try:
        held = HubClient(h, "held", {"X-API-Key": KEY_B})
        echo = HubClient(h, "echo", {"X-API-Key": KEY_B})
        first = held.send("g-repeat", message_id="h-1", configuration={"returnImmediately": True})
        assert first["status"]["state"] == "TASK_STATE_SUBMITTED"
        again = held.send("g-repeat", message_id="h-1")            # the one slot is taken
        assert (again["id"], again["status"]["state"]) == (first["id"], "TASK_STATE_WORKING")
        gate("g-repeat").set()
        wait_until(lambda: h.admission.running("globex") == 0)
        done = [echo.send(f"e{i}", message_id=f"e-{i}") for i in range(2)]
        assert [t["status"]["state"] for t in done] == ["TASK_STATE_COMPLETED"] * 2
        refused = echo.send("one too many")                        # the bucket is empty
        assert refused["status"]["message"]["parts"][0]["text"] == (
            "rate limit reached: 3 runs per minute for this tenant")
        assert echo.send("again?", message_id="e-0") == done[0]
        finished = held.send("g-repeat", message_id="h-1")
        assert (finished["id"], finished["status"]["state"]) == (first["id"],
                                                                 "TASK_STATE_COMPLETED")
        assert echo.result("ListTasks", {})["totalSize"] == 3
    finally:
        close_hub(h)


def test_the_admission_hook_is_asked_before_the_tenants_counts(store):
    """The hook (the operator's code) comes first: a message it refuses is refused with its
    reason even with the tenant's bucket empty, and takes no token or slot while the
    bucket is full."""
    h = _globex(store, True)
    try:
        rpc = HubClient(h, "echo", {"X-API-Key": KEY_B})
        hooked = "beta is closed for this tenant"
        assert rpc.send("beta 1")["status"]["message"]["parts"][0]["text"] == hooked
        states = [rpc.send(f"n{i}")["status"]["state"] for i in range(3)]
        assert states == ["TASK_STATE_COMPLETED"] * 3        # the refusal took no token
        assert rpc.send("beta 2")["status"]["message"]["parts"][0]["text"] == hooked
        assert rpc.send("n3")["status"]["message"]["parts"][0]["text"] == (
            "rate limit reached: 3 runs per minute for this tenant")
    finally:
        close_hub(h)
