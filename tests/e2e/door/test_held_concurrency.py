"""200 concurrent held SendMessage calls against one gunicorn -k gevent door."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.e2e.conftest import CLOSE, start_door

pytestmark = pytest.mark.e2e

CALLS = 200
HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}


def send(session: requests.Session, url: str, i: int) -> dict:
    text = f"/sleep 0.05\nanswer {i}" if i % 4 == 0 else f"answer {i}"
    body = {"jsonrpc": "2.0", "id": i, "method": "SendMessage",
            "params": {"message": {"messageId": f"m{i}", "role": "ROLE_USER",
                                   "contextId": f"ctx-{i % 10}", "parts": [{"text": text}]}}}
    response = session.post(url + "/", data=json.dumps(body), headers=HEADERS, timeout=60)
    assert response.status_code == 200
    return response.json()


def test_two_hundred_held_send_messages(tmp_path):
    manifest = {"name": "load", "version": "0.1.0", "agent": "demo",
                "lifecycle": {"task_acceptance": "queue", "queue_depth": CALLS}}
    with start_door(tmp_path, manifest) as door:
        with ThreadPoolExecutor(max_workers=CALLS) as pool:
            sessions = [requests.Session() for _ in range(CALLS)]
            answers = list(pool.map(lambda i: send(sessions[i], door.url, i), range(CALLS)))
            for session in sessions:
                session.close()
        ids = set()
        for i, answer in enumerate(answers):
            assert answer["id"] == i
            task = answer["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            assert task["artifacts"][0]["parts"][0]["text"] == f"answer {i}"
            assert task["contextId"] == f"ctx-{i % 10}"
            ids.add(task["id"])
        assert len(ids) == CALLS

        listed, token = [], ""
        while True:
            body = {"jsonrpc": "2.0", "id": "l", "method": "ListTasks",
                    "params": {"pageSize": 100, "pageToken": token}}
            page = requests.post(door.url + "/", data=json.dumps(body),
                                 headers={**HEADERS, **CLOSE}, timeout=10).json()["result"]
            assert page["totalSize"] == CALLS
            listed += [t["id"] for t in page["tasks"]]
            token = page["nextPageToken"]
            if not token:
                break
        assert sorted(listed) == sorted(ids)
        body = {"jsonrpc": "2.0", "id": "c", "method": "ListTasks",
                "params": {"contextId": "ctx-3", "status": "TASK_STATE_COMPLETED"}}
        page = requests.post(door.url + "/", data=json.dumps(body),
                             headers={**HEADERS, **CLOSE}, timeout=10).json()["result"]
        assert page["totalSize"] == CALLS // 10
