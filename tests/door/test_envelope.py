"""Steps 5, 6, 7, 10, 12 and 13: what reaches the JSON-RPC door, and how it is refused."""
from __future__ import annotations

import json

import pytest
from werkzeug.test import Client

from tests.conftest import V1, Rpc, make_door

DATA_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
PUSH_METHODS = ["CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
                "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"]
AUTHENTICATION = {"scheme": "bearer", "credentials": {
    "watcher": {"scopes": ["murmur.WatchSession", "GetTask", "ListTasks"]}}}
TENANT_ACME = ('Invalid params: tenant "acme" names a tenant; this agent serves no tenants, '
               "so omit tenant")


def ordered(value):
    """A JSON value as the wire orders it: objects become lists of (key, value) pairs."""
    return json.loads(json.dumps(value), object_pairs_hook=list)


def wire(response):
    """The answer's JSON body with its key order (escaping aside), as ``ordered`` builds it."""
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    return json.loads(response.data, object_pairs_hook=list)


def rpc_error(request_id, code, message):
    """A standard JSON-RPC error, key by key: no data."""
    return ordered({"jsonrpc": "2.0", "id": request_id,
                    "error": {"code": code, "message": message}})


def a2a_error(request_id, code, message, reason, metadata=None):
    return ordered({"jsonrpc": "2.0", "id": request_id,
                    "error": {"code": code, "message": message,
                              "data": [{"@type": DATA_TYPE, "reason": reason,
                                        "domain": "a2a-protocol.org",
                                        "metadata": metadata or {}}]}})


def envelope_of(response):
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Content-Length"] == str(len(response.data))
    return json.loads(response.data)


# --- step 5: anything but POST / with application/json and a body is 404 ----------


def assert_not_found(response):
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/json"
    body = json.loads(response.data, object_pairs_hook=list)
    assert [key for key, _ in body] == ["error", "message"]
    assert dict(body)["error"] == "not_found"
    assert isinstance(dict(body)["message"], str) and dict(body)["message"]
    assert b"jsonrpc" not in response.data


GOOD = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}})


@pytest.mark.parametrize("method, path, content_type, data", [
    pytest.param("GET", "/", None, None, id="GET /"),
    pytest.param("GET", "/", "application/json", GOOD, id="GET / with body"),
    pytest.param("PUT", "/", "application/json", GOOD, id="PUT /"),
    pytest.param("DELETE", "/", "application/json", GOOD, id="DELETE /"),
    pytest.param("PATCH", "/", "application/json", GOOD, id="PATCH /"),
    pytest.param("POST", "/other", "application/json", GOOD, id="POST /other"),
    pytest.param("POST", "/index.html", "application/json", GOOD, id="POST /index.html"),
    pytest.param("POST", "/", "text/plain", GOOD, id="text/plain"),
    pytest.param("POST", "/", "application/x-www-form-urlencoded", GOOD, id="form"),
    pytest.param("POST", "/", "application/jsonx", GOOD, id="application/jsonx"),
    pytest.param("POST", "/", "application/json-rpc", GOOD, id="application/json-rpc"),
    pytest.param("POST", "/", "application/problem+json", GOOD, id="problem+json"),
    pytest.param("POST", "/", "", GOOD, id="empty content-type"),
    pytest.param("POST", "/", None, GOOD, id="no content-type"),
    pytest.param("POST", "/", "application/json", "", id="empty body"),
    # HTTP's whitespace is space and tab: a latin-1 no-break space or NEL is part of the type.
    pytest.param("POST", "/", "application/json\xa0", GOOD, id="json then no-break space"),
    pytest.param("POST", "/", "\x85application/json", GOOD, id="nel then json"),
    pytest.param("GET", "/.well-known/agent-card.json/", None, None, id="card with slash"),
    pytest.param("POST", "/.well-known/agent-card.json", "application/json", GOOD,
                 id="POST card"),
])
def test_step5_not_found(door, method, path, content_type, data):
    client = Client(door)
    headers = dict(V1)
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = client.open(path, method=method, data=data, headers=headers)
    assert_not_found(response)


@pytest.mark.parametrize("content_type", [
    "application/json", "application/json; charset=utf-8", "Application/JSON",
    "application/json;charset=UTF-8", "application/json ; charset=utf-8",
    " application/json\t",
])
def test_step5_json_content_types_are_served(rpc, content_type):
    response = rpc.post(GOOD, content_type=content_type)
    assert envelope_of(response)["error"]["code"] == -32001


