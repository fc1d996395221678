"""The hub's request path: a trailing slash on the RPC URL, one credential a request, and the
stream's body written as the door's is (bounded chunks, the write deadline, the socket's
timeout restored)."""
from __future__ import annotations

import json
import socket

import pytest
from werkzeug.test import EnvironBuilder

from murmur_wsgi.hub.auth import BOTH
from murmur_wsgi.hub.sse import HubStream
from murmur_wsgi.streams.sse import HEARTBEAT, PENDING_BYTES

from tests.hub.conftest import KEY_A, V1, HubClient, send_params, token

A2A = {"Cache-Control": "private, no-store", "Vary": "Authorization, X-API-Key, X-Tenant-ID"}


def _ok_headers(response):
    for name, value in A2A.items():
        assert response.headers[name] == value


def test_a_post_with_one_trailing_slash_is_served_as_the_agents_url(hub):
    client = HubClient(hub)
    body = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": send_params("hi")}
    response = client.client.post("/a2a/v1/agents/echo/", data=json.dumps(body),
                                  headers={**V1, "X-API-Key": KEY_A},
                                  content_type="application/json")
    assert response.status_code == 200
    payload = response.get_json()
    assert payload["id"] == 7 and payload["result"]["task"]["status"]["state"] == (
        "TASK_STATE_COMPLETED")
    _ok_headers(response)
    task_id = payload["result"]["task"]["id"]
    again = client.client.post("/a2a/v1/agents/echo/", data=json.dumps(
        {"jsonrpc": "2.0", "id": 8, "method": "GetTask", "params": {"id": task_id}}),
        headers={**V1, "X-API-Key": KEY_A}, content_type="application/json")
    assert again.get_json()["result"]["id"] == task_id


@pytest.mark.parametrize("method, path", [
    ("POST", "/a2a/v1/agents/echo//"), ("POST", "/a2a/v1/agents//"),
    ("GET", "/a2a/v1/agents/echo/"), ("POST", "/a2a/v1/agents/echo/x/"),
    ("GET", "/a2a/v1/agents/echo/.well-known/agent-card.json/"),
    ("POST", "/a2a/v1/agents/echo/.well-known/agent-card.json/"),
])
def test_every_other_trailing_slash_stays_404(hub, method, path):
    response = HubClient(hub).client.open(path, method=method, headers={"X-API-Key": KEY_A},
                                          data=b"{}", content_type="application/json")
    assert (response.status_code, response.get_json()) == (404, {"error": "not found"})
    _ok_headers(response)


@pytest.mark.parametrize("method, raw", [
    ("POST", "/a2a%2Fv1%2Fagents%2Fecho"), ("POST", "/a2a/v1/agents/%65cho"),
    ("GET", "/a2a/v1/agents/echo%2F.well-known/agent-card.json"),
    ("GET", "/a2a/v1/agents/echo/.well-known%2Fagent-card.json"),
])
def test_a_path_sent_percent_encoded_is_404(hub, method, raw):
    # NOTE: before, PATH_INFO (decoded by the server) was routed: each was served, the RPC
    # answered and the card given, where a proxy judging the path as sent saw another.
    decoded = raw.replace("%2F", "/").replace("%65", "e")
    response = HubClient(hub).client.open(
        decoded, method=method, headers={**V1, "X-API-Key": KEY_A}, content_type=
        "application/json", data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                             "params": {"id": "x"}}),
        environ_overrides={"RAW_URI": raw + "?q=%20"})
    assert (response.status_code, response.get_json()) == (404, {"error": "not found"})
    _ok_headers(response)
    plain = HubClient(hub).client.open(decoded, method=method, headers={
        **V1, "X-API-Key": KEY_A}, content_type="application/json", data=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}),
        environ_overrides={"RAW_URI": decoded + "?q=%20"})
    assert plain.status_code == 200            # the same path sent plain: served


@pytest.mark.parametrize("keys", [("RAW_URI",), ("REQUEST_URI",), ("RAW_URI", "REQUEST_URI")],
                         ids=["gunicorn", "uwsgi-mod_wsgi", "werkzeug"])
def test_a_path_sent_percent_encoded_is_404_in_whichever_key_the_server_gives(hub, keys):
    """gunicorn gives the path as sent in ``RAW_URI``, uWSGI and mod_wsgi in
    ``REQUEST_URI`` only, Werkzeug in both. Only ``RAW_URI`` was read: under uWSGI or
    mod_wsgi ``/a2a/v1/agents/%65cho`` was served (200), where gunicorn answered 404."""
    from werkzeug.test import run_wsgi_app

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})
    answers = []
    for raw in ("/a2a/v1/agents/%65cho", "/a2a/v1/agents/echo"):
        builder = EnvironBuilder(path="/a2a/v1/agents/echo", method="POST", data=body,
                                 headers={**V1, "X-API-Key": KEY_A},
                                 content_type="application/json")
        try:
            environ = builder.get_environ()
            for key in ("RAW_URI", "REQUEST_URI"):
                environ.pop(key)
            environ.update(dict.fromkeys(keys, raw + "?q=%20"))
            _, status, _ = run_wsgi_app(hub, environ, buffered=True)
        finally:
            builder.close()
        answers.append(status)
    assert answers == ["404 Not Found", "200 OK"]


