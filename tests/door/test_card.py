"""The agent card: the public card, the authenticated door's cards, caching, strict parsing."""
from __future__ import annotations

import copy
import json
import sys

import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from tests.conftest import MY_AGENT, Rpc, make_door

CARD_PATH = "/.well-known/agent-card.json"
REFERENCE_SESSION = "ses_019f01a940ce7761854e768ecbe3d399"
STREAM_URI = "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1"

# Copied from murmur-door.txt, "Agent Card": my-agent 0.1.0 on port 41873, public door.
PUBLIC_CARD = r"""
{
  "name": "my-agent",
  "description": "Murmur capsule my-agent 0.1.0",
  "version": "0.1.0",
  "supportedInterfaces": [
    { "url": "http://localhost:41873", "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }
  ],
  "capabilities": {
    "streaming": true,
    "pushNotifications": false,
    "extendedAgentCard": false,
    "extensions": [
      {
        "uri": "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1",
        "description": "Every JSON-RPC method this door answers, A2A methods and murmur's own alike, the murmur ones named murmur.<Method>; whether it accepts tasks from peer capsules; and the forgetSession field a message's metadata may carry under this URI.",
        "required": false,
        "params": {
          "methods": ["SendMessage", "SendStreamingMessage", "murmur.WatchSession", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask", "murmur.StopSession"],
          "peerTasks": false
        }
      },
      {
        "uri": "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1",
        "description": "The session answering this address and what the capsule may do. Served only to authenticated callers once the door authenticates.",
        "required": false,
        "params": {
          "sessionId": "ses_019f01a940ce7761854e768ecbe3d399",
          "tools": ["bash"],
          "shell": true,
          "network": true,
          "planes": ["files"]
        }
      },
      {
        "uri": "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1",
        "description": "The murmur frames this capsule writes in addition to the A2A v1.0 events: sent on SendStreamingMessage and SubscribeToTask when the request's A2A-Extensions header names this URI, and always on murmur.WatchSession. Each is carried in a StreamResponse under metadata keyed by this URI.",
        "required": false,
        "params": {
          "frames": ["text", "thinking", "tool-call-started", "tool-call-progress", "artifact", "gap", "lagged", "connection-ack", "capsule-closed"]
        }
      }
    ]
  },
  "securitySchemes": {},
  "securityRequirements": [],
  "defaultInputModes": ["text/plain", "application/json"],
  "defaultOutputModes": ["text/plain", "application/json"],
  "skills": [
    {
      "id": "task",
      "name": "Run a task",
      "description": "Runs one task given as a text message and reports its outcome.",
      "tags": ["task"]
    }
  ]
}
"""

# Copied from murmur-door.txt, "The public card of an authenticated door".
AUTH_PUBLIC_CARD = r"""
{
  "name": "my-agent",
  "description": "Murmur capsule my-agent 0.1.0",
  "version": "0.1.0",
  "supportedInterfaces": [
    { "url": "http://localhost:41873", "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }
  ],
  "capabilities": {
    "streaming": true,
    "pushNotifications": false,
    "extendedAgentCard": true,
    "extensions": [
      {
        "uri": "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1",
        "description": "Every JSON-RPC method this door answers, A2A methods and murmur's own alike, the murmur ones named murmur.<Method>; whether it accepts tasks from peer capsules; and the forgetSession field a message's metadata may carry under this URI.",
        "required": false,
        "params": {
          "methods": ["SendMessage", "SendStreamingMessage", "murmur.WatchSession", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask", "murmur.StopSession", "GetExtendedAgentCard"],
          "peerTasks": false
        }
      },
      {
        "uri": "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1",
        "description": "The murmur frames this capsule writes in addition to the A2A v1.0 events: sent on SendStreamingMessage and SubscribeToTask when the request's A2A-Extensions header names this URI, and always on murmur.WatchSession. Each is carried in a StreamResponse under metadata keyed by this URI.",
        "required": false,
        "params": {
          "frames": ["text", "thinking", "tool-call-started", "tool-call-progress", "artifact", "gap", "lagged", "connection-ack", "capsule-closed"]
        }
      }
    ]
  },
  "securitySchemes": {
    "bearer": {
      "httpAuthSecurityScheme": {
        "scheme": "Bearer",
        "description": "A token this capsule's runtime mints at launch and accepts until the session ends."
      }
    }
  },
  "securityRequirements": [ { "schemes": { "bearer": { "list": [] } } } ],
  "defaultInputModes": ["text/plain", "application/json"],
  "defaultOutputModes": ["text/plain", "application/json"],
  "skills": [
    {
      "id": "task",
      "name": "Run a task",
      "description": "Runs one task given as a text message and reports its outcome.",
      "tags": ["task"],
      "securityRequirements": [
        { "schemes": { "bearer": { "list": ["SendMessage"] } } },
        { "schemes": { "bearer": { "list": ["SendStreamingMessage"] } } }
      ]
    }
  ]
}
"""