def test_step5_not_found_on_authenticated_door_with_token():
    door = make_door(network={"authentication": AUTHENTICATION})
    token = door.tokens.tokens["operator"]
    response = Client(door).get("/", headers={"Authorization": f"Bearer {token}"})
    assert_not_found(response)


# --- step 6: a body that is not JSON ------------------------------------------------


@pytest.mark.parametrize("data", [
    pytest.param(b"{", id="truncated"),
    pytest.param(b"not json", id="text"),
    pytest.param(b"{'jsonrpc': '2.0'}", id="single-quotes"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"GetTask",}', id="trailing-comma"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"GetTask"} {}', id="two-values"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"GetT\xffask"}', id="invalid-utf8"),
    pytest.param(b"\xff\xfe{\x00}\x00", id="utf16"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"x":NaN}}', id="NaN"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"x":Infinity}}',
                 id="Infinity"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"x":-Infinity}}',
                 id="-Infinity"),
    pytest.param(b'{"jsonrpc":"2.0","id":NaN,"method":"GetTask"}', id="NaN-id"),
    pytest.param(b" ", id="whitespace-only"),
    pytest.param(b"\x00", id="nul"),
    pytest.param(b"[" * 100_000, id="deep-nesting"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\xed\xa0\x80"}}',
                 id="utf8-encoded-surrogate"),
])
def test_step6_parse_error(rpc, data):
    response = rpc.post(data)
    assert wire(response) == rpc_error(None, -32700, "Invalid JSON payload")
    assert envelope_of(response)["id"] is None


# --- step 7: a body that is not a JSON-RPC 2.0 request ------------------------------


@pytest.mark.parametrize("payload, echo", [
    pytest.param([], None, id="empty-batch"),
    pytest.param([{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}], None, id="batch"),
    pytest.param("GetTask", None, id="string"),
    pytest.param(5, None, id="number"),
    pytest.param(None, None, id="null"),
    pytest.param(True, None, id="true"),
    pytest.param({}, None, id="empty-object"),
    pytest.param({"jsonrpc": "2.0", "method": "GetTask"}, None, id="notification"),
    pytest.param({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t"}}, None,
                 id="notification-with-params"),
    pytest.param({"jsonrpc": "1.0", "id": 5, "method": "GetTask"}, 5, id="jsonrpc-1.0"),
    pytest.param({"jsonrpc": 2.0, "id": 5, "method": "GetTask"}, 5, id="jsonrpc-number"),
    pytest.param({"jsonrpc": "2.0 ", "id": 5, "method": "GetTask"}, 5, id="jsonrpc-space"),
    pytest.param({"id": "a", "method": "GetTask"}, "a", id="jsonrpc-missing"),
    pytest.param({"jsonrpc": "2.0", "id": 5}, 5, id="method-missing"),
    pytest.param({"jsonrpc": "2.0", "id": 5, "method": 5}, 5, id="method-number"),
    pytest.param({"jsonrpc": "2.0", "id": "x", "method": None}, "x", id="method-null"),
    pytest.param({"jsonrpc": "2.0", "id": "x", "method": ["GetTask"]}, "x", id="method-array"),
    pytest.param({"jsonrpc": "2.0", "id": 1.5, "method": "GetTask"}, None, id="id-float"),
    pytest.param({"jsonrpc": "2.0", "id": 1.0, "method": "GetTask"}, None, id="id-float-1.0"),
    pytest.param({"jsonrpc": "2.0", "id": True, "method": "GetTask"}, None, id="id-true"),
    pytest.param({"jsonrpc": "2.0", "id": False, "method": "GetTask"}, None, id="id-false"),
    pytest.param({"jsonrpc": "2.0", "id": None, "method": "GetTask"}, None, id="id-null"),
    pytest.param({"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask"}, None, id="id-object"),
    pytest.param({"jsonrpc": "2.0", "id": [1], "method": "GetTask"}, None, id="id-array"),
    pytest.param({"jsonrpc": "1.0", "id": 1.5, "method": 3}, None, id="all-wrong"),
])
def test_step7_invalid_request(rpc, payload, echo):
    response = rpc.post(json.dumps(payload))
    assert wire(response) == rpc_error(echo, -32600, "Request payload validation error")


GET_TASK = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{%s}}'


