"""Routes, credentials and cards: the matrix of credentials × {card, each method}, on the
memory store and on Redis."""
from __future__ import annotations

import base64
import json
import time

import jwt
import pytest
from a2a.types.a2a_pb2 import AgentCard
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from google.protobuf.json_format import ParseDict

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import (AUDIENCE, ISSUER, KEY_A, KEY_B, PUBLIC, SECRET, HubClient,
                                agent, hub_config, send_params, token)

# NOTE: on both stores: on Redis a presented key is also looked up in the store's table of
# keys (docs/hub.md, "Keys without a restart"), so each refusal is asserted there too.

A2A = {"Cache-Control": "private, no-store", "Vary": "Authorization, X-API-Key, X-Tenant-ID"}
UNAUTHENTICATED = (401, {"error": "unauthenticated"})
NO_TENANT = (401, {"error": "no tenant in context"})
AGENT_NOT_FOUND = (404, {"error": "agent not found"})


def _none_token() -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(json.dumps(
        {"sub": "x", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300,
         "role": "operator"}).encode()).rstrip(b"=").decode()
    return f"{head}.{body}."


def _signed(claims: dict) -> str:
    """A token of the test secret: issuer, audience and a day's expiry, then ``claims``
    (a claim given None is left out)."""
    body = {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 86_400, **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, SECRET,
                      algorithm="HS256")


CREDENTIALS = {
    "none": ({}, UNAUTHENTICATED),
    "bad-key": ({"X-API-Key": "mhk_wrong"}, UNAUTHENTICATED),
    "key-a": ({"X-API-Key": KEY_A}, None),
    "key-b": ({"X-API-Key": KEY_B}, AGENT_NOT_FOUND),
    "jwt-no-tenant": ({"Authorization": f"Bearer {token()}"}, NO_TENANT),
    "jwt-other-tenant": ({"Authorization": f"Bearer {token(['globex'])}",
                          "X-Tenant-ID": "acme"}, UNAUTHENTICATED),
    "jwt-expired": ({"Authorization": f"Bearer {token(exp_in=-60)}", "X-Tenant-ID": "acme"},
                    UNAUTHENTICATED),
    "jwt-alg-none": ({"Authorization": f"Bearer {_none_token()}", "X-Tenant-ID": "acme"},
                     UNAUTHENTICATED),
    "jwt-a": ({"Authorization": f"Bearer {token()}", "X-Tenant-ID": "acme"}, None),
}
METHODS = {
    "SendMessage": lambda: send_params("hi"),
    "SendStreamingMessage": lambda: send_params("hi"),
    "GetTask": lambda: {"id": "nope"},
    "ListTasks": lambda: {},
    "CancelTask": lambda: {"id": "nope"},
    "SubscribeToTask": lambda: {"id": "nope"},
    "CreateTaskPushNotificationConfig": lambda: {"taskId": "nope", "url": "https://x.io/h"},
    "GetTaskPushNotificationConfig": lambda: {"taskId": "nope", "id": "c"},
    "ListTaskPushNotificationConfigs": lambda: {"taskId": "nope"},
    "DeleteTaskPushNotificationConfig": lambda: {"taskId": "nope", "id": "c"},
}
# What a credential that reaches the agent gets from each method (the agent is "tokens").
OK_CODES = {"GetTask": -32001, "CancelTask": -32001, "SubscribeToTask": -32001,
            "CreateTaskPushNotificationConfig": -32004, "GetTaskPushNotificationConfig": -32004,
            "ListTaskPushNotificationConfigs": -32004, "DeleteTaskPushNotificationConfig": -32004}


def _headers_ok(response):
    for name, value in A2A.items():
        assert response.headers[name] == value


@pytest.mark.parametrize("target", ["card", *METHODS])
@pytest.mark.parametrize("credential", list(CREDENTIALS))
def test_matrix(hub, credential, target):
    headers, refusal = CREDENTIALS[credential]
    client = HubClient(hub, "tokens", headers)
    if target == "card":
        response = client.card()
    else:
        response = client.call(target, METHODS[target]())
    _headers_ok(response)
    if refusal is not None:
        assert (response.status_code, response.get_json()) == refusal
        if refusal[0] == 401:
            assert response.headers["WWW-Authenticate"] == 'Bearer realm="murmur-hub"'
        return
    assert response.status_code == 200
    if target == "card":
        assert response.get_json()["name"] == "tokens"
    elif target in OK_CODES:
        assert response.get_json()["error"]["code"] == OK_CODES[target]
    elif target == "SendStreamingMessage":
        assert response.headers["Content-Type"] == "text/event-stream"
        assert "TASK_STATE_COMPLETED" in response.get_data(as_text=True)
    else:
        assert "result" in response.get_json()


