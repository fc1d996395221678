"""An agent that writes without waiting leaves the worker's other requests answered."""
from __future__ import annotations

import json
import threading
import time

import pytest
import requests

from tests.e2e.conftest import start_door

pytestmark = [pytest.mark.e2e, pytest.mark.timed]

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}


def rpc(session: requests.Session, url: str, method: str, params: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return session.post(url + "/", data=json.dumps(body), headers=HEADERS, timeout=120).json()


def test_gettask_is_answered_while_an_agent_streams(tmp_path):
    # NOTE: before, the demo's /stream ran on the request's greenlet without ever waiting:
    # 100,000 chunks held the worker 1.5 s, and a GetTask sent meanwhile was answered only
    # once the stream ended (0.5-1.5 s); now the agent gives way every 10 ms of writes.
    with start_door(tmp_path, {"name": "busy", "version": "0.1.0"}) as door:
        answered = []
        with requests.Session() as session:
            assert "error" in rpc(session, door.url, "GetTask", {"id": "tsk_none"})
            task = {}
            params = {"message": {"messageId": "m", "role": "ROLE_USER",
                                  "parts": [{"text": "/stream 100000"}]}}
            sender = threading.Thread(target=lambda: task.update(
                rpc(requests.Session(), door.url, "SendMessage", params)))
            sender.start()
            while sender.is_alive():
                started = time.monotonic()
                rpc(session, door.url, "GetTask", {"id": "tsk_none"})
                if sender.is_alive():
                    answered.append(time.monotonic() - started)
            sender.join(120)
        assert task["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert len(answered) >= 10, answered
        assert max(answered) < 0.5, answered