@pytest.mark.parametrize("data", [
    pytest.param(b'{"jsonrpc":"2.0","id":"\\ud800","method":"GetTask"}', id="id"),
    *[pytest.param(GET_TASK % params, id=name) for name, params in [
        ("tenant", b'"tenant":"\\udc00"'),
        ("task-id", b'"id":"a\\uDE00b"'),
        ("key", b'"\\ud800":1'),
        ("high-then-pair", b'"id":"\\ud800\\ud800\\udc00"'),
        ("pair-then-low", b'"id":"\\ud83d\\ude00\\ude00"'),
        ("after-an-escaped-backslash", b'"id":"\\\\\\ud800"'),
        ("overflow", b'"id":"t","x":1e999999'),
        ("negative-overflow", b'"id":"t","x":-1e400'),
        ("overflow-without-exponent", b'"id":"t","x":1' + b"0" * 400 + b".5"),
    ]],
])
def test_step6_what_cannot_be_written_back_is_not_json(rpc, data):
    # NOTE: RFC 8259's grammar admits an escaped unpaired surrogate, but no UTF-8 text can
    # hold it (I-JSON, RFC 7493, forbids it), nor a double a number that overflows: refused
    # as not JSON, wherever it sits, so that nothing the door keeps cannot be written back.
    response = rpc.post(data)
    assert wire(response) == rpc_error(None, -32700, "Invalid JSON payload")


@pytest.mark.parametrize("value", [b"1e308", b"-1e-400", b"1" + b"0" * 300, b"1e-999999"])
def test_step6_large_numbers_that_fit_are_json(rpc, value):
    data = GET_TASK % (b'"id":"t","x":' + value)
    assert envelope_of(rpc.post(data))["error"]["code"] == -32001


def test_step6_surrogate_pairs_are_json(rpc):
    data = (b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"GetTask",'
            b'"params":{"id":"\\\\ud800"}}')
    response = rpc.post(data)
    assert envelope_of(response) == {"jsonrpc": "2.0", "id": "\U0001f600", "error": {
        "code": -32001, "message": "Task not found", "data": [{
            "@type": DATA_TYPE, "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org",
            "metadata": {"taskId": "\\ud800"}}]}}


@pytest.mark.parametrize("request_id", [0, -1, 2 ** 64, "", "req-1", "\u00e9\u4e2d"])
def test_step7_valid_ids_are_echoed_exactly(rpc, request_id):
    body = {"jsonrpc": "1.0", "id": request_id, "method": "GetTask"}
    response = rpc.post(json.dumps(body))
    assert envelope_of(response) == {"jsonrpc": "2.0", "id": request_id, "error": {
        "code": -32600, "message": "Request payload validation error"}}
    served = rpc.post(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "GetTask",
                                  "params": {"id": "tsk_x"}}))
    assert envelope_of(served)["id"] == request_id


def test_extra_members_are_ignored(rpc):
    body = {"jsonrpc": "2.0", "id": 9, "method": "GetTask", "params": {"id": "tsk_x"},
            "extra": {"nested": [1, 2]}, "result": 1, "error": None}
    response = rpc.post(json.dumps(body))
    assert wire(response) == a2a_error(9, -32001, "Task not found", "TASK_NOT_FOUND",
                                       {"taskId": "tsk_x"})


# --- step 10: the method -------------------------------------------------------------


@pytest.mark.parametrize("method", [
    "NoSuchMethod", "", "message/send", "message/stream", "tasks/get", "tasks/cancel",
    "tasks/resubscribe", "tasks/pushNotificationConfig/set", "agent/getAuthenticatedExtendedCard",
    "stream/watch", "session/stop", "getTask", "gettask", "GETTASK", " GetTask", "GetTask ",
    "murmur.watchSession", "WatchSession", "StopSession", "murmur.GetTask",
])
def test_step10_method_not_found(rpc, method):
    response = rpc.call(method, {"id": "tsk_x"}, request_id=3)
    assert wire(response) == rpc_error(3, -32601, "Method not found")
    assert "A2A-Extensions" not in response.headers