@pytest.mark.parametrize("headers", [
    pytest.param({"Authorization": f"Bearer {token(role='operator', tenants=[])}",
                  "X-Tenant-ID": "acme"}, id="operator"),
    pytest.param({"Authorization": f"bearer {token()}", "X-Tenant-ID": "acme"}, id="lowercase"),
])
def test_jwt_accepted(hub, headers):
    assert HubClient(hub, "echo", headers).card().status_code == 200


@pytest.mark.parametrize("headers", [
    pytest.param({"Authorization": "Bearer " + jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60, "tenants": ["acme"]},
        SECRET, algorithm="HS512"), "X-Tenant-ID": "acme"}, id="unconfigured-alg"),
    pytest.param({"Authorization": "Bearer " + jwt.encode(
        {"iss": "https://other", "aud": AUDIENCE, "exp": int(time.time()) + 60,
         "tenants": ["acme"]}, SECRET, algorithm="HS256"), "X-Tenant-ID": "acme"}, id="issuer"),
    pytest.param({"Authorization": "Bearer " + jwt.encode(
        {"iss": ISSUER, "aud": "other", "exp": int(time.time()) + 60, "tenants": ["acme"]},
        SECRET, algorithm="HS256"), "X-Tenant-ID": "acme"}, id="audience"),
    pytest.param({"Authorization": "Bearer " + jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "tenants": ["acme"]}, SECRET, algorithm="HS256"),
        "X-Tenant-ID": "acme"}, id="no-expiry"),
    pytest.param({"Authorization": "Bearer " + jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60, "tenants": ["acme"]},
        "another-secret-" + "x" * 60, algorithm="HS256"), "X-Tenant-ID": "acme"},
        id="signature"),
    pytest.param({"Authorization": "Bearer not.a.jwt", "X-Tenant-ID": "acme"}, id="garbage"),
    pytest.param({"Authorization": f"Bearer {token()}", "X-Tenant-ID": "nobody"},
                 id="unknown-tenant"),
    pytest.param({"Authorization": "Basic dXNlcjpwYXNz"}, id="basic"),
    pytest.param({"Authorization": "Bearer ", "X-Tenant-ID": "acme"}, id="bearer-empty"),
] + [pytest.param({"Authorization": "Bearer " + _signed(claims), "X-Tenant-ID": tenant},
                  id=name) for name, claims, tenant in (
    ("tenants-a-string", {"tenants": "acme"}, "acme"),
    ("tenants-absent", {}, "acme"),
    ("tenants-a-prefix", {"tenants": ["acm"]}, "acme"),
    ("operator-of-no-such-tenant", {"role": "operator"}, "nobody"),
    ("operator-spelt-otherwise", {"role": "Operator", "tenants": []}, "acme"),
    ("operator-in-a-list", {"role": ["operator"]}, "acme"),
    ("no-issuer", {"iss": None, "tenants": ["acme"]}, "acme"),
    ("no-audience", {"aud": None, "tenants": ["acme"]}, "acme"))
])
def test_jwt_refused(hub, headers):
    """Each rule of docs/hub.md's credentials table: 401 unauthenticated, with the challenge,
    card and RPC alike."""
    client = HubClient(hub, "echo", headers)
    for response in (client.card(), client.call("GetTask", {"id": "t"})):
        assert (response.status_code, response.get_json()) == UNAUTHENTICATED
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="murmur-hub"'
        _headers_ok(response)


