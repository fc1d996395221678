"""The hub under ``wsgiref.validate`` and a strict server's checks (tests/pep3333.py): every
kind of answer (card, each method, push's too, each class of refusal, /metrics, streams
read to their end or dropped after the first event, HEAD, OPTIONS) and every way a body
comes."""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.hub import create_hub
from tests.hub.agents import gate
from tests.hub.conftest import KEY_A, close_hub, send_params, token, wait_until
from tests.hub.push_util import push_config
from tests.pep3333 import BODY_WAYS, Checked

HEADERS = {"X-API-Key": KEY_A, "A2A-Version": "1.0"}
ECHO = "/a2a/v1/agents/echo"
CARD = ECHO + "/.well-known/agent-card.json"


@pytest.fixture
def checked(store):
    """A hub with push and /metrics on, on the memory store and on Redis (``store``)."""
    config = push_config()
    config["store"] = store
    config["metrics"] = {"enabled": True}
    hub = create_hub(config)
    checked = Checked(hub)
    checked.hub = hub
    yield checked
    close_hub(hub)


def rpc(method, params=None, request_id=1) -> str:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body)


def call(checked, method, params=None, path=ECHO, headers=HEADERS) -> dict:
    response = checked.client.post(path, data=rpc(method, params), headers=headers,
                                   content_type="application/json", buffered=True)
    return json.loads(response.get_data())


def test_every_kind_of_answer_is_pep_3333(checked):
    client = checked.client
    assert client.get(CARD, headers=HEADERS, buffered=True).status_code == 200
    assert client.head(CARD, headers=HEADERS, buffered=True).get_data() == b""
    task_id = call(checked, "SendMessage", send_params("checked"))["result"]["task"]["id"]
    answers = [call(checked, "GetTask", {"id": task_id}), call(checked, "ListTasks", {}),
               call(checked, "CancelTask", {"id": task_id}),
               call(checked, "CreateTaskPushNotificationConfig",
                    {"taskId": task_id, "url": "https://hooks.example.com/a"}),
               call(checked, "ListTaskPushNotificationConfigs", {"taskId": task_id}),
               call(checked, "GetExtendedAgentCard", {}), call(checked, "Nope", {}),
               call(checked, "GetTask", []),
               call(checked, "GetTask", {"id": task_id}, headers={**HEADERS,
                                                                  "A2A-Version": "9"})]
    assert [answer.get("error", {}).get("code") for answer in answers] == [
        None, None, -32002, None, None, -32007, -32601, -32602, -32009]
    operator = {"Authorization": f"Bearer {token(role='operator')}"}
    other_tenant = {"Authorization": f"Bearer {token(('globex',))}", "X-Tenant-ID": "globex",
                    "A2A-Version": "1.0"}
    statuses = [client.open(path, method=verb, data=data, headers=headers,
                            content_type="application/json", buffered=True,
                            environ_overrides={"CONTENT_LENGTH": str(10**12)}
                            if data == b"{too large}" else {}).status_code
                for verb, path, data, headers in [
                    ("POST", ECHO, b"{", HEADERS),                          # -32700
                    ("POST", ECHO, b"[]", HEADERS),                         # -32600
                    ("POST", ECHO, b"{}", {"A2A-Version": "1.0"}),          # 401
                    ("POST", ECHO + "x", b"{}", HEADERS),                   # 404 agent
                    ("POST", "/a2a/v1/agents/tokens", b"{}", other_tenant),  # 404 not theirs
                    ("POST", ECHO, b"{too large}", HEADERS),                # 413
                    ("POST", ECHO, b"{}", {**HEADERS, "Transfer-Encoding": "gzip"}),  # 400
                    ("OPTIONS", ECHO, b"", HEADERS), ("GET", ECHO, b"", HEADERS),
                    ("HEAD", ECHO, b"", HEADERS), ("DELETE", CARD, b"", HEADERS),
                    ("GET", "/elsewhere", b"", {}), ("GET", "/metrics", b"", operator),
                    ("HEAD", "/metrics", b"", operator), ("GET", "/metrics", b"", HEADERS)]]
    assert statuses == [200, 200, 401, 404, 404, 413, 400, 404, 404, 404, 404, 404, 200, 200, 401]
    checked.assert_sound()


def test_streams_read_to_their_end_or_dropped_are_closed_and_released(checked):
    hub, client = checked.hub, checked.client
    whole = client.post(ECHO, data=rpc("SendStreamingMessage", send_params("streamed")),
                        headers=HEADERS, content_type="application/json")
    assert b"TASK_STATE_COMPLETED" in whole.get_data()
    whole.close()
    dropped = client.post("/a2a/v1/agents/held", headers=HEADERS,
                          data=rpc("SendStreamingMessage", send_params("pep3333-dropped")),
                          content_type="application/json")
    first = json.loads(next(iter(dropped.response)).decode().partition("data: ")[2])
    task_id = first["result"]["task"]["id"]
    dropped.close()
    # The client left: its run is canceled and leaves the runs in flight.
    wait_until(lambda: hub.runs.get(task_id) is None)
    assert call(checked, "GetTask", {"id": task_id}, path="/a2a/v1/agents/held")[
        "result"]["status"]["state"] == "TASK_STATE_CANCELED"
    held = call(checked, "SendMessage", send_params("pep3333-watched", configuration={
        "returnImmediately": True}), path="/a2a/v1/agents/held")["result"]["task"]["id"]
    watched = client.post("/a2a/v1/agents/held", headers=HEADERS,
                          data=rpc("SubscribeToTask", {"id": held}),
                          content_type="application/json")
    assert next(iter(watched.response)).startswith(b"data: ")
    assert hub._subscriptions == {"acme": 1}
    watched.close()
    assert hub._subscriptions == {"acme": 0}
    gate("pep3333-watched").set()
    wait_until(lambda: hub.runs.get(held) is None)
    checked.assert_sound()


def test_a_large_answer_read_whole_or_dropped_is_closed_and_given_back(checked):
    """A task of about 1 MiB: on Redis a copy held for its reader (hub/held.py), given back
    when the server closes the answer, read or not."""
    hub, client = checked.hub, checked.client
    task_id = call(checked, "SendMessage", send_params("x" * 300_000))["result"]["task"]["id"]
    read = client.post(ECHO, data=rpc("GetTask", {"id": task_id}), headers=HEADERS,
                       content_type="application/json")
    assert len(read.get_data()) == int(read.headers["Content-Length"]) > 600_000
    read.close()
    dropped = client.post(ECHO, data=rpc("GetTask", {"id": task_id}), headers=HEADERS,
                          content_type="application/json")
    assert next(iter(dropped.response)).startswith(b'{"jsonrpc":"2.0","id":1,"result":')
    assert (hub.held.held() > 0) == hub.store.shared        # a copy on Redis, quoted in memory
    dropped.close()
    assert hub.held.held() == 0
    checked.assert_sound()


@pytest.mark.parametrize("way", list(BODY_WAYS))
def test_a_body_read_in_short_reads_is_whole(checked, way):
    data = rpc("SendMessage", send_params("dribbled")).encode()
    status, body = checked.raw_post(ECHO, data, HEADERS, way)
    assert status == "200 OK"
    assert json.loads(body)["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "dribbled"
    checked.assert_sound()
