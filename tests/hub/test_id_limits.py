"""limits.max_id_bytes: every id a client sends the hub is capped in bytes, -32602 naming it."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError
from tests.hub.conftest import KEY_B, HubClient, close_hub, hub_config, send_params
from tests.hub.push_util import push_hub_on

LONG = "i" * 257
WIDE = "\u00e9" * 129                   # 129 characters, 258 bytes
MSG = {"messageId": "m-ok", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
PUSH = {"url": "https://hooks.test/h"}


def message(**fields) -> dict:
    return {"message": {**MSG, **fields}}


# (method, params with the id too long, the field the refusal names)
CASES = [
    ("SendMessage", message(messageId=LONG), "message.messageId"),
    ("SendMessage", message(messageId=WIDE), "message.messageId"),
    ("SendStreamingMessage", message(messageId=LONG), "message.messageId"),
    ("SendMessage", message(contextId=LONG), "message.contextId"),
    ("SendMessage", message(taskId=LONG), "message.taskId"),
    ("SendMessage", message(referenceTaskIds=["t1", LONG]), "message.referenceTaskIds[1]"),
    ("SendMessage", {**message(), "configuration": {"taskPushNotificationConfig": {
        "id": LONG, **PUSH}}}, "configuration.taskPushNotificationConfig.id"),
    ("SendMessage", {**message(), "configuration": {"taskPushNotificationConfig": {
        "taskId": LONG, **PUSH}}}, "configuration.taskPushNotificationConfig.taskId"),
    ("GetTask", {"id": LONG}, "id"),
    ("CancelTask", {"id": LONG}, "id"),
    ("SubscribeToTask", {"id": WIDE}, "id"),
    ("ListTasks", {"contextId": LONG}, "contextId"),
    ("CreateTaskPushNotificationConfig", {"taskId": LONG, "id": "c", **PUSH}, "taskId"),
    ("CreateTaskPushNotificationConfig", {"taskId": "t", "id": LONG, **PUSH}, "id"),
    ("GetTaskPushNotificationConfig", {"taskId": "t", "id": LONG}, "id"),
    ("DeleteTaskPushNotificationConfig", {"taskId": LONG, "id": "c"}, "taskId"),
    ("ListTaskPushNotificationConfigs", {"taskId": LONG}, "taskId"),
]


@pytest.fixture(params=["memory", "redis"])
def rpc(request):
    h = push_hub_on(request)
    yield HubClient(h)
    close_hub(h)


@pytest.mark.parametrize("method, params, field", CASES,
                         ids=[f"{m}-{f}" for m, _, f in CASES])
def test_an_id_longer_than_the_cap_is_refused_naming_it(rpc, method, params, field):
    assert rpc.error(method, params) == {
        "code": -32602, "message": f"Invalid params: {field} is longer than 256 bytes"}
    assert rpc.result("ListTasks", {})["totalSize"] == 0          # nothing stored


def test_an_id_of_the_cap_is_read(rpc):
    task = rpc.send("hi", message_id="m" * 256, context_id="c" * 256)
    assert task["history"][0]["messageId"] == "m" * 256
    assert task["contextId"] == "c" * 256
    assert rpc.error("GetTask", {"id": "\u00e9" * 128})["code"] == -32001   # 256 bytes: read


def test_the_cap_is_a_setting_per_tenant():
    config = hub_config()
    config["limits"]["max_id_bytes"] = 1024
    config["tenants"]["globex"]["limits"]["max_id_bytes"] = 64
    h = create_hub(config)
    try:
        acme = HubClient(h)
        assert acme.send("hi", message_id="m" * 1024)["status"]["state"]
        # contextId stays at the text's 256 bytes, whatever the setting.
        assert acme.error("SendMessage", send_params("hi", context_id="c" * 257)) == {
            "code": -32602, "message": "Invalid params: message.contextId is longer than "
                                       "256 bytes"}
        globex = HubClient(h, headers={"X-API-Key": KEY_B})
        assert globex.error("GetTask", {"id": "t" * 65}) == {
            "code": -32602, "message": "Invalid params: id is longer than 64 bytes"}
    finally:
        close_hub(h)


@pytest.mark.parametrize("value", [63, 0, "256"])
def test_a_cap_below_the_hubs_own_ids_is_a_bad_config(value):
    config = hub_config()
    config["limits"]["max_id_bytes"] = value
    with pytest.raises(ConfigError):
        create_hub(config)


def _raw(rpc, method: str, params: dict, request_id):
    return rpc.post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


@pytest.mark.parametrize("method, params", [
    ("SendStreamingMessage", message()), ("SendMessage", message()),
    ("SubscribeToTask", {"id": "t"}), ("GetTask", {"id": "t"})])
@pytest.mark.parametrize("request_id", [LONG, WIDE])
def test_a_json_rpc_id_longer_than_the_cap_is_refused_unechoed(rpc, method, params,
                                                                request_id):
    """The id is echoed in every event of a stream: a 900 KB one made a SubscribeToTask of a
    task of 10,000 events a 9 GB answer, 4.3 s of the worker's CPU."""
    response = _raw(rpc, method, params, request_id)
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.get_json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "Invalid Request: the JSON-RPC id is longer than 256 bytes"}}
    assert rpc.result("ListTasks", {})["totalSize"] == 0          # nothing stored


def test_a_json_rpc_id_of_the_cap_is_echoed(rpc):
    for request_id in ("r" * 256, "\u00e9" * 128, 10 ** 300):
        response = _raw(rpc, "GetTask", {"id": "t"}, request_id)
        assert response.get_json()["id"] == request_id
        assert response.get_json()["error"]["code"] == -32001
