"""Property tests: whatever a client sends the hub, it answers on the Nexus text's terms,
and nothing it stores breaks a later read of the tenant's tasks.

Every answer is 200 with a JSON-RPC response (the id rule kept) or a refusal (401, 404,
413) whose body is ``{"error": …}``; only valid JSON comes out (no NaN, no Infinity, no
integer a double does not hold), nothing answers -32603, and no answer carries a
traceback. After every example the tenant's tasks still read: ListTasks and GetTask
answer, and a2a-sdk's reader takes them (``parse_lenient``), as it takes every
SendMessage result. A request answered with an error stores no task.

On the memory store and on a redis-server of the module's own (the hub lives across
examples: what one example stores, the next ones read). On a hub with push on, any
Create, Get, List and Delete of a task's push configs answers alike, and what the task
keeps (at most 10) reads back whole and parses with a2a-sdk.

NOTE: the demo agent's texts never name /sleep or /background (they hold a run), and the
hub's limits admit every run (the rate's bucket would otherwise refuse most examples).
"""
from __future__ import annotations

import json
import math
import uuid

import pytest
from a2a.types.a2a_pb2 import (ListTaskPushNotificationConfigsResponse, ListTasksResponse,
                               SendMessageResponse, Task)
from a2a.utils.proto_utils import parse_lenient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.test import Client

from murmur_wsgi.hub import create_hub
from tests.fuzz_util import refuse_constant, sent_id
from tests.hub.conftest import KEY_A, KEY_B, close_hub, hub_config, module_store, token
from tests.hub.push_util import Resolver, Sleeps, push_config

pytestmark = pytest.mark.one_store          # the module's own hubs: memory and Redis

FUZZ = settings(max_examples=100, deadline=None, database=None,
                derandomize=True, suppress_health_check=[HealthCheck.too_slow])
PATH = "/a2a/v1/agents/echo"
DOUBLE_INT = 2 ** 53


@pytest.fixture(scope="module", params=["memory", "redis"])
def hub(request):
    store = module_store(request)
    limits = {"run_timeout_secs": 30, "concurrency": 1000, "rate_per_minute": 1_000_000}
    h = create_hub(hub_config(store=store, limits=limits))
    yield h
    close_hub(h)


# --- what a client may send ------------------------------------------------------------

ODD_TEXTS = ["\ud800", "a\udfffb", "\x00", "\u2028\u2029\x85", "\ufeff", "\u202e", "é" * 40]
json_scalars = (st.none() | st.booleans() | st.integers()
                | st.sampled_from([DOUBLE_INT + 1, 10 ** 308, 2 * 10 ** 308, -(10 ** 400)])
                | st.floats(allow_nan=False, allow_infinity=False)
                | st.text(max_size=12) | st.sampled_from(ODD_TEXTS))
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)
# Directives that answer at once (docs/demo-agent.md), and texts that name none.
texts = (st.sampled_from(["hi", "/stream 3", "/fail boom", "/think it", "/tool t\nx", "/raw",
                          "/ask what?", "/stream x", "/stream -2"])
         | st.text(max_size=20).filter(lambda t: not t.lstrip().startswith("/"))
         | st.sampled_from(ODD_TEXTS))
plain_values = st.recursive(       # values a client may well send: doubles hold them all
    st.none() | st.booleans() | st.integers(-DOUBLE_INT, DOUBLE_INT)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8)


def mutated(base):
    """``base``'s objects, half of them with one member dropped or made any JSON value."""
    @st.composite
    def one(draw):
        value = dict(draw(base))
        if value and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(value)))
            if draw(st.booleans()):
                del value[key]
            else:
                value[key] = draw(json_values)
        return value
    return one()


metadata = st.dictionaries(st.text(max_size=8), plain_values, max_size=3)
parts = mutated(st.one_of(
    st.fixed_dictionaries({"text": texts}, optional={"metadata": metadata,
                                                     "mediaType": st.just("text/plain")}),
    st.fixed_dictionaries({"data": plain_values},
                          optional={"mediaType": st.just("application/json"),
                                    "metadata": metadata}),
    st.fixed_dictionaries({"url": st.sampled_from(["https://example.com/a.txt", ""]),
                           "mediaType": st.just("text/plain")},
                          optional={"filename": st.text(max_size=8)}),
    st.fixed_dictionaries({"raw": st.sampled_from(["aGk=", "!!", "", "a" * 7])},
                          optional={"mediaType": st.just("application/octet-stream"),
                                    "filename": st.text(max_size=8)})))
