"""Only JSON in, only JSON out, on the door: a value no JSON text can hold is refused.

Each bad value (a lone surrogate escaped, a number that overflows a double, NaN) goes
through every method the door serves, in every place a request carries one; each
answer is -32700 Invalid JSON payload with id null, no task starts, and GetTask and
ListTasks still answer JSON.
"""
from __future__ import annotations

import json

import pytest

from murmur_wsgi.uris import DOOR_URI
from tests.conftest import Rpc, make_door
from tests.shared.bad_json import (DOUBLE_WIDE, FITTING, MESSAGE_PLACES, MSG, PARSE_ERROR, TEXT,
                                   WIDE_INTEGERS, bodies, strict_json)

DOOR = json.dumps(DOOR_URI)
PLACES = {
    "SendMessage": MESSAGE_PLACES + [
        '{"message":{%s,%s,"metadata":{%s:{"forgetSession":BAD}}}}' % (MSG, TEXT, DOOR),
        '{"message":{%s,%s},"tenant":BAD}' % (MSG, TEXT),
    ],
    "GetTask": ['{"id":BAD}', '{"id":"TASK","historyLength":BAD}', '{"id":"TASK","tenant":BAD}'],
    "ListTasks": ['{"contextId":BAD}', '{"pageToken":BAD}', '{"status":BAD}',
                  '{"pageSize":BAD}', '{"statusTimestampAfter":BAD}'],
    "CancelTask": ['{"id":BAD}'],
    "SubscribeToTask": ['{"id":BAD}'],
    "murmur.WatchSession": ['{"x":BAD}'],
    "murmur.StopSession": ['{"x":BAD}'],
    "GetExtendedAgentCard": ['{"x":BAD}'],
}
PLACES["SendStreamingMessage"] = PLACES["SendMessage"]


@pytest.fixture
def rpc():
    rpc = Rpc(make_door())
    yield rpc
    rpc.door.close()


def test_a_value_json_cannot_hold_is_refused_by_every_method(rpc):
    task_id = rpc.result("SendMessage", {"message": {"messageId": "m-1", "role": "ROLE_USER",
                                                     "parts": [{"text": "hello"}]}})["task"]["id"]
    before = rpc.result("ListTasks", {"includeArtifacts": True})
    seen = set()
    for method, body in bodies(PLACES, task_id):
        response = rpc.post(body.encode())
        assert response.status_code == 200, (method, body)
        assert response.headers["Content-Type"] == "application/json"
        assert strict_json(response.data) == PARSE_ERROR, (method, body)
        seen.add(method)
    assert seen == {*PLACES, "method"}
    for method, params in (("GetTask", {"id": task_id}), ("ListTasks", {}),
                           ("ListTasks", {"includeArtifacts": True})):
        assert "result" in strict_json(rpc.call(method, params).data), method
    after = rpc.result("ListTasks", {"includeArtifacts": True})
    assert [t["id"] for t in after["tasks"]] == [t["id"] for t in before["tasks"]]
    assert after["totalSize"] == before["totalSize"] == 1


# The door reads integers no double holds (its reference reads any JSON number); the hub
# does not.
@pytest.mark.parametrize("value", FITTING + DOUBLE_WIDE + WIDE_INTEGERS)
def test_values_that_fit_are_read_and_written_back(rpc, value):
    body = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{%s,'
            '"parts":[{"data":{"x":%s}}]},"configuration":{"returnImmediately":true}}}'
            % (MSG, value))
    task = strict_json(rpc.post(body.encode()).data)["result"]["task"]
    assert strict_json(rpc.call("GetTask", {"id": task["id"]}).data)["result"]["id"] == task["id"]
    listed = strict_json(rpc.call("ListTasks", {}).data)["result"]["tasks"]
    assert task["id"] in {t["id"] for t in listed}
