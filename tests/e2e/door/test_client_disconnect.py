"""A held SendMessage whose client leaves: the task runs on and is found by its context."""
from __future__ import annotations

import json

import pytest
import requests

from tests.e2e.conftest import CLOSE

pytestmark = pytest.mark.e2e

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0", **CLOSE}


def rpc(url, method, params, **kwargs):
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return requests.post(url + "/", data=json.dumps(body), headers=HEADERS, **kwargs)


def test_a_client_that_leaves_changes_nothing_for_its_task(door_server):
    url = door_server.url
    message = {"messageId": "m-gone", "role": "ROLE_USER", "contextId": "ctx-gone",
               "parts": [{"text": "/sleep 1\nstill here"}]}
    with pytest.raises(requests.ReadTimeout):
        rpc(url, "SendMessage", {"message": message}, timeout=0.3)
    page = rpc(url, "ListTasks", {"contextId": "ctx-gone"}, timeout=10).json()["result"]
    assert page["totalSize"] == 1
    task = page["tasks"][0]
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    # Follow it to its end: nothing was cancelled when the client left.
    with rpc(url, "SubscribeToTask", {"id": task["id"]}, stream=True, timeout=10) as stream:
        states = []
        for line in stream.iter_lines():
            if line.startswith(b"data: "):
                result = json.loads(line[6:])["result"]
                status = (result.get("statusUpdate") or result.get("task") or {}).get("status")
                if status:
                    states.append(status["state"])
    assert states[-1] == "TASK_STATE_COMPLETED"
    final = rpc(url, "GetTask", {"id": task["id"]}, timeout=10).json()["result"]
    assert final["artifacts"][0]["parts"][0]["text"] == "still here"