@pytest.mark.parametrize("method", PUSH_METHODS)
@pytest.mark.parametrize("authenticated", [False, True], ids=["public", "authenticated"])
def test_step10_push_config_methods(method, authenticated):
    overrides = {"network": {"authentication": AUTHENTICATION}} if authenticated else {}
    door = make_door(**overrides)
    headers = {}
    if authenticated:   # a token without any push scope: none is asked (before step 11)
        headers["Authorization"] = f"Bearer {door.tokens.tokens['watcher']}"
    # Before any params check: params that step 12 would refuse, and a tenant.
    for params in (None, {"id": "tsk_x", "tenant": "acme"}, [1, 2], "x"):
        response = Rpc(door).call(method, params, headers, request_id=1)
        assert wire(response) == a2a_error(
            1, -32003, "push notifications are not supported by this agent",
            "PUSH_NOTIFICATION_NOT_SUPPORTED")


def test_step10_public_door_extended_card(rpc):
    response = rpc.call("GetExtendedAgentCard", request_id=1)
    assert wire(response) == a2a_error(1, -32004, "this door is public: it has no extended card",
                                       "UNSUPPORTED_OPERATION")
    assert "A2A-Extensions" not in response.headers


@pytest.fixture
def none_door():
    return make_door(lifecycle={"task_acceptance": "none"})


def test_step10_none_send_message_not_found(none_door):
    params = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    response = Rpc(none_door).call("SendMessage", params, request_id=4)
    assert wire(response) == rpc_error(4, -32601, "Method not found")


@pytest.mark.parametrize("method, params", [
    ("SendStreamingMessage", {"message": {"messageId": "m1", "role": "ROLE_USER",
                                          "parts": [{"text": "hi"}]}}),
    ("SubscribeToTask", {"id": "tsk_x"}),
])
def test_step10_none_streaming_unsupported(none_door, method, params):
    response = Rpc(none_door).call(method, params, request_id=4)
    # One JSON body, no stream: with {} as metadata, even when a task is named.
    assert wire(response) == a2a_error(4, -32004, "this door starts no task, so it streams none",
                                       "UNSUPPORTED_OPERATION")


@pytest.mark.parametrize("method", ["GetTask", "CancelTask"])
def test_step10_none_still_serves_tasks(none_door, method):
    response = Rpc(none_door).call(method, {"id": "tsk_x"}, request_id=4)
    assert envelope_of(response)["error"]["code"] == -32001


def test_step10_none_serves_the_sessions_own_methods(none_door):
    rpc = Rpc(none_door)
    assert rpc.result("ListTasks", {}) == {"tasks": [], "nextPageToken": "", "pageSize": 50,
                                           "totalSize": 0}
    assert rpc.result("murmur.StopSession", {}) == {"canceled": [], "residue": [],
                                                    "session_id": none_door.session.id}
    watch = rpc.call("murmur.WatchSession", {})
    assert watch.status_code == 200 and watch.mimetype == "text/event-stream"
    watch.close()


# --- step 12: params ------------------------------------------------------------------


@pytest.mark.parametrize("params", [
    pytest.param([], id="empty-array"),
    pytest.param([{"id": "tsk_x"}], id="array"),
    pytest.param("tsk_x", id="string"),
    pytest.param(7, id="number"),
    pytest.param(1.5, id="float"),
    pytest.param(True, id="bool"),
    pytest.param(None, id="null"),
])
@pytest.mark.parametrize("method", ["GetTask", "CancelTask", "ListTasks", "murmur.StopSession",
                                    "murmur.WatchSession", "SubscribeToTask"])
def test_step12_params_not_an_object(rpc, method, params):
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
    envelope = envelope_of(rpc.post(json.dumps(body)))
    assert list(envelope) == ["jsonrpc", "id", "error"]
    assert envelope["id"] == 5
    assert list(envelope["error"]) == ["code", "message"]       # no data
    assert envelope["error"]["code"] == -32602
    assert "params" in envelope["error"]["message"]


def test_step12_omitted_params_read_as_empty_object(rpc):
    omitted = envelope_of(rpc.call("GetTask", None, request_id=1))
    empty = envelope_of(rpc.call("GetTask", {}, request_id=1))
    assert omitted == empty == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32602, "message": "GetTask requires an id"}}


def test_step12_omitted_params_extended_card():
    door = make_door(network={"authentication": AUTHENTICATION})
    token = door.tokens.tokens["operator"]
    result = Rpc(door).result("GetExtendedAgentCard", None, {"Authorization": f"Bearer {token}"})
    assert result["name"] == "test-agent"


# --- step 13: tenants -------------------------------------------------------------------