def _keypair(kind):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RS256" \
        else ec.generate_private_key(ec.SECP256R1())
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public.decode()


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_public_key_jwt(alg):
    private, public = _keypair(alg)
    hub = create_hub(hub_config(auth={"jwt": {"public_key": public, "issuer": ISSUER,
                                              "audience": AUDIENCE}}))
    claims = {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60, "tenants": ["acme"]}
    good = jwt.encode(claims, private, algorithm=alg)
    assert HubClient(hub, "echo", {"Authorization": f"Bearer {good}", "X-Tenant-ID": "acme"}
                     ).card().status_code == 200
    # An HS256 token signed with the public key's text (the classic confusion) is refused.
    forged = jwt.api_jws.PyJWS().encode(json.dumps(claims).encode(), b"x" * 32,
                                        algorithm="HS256")
    response = HubClient(hub, "echo", {"Authorization": f"Bearer {forged}",
                                       "X-Tenant-ID": "acme"}).card()
    assert (response.status_code, response.get_json()) == UNAUTHENTICATED
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="murmur-hub"'
    hub.close(0)


def test_without_a_configured_audience_a_jwt_with_aud_is_refused():
    # PyJWT refuses a token naming an audience when the verifier expects none; the hub
    # keeps that (docs/hub.md, auth.jwt): an issuer must leave aud out, or the hub set it.
    hub = create_hub(hub_config(auth={"jwt": {"secret": SECRET, "issuer": ISSUER}}))
    try:
        claims = {"iss": ISSUER, "exp": int(time.time()) + 60, "tenants": ["acme"]}
        for aud, expected in ((None, 200), (AUDIENCE, 401), ([AUDIENCE], 401)):
            signed = jwt.encode({**claims, **({} if aud is None else {"aud": aud})}, SECRET,
                                algorithm="HS256")
            client = HubClient(hub, "echo", {"Authorization": f"Bearer {signed}",
                                             "X-Tenant-ID": "acme"})
            for response in (client.card(), client.call("GetTask", {"id": "t"})):
                assert response.status_code == expected, aud
                if expected == 401:
                    assert response.get_json() == {"error": "unauthenticated"}
                    assert response.headers["WWW-Authenticate"] == 'Bearer realm="murmur-hub"'
    finally:
        hub.close(0)


@pytest.mark.parametrize("claims", [{"exp_in": -30}, {"nbf": 30}, {"iat": 30}],
                         ids=["exp-past", "nbf-ahead", "iat-ahead"])
def test_leeway_applies_to_exp_nbf_and_iat(claims):
    """``auth.jwt.leeway_secs`` is the clock skew taken on each time claim, as docs/hub.md
    says: a token 30 s expired, or not valid for 30 s, or issued 30 s ahead, is refused with
    no leeway and taken with 60 s of it."""
    exp_in = claims.pop("exp_in", 300)
    at = {name: int(time.time()) + ahead for name, ahead in claims.items()}
    signed = token(exp_in=exp_in, **at)
    for leeway, expected in ((0, 401), (60, 200)):
        hub = create_hub(hub_config(auth={"jwt": {"secret": SECRET, "issuer": ISSUER,
                                                  "audience": AUDIENCE,
                                                  "leeway_secs": leeway}}))
        try:
            client = HubClient(hub, "echo", {"Authorization": f"Bearer {signed}",
                                             "X-Tenant-ID": "acme"})
            response = client.call("GetTask", {"id": "t"})
            assert response.status_code == expected, leeway
            if expected == 401:
                assert response.get_json() == {"error": "unauthenticated"}
        finally:
            hub.close(0)


@pytest.mark.parametrize("agent", ["hidden", "nobody", "held-not-here", "tokens"])
def test_unpublished_unknown_and_other_tenants_agents_answer_alike(hub, agent):
    from tests.hub.agents import SEEN
    SEEN.clear()                    # what earlier tests' runs left (globex's included)
    client = HubClient(hub, agent, {"X-API-Key": KEY_B})
    for response in (client.card(), client.call("SendMessage", send_params("hi"))):
        assert (response.status_code, response.get_json()) == AGENT_NOT_FOUND
        _headers_ok(response)
    assert not any(ctx.caller == "globex" for ctx in SEEN)


def test_unpublished_agent_of_own_tenant(hub):
    response = HubClient(hub, "hidden").card()
    assert (response.status_code, response.get_json()) == AGENT_NOT_FOUND


