"""Steps 2 and 11: the bearer token and the method's scope, answered exactly."""
from __future__ import annotations

import json
import logging
import re

import pytest
from werkzeug.test import Client

from murmur_wsgi import create_app
from murmur_wsgi.door.middleware import auth
from murmur_wsgi.door.tasks.record import TaskRecord

from tests.conftest import V1, Rpc, make_door

AUTH = {"scheme": "bearer", "credentials": {
    "alpha": {"scopes": ["GetTask"]},
    "beta": {"scopes": ["ListTasks", "resources/files"]},
}}
REALM = 'Bearer realm="test-agent"'
UNAUTHENTICATED = (b'{"error":"unauthenticated","message":"this door takes a token this '
                   b"capsule's runtime minted, as Authorization: Bearer <token>\"}")
INVALID = (b'{"error":"invalid_token","message":"the Authorization header does not present a '
           b'token this session minted"}')
EXISTING = "tsk_" + "1" * 32
MISSING = "tsk_" + "2" * 32


def auth_door(**overrides):
    network = {"authentication": AUTH}
    return make_door(network=network, **overrides)


def bearer(door, name="operator"):
    return {"Authorization": f"Bearer {door.tokens.tokens[name]}"}


def wire(response):
    """Everything a response says: status, every header in order, the body bytes."""
    return response.status, list(response.headers.items()), response.get_data()


def refusal(status, body, challenge=None):
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if challenge is not None:
        headers.append(("WWW-Authenticate", challenge))
    return status, headers, body


def scope_refusal(credential, scope):
    body = json.dumps({"error": "insufficient_scope",
                       "message": f"credential '{credential}' does not reach {scope}"},
                      separators=(",", ":")).encode()
    return refusal("403 Forbidden", body,
                   f'{REALM}, error="insufficient_scope", scope="{scope}"')


NO_TOKEN = refusal("401 Unauthorized", UNAUTHENTICATED, REALM)
BAD_TOKEN = refusal("401 Unauthorized", INVALID, f'{REALM}, error="invalid_token"')


def add_task(door, task_id=EXISTING, owner=None):
    door.session.store.add(TaskRecord(task_id, "ctx_" + "3" * 32, owner=owner))


# --- tokens ------------------------------------------------------------------------------


def test_tokens_are_minted_per_credential_and_per_launch():
    first, second = auth_door(), auth_door()
    assert list(first.tokens.tokens) == ["operator", "alpha", "beta"]
    tokens = list(first.tokens.tokens.values()) + list(second.tokens.tokens.values())
    assert len(set(tokens)) == 6                      # a restart mints new ones
    for token in tokens:
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)   # 32 random bytes, url-safe


def test_a_public_door_mints_no_token():
    door = make_door()
    assert door.tokens.enabled is False
    assert door.tokens.tokens == {}


def test_lookup_compares_every_minted_token(monkeypatch):
    door = auth_door()
    calls = []
    real = auth.hmac.compare_digest

    def counting(a, b):
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    assert door.tokens.lookup(door.tokens.tokens["operator"]).name == "operator"
    assert len(calls) == 3                            # no early exit on the first match
    assert door.tokens.lookup("nope") is None
    assert len(calls) == 6


def test_tokens_never_reach_a_log_or_repr(caplog):
    door = auth_door()
    rpc = Rpc(door)
    caplog.set_level(logging.DEBUG)
    for name in ("operator", "alpha", "beta"):
        rpc.call("GetTask", {"id": MISSING}, headers=bearer(door, name))
        rpc.call("SendMessage", {}, headers=bearer(door, name))
    rpc.call("GetTask", {"id": MISSING},
             headers={"Authorization": "Bearer " + door.tokens.tokens["alpha"] + "x"})
    for token in door.tokens.tokens.values():
        assert token not in caplog.text
        assert token not in repr(door.tokens)


def test_tokens_never_reach_the_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("MURMUR_WSGI_HOME", str(tmp_path))
    door = create_app({"name": "test-agent", "version": "0.1.0",
                       "network": {"authentication": AUTH}}, trace=True)
    rpc = Rpc(door)
    try:
        for name in ("operator", "alpha", "beta"):
            rpc.call("GetTask", {"id": MISSING}, headers=bearer(door, name))
            rpc.call("SendMessage", {}, headers=bearer(door, name))
        rpc.call("GetTask", {"id": MISSING}, headers={"Authorization": "Bearer nope"})
    finally:
        door.close()
    written = [p.read_text() for p in tmp_path.rglob("*") if p.is_file()]
    assert written, "the trace wrote nothing"
    for token in door.tokens.tokens.values():
        assert not any(token in text for text in written)


