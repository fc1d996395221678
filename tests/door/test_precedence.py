"""Precedence: a request that breaks two steps of "What the door answers" gets the earlier one.

Each case breaks the rules of two adjacent steps; the answer is the earlier step's.
Doors: ``public`` (no authentication), ``auth`` (bearer, a ``watcher`` credential),
``auth_none`` (bearer, lifecycle.task_acceptance: none). Header values may name a
token as ``{operator}`` or ``{watcher}``; ``{session}`` is the door's session id.
"""
from __future__ import annotations

import json

import pytest
from werkzeug.test import Client

from tests.conftest import make_door

AUTHENTICATION = {"scheme": "bearer", "credentials": {
    "watcher": {"scopes": ["murmur.WatchSession", "GetTask", "ListTasks"]}}}
REALM = 'Bearer realm="test-agent"'
CARD = "/.well-known/agent-card.json"
MESSAGE = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
TENANT_ACME = ('Invalid params: tenant "acme" names a tenant; this agent serves no tenants, '
               "so omit tenant")
V1 = ("A2A-Version", "1.0")
PEER = ("x-murmur-task-origin", "peer")
WATCHER = ("Authorization", "Bearer {watcher}")
OPERATOR = ("Authorization", "Bearer {operator}")


def build(kind: str):
    if kind == "public":
        return make_door()
    if kind == "auth":
        return make_door(network={"authentication": AUTHENTICATION})
    if kind == "auth_none":
        return make_door(network={"authentication": AUTHENTICATION},
                         lifecycle={"task_acceptance": "none"})
    raise AssertionError(kind)


def send(door, method="POST", path="/", headers=(), body=None,
         content_type="application/json"):
    """Send one request; ``body`` is bytes, or a value serialized as JSON."""
    names = dict(door.tokens.tokens, session=door.session.id)
    hdrs = [(k, v.format(**names)) for k, v in headers]
    if content_type is not None:
        hdrs.append(("Content-Type", content_type))
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    return Client(door).open(path, method=method, headers=hdrs, data=data)


def rpc(method, params=None, request_id=1, **extra):
    body = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    body.update(extra)
    return body


