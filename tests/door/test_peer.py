"""Step 3: peer consent, and the origin and trust a request carries."""
from __future__ import annotations

import json

import pytest
from werkzeug.test import Client

from murmur_wsgi import create_app
from murmur_wsgi.door.context import CallContext
from murmur_wsgi.errors import PeerNotAccepted
from murmur_wsgi.door.middleware.peer import check_consent

from tests.conftest import V1, Rpc, make_door

PEER = {"x-murmur-task-origin": "peer", "x-murmur-task-trust": "trusted"}
BODY = b'{"error":"peer_not_accepted","message":"this capsule does not accept tasks from peers"}'
REFUSED = ("403 Forbidden",
           [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))], BODY)
AUTH = {"scheme": "bearer", "credentials": {"alpha": {"scopes": ["GetTask"]}}}
MISSING = "tsk_" + "2" * 32


def wire(response):
    return response.status, list(response.headers.items()), response.get_data()


def rpc_body(method, params=None):
    body = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body)


def every_request(client, headers):
    """Many methods, paths and bodies, each sent with ``headers``."""
    def post(body, extra=None, content_type="application/json", path="/"):
        return client.post(path, data=body, headers={**V1, **headers, **(extra or {})},
                           content_type=content_type)

    return {
        "SendMessage": post(rpc_body("SendMessage", {"message": {
            "messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}})),
        "GetTask": post(rpc_body("GetTask", {"id": MISSING})),
        "ListTasks": post(rpc_body("ListTasks", {})),
        "CancelTask": post(rpc_body("CancelTask", {"id": MISSING})),
        "murmur.StopSession": post(rpc_body("murmur.StopSession")),
        "GetExtendedAgentCard": post(rpc_body("GetExtendedAgentCard")),
        "push": post(rpc_body("GetTaskPushNotificationConfig", {})),
        "unknown-method": post(rpc_body("NoSuchMethod")),
        "junk-body": post(b"{junk"),
        "empty-body": post(b""),
        "text-plain": post(rpc_body("GetTask"), content_type="text/plain"),
        "bad-version": post(rpc_body("GetTask", {"id": MISSING}), {"A2A-Version": "0.3"}),
        "other-path": post(rpc_body("GetTask"), path="/nope"),
        "get-root": client.get("/", headers=headers),
        "get-nope": client.get("/nope", headers=headers),
        "listing": client.get("/resources/files", headers=headers),
        "file": client.get("/resources/files/report.md", headers=headers),
        "put-file": client.put("/resources/files/report.md", headers=headers),
        "card-post": client.post("/.well-known/agent-card.json", headers=headers),
    }


@pytest.mark.parametrize("manifest", [
    pytest.param({}, id="no-peer-tasks-block"),
    pytest.param({"exports": {"peer_tasks": {"accept": False}}}, id="accept-false"),
    pytest.param({"exports": {"files": {"root": "out/", "mode": "read-only"}}},
                 id="files-plane-declared"),
])
def test_a_peer_is_refused_byte_identically_for_every_request(manifest, tmp_path):
    door = create_app({"name": "test-agent", "version": "0.1.0", **manifest},
                      workdir=str(tmp_path))
    for name, response in every_request(Client(door), PEER).items():
        assert wire(response) == REFUSED, name
        assert "WWW-Authenticate" not in response.headers


@pytest.mark.parametrize("value", ["peer", "PEER", " Peer ", "peer, completion",
                                   "completion, peer"])
def test_any_spelling_or_second_line_of_peer_is_refused(value):
    response = Rpc(make_door()).call("GetTask", {"id": MISSING},
                                     headers={"x-murmur-task-origin": value})
    assert wire(response) == REFUSED


def test_two_origin_header_lines_naming_peer_are_refused():
    response = Client(make_door()).post(
        "/", data=rpc_body("GetTask", {"id": MISSING}), content_type="application/json",
        headers=[("A2A-Version", "1.0"), ("x-murmur-task-origin", "completion"),
                 ("x-murmur-task-origin", "peer")])
    assert wire(response) == REFUSED


def test_a_capsule_accepting_peers_serves_them():
    rpc = Rpc(make_door(exports={"peer_tasks": {"accept": True}}))
    assert rpc.error("GetTask", {"id": MISSING}, headers=PEER)["code"] == -32001


@pytest.mark.parametrize("origin", ["user", "event", "", "completion-ish"])
def test_other_origins_are_not_peers(origin):
    rpc = Rpc(make_door())
    error = rpc.error("GetTask", {"id": MISSING}, headers={"x-murmur-task-origin": origin})
    assert error["code"] == -32001


def test_a_completion_is_not_refused_as_a_peer():
    rpc = Rpc(make_door())
    error = rpc.error("SendMessage", {}, headers={"x-murmur-task-origin": "completion",
                                                  "x-murmur-completion-session": "ses_other"})
    assert error["code"] == -31001


# --- the order: step 1 before, step 2 before, step 4 after -----------------------------


def test_public_routes_answer_a_peer():
    client = Client(make_door())
    assert client.get("/.well-known/agent-card.json", headers=PEER).status_code == 200
    peer_plane = client.get("/resources/peer/mh1.x.y", headers=PEER)
    assert peer_plane.status_code == 404
    assert peer_plane.get_json()["error"] == "no_peer_plane"
    control = client.get("/control", headers=PEER)      # the control surface takes its own token
    assert control.status_code == 404
    assert control.get_json()["error"] == "not_found"


def test_an_authenticated_door_checks_the_token_first():
    door = make_door(network={"authentication": AUTH})
    rpc = Rpc(door)
    no_token = rpc.call("GetTask", {"id": MISSING}, headers=PEER)
    assert no_token.status_code == 401
    assert no_token.get_json()["error"] == "unauthenticated"
    wrong = rpc.call("GetTask", {"id": MISSING}, headers={**PEER, "Authorization": "Bearer x"})
    assert wrong.status_code == 401
    assert wrong.get_json()["error"] == "invalid_token"


def test_an_authenticated_door_refuses_a_peer_with_a_valid_token_identically():
    door = make_door(network={"authentication": AUTH})
    for name in ("operator", "alpha"):
        headers = {**PEER, "Authorization": f"Bearer {door.tokens.tokens[name]}"}
        for request, response in every_request(Client(door), headers).items():
            assert wire(response) == REFUSED, (name, request)


def test_peer_consent_is_checked_before_the_scope():
    door = make_door(network={"authentication": AUTH})
    headers = {**PEER, "Authorization": f"Bearer {door.tokens.tokens['alpha']}"}
    assert wire(Rpc(door).call("SendMessage", {}, headers=headers)) == REFUSED
    assert wire(Client(door).get("/resources/files", headers=headers)) == REFUSED


# --- origin and trust, as the task records them -----------------------------------------


@pytest.mark.parametrize("headers,origin,trust", [
    pytest.param({}, None, "untrusted", id="plain-client"),
    pytest.param({"HTTP_X_MURMUR_TASK_TRUST": "trusted"}, None, "untrusted",
                 id="trust-without-origin-is-ignored"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "user",
                  "HTTP_X_MURMUR_TASK_TRUST": "trusted"}, None, "untrusted",
                 id="origin-not-from-the-wire"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "peer"}, "peer", "untrusted",
                 id="peer-missing-trust"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "peer",
                  "HTTP_X_MURMUR_TASK_TRUST": "trusted"}, "peer", "trusted", id="peer-trusted"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "peer",
                  "HTTP_X_MURMUR_TASK_TRUST": "Trusted "}, "peer", "trusted",
                 id="trust-any-case"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "peer",
                  "HTTP_X_MURMUR_TASK_TRUST": "untrusted"}, "peer", "untrusted",
                 id="peer-untrusted"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "peer",
                  "HTTP_X_MURMUR_TASK_TRUST": "root"}, "peer", "untrusted",
                 id="unknown-trust"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "peer",
                  "HTTP_X_MURMUR_TASK_TRUST": "trusted, untrusted"}, "peer", "untrusted",
                 id="two-trust-lines"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "completion",
                  "HTTP_X_MURMUR_TASK_TRUST": "trusted"}, "completion", "trusted",
                 id="completion-trusted"),
    pytest.param({"HTTP_X_MURMUR_TASK_ORIGIN": "completion"}, "completion", "untrusted",
                 id="completion-missing-trust"),
])
def test_origin_and_trust_are_recorded(headers, origin, trust):
    ctx = CallContext()
    check_consent(headers, ctx, accept=True)
    assert (ctx.origin, ctx.trust) == (origin, trust)


def test_check_consent_refuses_a_peer_when_not_accepted():
    ctx = CallContext()
    with pytest.raises(PeerNotAccepted):
        check_consent({"HTTP_X_MURMUR_TASK_ORIGIN": "peer"}, ctx, accept=False)