# --- step 2: the four refusals, exactly --------------------------------------------------


def test_no_authorization_header_is_unauthenticated():
    rpc = Rpc(auth_door())
    assert wire(rpc.call("GetTask", {"id": MISSING})) == NO_TOKEN


@pytest.mark.parametrize("value", [
    pytest.param("Basic {t}", id="basic-scheme"),
    pytest.param("Bearer", id="scheme-only"),
    pytest.param("", id="empty"),
    pytest.param("{t}", id="token-without-scheme"),
    pytest.param("Token {t}", id="other-scheme"),
    pytest.param("Bearer wrong", id="unminted"),
    pytest.param("Bearer {t}x", id="token-plus-one"),
    pytest.param("Bearer {t_upper}", id="token-case-changed"),
    pytest.param("Bearer {t_short}", id="token-prefix"),
    pytest.param("Bearer {t}, Bearer {t}", id="two-values-joined"),
    pytest.param("Bearer {t} {t}", id="two-tokens"),
    pytest.param("Bearer\x00{t}", id="nul"),
    # HTTP's whitespace is space and tab: a latin-1 no-break space or NEL is no separator,
    # and a token followed by one is not the token.
    pytest.param("Bearer {t}\xa0", id="token-then-no-break-space"),
    pytest.param("Bearer {t}\x85", id="token-then-nel"),
    pytest.param("Bearer\xa0{t}", id="no-break-space-after-the-scheme"),
    pytest.param("\x85Bearer {t}", id="nel-before-the-scheme"),
])
def test_an_authorization_that_is_not_a_minted_bearer_token_is_invalid(value):
    door = auth_door()
    token = door.tokens.tokens["operator"]
    header = value.format(t=token, t_upper=token.swapcase(), t_short=token[:-1])
    response = Rpc(door).call("GetTask", {"id": MISSING}, headers={"Authorization": header})
    assert wire(response) == BAD_TOKEN


@pytest.mark.parametrize("second", ["same", "other", "wrong"])
def test_two_authorization_header_lines_are_invalid(second):
    door = auth_door()
    token = door.tokens.tokens["operator"]
    other = {"same": token, "other": door.tokens.tokens["alpha"], "wrong": "x"}[second]
    response = Client(door).post("/", data=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": MISSING}}),
        content_type="application/json",
        headers=[("A2A-Version", "1.0"), ("Authorization", f"Bearer {token}"),
                 ("Authorization", f"Bearer {other}")])
    assert wire(response) == BAD_TOKEN


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_scheme_matches_in_any_case(scheme):
    door = auth_door()
    token = door.tokens.tokens["alpha"]
    error = Rpc(door).error("GetTask", {"id": MISSING},
                            headers={"Authorization": f"{scheme} {token}"})
    assert error["code"] == -32001


def test_a_lacking_scope_names_the_credential_and_the_scope():
    door = auth_door()
    response = Rpc(door).call("SendMessage", {}, headers=bearer(door, "alpha"))
    assert wire(response) == scope_refusal("alpha", "SendMessage")


def test_the_realm_is_the_capsule_name_quoted():
    door = create_app({"name": 'say "hi"\\x', "version": "1",
                       "network": {"authentication": AUTH}})
    response = Rpc(door).call("GetTask", {"id": MISSING})
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="say \\"hi\\"\\\\x"'


# A header value as RFC 9110 (and gunicorn, which answers 500 for any other) takes it.
HEADER_VALUE = re.compile(r"[ \t\x21-\x7e\x80-\xff]*")


@pytest.mark.parametrize("name", ["two\nlines", "cr\rname", "nul\x00", "esc\x1b[0m",
                                  "del\x7f", "tab\tname"])
def test_a_name_with_a_control_character_still_makes_a_header_value(name):
    door = create_app({"name": name, "version": "1", "network": {"authentication": AUTH}})
    rpc = Rpc(door)
    shown = "".join("?" if (ord(c) < 32 and c != "\t") or ord(c) == 127 else c for c in name)
    for headers, status in (({}, 401), ({"Authorization": "Bearer nope"}, 401),
                            (bearer(door, "alpha"), 403)):
        response = rpc.call("ListTasks", {}, headers=headers)
        assert response.status_code == status
        challenge = response.headers["WWW-Authenticate"]
        assert HEADER_VALUE.fullmatch(challenge), challenge
        assert challenge.startswith(f'Bearer realm="{shown}"'), challenge


