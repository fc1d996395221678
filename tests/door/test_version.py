"""Step 8: the A2A-Version header, every row of the spec's table."""
from __future__ import annotations

import json

import pytest
from werkzeug.test import Client

from tests.conftest import make_door

GET_TASK = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "tsk_nope"}}


def version_error(requested: str, request_id=1):
    """The -32009 body of the spec, key by key (objects as lists of pairs)."""
    return json.loads(json.dumps(
        {"jsonrpc": "2.0", "id": request_id,
         "error": {"code": -32009,
                   "message": f"A2A version '{requested}' is not supported; this agent speaks 1.0",
                   "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                             "reason": "VERSION_NOT_SUPPORTED",
                             "domain": "a2a-protocol.org",
                             "metadata": {"requestedVersion": requested,
                                          "supportedVersions": "1.0"}}]}}),
        object_pairs_hook=list)


def wire(response):
    """The answer's JSON body with its key order: one JSON body, HTTP 200."""
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    return json.loads(response.data, object_pairs_hook=list)


def post(door, headers, body=None, path="/"):
    """POST with exactly the given header lines (a list keeps repeated lines)."""
    data = json.dumps(GET_TASK if body is None else body)
    return Client(door).post(path, data=data, headers=headers, content_type="application/json")


def served(response) -> bool:
    """True when the request passed step 8 (GetTask on an unknown id answers -32001)."""
    return response.status_code == 200 and response.get_json()["error"]["code"] == -32001


@pytest.fixture
def door():
    return make_door()


@pytest.mark.parametrize("value", [
    pytest.param("1.0", id="1.0"),
    pytest.param("1.0.1", id="1.0.1"),
    pytest.param("1.0.0", id="1.0.0"),
    pytest.param("1.0.42", id="1.0.42"),
    pytest.param(" 1.0 ", id="surrounding-spaces"),
    pytest.param("\t1.0.1 ", id="surrounding-tab"),
])
def test_served_versions(door, value):
    assert served(post(door, [("A2A-Version", value)]))


@pytest.mark.parametrize("headers, requested", [
    pytest.param([], "", id="absent"),
    pytest.param([("A2A-Version", "")], "", id="empty"),
    pytest.param([("A2A-Version", "   ")], "", id="blank"),
    pytest.param([("A2A-Version", "1.1")], "1.1", id="1.1"),
    pytest.param([("A2A-Version", "0.3")], "0.3", id="0.3"),
    pytest.param([("A2A-Version", "1")], "1", id="1"),
    pytest.param([("A2A-Version", "1.0x")], "1.0x", id="1.0x"),
    pytest.param([("A2A-Version", "2.0")], "2.0", id="2.0"),
    pytest.param([("A2A-Version", "1.0.")], "1.0.", id="1.0-dot"),
    pytest.param([("A2A-Version", "1.0.1a")], "1.0.1a", id="1.0.1a"),
    pytest.param([("A2A-Version", "1.0.1.2")], "1.0.1.2", id="1.0.1.2"),
    pytest.param([("A2A-Version", "v1.0")], "v1.0", id="v1.0"),
    pytest.param([("A2A-Version", "01.0")], "01.0", id="01.0"),
    pytest.param([("A2A-Version", "1.00")], "1.00", id="1.00"),
    pytest.param([("A2A-Version", "1.0\u00a0")], "1.0\u00a0", id="nbsp-is-not-whitespace"),
    # Two header lines: refused whatever their values; the lines joined with ",".
    pytest.param([("A2A-Version", "1.0"), ("A2A-Version", "1.0")], "1.0,1.0", id="two-1.0"),
    pytest.param([("A2A-Version", "1.0"), ("A2A-Version", "0.3")], "1.0,0.3", id="two-mixed"),
    pytest.param([("A2A-Version", "0.3"), ("A2A-Version", "1.0.1")], "0.3,1.0.1",
                 id="two-mixed-reversed"),
    pytest.param([("A2A-Version", "1.0"), ("A2A-Version", "")], "1.0,", id="two-one-empty"),
    pytest.param([("A2A-Version", "1.0"), ("a2a-version", "1.0"), ("A2A-VERSION", "1.0")],
                 "1.0,1.0,1.0", id="three-any-case"),
])
def test_refused_versions(door, headers, requested):
    response = post(door, headers)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert "A2A-Extensions" not in response.headers
    assert wire(response) == version_error(requested)