messages = mutated(st.fixed_dictionaries({
    "messageId": st.uuids().map(str) | st.uuids().map(str)
    | st.sampled_from(["same-id", "x" * 300]),
    "role": st.just("ROLE_USER"),
    "parts": st.lists(parts, min_size=1, max_size=3),
}, optional={
    "contextId": st.sampled_from(["ctx-1", "ctx-2", ""]),
    "taskId": st.sampled_from(["tsk-none", ""]),
    "metadata": metadata,
    "extensions": st.lists(st.text(max_size=8), max_size=2),
    "referenceTaskIds": st.lists(st.text(max_size=8), max_size=2),
}))
configurations = mutated(st.fixed_dictionaries({}, optional={
    "returnImmediately": st.booleans(),
    "historyLength": st.integers(-3, 5),
    "acceptedOutputModes": st.lists(st.sampled_from(["text/plain", "application/json"]),
                                    max_size=2),
}))
send_params = mutated(st.fixed_dictionaries({"message": messages},
                                            optional={"configuration": configurations,
                                                      "metadata": metadata}))
read_params = st.fixed_dictionaries({}, optional={
    "id": st.sampled_from(["tsk-none", ""]) | json_values,
    "historyLength": st.integers(-3, 5) | json_values,
    "pageSize": st.integers(-3, 200) | json_values,
    "pageToken": st.sampled_from(["", "x", "0"]) | json_values,
    "contextId": st.sampled_from(["ctx-1", "ctx-2"]) | json_values,
    "status": st.sampled_from(["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "done"])
    | json_values,
    "statusTimestampAfter": st.sampled_from(["2026-01-01T00:00:00Z", "yesterday", ""])
    | json_values,
    "includeArtifacts": st.booleans() | json_values,
})
ids = st.integers(-DOUBLE_INT, DOUBLE_INT) | st.text(max_size=10) | json_values
envelopes = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.just("2.0") | json_values,
    "id": ids,
    "method": st.sampled_from(["SendMessage", "GetTask", "ListTasks", "CancelTask",
                               "GetExtendedAgentCard", "CreateTaskPushNotificationConfig",
                               "message/send", "tasks/get", ""]) | st.text(max_size=12),
    "params": send_params | read_params | json_values,
})
# One credential per request as the text reads them; "{jwt}"/"{jwt-b}" become tokens.
credentials = st.sampled_from([
    {"X-API-Key": KEY_A}, {"X-API-Key": KEY_A}, {"X-API-Key": KEY_B}, {"X-API-Key": "mhk_x"},
    {}, {"X-API-Key": ""}, {"X-API-Key": KEY_A, "Authorization": "Bearer {jwt}"},
    {"Authorization": "Bearer {jwt}", "X-Tenant-ID": "acme"},
    {"Authorization": "Bearer {jwt}"}, {"Authorization": "Bearer {jwt}", "X-Tenant-ID": "globex"},
    {"Authorization": "Bearer {jwt-b}", "X-Tenant-ID": "acme"},
    {"Authorization": "Basic dXNlcjpwYXNz", "X-Tenant-ID": "acme"},
    {"Authorization": "Bearer not.a.jwt", "X-Tenant-ID": "acme"}])
paths = st.sampled_from([PATH, PATH, PATH + "/", "/a2a/v1/agents/hidden", "/a2a/v1/agents/nope",
                         "/a2a/v1/agents/echo/x", "/a2a/v1", "/", "/metrics",
                         "/a2a/v1/agents/echo/.well-known/agent-card.json"])
versions = st.sampled_from([["1.0"], ["1.0"], [" 1.0\t"], ["0.3"], [], ["1.0", "1.0"], [""]])


# --- what the hub must answer ----------------------------------------------------------

def strict_json(data: bytes):
    """``data`` as RFC 8259 JSON that a2a-sdk reads: no NaN or Infinity, and no integer a
    double does not hold (a2a-sdk reads every number as a double)."""
    def number(text):
        value = int(text)
        assert abs(value) <= 10 ** 308 and math.isfinite(float(value)), text[:40]
        return value
    return json.loads(data.decode("utf-8"), parse_constant=refuse_constant, parse_int=number)