def test_a_public_door_ignores_authorization():
    rpc = Rpc(make_door())
    error = rpc.error("GetTask", {"id": MISSING}, headers={"Authorization": "Bearer nope"})
    assert error["code"] == -32001


@pytest.mark.parametrize("method", ["GET", "POST", "PUT"])
@pytest.mark.parametrize("path, body", [
    pytest.param("/resources/peer/mh1.x.y", b'{"error":"no_peer_plane","message":"this capsule '
                 b'declares no peer plane"}', id="peer-plane"),
    pytest.param("/control", b'{"error":"not_found","message":"this capsule declares no '
                 b'control surface"}', id="control"),
])
@pytest.mark.parametrize("authorization", [None, "Bearer nope"])
def test_the_peer_plane_and_the_control_surface_need_no_door_token(method, path, body,
                                                                   authorization):
    # Step 1: served without a door token, so never a 401 (the control surface takes its own).
    headers = {} if authorization is None else {"Authorization": authorization}
    response = Client(auth_door()).open(path, method=method, headers=headers)
    assert wire(response) == refusal("404 Not Found", body)


def test_the_card_needs_no_token():
    response = Client(auth_door()).get("/.well-known/agent-card.json",
                                       headers={"Authorization": "Bearer nope"})
    assert response.status_code == 200


# --- a refusal says nothing about what exists --------------------------------------------