AUTHENTICATION = {"scheme": "bearer", "credentials": {
    "watcher": {"scopes": ["murmur.WatchSession", "GetTask", "ListTasks"]}}}


def ordered(text: str | bytes):
    """Parse JSON keeping every object's key order (objects become lists of pairs)."""
    return json.loads(text, object_pairs_hook=list)


def reference(text: str, session_id: str):
    """The reference card as it names this door's session."""
    return ordered(text.replace(REFERENCE_SESSION, session_id))


def strict_parse(body: bytes | str) -> a2a_pb2.AgentCard:
    """Parse with the A2A v1.0 protobuf classes, refusing any unknown field."""
    return json_format.Parse(body, a2a_pb2.AgentCard(), ignore_unknown_fields=False)


def capsule_extension(session_id: str) -> dict:
    card = json.loads(PUBLIC_CARD.replace(REFERENCE_SESSION, session_id))
    return card["capabilities"]["extensions"][1]


def extended_reference(session_id: str) -> dict:
    """The extended card: the authenticated public card with the capsule extension added."""
    card = json.loads(AUTH_PUBLIC_CARD)
    card["capabilities"]["extensions"].insert(1, capsule_extension(session_id))
    return card


def my_agent(**overrides) -> dict:
    manifest = copy.deepcopy(MY_AGENT)
    manifest.update(overrides)
    return manifest


@pytest.fixture
def public_door():
    return make_door(**my_agent())


@pytest.fixture
def auth_door():
    return make_door(**my_agent(network={"authentication": AUTHENTICATION}))


def get_card(door, headers=None):
    return Rpc(door).client.get(CARD_PATH, headers=headers or {})


# --- the public card --------------------------------------------------------


def test_public_card_is_the_reference_key_by_key_in_order(public_door):
    response = get_card(public_door)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert ordered(response.data) == reference(PUBLIC_CARD, public_door.session.id)


def test_public_card_names_the_session_answering(public_door):
    card = get_card(public_door).get_json()
    capsule = card["capabilities"]["extensions"][1]
    assert capsule["uri"] == "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1"
    assert capsule["params"]["sessionId"] == public_door.session.id
    assert public_door.session.id.startswith("ses_") and len(public_door.session.id) == 36


def test_public_card_parses_strictly(public_door):
    parsed = strict_parse(get_card(public_door).data)
    assert parsed.name == "my-agent"
    assert parsed.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert parsed.supported_interfaces[0].protocol_version == "1.0"
    assert [ext.required for ext in parsed.capabilities.extensions] == [False, False, False]


def test_public_card_ignores_authorization(public_door):
    plain = get_card(public_door)
    with_auth = get_card(public_door, {"Authorization": "Bearer whatever"})
    assert (with_auth.status_code, with_auth.data) == (200, plain.data)


def test_minimal_manifest_card_keys():
    door = make_door()
    card = get_card(door).get_json()
    assert list(card) == ["name", "description", "version", "supportedInterfaces",
                          "capabilities", "securitySchemes", "securityRequirements",
                          "defaultInputModes", "defaultOutputModes", "skills"]
    capsule = card["capabilities"]["extensions"][1]["params"]
    assert capsule == {"sessionId": door.session.id, "tools": [], "shell": False,
                       "network": False, "planes": []}
    assert card["description"] == "Murmur capsule test-agent 0.1.0"
    strict_parse(get_card(door).data)


def test_peer_tasks_accept_shows_on_the_card():
    door = make_door(exports={"peer_tasks": {"accept": True}})
    card = get_card(door).get_json()
    assert card["capabilities"]["extensions"][0]["params"]["peerTasks"] is True


def test_public_url_names_the_interface():
    door = make_door(network={"public_url": "https://agents.example.com/mine/"})
    card = get_card(door).get_json()
    assert card["supportedInterfaces"][0]["url"] == "https://agents.example.com/mine"


# --- task_acceptance: none --------------------------------------------------


@pytest.mark.parametrize("auth, methods", [
    pytest.param(False, ["murmur.WatchSession", "GetTask", "ListTasks", "CancelTask",
                         "murmur.StopSession"], id="public"),
    pytest.param(True, ["murmur.WatchSession", "GetTask", "ListTasks", "CancelTask",
                        "murmur.StopSession", "GetExtendedAgentCard"], id="authenticated"),
])
def test_task_acceptance_none_card(auth, methods):
    overrides = {"lifecycle": {"task_acceptance": "none"}}
    if auth:
        overrides["network"] = {"authentication": AUTHENTICATION}
    door = make_door(**my_agent(**overrides))
    response = get_card(door)
    card = response.get_json()
    assert card["capabilities"]["extensions"][0]["params"] == {"methods": methods,
                                                               "peerTasks": False}
    assert card["capabilities"]["streaming"] is False
    assert card["skills"] == []
    strict_parse(response.data)


def test_task_acceptance_queue_card_is_the_reference():
    door = make_door(**my_agent(lifecycle={"task_acceptance": "queue", "queue_depth": 3}))
    assert ordered(get_card(door).data) == reference(PUBLIC_CARD, door.session.id)


