"""One tenant cannot reach, nor write into, another's tasks, on every store and on a Cluster.

Tenants acme and globex (each its own key) use the same messageId and contextId; every
id-bearing method of globex, given acme's task id, answers exactly as for an id nobody
has; ids made of Redis's key and pattern syntax (``{``, ``}``, ``:``, ``*``, ``?``,
``[``), control characters and look-alike Unicode are stored in acme's own keys only,
and globex's task reads back as it was.
"""
from __future__ import annotations

import json
import re

import pytest

from murmur_wsgi.hub import create_hub
from tests.hub.conftest import KEY_B, HubClient, close_hub, token, wait_until
from tests.hub.push_util import push_config

pytestmark = pytest.mark.cluster          # every test on a Redis Cluster too

BY_ID = [("GetTask", {"id": "ID"}), ("CancelTask", {"id": "ID"}),
         ("SubscribeToTask", {"id": "ID"}),
         ("GetTaskPushNotificationConfig", {"taskId": "ID", "id": "c"}),
         ("ListTaskPushNotificationConfigs", {"taskId": "ID"}),
         ("DeleteTaskPushNotificationConfig", {"taskId": "ID", "id": "c"}),
         ("CreateTaskPushNotificationConfig", {"taskId": "ID", "id": "c",
                                               "url": "https://hooks.test/h"})]
ODD_IDS = ["{t:globex}", "}:x", "a:b", "*", "?", "[a]", "x\ny", "x\x00y", "e\u0301", "\u00e9",
           "\uff41", "{", "}"]


@pytest.fixture
def hub(store):
    config = push_config()                 # push on: its methods read the task too
    config["store"] = store
    h = create_hub(config)
    yield h
    close_hub(h)


def _finished(rpc, text: str, **ids) -> dict:
    task = rpc.send(text, **ids)
    wait_until(lambda: rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_COMPLETED")
    return rpc.result("GetTask", {"id": task["id"]})


def _answer(rpc, method: str, params: dict, task_id: str) -> str:
    """The answer's body, the id it names and its JSON-RPC id left out."""
    body = json.loads(json.dumps(params).replace('"ID"', json.dumps(task_id)))
    text = rpc.call(method, body).get_data(as_text=True).replace(task_id, "ID")
    return re.sub(r'^\{"jsonrpc":"2.0","id":\d+,', "", text)


def test_another_tenants_task_answers_as_one_nobody_has(hub):
    acme, globex = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
    theirs = _finished(acme, "hello", message_id="m1", context_id="c1")
    mine = _finished(globex, "hello", message_id="m1", context_id="c1")
    assert mine["id"] != theirs["id"]
    unknown = theirs["id"][:-4] + "ffff"
    for method, params in BY_ID:
        answer = _answer(globex, method, params, theirs["id"])
        assert answer == _answer(globex, method, params, unknown), method
        assert '"error":{"code":-32001,' in answer, answer
    listed = globex.result("ListTasks", {"contextId": "c1", "includeArtifacts": True})
    assert [task["id"] for task in listed["tasks"]] == [mine["id"]]
    assert acme.result("GetTask", {"id": theirs["id"]}) == theirs


@pytest.mark.parametrize("tenant", ["ACME", "acme.", "\uff41\uff43\uff4d\uff45", "\xa0acme",
                                    "acme,globex", "globex"])
def test_a_jwt_acts_only_for_the_tenants_it_names_exactly(hub, tenant):
    rpc = HubClient(hub, headers={"Authorization": "Bearer " + token(("acme",)),
                                  "X-Tenant-ID": tenant.encode().decode("latin-1")})
    response = rpc.call("ListTasks", {})
    assert (response.status_code, response.get_json()) == (401, {"error": "unauthenticated"})


def test_a_tenant_header_is_read_without_the_whitespace_at_its_ends(hub):
    """HTTP's whitespace (space, tab) at a header's ends is not its value (hub/auth.py):
    " acme\t" names acme, as a server that strips it passes it on."""
    rpc = HubClient(hub, headers={"Authorization": "Bearer " + token(("acme",)),
                                  "X-Tenant-ID": " acme\t"})
    assert rpc.call("ListTasks", {}).status_code == 200


def test_ids_of_key_syntax_stay_in_their_tenants_keys(hub, store, request):
    acme, globex = HubClient(hub), HubClient(hub, headers={"X-API-Key": KEY_B})
    victim = _finished(globex, "victim", message_id="mv", context_id="cv")
    for value in ODD_IDS:
        task = _finished(acme, "odd", message_id=value, context_id=value)
        assert task["contextId"] == value
        again = acme.send("odd", message_id=value, context_id=value)
        assert again["id"] == task["id"]                   # the same message: its task
        listed = acme.result("ListTasks", {"contextId": value})
        assert [found["id"] for found in listed["tasks"]] == [task["id"]]
        for method, params in BY_ID:
            body = json.loads(json.dumps(params).replace('"ID"', json.dumps(value)))
            assert acme.error(method, body)["code"] == -32001
    assert globex.result("GetTask", {"id": victim["id"]}) == victim
    if store == "memory":
        return
    server = request.getfixturevalue("redis_cluster" if store.startswith("redis-cluster")
                                     else "redis_server")
    client = server.client()
    try:
        keys = client.keys("*", target_nodes="all") if hasattr(client, "get_nodes") \
            else client.keys("*")
    finally:
        client.close()
    prefixes = ("murmur:{t:acme}:", "murmur:{t:globex}:", "murmur:{hub}:")
    strays = [key for key in keys
              if not (key if isinstance(key, str) else key.decode()).startswith(prefixes)]
    assert strays == []