@pytest.fixture
def exported(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").write_bytes(b"hello")
    door = create_app({"name": "test-agent", "version": "0.1.0",
                       "network": {"authentication": AUTH},
                       "exports": {"files": {"root": "out/", "mode": "read-only"}}},
                      workdir=str(tmp_path))
    add_task(door)
    return door


def _requests(door):
    """Requests naming things that exist and things that do not, many ways."""
    client = Client(door)

    def rpc(method, params):
        body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
        return lambda headers: client.post("/", data=body, headers={**V1, **headers},
                                           content_type="application/json")

    return {
        "get-existing": rpc("GetTask", {"id": EXISTING}),
        "get-missing": rpc("GetTask", {"id": MISSING}),
        "cancel-existing": rpc("CancelTask", {"id": EXISTING}),
        "cancel-missing": rpc("CancelTask", {"id": MISSING}),
        "unknown-method": rpc("NoSuchMethod", {}),
        "junk-body": lambda h: client.post("/", data=b"{junk", headers={**V1, **h},
                                           content_type="application/json"),
        "no-version": lambda h: client.post("/", data=b"{}", headers=h,
                                            content_type="application/json"),
        "get-nope": lambda h: client.get("/nope", headers=h),
        "get-root": lambda h: client.get("/", headers=h),
        "file-existing": lambda h: client.get("/resources/files/report.md", headers=h),
        "file-missing": lambda h: client.get("/resources/files/missing.md", headers=h),
        "file-escape": lambda h: client.get("/resources/files/../x", headers=h),
        "listing": lambda h: client.get("/resources/files", headers=h),
        "put-file": lambda h: client.put("/resources/files/report.md", headers=h),
        "card-post": lambda h: client.post("/.well-known/agent-card.json", headers=h),
    }


@pytest.mark.parametrize("case", ["no-token", "wrong-token", "minted-elsewhere"])
def test_a_401_is_the_same_whatever_the_request_names(exported, case):
    headers = {"no-token": {}, "wrong-token": {"Authorization": "Bearer nope"},
               "minted-elsewhere": bearer(auth_door())}[case]
    expected = NO_TOKEN if case == "no-token" else BAD_TOKEN
    for name, send in _requests(exported).items():
        assert wire(send(headers)) == expected, name


def test_a_scope_refusal_is_the_same_for_an_existing_and_a_missing_task(exported):
    requests = _requests(exported)
    beta = bearer(exported, "beta")                   # lacks GetTask and CancelTask
    assert wire(requests["get-existing"](beta)) == wire(requests["get-missing"](beta)) \
        == scope_refusal("beta", "GetTask")
    assert wire(requests["cancel-existing"](beta)) == wire(requests["cancel-missing"](beta)) \
        == scope_refusal("beta", "CancelTask")


def test_a_plane_scope_refusal_is_the_same_for_every_path(exported):
    requests = _requests(exported)
    alpha = bearer(exported, "alpha")                 # lacks resources/files
    expected = scope_refusal("alpha", "resources/files")
    for name in ("file-existing", "file-missing", "file-escape", "listing", "put-file"):
        assert wire(requests[name](alpha)) == expected, name


# --- step 11: the matrix ------------------------------------------------------------------

SCOPED = ["SendMessage", "SendStreamingMessage", "murmur.WatchSession", "GetTask", "ListTasks",
          "CancelTask", "SubscribeToTask", "murmur.StopSession"]
UNSCOPED = ["GetExtendedAgentCard", "CreateTaskPushNotificationConfig",
            "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
            "DeleteTaskPushNotificationConfig"]
PARAMS = {"GetTask": {"id": MISSING}, "CancelTask": {"id": MISSING},
          "SubscribeToTask": {"id": MISSING}}
MATRIX_AUTH = {"scheme": "bearer", "credentials": {
    # Each method is granted to ``holder`` and withheld from ``lacker``.
    "holder": {"scopes": SCOPED + ["resources/files"]},
    "lacker": {"scopes": ["ListTasks"]},
    "lister": {"scopes": ["GetTask"]},
}}


def _matrix_door(tmp_path):
    return create_app({"name": "test-agent", "version": "0.1.0",
                       "network": {"authentication": MATRIX_AUTH},
                       "exports": {"files": {"root": "out/", "mode": "read-only"}}},
                      listen="127.0.0.1:41873", workdir=str(tmp_path))


def _send(door, method, headers):
    if method == "resources/files":
        return Client(door).get("/resources/files", headers=headers)
    return Rpc(door).call(method, PARAMS.get(method), headers=headers)


@pytest.mark.parametrize("case", ["no-token", "wrong-token", "lacking-scope", "right-token"])
@pytest.mark.parametrize("method", SCOPED + UNSCOPED + ["resources/files"])
def test_method_matrix(tmp_path, method, case):
    door = _matrix_door(tmp_path)
    lacker = "lister" if method == "ListTasks" else "lacker"
    headers = {"no-token": {}, "wrong-token": {"Authorization": "Bearer nope"},
               "lacking-scope": bearer(door, lacker),
               "right-token": bearer(door, "holder")}[case]
    response = _send(door, method, headers)
    try:
        if case == "no-token":
            assert wire(response) == NO_TOKEN
        elif case == "wrong-token":
            assert wire(response) == BAD_TOKEN
        elif case == "lacking-scope" and method not in UNSCOPED:
            assert wire(response) == scope_refusal(lacker, method)
        else:
            # Past the token and the scope: whatever the method answers, it is not a refusal.
            assert response.status_code == 200, response.get_data()
            if method in UNSCOPED[1:]:
                assert response.get_json()["error"]["code"] == -32003
            if method == "GetExtendedAgentCard":
                assert response.get_json()["result"]["name"] == "test-agent"
    finally:
        response.close()
        door.close()


def test_the_operator_reaches_every_method(tmp_path):
    door = _matrix_door(tmp_path)
    try:
        for method in SCOPED + UNSCOPED + ["resources/files"]:
            response = _send(door, method, bearer(door, "operator"))
            assert response.status_code == 200, (method, response.get_data())
            response.close()
    finally:
        door.close()


# --- where steps 2 and 11 sit in the order ----------------------------------------------


def test_the_token_is_checked_before_the_version_and_the_body():
    door = auth_door()
    client = Client(door)
    assert wire(client.post("/", data=b"{junk", content_type="application/json")) == NO_TOKEN
    assert wire(client.post("/", data=b"{}", content_type="text/plain",
                            headers={"Authorization": "Bearer nope"})) == BAD_TOKEN


@pytest.mark.parametrize("method,headers,code", [
    pytest.param("SendMessage", {"A2A-Version": "0.3"}, -32009, id="version-before-scope"),
    pytest.param("NoSuchMethod", {}, -32601, id="method-before-scope"),
    pytest.param("GetTaskPushNotificationConfig", {}, -32003, id="push-needs-no-scope"),
])
def test_steps_before_the_scope_answer_first(method, headers, code):
    door = auth_door()
    error = Rpc(door).error(method, {}, headers={**bearer(door, "alpha"), **headers})
    assert error["code"] == code


def test_the_scope_is_checked_before_params():
    door = auth_door()
    response = Rpc(door).call("SendMessage", [1, 2], headers=bearer(door, "alpha"))
    assert wire(response) == scope_refusal("alpha", "SendMessage")


def test_every_valid_token_reads_the_extended_card():
    door = auth_door()
    for name in ("operator", "alpha", "beta"):
        result = Rpc(door).result("GetExtendedAgentCard", None, headers=bearer(door, name))
        assert result["capabilities"]["extendedAgentCard"] is True