@pytest.mark.parametrize("name", ["A2A-Version", "a2a-version", "A2A-VERSION", "a2A-vErSiOn"])
def test_header_name_in_any_case(door, name):
    assert served(post(door, [(name, "1.0")]))
    assert wire(post(door, [(name, "0.3")])) == version_error("0.3")


@pytest.mark.parametrize("query", ["A2A-Version=1.0", "a2a-version=1.0", "A2A-Version=1.0.1"])
def test_query_parameter_does_not_set_the_version(door, query):
    response = post(door, [], path=f"/?{query}")
    assert wire(response) == version_error("")
    # ...and does not unset it either.
    assert served(post(door, [("A2A-Version", "1.0")], path=f"/?{query}"))


@pytest.mark.parametrize("method", [
    "SendMessage", "SendStreamingMessage", "murmur.WatchSession", "murmur.StopSession",
    "SubscribeToTask", "GetTask", "ListTasks", "CancelTask", "GetExtendedAgentCard",
    "CreateTaskPushNotificationConfig", "message/send", "NoSuchMethod",
])
def test_every_method_is_negotiated_as_one_json_body(door, method):
    body = {"jsonrpc": "2.0", "id": "v-1", "method": method,
            "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                                   "parts": [{"text": "hi"}]}, "id": "tsk_x", "tenant": "t"}}
    response = post(door, [("A2A-Version", "0.3"),
                           ("A2A-Extensions",
                            "https://docs.murmur.nexus/reference/streaming-protocol/"
                            "#murmur-stream-v1")], body)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Content-Length"] == str(len(response.data))
    assert "A2A-Extensions" not in response.headers
    assert wire(response) == version_error("0.3", "v-1")


def test_refusal_starts_and_stops_nothing(door):
    before = door.session.closing
    post(door, [], {"jsonrpc": "2.0", "id": 2, "method": "murmur.StopSession"})
    post(door, [], {"jsonrpc": "2.0", "id": 3, "method": "SendMessage",
                    "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                                           "parts": [{"text": "hi"}]}}})
    assert door.session.closing == before
    ok = post(door, [("A2A-Version", "1.0")])
    assert served(ok)


def test_id_echo_on_version_refusal(door):
    for request_id in (7, "abc", -1, 2 ** 63):
        body = dict(GET_TASK, id=request_id)
        assert wire(post(door, [], body)) == version_error("", request_id)


def test_card_and_planes_read_no_version(door):
    client = Client(door)
    card = client.get("/.well-known/agent-card.json", headers=[("A2A-Version", "0.3")])
    assert card.status_code == 200
    plane = client.get("/resources/files/x", headers=[("A2A-Version", "0.3")])
    assert plane.status_code == 404
    assert set(plane.get_json()) == {"error", "message"}


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
def test_a_refused_message_starts_no_task(door, method):
    body = {"jsonrpc": "2.0", "id": 2, "method": method,
            "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                                   "parts": [{"text": "hi"}]}}}
    assert wire(post(door, [("A2A-Version", "0.3")], body)) == version_error("0.3", 2)
    assert len(door.session.store) == 0 and door.session.ring.last_id == 0


@pytest.mark.parametrize("method", ["murmur.StopSession", "CancelTask"])
def test_a_refused_stop_or_cancel_stops_nothing(method):
    door = make_door(capabilities={"shell": {"allow": ["sleep"]}})
    try:
        live = post(door, [("A2A-Version", "1.0")], {
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                                   "parts": [{"text": "/sleep 30"}]},
                       "configuration": {"returnImmediately": True}}}).get_json()
        task_id = live["result"]["task"]["id"]
        body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"id": task_id}}
        assert wire(post(door, [], body)) == version_error("", 3)
        assert door.session.store.get(task_id).state in ("TASK_STATE_SUBMITTED",
                                                         "TASK_STATE_WORKING")
    finally:
        door.close()


def test_the_peer_plane_and_the_control_surface_read_no_version(door):
    client = Client(door)
    for path, error in (("/resources/peer/mh1.x.y", "no_peer_plane"), ("/control", "not_found")):
        answers = {(r.status, r.data) for r in (
            client.get(path, headers=headers)
            for headers in ([], [("A2A-Version", "0.3")], [("A2A-Version", "1.0")]))}
        [(status, data)] = answers
        assert status == "404 Not Found" and json.loads(data)["error"] == error, path
