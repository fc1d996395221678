"""The hub's request limits as settings, per tenant: JSON values and depth, parts, data text.

Each is refused with its exact answer before the work it bounds, nothing is stored, and
a request within the limit is served; another tenant keeps the top-level defaults.
"""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError, load_config
from tests.hub.conftest import KEY_B, HubClient, close_hub, hub_config

PARSE_ERROR = {"jsonrpc": "2.0", "id": None,
               "error": {"code": -32700, "message": "Invalid JSON payload"}}
TIGHT = {"max_json_values": 40, "max_json_depth": 8, "max_parts": 3, "data_text_bytes": 200}


@pytest.fixture
def hub(store):
    config = hub_config(store=store)
    config["tenants"]["acme"]["limits"] = dict(TIGHT)
    h = create_hub(config)
    yield h
    close_hub(h)


def _send(rpc, parts, metadata=None) -> dict:
    message = {"messageId": f"m-{len(json.dumps(parts))}-{json.dumps(metadata)}",
               "role": "ROLE_USER", "parts": parts}
    if metadata is not None:
        message["metadata"] = metadata
    return rpc.call("SendMessage", {"message": message}).get_json()


def _nothing_stored(rpc) -> bool:
    return rpc.result("ListTasks", {})["totalSize"] == 0


def test_more_parts_than_the_tenants_limit_are_refused(hub):
    rpc = HubClient(hub)
    answer = _send(rpc, [{"text": "a"}] * 4)
    assert answer["error"] == {"code": -32602, "message": "Invalid params: message.parts "
                               "holds 4 parts, more than limits.max_parts (3)"}
    assert _nothing_stored(rpc)
    assert _send(rpc, [{"text": "a"}] * 3)["result"]["task"]["status"]["state"] \
        == "TASK_STATE_COMPLETED"


def test_a_body_deeper_than_the_tenants_limit_is_not_json(hub):
    rpc = HubClient(hub)
    # The envelope, params, message and metadata are 4 levels; each list one more.
    assert _send(rpc, [{"text": "a"}], {"k": [[[[[1]]]]]}) == PARSE_ERROR   # depth 9
    assert _nothing_stored(rpc)
    answer = _send(rpc, [{"text": "a"}], {"k": [[[[1]]]]})                 # depth 8
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_body_of_more_values_than_the_tenants_limit_is_not_json(hub):
    rpc = HubClient(hub)
    assert _send(rpc, [{"text": "a"}], {"k": list(range(40))}) == PARSE_ERROR
    assert _nothing_stored(rpc)
    answer = _send(rpc, [{"text": "a"}], {"k": list(range(20))})
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_data_parts_past_the_tenants_text_budget_are_refused(hub):
    rpc = HubClient(hub)
    answer = _send(rpc, [{"data": {"k": "x" * 300}}])
    assert answer["error"] == {"code": -32602, "message": "Invalid params: the message's data "
                               "parts, pretty-printed for the agent, are more than "
                               "limits.data_text_bytes (200) bytes"}
    assert _nothing_stored(rpc)
    assert "result" in _send(rpc, [{"data": {"k": "x" * 100}}])


def test_another_tenant_keeps_the_defaults(hub):
    rpc = HubClient(hub, headers={"X-API-Key": KEY_B})
    answer = _send(rpc, [{"text": "a"}] * 1000, {"k": [[[[[[1]]]]]]})
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    answer = _send(rpc, [{"text": "a"}] * 1001)
    assert answer["error"]["message"] == ("Invalid params: message.parts holds 1001 parts, "
                                          "more than limits.max_parts (1000)")


@pytest.mark.parametrize("key, value, least", [("max_json_depth", 4, 5),
                                               ("max_json_values", 10, 11), ("max_parts", 0, 1)])
def test_a_limit_below_what_a_message_needs_is_refused_at_start(key, value, least):
    config = hub_config()
    config["limits"][key] = value
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert str(info.value) == f"limits.{key}: Must be greater than or equal to {least}."