def check_answer(response, body: bytes):
    """The text's terms on one answer; the JSON-RPC envelope of a 200 (None otherwise)."""
    data = response.data
    assert b"Traceback" not in data and b'File "' not in data, data[:300]
    status = response.status_code
    assert status in (200, 401, 404, 413), (status, data[:300])
    if response.headers.get("Content-Type") == "text/plain; version=0.0.4; charset=utf-8":
        return None                                     # /metrics, when it is served
    assert response.headers["Content-Type"] == "application/json", response.headers
    if status != 200:
        refusal = json.loads(data, object_pairs_hook=list)
        if status == 413:
            return None                                 # -32600, id null (checked below)
        assert [key for key, _ in refusal] == ["error"], data
        assert isinstance(refusal[0][1], str) and refusal[0][1]
        if status == 401:
            assert response.headers["WWW-Authenticate"] == 'Bearer realm="murmur-hub"'
        return None
    envelope = strict_json(data)
    if "result" not in envelope and "error" not in envelope:      # a card
        assert "name" in envelope, data[:300]
        return None
    keys = list(json.loads(data, object_pairs_hook=dict))
    assert keys in (["jsonrpc", "id", "error"], ["jsonrpc", "id", "result"]), data[:300]
    expected = sent_id(body)
    if "result" in envelope:
        assert expected is not None
        assert envelope["id"] == expected and type(envelope["id"]) is type(expected)
        return envelope
    error = envelope["error"]
    assert isinstance(error["code"], int) and isinstance(error["message"], str)
    assert error["code"] != -32603, data[:500]        # nothing failed inside the hub
    if error["code"] == -32700 or expected is None:
        assert envelope["id"] is None, (body[:200], data[:300])
    else:
        assert envelope["id"] == expected and type(envelope["id"]) is type(expected)
    return envelope


def post(hub, body: bytes, *, path=PATH, headers=None, version=("1.0",), method="POST"):
    sent = [("A2A-Version", v) for v in version]
    for name, value in (headers if headers is not None else {"X-API-Key": KEY_A}).items():
        value = value.replace("{jwt-b}", token(("globex",))).replace("{jwt}", token())
        sent.append((name, value))
    sent.append(("Content-Type", "application/json"))
    return Client(hub).open(path, method=method, headers=sent, data=body)


def _read(hub, method: str, params: dict):
    body = json.dumps({"jsonrpc": "2.0", "id": "probe", "method": method,
                       "params": params}).encode()
    response = post(hub, body)
    assert response.status_code == 200, response.data[:300]
    envelope = strict_json(response.data)
    assert "result" in envelope, response.data[:500]
    return envelope["result"]


def listed(hub) -> dict:
    """The newest tasks of acme's echo, as a2a-sdk reads them (it fails on a poisoned one)."""
    result = _read(hub, "ListTasks", {"includeArtifacts": True, "pageSize": 100})
    parse_lenient(result, ListTasksResponse())
    return result


def still_reads(hub, envelope, total_before: int) -> None:
    """The tenant's tasks read after the example; an error stored no task."""
    after = listed(hub)
    if envelope is None or "error" in envelope:
        assert after["totalSize"] == total_before, (envelope, after["totalSize"])
        return
    result = envelope["result"]
    if isinstance(result, dict) and isinstance(result.get("task"), dict):
        parse_lenient(result, SendMessageResponse())
        task = _read(hub, "GetTask", {"id": result["task"]["id"]})
        parse_lenient(task, Task())


@FUZZ
@given(body=st.binary(max_size=256))
def test_arbitrary_bytes(hub, body):
    before = listed(hub)["totalSize"]
    still_reads(hub, check_answer(post(hub, body), body), before)


@FUZZ
@given(value=json_values)
def test_arbitrary_json(hub, value):
    body = json.dumps(value).encode()
    before = listed(hub)["totalSize"]
    still_reads(hub, check_answer(post(hub, body), body), before)


@FUZZ
@given(value=envelopes, ascii_only=st.booleans())
def test_arbitrary_envelopes(hub, value, ascii_only):
    body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    before = listed(hub)["totalSize"]
    still_reads(hub, check_answer(post(hub, body), body), before)


@FUZZ
@given(params=send_params, request_id=st.integers(0, 99) | st.text(max_size=4) | ids,
       ascii_only=st.booleans())