def test_the_card_keeps_its_url_without_a_slash(hub):
    card = HubClient(hub).card().get_json()
    assert card["supportedInterfaces"][0]["url"].endswith("/a2a/v1/agents/echo")


@pytest.mark.parametrize("authorization", [
    pytest.param(lambda: f"Bearer {token()}", id="a valid JWT"),
    pytest.param(lambda: "Bearer not-a-jwt", id="a bad JWT"),
    pytest.param(lambda: "Basic dXNlcjpwYXNz", id="another scheme"),
])
@pytest.mark.parametrize("what", ["card", "rpc"])
def test_a_request_with_both_credentials_is_refused(hub, authorization, what):
    """X-API-Key and Authorization together: 401, whichever of them would verify."""
    headers = {"X-API-Key": KEY_A, "Authorization": authorization(), "X-Tenant-ID": "acme"}
    client = HubClient(hub, headers=headers)
    response = client.card() if what == "card" else client.call("GetTask", {"id": "x"})
    assert (response.status_code, response.get_json()) == (401, {"error": BOTH})
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="murmur-hub"'
    _ok_headers(response)


def test_either_credential_alone_still_answers(hub):
    assert HubClient(hub).card().status_code == 200
    jwt_only = HubClient(hub, headers={"Authorization": f"Bearer {token()}",
                                       "X-Tenant-ID": "acme"})
    assert jwt_only.card().status_code == 200


def test_the_hubs_stream_is_written_in_chunks_of_at_most_pending_bytes():
    big = '{"text":"' + "x" * (3 * PENDING_BYTES) + '"}'
    answers = iter([([big, '{"n":1}'], True)])
    stream = HubStream(1, ['{"task":{}}'], lambda timeout: next(answers), environ={},
                       keepalive=15, write_timeout=10)
    chunks = list(stream)
    assert all(len(chunk) <= PENDING_BYTES for chunk in chunks) and len(chunks) >= 3
    text = b"".join(chunks).decode()
    assert text == ('data: {"jsonrpc":"2.0","id":1,"result":{"task":{}}}\n\n'
                    f'data: {{"jsonrpc":"2.0","id":1,"result":{big}}}\n\n'
                    'data: {"jsonrpc":"2.0","id":1,"result":{"n":1}}\n\n')
    assert stream.finished


def test_the_hubs_stream_beats_and_ends_with_its_lifetime():
    now = [0.0]

    def source(timeout):
        now[0] += timeout
        return [], False

    stream = HubStream("s", [], source, environ={}, keepalive=15, write_timeout=10,
                       lifetime=40, expired={"code": -32000, "message": "old"},
                       clock=lambda: now[0])
    chunks = list(stream)
    assert chunks[:2] == [HEARTBEAT, HEARTBEAT] and len(chunks) == 3
    assert chunks[-1] == b'data: {"jsonrpc":"2.0","id":"s","error":{"code":-32000,' \
                         b'"message":"old"}}\n\n'
    assert now[0] == 40 and stream.finished


def test_the_socket_has_the_write_deadline_during_a_stream_and_its_own_timeout_after(hub):
    """The hub's stream runs under the shared write deadline, and the socket's own timeout
    (gunicorn's) comes back when the stream ends."""
    left, right = socket.socketpair()
    try:
        left.settimeout(5.0)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                           "params": send_params("a b c")})
        environ = EnvironBuilder(path="/a2a/v1/agents/tokens", method="POST", data=body,
                                 content_type="application/json",
                                 headers={**V1, "X-API-Key": KEY_A}).get_environ()
        environ["gunicorn.socket"] = left
        statuses = []
        answer = hub(environ, lambda status, headers, exc_info=None: statuses.append(status))
        during = []
        chunks = []
        for chunk in answer:
            during.append(left.gettimeout())
            chunks.append(chunk)
        answer.close()
        assert statuses == ["200 OK"]
        assert set(during) == {hub.config.stream["write_timeout_secs"]}
        assert left.gettimeout() == 5.0
        assert b"TASK_STATE_COMPLETED" in b"".join(chunks)
    finally:
        left.close()
        right.close()