@pytest.mark.parametrize("tenant, shown", [
    pytest.param("acme", '"acme"', id="string"),
    pytest.param(7, "7", id="integer"),
    pytest.param(None, "null", id="null"),
    pytest.param(False, "false", id="false"),
    pytest.param(["a"], '["a"]', id="array"),
    pytest.param({}, "{}", id="object"),
    pytest.param(" ", '" "', id="space"),
    pytest.param("caf\u00e9", '"caf\u00e9"', id="non-ascii"),
])
def test_step13_tenant_refused(rpc, tenant, shown):
    response = rpc.call("GetTask", {"id": "tsk_x", "tenant": tenant}, request_id=6)
    message = (f"Invalid params: tenant {shown} names a tenant; this agent serves no tenants, "
               "so omit tenant")
    assert wire(response) == rpc_error(6, -32602, message)


def test_step13_tenant_acme_exact(rpc):
    response = rpc.call("GetTask", {"id": "tsk_x", "tenant": "acme"}, request_id=6)
    assert wire(response) == rpc_error(6, -32602, TENANT_ACME)


def test_step13_tenant_integer_reads_tenant_7(rpc):
    message = envelope_of(rpc.call("GetTask", {"tenant": 7}))["error"]["message"]
    assert message == ("Invalid params: tenant 7 names a tenant; this agent serves no tenants, "
                       "so omit tenant")


@pytest.mark.parametrize("method", ["GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
                                    "SendMessage", "SendStreamingMessage", "murmur.StopSession",
                                    "murmur.WatchSession"])
def test_step13_every_served_method_refuses_a_tenant(door, method):
    params = {"id": "tsk_x", "tenant": "acme",
              "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    response = Rpc(door).call(method, params, request_id=2)
    assert wire(response) == rpc_error(2, -32602, TENANT_ACME)
    assert door.session.closing is False


def test_step13_empty_tenant_is_served(rpc):
    response = rpc.call("GetTask", {"id": "tsk_x", "tenant": ""}, request_id=8)
    assert wire(response) == a2a_error(8, -32001, "Task not found", "TASK_NOT_FOUND",
                                       {"taskId": "tsk_x"})


def test_step13_tenant_on_unserved_methods(rpc):
    params = {"tenant": "acme"}
    assert wire(rpc.call("tasks/get", params, request_id=1)) == rpc_error(1, -32601,
                                                                         "Method not found")
    push = rpc.call("GetTaskPushNotificationConfig", params, request_id=1)
    assert json.loads(push.data)["error"]["code"] == -32003
    version = rpc.post({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": params},
                       {"A2A-Version": "0.3"})
    assert json.loads(version.data)["error"]["code"] == -32009


# --- standard errors carry no data ---------------------------------------------------------


@pytest.mark.parametrize("data, code", [
    pytest.param(b"{", -32700, id="-32700"),
    pytest.param(b"[]", -32600, id="-32600"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"nope"}', -32601, id="-32601"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[]}', -32602,
                 id="-32602"),
])
def test_standard_errors_carry_no_data(rpc, data, code):
    error = envelope_of(rpc.post(data))["error"]
    assert list(error) == ["code", "message"]
    assert error["code"] == code


def test_step13_the_extended_card_refuses_a_tenant():
    door = make_door(network={"authentication": AUTHENTICATION})
    token = door.tokens.tokens["watcher"]             # every valid token reads the card
    response = Rpc(door).call("GetExtendedAgentCard", {"tenant": "acme"},
                              {"Authorization": f"Bearer {token}"}, request_id=2)
    assert wire(response) == rpc_error(2, -32602, TENANT_ACME)


# --- -32603: a request the door accepted and could not hand to the session -------------


def test_a_method_that_fails_inside_the_door_is_internal_error(rpc, monkeypatch, caplog):
    from murmur_wsgi.door import methods

    def broken(door, call, params):
        raise RuntimeError("the session's store is gone")

    monkeypatch.setitem(methods.METHODS, "GetTask",
                        methods.Method(broken, methods.METHODS["GetTask"].read))
    response = rpc.call("GetTask", {"id": "tsk_x"}, request_id="r-1")
    assert wire(response) == rpc_error(
        "r-1", -32603, "Internal error: the door could not hand the request to the session")
    assert b"store is gone" not in response.data and b"Traceback" not in response.data
    assert any("RuntimeError" in (record.exc_text or "") for record in caplog.records)