@pytest.mark.parametrize("method, path", [
    ("GET", "/a2a/v1/agents/echo"), ("POST", "/a2a/v1/agents/echo/.well-known/agent-card.json"),
    ("GET", "/a2a/v1/agents/"), ("GET", "/a2a/v1/agents/echo/extra"), ("GET", "/a2a/v1"),
    ("PUT", "/a2a/v1/agents/echo"),
])
def test_other_paths_are_404_not_found(hub, method, path):
    response = HubClient(hub).client.open(path, method=method, headers={"X-API-Key": KEY_A})
    assert (response.status_code, response.get_json()) == (404, {"error": "not found"})
    _headers_ok(response)


def test_outside_the_group(hub):
    response = HubClient(hub).client.get("/", headers={"X-API-Key": KEY_A})
    assert (response.status_code, response.get_json()) == (404, {"error": "not found"})


def test_card(hub):
    response = HubClient(hub).card(headers={"Host": "evil.example"})
    assert response.status_code == 200
    card = response.get_json()
    assert card == {
        "name": "echo", "description": "demo for tests",
        "supportedInterfaces": [{"url": f"{PUBLIC}/a2a/v1/agents/echo",
                                 "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "version": "2.1.0",
        "capabilities": {"streaming": True, "pushNotifications": False},
        "securitySchemes": {
            "apiKey": {"apiKeySecurityScheme": {
                "description": "An API key of the tenant, as X-API-Key", "location": "header",
                "name": "X-API-Key"}},
            "bearer": {"httpAuthSecurityScheme": {
                "description": "A JWT naming the tenant in X-Tenant-ID", "scheme": "Bearer",
                "bearerFormat": "JWT"}}},
        "securityRequirements": [{"schemes": {"apiKey": {"list": []}}},
                                 {"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        # The skill without a description is dropped.
        "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["t"]}],
    }
    ParseDict(card, AgentCard())            # strict: an unknown field would raise


def test_tenant_comes_from_the_credential(hub):
    a = HubClient(hub, "echo")
    b = HubClient(hub, "echo", {"X-API-Key": KEY_B})
    params = send_params("mine")
    params["tenant"] = "globex"
    task = a.result("SendMessage", params)["task"]
    # B's echo does not see A's task, whatever the request's tenant field says.
    error = b.error("GetTask", {"id": task["id"], "tenant": "acme"})
    assert error["code"] == -32001
    assert b.error("CancelTask", {"id": task["id"]})["code"] == -32001
    assert b.result("ListTasks", {"tenant": "acme"})["tasks"] == []
    # A's other agent does not see it either.
    assert a.error("GetTask", {"id": task["id"]}, agent="tokens")["code"] == -32001
    assert a.result("GetTask", {"id": task["id"], "tenant": "globex"})["id"] == task["id"]


def test_x_tenant_id_beside_an_api_key_changes_nothing(hub):
    """The key's tenant it is: X-Tenant-ID names the tenant of a JWT only."""
    client = HubClient(hub, "echo", {"X-API-Key": KEY_A, "X-Tenant-ID": "globex"})
    task = client.send("mine")
    assert HubClient(hub, "echo").result("GetTask", {"id": task["id"]}) == task
    assert HubClient(hub, "echo", {"X-API-Key": KEY_B}).error(
        "GetTask", {"id": task["id"]})["code"] == -32001
    response = HubClient(hub, "hidden", {"X-API-Key": KEY_B, "X-Tenant-ID": "acme"}).card()
    assert (response.status_code, response.get_json()) == AGENT_NOT_FOUND


def test_a_context_id_of_another_tenant_is_another_conversation():
    config = hub_config()
    config["tenants"]["globex"]["agents"]["history"] = agent("tests.hub.agents:history")
    hub = create_hub(config)
    try:
        acme = HubClient(hub, "history")
        acme.send("acme's words", context_id="shared")
        assert acme.send("more", context_id="shared")["artifacts"][0]["parts"][0]["text"] == \
            "user:acme's words | agent:(none)"
        globex = HubClient(hub, "history", {"X-API-Key": KEY_B})
        answer = globex.send("hello", context_id="shared")
        assert answer["contextId"] == "shared"
        assert answer["artifacts"][0]["parts"][0]["text"] == "(none)"
        assert [t["id"] for t in globex.result("ListTasks", {"contextId": "shared"})["tasks"]] \
            == [answer["id"]]
    finally:
        hub.close(0)