# Each expectation: ("card",) | ("http", status, error, www-authenticate or None, message
# or None) | ("rpc", id, code, message or None, reason or None).
CASES = [
    pytest.param("auth", dict(method="GET", path=CARD, content_type=None),
                 ("card",), id="1/2 card needs no token"),
    pytest.param("auth", dict(method="GET", path=CARD, content_type=None,
                              headers=[("Authorization", "Bearer nope")]),
                 ("card",), id="1/2 card ignores a bad token"),
    pytest.param("auth", dict(body=rpc("GetTask", {"id": "t"}), headers=[V1, PEER]),
                 ("http", 401, "unauthenticated", REALM, None), id="2/3 no token, peer"),
    pytest.param("auth", dict(body=rpc("GetTask", {"id": "t"}),
                              headers=[V1, PEER, ("Authorization", "Bearer nope")]),
                 ("http", 401, "invalid_token", f'{REALM}, error="invalid_token"', None),
                 id="2/3 bad token, peer"),
    pytest.param("auth", dict(method="GET", path="/resources/files/a.txt", content_type=None,
                              headers=[WATCHER, PEER]),
                 ("http", 403, "peer_not_accepted", None, None),
                 id="3/4 peer on the files plane without its scope"),
    pytest.param("public", dict(method="GET", path="/resources/files/a.txt", content_type=None,
                                headers=[PEER]),
                 ("http", 403, "peer_not_accepted", None, None),
                 id="3/4 peer on an undeclared plane"),
    pytest.param("auth", dict(method="GET", path="/resources/files/a.txt", content_type=None,
                              headers=[WATCHER]),
                 ("http", 403, "insufficient_scope",
                  f'{REALM}, error="insufficient_scope", scope="resources/files"',
                  "credential 'watcher' does not reach resources/files"),
                 id="4/5 files plane scope before the 404"),
    pytest.param("public", dict(body=b"{", content_type="text/plain", headers=[V1]),
                 ("http", 404, "not_found", None, None), id="5/6 text/plain and not JSON"),
    pytest.param("public", dict(path="/other", body=b"{", headers=[V1]),
                 ("http", 404, "not_found", None, None), id="5/6 POST /other and not JSON"),
    pytest.param("public", dict(body=b"[\xff", headers=[V1]),
                 ("rpc", None, -32700, "Invalid JSON payload", None),
                 id="6/7 not JSON, and an array"),
    pytest.param("public", dict(body=rpc("GetTask", {"id": "t"}, jsonrpc="1.0")),
                 ("rpc", 1, -32600, "Request payload validation error", None),
                 id="7/8 jsonrpc 1.0 without A2A-Version"),
    pytest.param("public", dict(body=[rpc("GetTask")], headers=[("A2A-Version", "0.3")]),
                 ("rpc", None, -32600, "Request payload validation error", None),
                 id="7/8 batch with A2A-Version 0.3"),
    pytest.param("public", dict(body=rpc("SendMessage", {"message": MESSAGE}),
                                headers=[("A2A-Version", "0.3"),
                                         ("x-murmur-task-origin", "completion"),
                                         ("x-murmur-completion-session", "ses_other")]),
                 ("rpc", 1, -32009, "A2A version '0.3' is not supported; this agent speaks 1.0",
                  "VERSION_NOT_SUPPORTED"),
                 id="8/9 wrong version, misaddressed completion"),
    pytest.param("public", dict(body=rpc("message/send", {"message": MESSAGE}),
                                headers=[V1, ("x-murmur-task-origin", "completion"),
                                         ("x-murmur-completion-session", "ses_other")]),
                 ("rpc", 1, -31001, None, "COMPLETION_MISADDRESSED"),
                 id="9/10 misaddressed completion, unknown method"),
    pytest.param("auth", dict(body=rpc("message/send", {"message": MESSAGE}),
                              headers=[V1, WATCHER]),
                 ("rpc", 1, -32601, "Method not found", None),
                 id="10/11 unknown method, token without scope"),
    pytest.param("auth_none", dict(body=rpc("SendStreamingMessage", {"message": MESSAGE}),
                                   headers=[V1, WATCHER]),
                 ("rpc", 1, -32004, None, "UNSUPPORTED_OPERATION"),
                 id="10/11 no task started, token without scope"),
    pytest.param("auth", dict(body=rpc("CreateTaskPushNotificationConfig", {"id": "t"}),
                              headers=[V1, WATCHER]),
                 ("rpc", 1, -32003, "push notifications are not supported by this agent",
                  "PUSH_NOTIFICATION_NOT_SUPPORTED"),
                 id="10/11 push config, any token"),
    pytest.param("auth", dict(body=rpc("SendMessage", []), headers=[V1, WATCHER]),
                 ("http", 403, "insufficient_scope",
                  f'{REALM}, error="insufficient_scope", scope="SendMessage"',
                  "credential 'watcher' does not reach SendMessage"),
                 id="11/12 scope before params"),
    pytest.param("auth", dict(body=rpc("CancelTask", {"id": "t", "tenant": "acme"}),
                              headers=[V1, WATCHER]),
                 ("http", 403, "insufficient_scope",
                  f'{REALM}, error="insufficient_scope", scope="CancelTask"',
                  "credential 'watcher' does not reach CancelTask"),
                 id="11/13 scope before tenant"),
    pytest.param("public", dict(body=rpc("GetTask", [{"tenant": "acme"}]), headers=[V1]),
                 ("rpc", 1, -32602, "Invalid params: params must be an object", None),
                 id="12/13 params an array holding a tenant"),
    pytest.param("public", dict(body=rpc("GetTask", {"tenant": "acme"}), headers=[V1]),
                 ("rpc", 1, -32602, TENANT_ACME, None), id="13/14 tenant, GetTask without id"),
    pytest.param("public", dict(body=rpc("CancelTask", {"id": "tsk_x", "tenant": "acme"}),
                                headers=[V1]),
                 ("rpc", 1, -32602, TENANT_ACME, None), id="13/14 tenant, unknown task"),
    pytest.param("auth", dict(body=rpc("murmur.StopSession", {"tenant": "acme"}),
                              headers=[V1, OPERATOR]),
                 ("rpc", 1, -32602, TENANT_ACME, None), id="13/14 tenant, StopSession"),
    pytest.param("auth", dict(body=rpc("SendMessage", {"tenant": "acme", "message": 5}),
                              headers=[V1, OPERATOR]),
                 ("rpc", 1, -32602, TENANT_ACME, None), id="13/14 tenant, unreadable message"),
]


@pytest.mark.parametrize("kind, request_kwargs, expected", CASES)
def test_earlier_step_answers(kind, request_kwargs, expected):
    door = build(kind)
    response = send(door, **request_kwargs)
    if expected[0] == "card":
        assert response.status_code == 200
        assert response.get_json()["name"] == "test-agent"
        assert "ETag" in response.headers
        return
    assert response.headers["Content-Type"] == "application/json"
    assert "A2A-Extensions" not in response.headers
    body = json.loads(response.data, object_pairs_hook=list)
    if expected[0] == "http":
        _, status, error, challenge, message = expected
        assert response.status_code == status
        assert [key for key, _ in body] == ["error", "message"]
        assert dict(body)["error"] == error
        if message is not None:
            assert dict(body)["message"] == message
        assert response.headers.get("WWW-Authenticate") == challenge
        return
    _, request_id, code, message, reason = expected
    assert response.status_code == 200
    payload = response.get_json()
    assert [key for key, _ in body] == ["jsonrpc", "id", "error"]
    assert payload["id"] == request_id
    assert payload["error"]["code"] == code
    if message is not None:
        assert payload["error"]["message"] == message
    if reason is None:
        assert list(payload["error"]) == ["code", "message"]
    else:
        assert payload["error"]["data"][0]["reason"] == reason
    assert door.session.closing is False


# --- peer consent (step 3): one answer, byte for byte -----------------------------------


