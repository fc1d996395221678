"""Property tests: whatever arrives, the door answers on the wire's terms, never a 500.

Every answer is 200 with a JSON-RPC response (the id rule kept), or 401/403/404 with a
plain ``{"error", "message"}`` body. Nothing answers -32603 or carries a traceback, and
the door still serves GetTask after every example.

NOTE: generated envelopes never name SendMessage, SendStreamingMessage, SubscribeToTask,
murmur.WatchSession or murmur.StopSession: those hold, stream, or close the session.
A generated string or bytes body cannot name them with a readable message either.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.test import Client

from tests.conftest import MY_AGENT, make_door
from tests.fuzz_util import sent_id

AUTHENTICATION = {"scheme": "bearer", "credentials": {
    "watcher": {"scopes": ["murmur.WatchSession", "GetTask", "ListTasks"]}}}
FUZZ = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])

SAFE_METHODS = ["GetTask", "ListTasks", "CancelTask", "GetExtendedAgentCard",
                "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
                "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig",
                "message/send", "tasks/get", "tasks/cancel", "stream/watch", "getTask",
                " GetTask", ""]
FILES_PLANE = "/resources/files"
PATHS = ["/", "/", "/", "/other", "/resources/files/a.txt", "/resources/peer/h", "/control"]
HTTP_METHODS = ["POST", "POST", "POST", "GET", "PUT", "DELETE"]

# Header text as a WSGI server hands it over: latin-1, no CR, LF or NUL.
header_text = st.text(alphabet=st.characters(codec="latin-1", exclude_categories=("Cc",))
                      | st.just("\t"), max_size=24)
json_scalars = (st.none() | st.booleans() | st.integers()
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)
param_keys = st.sampled_from(["id", "tenant", "historyLength", "pageSize", "pageToken",
                              "contextId", "status", "statusTimestampAfter",
                              "includeArtifacts", "message", "configuration"])
params = (st.dictionaries(param_keys | st.text(max_size=6), json_values, max_size=4)
          | json_values)
ids = st.integers() | st.text(max_size=10) | json_values
envelopes = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.just("2.0") | json_values,
    "id": ids,
    "method": st.sampled_from(SAFE_METHODS) | st.text(max_size=12),
    "params": params,
    "extra": json_values,
})
well_formed = st.fixed_dictionaries({
    "jsonrpc": st.just("2.0"),
    "id": st.integers() | st.text(max_size=10),
    "method": st.sampled_from(SAFE_METHODS),
}, optional={"params": params})

versions = st.lists(st.sampled_from(["1.0", "1.0.1", " 1.0 ", "0.3", "", "1.1", "2.0", "1"])
                    | header_text, max_size=3)
content_types = st.one_of(st.none(), st.sampled_from([
    "application/json", "application/json; charset=utf-8", "text/plain", "APPLICATION/JSON",
    "application/jsonx", ""]), header_text)
# Authorization values; "{operator}" and "{watcher}" become that door's tokens.
authorizations = st.lists(st.sampled_from([
    "Bearer {operator}", "Bearer {watcher}", "bearer {operator}", "BEARER {watcher}",
    "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer {operator} extra", "Bearer  {watcher}",
    "Bearer {operator},Bearer {watcher}", "Token {operator}"]) | header_text, max_size=2)
origins = st.lists(st.sampled_from(["peer", "completion", "PEER", "other"]) | header_text,
                   max_size=1)
extensions = st.lists(st.sampled_from([
    "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1",
    "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1"]) | header_text,
    max_size=2)


@pytest.fixture(scope="module", params=["public", "authenticated"])
def door(request):
    if request.param == "public":
        return make_door(**MY_AGENT)
    return make_door(**dict(MY_AGENT, network={"authentication": AUTHENTICATION}))


def check_answer(door, response, body: bytes, path="/"):
    """Assert the wire's terms on one answer."""
    data = response.data
    assert b"Traceback" not in data and b'File "' not in data
    status = response.status_code
    if path.startswith(FILES_PLANE):
        # NOTE: the operator plane answers on its own terms (405, 410, a file...).
        assert status < 500, (status, data)
        return
    assert status in (200, 401, 403, 404), (status, data)
    assert response.headers["Content-Type"] == "application/json", response.headers
    if status != 200:
        refusal = json.loads(data, object_pairs_hook=list)
        assert [key for key, _ in refusal] == ["error", "message"], data
        assert all(isinstance(value, str) and value for _, value in refusal)
        if status == 401:
            assert door.tokens.enabled
            assert response.headers["WWW-Authenticate"].startswith('Bearer realm="my-agent"')
        return
    payload = json.loads(data, object_pairs_hook=list)
    keys = [key for key, _ in payload]
    assert keys in (["jsonrpc", "id", "error"], ["jsonrpc", "id", "result"]), data
    envelope = json.loads(data)
    assert envelope["jsonrpc"] == "2.0"
    expected = sent_id(body)
    if "result" in envelope:
        assert expected is not None
        assert envelope["id"] == expected and type(envelope["id"]) is type(expected)
        return
    error = envelope["error"]
    assert isinstance(error["code"], int) and isinstance(error["message"], str)
    assert error["code"] != -32603, data          # nothing failed inside the door
    if error["code"] == -32700:
        assert envelope["id"] is None
    elif expected is None:
        assert envelope["id"] is None, (body, data)
    else:
        assert envelope["id"] == expected and type(envelope["id"]) is type(expected)
    if error["code"] in (-32700, -32600, -32601, -32602):
        assert list(error) == ["code", "message"]
    else:
        assert error["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"


def still_serves(door):
    headers = {"A2A-Version": "1.0"}
    if door.tokens.enabled:
        headers["Authorization"] = f"Bearer {door.tokens.tokens['operator']}"
    response = Client(door).post("/", headers=headers, content_type="application/json",
                                 data=b'{"jsonrpc":"2.0","id":"probe","method":"GetTask",'
                                      b'"params":{"id":"tsk_probe"}}')
    assert response.status_code == 200
    assert response.get_json()["error"]["code"] == -32001


def send(door, body: bytes, *, method="POST", path="/", version=("1.0",), content_type=
         "application/json", authorization=("Bearer {operator}",), origin=(), extension=()):
    tokens = door.tokens.tokens or {"operator": "x", "watcher": "y"}
    headers = [("A2A-Version", v) for v in version]
    headers += [("Authorization", a.replace("{operator}", tokens["operator"])
                 .replace("{watcher}", tokens["watcher"])) for a in authorization]
    headers += [("x-murmur-task-origin", o) for o in origin]
    headers += [("A2A-Extensions", e) for e in extension]
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    response = Client(door).open(path, method=method, headers=headers, data=body)
    check_answer(door, response, body, path)
    return response


@FUZZ
@given(body=st.binary(max_size=256))
def test_arbitrary_bytes(door, body):
    send(door, body)
    still_serves(door)


@FUZZ
@given(value=json_values)
def test_arbitrary_json(door, value):
    send(door, json.dumps(value).encode())
    still_serves(door)


@FUZZ
@given(value=envelopes, ascii_only=st.booleans())
def test_arbitrary_envelopes(door, value, ascii_only):
    send(door, json.dumps(value, ensure_ascii=ascii_only).encode())
    still_serves(door)


@FUZZ
@given(value=well_formed, version=versions, content_type=content_types,
       authorization=authorizations, origin=origins, extension=extensions,
       method=st.sampled_from(HTTP_METHODS), path=st.sampled_from(PATHS))
def test_arbitrary_headers(door, value, version, content_type, authorization, origin,
                           extension, method, path):
    send(door, json.dumps(value).encode(), method=method, path=path, version=version,
         content_type=content_type, authorization=authorization, origin=origin,
         extension=extension)
    still_serves(door)


@pytest.fixture(scope="module")
def public_door():
    return make_door(**MY_AGENT)


@FUZZ
@given(value=well_formed, authorization=authorizations)
def test_public_door_ignores_authorization(public_door, value, authorization):
    door = public_door
    plain = send(door, json.dumps(value).encode(), authorization=())
    other = send(door, json.dumps(value).encode(), authorization=authorization)
    assert (other.status_code, other.data) == (plain.status_code, plain.data)