def test_arbitrary_messages(hub, params, request_id, ascii_only):
    """SendMessage with any message: refused with its error, or stored readable."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "SendMessage",
                       "params": params}, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    before = listed(hub)["totalSize"]
    still_reads(hub, check_answer(post(hub, body), body), before)


@FUZZ
@given(params=read_params, method=st.sampled_from(["GetTask", "ListTasks", "CancelTask",
                                                    "SubscribeToTask"]))
def test_arbitrary_reads(hub, params, method):
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()
    before = listed(hub)["totalSize"]
    response = post(hub, body)
    if response.headers.get("Content-Type") == "text/event-stream":
        for line in response.get_data().split(b"\n"):
            if line.startswith(b"data: "):
                strict_json(line[len(b"data: "):])
        envelope = None
    else:
        envelope = check_answer(response, body)
    still_reads(hub, envelope, before)


@FUZZ
@given(value=envelopes, headers=credentials, path=paths, version=versions,
       method=st.sampled_from(["POST", "POST", "GET", "PUT", "HEAD"]))
def test_arbitrary_requests(hub, value, headers, path, version, method):
    """Any credential, path, version and verb: one of the text's answers, never more."""
    body = json.dumps(value).encode()
    before = listed(hub)["totalSize"]
    response = post(hub, body, path=path, headers=headers, version=version, method=method)
    if method == "HEAD":
        assert response.status_code in (200, 401, 404), response.status_code
        envelope = None
    else:
        envelope = check_answer(response, body)
    if method == "HEAD":
        assert response.data == b""         # its headers only, as a GET's
    elif response.status_code == 401:
        # NOTE: a refusal before authentication tells nothing of the path or the body.
        assert response.data == b'{"error":"unauthenticated"}' or response.data in (
            b'{"error":"no tenant in context"}',
            b'{"error":"send one credential: X-API-Key or Authorization, not both"}'), \
            response.data
    still_reads(hub, envelope, before)


# --- push notification configs, on a hub with push on -------------------------------------

@pytest.fixture(scope="module", params=["memory", "redis"])
def push_hub(request):
    config = push_config()
    config["store"] = module_store(request)
    config["limits"] = {"concurrency": 1000, "rate_per_minute": 1_000_000}
    h = create_hub(config)
    h.push.sender.sleep = Sleeps()              # retries recorded, never slept
    h.push.egress.resolver = Resolver()          # no host resolves: nothing leaves
    yield h
    close_hub(h)


HOOK = "https://hooks.example.com/a2a"
push_configs = mutated(st.fixed_dictionaries({"url": st.just(HOOK)}, optional={
    "id": st.sampled_from(["c1", "c2", "a/b", "x" * 129]) | st.text(max_size=8),
    "token": st.text(max_size=12) | st.sampled_from(["t\r\nX: 1", "é" * 300, "\u2028"]),
    "authentication": st.just({"scheme": "Bearer"}) | json_values,
}))
push_reads = mutated(st.fixed_dictionaries({}, optional={
    "id": st.sampled_from(["c1", "c2", ""]) | st.text(max_size=8),
    "pageSize": st.integers(-1, 12), "pageToken": st.sampled_from(["", "x"])}))


@FUZZ
@given(fields=push_configs, reads=st.lists(st.tuples(st.sampled_from(
    ["GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
     "DeleteTaskPushNotificationConfig"]), push_reads), max_size=3))
def test_arbitrary_push_configs(push_hub, fields, reads):
    """Create, Get, List, Delete with any params: the text's answers; what a task keeps
    (at most 10) reads back whole, and a2a-sdk reads it."""
    task = json.loads(post(push_hub, json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": str(uuid.uuid4()), "role": "ROLE_USER",
            "parts": [{"text": "hi"}]}}}).encode()).data)["result"]["task"]
    calls = [("CreateTaskPushNotificationConfig", fields)] + reads
    for method, params in calls:
        params = dict(params, taskId=task["id"]) if "taskId" not in params else params
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": method,
                           "params": params}).encode("utf-8", "surrogatepass")
        check_answer(post(push_hub, body), body)
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ListTaskPushNotificationConfigs",
                       "params": {"taskId": task["id"]}}).encode()
    listed = check_answer(post(push_hub, body), body)["result"]
    parse_lenient(listed, ListTaskPushNotificationConfigsResponse())
    assert len(listed.get("configs", [])) <= 10
    for config in listed.get("configs", []):
        body = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "GetTaskPushNotificationConfig",
                           "params": {"taskId": task["id"], "id": config["id"]}}).encode()
        read = check_answer(post(push_hub, body), body)["result"]
        assert read["url"] == config["url"] and read.get("token") == config.get("token")