PEER_REQUESTS = [
    pytest.param(dict(body=rpc("GetTask", {"id": "t"}), headers=[V1]), id="GetTask"),
    pytest.param(dict(body=rpc("SendMessage", {"message": MESSAGE}), headers=[V1]),
                 id="SendMessage"),
    pytest.param(dict(body=rpc("murmur.StopSession"), headers=[V1]), id="StopSession"),
    pytest.param(dict(body=rpc("nope"), headers=[]), id="unknown, no version"),
    pytest.param(dict(body=b"{", headers=[V1]), id="not JSON"),
    pytest.param(dict(body=b"", headers=[V1]), id="no body"),
    pytest.param(dict(method="GET", path="/", content_type=None), id="GET /"),
    pytest.param(dict(method="DELETE", path="/x/y"), id="DELETE /x/y"),
    pytest.param(dict(method="GET", path="/resources/files/a.txt", content_type=None),
                 id="files plane"),
    pytest.param(dict(body=rpc("GetTask"), content_type="text/plain"), id="text/plain"),
]


@pytest.mark.parametrize("kind, token", [
    pytest.param("public", None, id="public"),
    pytest.param("auth", OPERATOR, id="auth-operator"),
    pytest.param("auth", WATCHER, id="auth-watcher"),
])
def test_peer_not_accepted_is_byte_identical(kind, token):
    door = build(kind)
    answers = set()
    for param in PEER_REQUESTS:
        kwargs = dict(param.values[0])
        kwargs["headers"] = list(kwargs.get("headers", [])) + [PEER] + ([token] if token else [])
        response = send(door, **kwargs)
        answers.add((response.status, tuple(response.headers.items()), response.data))
    assert len(answers) == 1
    status, headers, data = answers.pop()
    assert status.startswith("403 ")
    assert dict(headers)["Content-Type"] == "application/json"
    assert "WWW-Authenticate" not in dict(headers)
    body = json.loads(data, object_pairs_hook=list)
    assert [key for key, _ in body] == ["error", "message"]
    assert dict(body)["error"] == "peer_not_accepted"
    assert door.session.closing is False


@pytest.mark.parametrize("origin", ["peer", "PEER", " peer "])
def test_peer_origin_value_forms(origin):
    door = build("public")
    response = send(door, body=rpc("GetTask", {"id": "t"}),
                    headers=[V1, ("x-murmur-task-origin", origin)])
    assert response.status_code == 403
    assert response.get_json()["error"] == "peer_not_accepted"


def test_peer_accepted_when_declared():
    door = make_door(exports={"peer_tasks": {"accept": True}})
    response = send(door, body=rpc("GetTask", {"id": "tsk_x"}), headers=[V1, PEER])
    assert response.status_code == 200
    assert response.get_json()["error"]["code"] == -32001


def test_peer_card_is_public():
    door = build("public")
    response = send(door, method="GET", path=CARD, headers=[PEER], content_type=None)
    assert response.status_code == 200
    assert response.get_json()["name"] == "test-agent"


# --- completions (step 9) ------------------------------------------------------------------


@pytest.mark.parametrize("addressed, header", [
    pytest.param("ses_other", [("x-murmur-completion-session", "ses_other")], id="other"),
    pytest.param("", [], id="absent"),
    pytest.param("", [("x-murmur-completion-session", "")], id="empty"),
])
@pytest.mark.parametrize("method", ["SendMessage", "GetTask", "message/send"])
def test_misaddressed_completion(addressed, header, method):
    door = build("public")
    response = send(door, body=rpc(method, {"message": MESSAGE, "tenant": "acme"}),
                    headers=[V1, ("x-murmur-task-origin", "completion"), *header])
    assert response.status_code == 200
    error = response.get_json()["error"]
    assert error["code"] == -31001
    assert error["data"] == [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                              "reason": "COMPLETION_MISADDRESSED", "domain": "murmur.nexus",
                              "metadata": {"addressedSession": addressed}}]
    assert door.session.id.encode() not in response.data
    assert "A2A-Extensions" not in response.headers


def test_addressed_completion_with_another_method_is_not_found():
    door = build("public")
    response = send(door, body=rpc("GetTask", {"id": "t"}),
                    headers=[V1, ("x-murmur-task-origin", "completion"),
                             ("x-murmur-completion-session", "{session}")])
    assert response.data == (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,'
                             b'"message":"Method not found"}}')


@pytest.mark.parametrize("delegation, metadata", [
    pytest.param([], {}, id="no delegation"),
    pytest.param([("x-murmur-delegation-id", "dlg_nope")], {"delegationId": "dlg_nope"},
                 id="unknown delegation"),
])
def test_addressed_completion_not_awaited(delegation, metadata):
    door = build("public")
    response = send(door, body=rpc("SendMessage", [1, 2]),      # before params is read
                    headers=[V1, ("x-murmur-task-origin", "completion"),
                             ("x-murmur-completion-session", "{session}"), *delegation])
    error = response.get_json()["error"]
    assert error["code"] == -31002
    assert error["data"] == [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                              "reason": "COMPLETION_NOT_AWAITED", "domain": "murmur.nexus",
                              "metadata": metadata}]
