"""Only JSON in, only JSON out: a value no JSON text can hold is refused before it is kept.

Each bad value (a lone surrogate escaped, a number that overflows a double, an integer
too, NaN) goes
through every method of the hub, in every place a request carries one; each answer is
-32700 with id null, nothing is stored, and the agent's GetTask and ListTasks still
answer JSON, on the memory store and on Redis.
"""
from __future__ import annotations

import json

import pytest

from tests.hub.conftest import HubClient, close_hub, wait_until
from tests.hub.push_util import push_hub_on
from tests.shared.bad_json import (DOUBLE_WIDE, FITTING, MESSAGE_PLACES, MSG, NUMBERS,
                                   PARSE_ERROR, TEXT, WIDE_INTEGERS, bodies, strict_json)

PUSH = '"url":"https://hooks.test/h"'

# Each place a value goes, as the body's params (BAD stands for the value).
PLACES = {
    "SendMessage": MESSAGE_PLACES + [
        '{"message":{%s,%s},"configuration":{"historyLength":BAD}}' % (MSG, TEXT),
        '{"message":{%s,%s},"configuration":{"taskPushNotificationConfig":{"id":BAD,%s}}}'
        % (MSG, TEXT, PUSH),
    ],
    "GetTask": ['{"id":BAD}', '{"id":"TASK","historyLength":BAD}'],
    "ListTasks": ['{"contextId":BAD}', '{"pageToken":BAD}', '{"status":BAD}',
                  '{"pageSize":BAD}', '{"statusTimestampAfter":BAD}'],
    "CancelTask": ['{"id":BAD}', '{"id":"TASK","metadata":{"k":BAD}}'],
    "SubscribeToTask": ['{"id":BAD}'],
    "CreateTaskPushNotificationConfig": ['{"taskId":BAD,"id":"c",%s}' % PUSH,
                                         '{"taskId":"TASK","id":BAD,%s}' % PUSH,
                                         '{"taskId":"TASK","id":"c","url":BAD}',
                                         '{"taskId":"TASK","id":"c",%s,"token":BAD}' % PUSH],
    "GetTaskPushNotificationConfig": ['{"taskId":BAD,"id":"c"}', '{"taskId":"TASK","id":BAD}'],
    "ListTaskPushNotificationConfigs": ['{"taskId":BAD}', '{"taskId":"TASK","pageToken":BAD}'],
    "DeleteTaskPushNotificationConfig": ['{"taskId":BAD,"id":"c"}',
                                         '{"taskId":"TASK","id":BAD}'],
}
PLACES["SendStreamingMessage"] = PLACES["SendMessage"]


@pytest.fixture(params=["memory", "redis"])
def push_hub(request):
    h = push_hub_on(request)
    yield h
    close_hub(h)


def test_a_value_json_cannot_hold_is_refused_by_every_method(push_hub):
    rpc = HubClient(push_hub)
    task = rpc.send("hello")
    task_id = task["id"]
    wait_until(lambda: rpc.result("GetTask", {"id": task_id})["status"]["state"]
               == "TASK_STATE_COMPLETED")
    before = rpc.result("ListTasks", {"includeArtifacts": True})
    assert before["totalSize"] == 1
    seen = set()
    for method, body in bodies(PLACES, task_id, NUMBERS + WIDE_INTEGERS):
        response = rpc.post(body.encode())
        assert response.status_code == 200, (method, body)
        assert strict_json(response.data, doubles=True) == PARSE_ERROR, (method, body)
        seen.add(method)
    assert seen == {*PLACES, "method"}
    for method, params in (("GetTask", {"id": task_id}), ("ListTasks", {}),
                           ("ListTasks", {"includeArtifacts": True})):
        response = rpc.call(method, params)
        assert response.status_code == 200
        assert "result" in strict_json(response.data, doubles=True), method
    after = rpc.result("ListTasks", {"includeArtifacts": True})
    assert after == before                             # nothing was stored, nothing started
    assert rpc.result("ListTaskPushNotificationConfigs", {"taskId": task_id})["configs"] == []


@pytest.mark.parametrize("value", FITTING + DOUBLE_WIDE)
def test_values_that_fit_are_stored_and_read_back(push_hub, value):
    rpc = HubClient(push_hub)
    body = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{%s,'
            '"parts":[{"data":{"x":%s}}]}}}' % (MSG, value))
    task = strict_json(rpc.post(body.encode()).data, doubles=True)["result"]["task"]
    sent = json.loads(value)
    assert task["history"][0]["parts"][0]["data"] == {"x": sent}
    got = strict_json(rpc.call("GetTask", {"id": task["id"]}).data, doubles=True)["result"]
    assert got["history"][0]["parts"][0]["data"] == {"x": sent}
    listed = strict_json(rpc.call("ListTasks", {}).data, doubles=True)["result"]
    assert listed["totalSize"] == 1