# --- transport: process -----------------------------------------------------


def test_process_transport_frames():
    door = make_door(**my_agent(inference={"transport": "process"},
                                agent={"process": [sys.executable, "-c", "pass"]}))
    response = get_card(door)
    card = response.get_json()
    stream = card["capabilities"]["extensions"][2]
    assert stream["uri"] == STREAM_URI
    assert stream["params"]["frames"] == [
        "text", "thinking", "tool-call-started", "tool-call-progress", "artifact", "quota",
        "suggested-prompt", "gap", "lagged", "connection-ack", "capsule-closed"]
    strict_parse(response.data)


# --- the authenticated door -------------------------------------------------


def test_authenticated_public_card_is_the_reference(auth_door):
    response = get_card(auth_door)                  # step 1: no token needed
    assert response.status_code == 200
    assert ordered(response.data) == ordered(AUTH_PUBLIC_CARD)
    assert auth_door.session.id.encode() not in response.data
    strict_parse(response.data)


@pytest.mark.parametrize("credential", ["operator", "watcher"])
def test_extended_card_via_json_rpc(auth_door, credential):
    token = auth_door.tokens.tokens[credential]
    rpc = Rpc(auth_door)
    response = rpc.post({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"},
                        {"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    payload = json.loads(response.data, object_pairs_hook=list)
    assert [key for key, _ in payload] == ["jsonrpc", "id", "result"]
    envelope = response.get_json()
    assert envelope["jsonrpc"] == "2.0" and envelope["id"] == 1
    expected = extended_reference(auth_door.session.id)
    assert dict(payload)["result"] == ordered(json.dumps(expected))   # key order included
    assert envelope["result"] == expected
    strict_parse(json.dumps(envelope["result"]))


def test_extended_card_session_id_at_same_path_as_public(auth_door, public_door):
    token = auth_door.tokens.tokens["operator"]
    extended = Rpc(auth_door).result("GetExtendedAgentCard", None,
                                     {"Authorization": f"Bearer {token}"})
    public = get_card(public_door).get_json()
    assert extended["capabilities"]["extensions"][1]["params"]["sessionId"] == auth_door.session.id
    assert public["capabilities"]["extensions"][1]["params"]["sessionId"] == public_door.session.id


def test_extended_card_takes_no_params(auth_door):
    token = auth_door.tokens.tokens["watcher"]
    result = Rpc(auth_door).result("GetExtendedAgentCard", {"anything": [1, 2]},
                                   {"Authorization": f"Bearer {token}"})
    assert result == extended_reference(auth_door.session.id)


def test_public_door_has_no_extended_card(public_door):
    error = Rpc(public_door).error("GetExtendedAgentCard")
    assert error["code"] == -32004
    assert error["data"] == [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                              "reason": "UNSUPPORTED_OPERATION",
                              "domain": "a2a-protocol.org", "metadata": {}}]
    card = get_card(public_door).get_json()
    assert "GetExtendedAgentCard" not in card["capabilities"]["extensions"][0]["params"]["methods"]


# --- caching ----------------------------------------------------------------


def test_card_cache_headers(public_door):
    response = get_card(public_door)
    assert response.headers["Cache-Control"] == "public, max-age=60"
    etag = response.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 2
    assert response.headers["Last-Modified"].endswith(" GMT")
    assert response.headers["Content-Length"] == str(len(response.data))
    again = get_card(public_door)
    assert again.headers["ETag"] == etag and again.data == response.data


@pytest.mark.parametrize("match", [
    pytest.param("{etag}", id="strong"),
    pytest.param("W/{etag}", id="weak"),
    pytest.param('"other", {etag}', id="list"),
])
def test_if_none_match_answers_304(public_door, match):
    etag = get_card(public_door).headers["ETag"]
    response = get_card(public_door, {"If-None-Match": match.format(etag=etag)})
    assert response.status_code == 304
    assert response.data == b""
    assert response.headers["ETag"] == etag
    assert response.headers["Cache-Control"] == "public, max-age=60"


def test_if_none_match_other_etag_answers_card(public_door):
    first = get_card(public_door)
    response = get_card(public_door, {"If-None-Match": '"not-this-one"'})
    assert (response.status_code, response.data) == (200, first.data)


def test_cards_of_two_doors_differ_in_etag():
    first, second = make_door(**my_agent()), make_door(**my_agent())
    assert get_card(first).headers["ETag"] != get_card(second).headers["ETag"]


def test_head_card(public_door):
    response = Rpc(public_door).client.head(CARD_PATH)
    assert response.status_code == 200
    assert response.data == b""
    assert response.headers["ETag"] == get_card(public_door).headers["ETag"]


def test_card_reads_no_a2a_version(public_door):
    plain = get_card(public_door)
    for value in ("0.3", "", "2.0"):
        response = get_card(public_door, {"A2A-Version": value})
        assert (response.status_code, response.data) == (200, plain.data)
