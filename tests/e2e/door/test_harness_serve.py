"""A harness served by ``murmur-wsgi serve`` under gunicorn -k gevent: answer, cancel, stop."""
from __future__ import annotations

import json
import time

import pytest

from tests.e2e.conftest import http_post, start_door
from tests.process_util import exits_within

pytestmark = pytest.mark.e2e

REPO_EXAMPLE = "examples/harness_upper.py"
FAULTS = "tests/harness_faults.py"
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
DEADLINE = 10.0


def manifest(*argv, **agent):
    block = {"process": list(argv), "idle_timeout_secs": 20, "cancel_grace_secs": 0.3}
    block.update(agent)
    return {"name": "harness-e2e", "version": "0.1.0", "inference": {"transport": "process"},
            "agent": block}


def call(door, method, params):
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = http_post(door.url + "/", json.dumps(body), V1)
    assert response.status_code == 200
    payload = response.json()
    assert "result" in payload, payload
    return payload["result"]


def send(door, text):
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}
    return call(door, "SendMessage", {"message": message})["task"]


def send_once_free(door, text, deadline=DEADLINE):
    """``send``, again while the answer is busy: a canceled harness holds the capsule's
    slot until it is gone, which the door learns a moment after the process exits."""
    ends = time.monotonic() + deadline
    while True:
        task = send(door, text)
        if task["status"]["state"] != "TASK_STATE_REJECTED" or time.monotonic() > ends:
            return task


def harness_pid(door, task_id):
    """The pid harness_start recorded in the door's trace (its home is the fixture's)."""
    path = door.home / "records" / door.session_id / "trace.jsonl"
    trace = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    starts = {r["event_id"] for r in trace
              if r["event_type"] == "task_start" and r["task_id"] == task_id}
    (pid,) = [r["pid"] for r in trace
              if r["event_type"] == "harness_start" and r["parent_id"] in starts]
    return pid


def test_a_served_harness_answers(tmp_path):
    with start_door(tmp_path, manifest("python", REPO_EXAMPLE)) as door:
        task = send(door, "hello gunicorn")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["text"] == "HELLO GUNICORN"
        assert exits_within(harness_pid(door, task["id"]), DEADLINE)


def test_cancel_and_stop_end_the_harness_under_gevent(tmp_path):
    with start_door(tmp_path, manifest("python", FAULTS, "ask")) as door:
        task = send(door, "go")                      # held until the harness asks
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        pid = harness_pid(door, task["id"])
        canceled = call(door, "CancelTask", {"id": task["id"]})
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert exits_within(pid, DEADLINE)

        second = send_once_free(door, "again")
        assert second["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        pid = harness_pid(door, second["id"])
        door.stop()                                  # SIGTERM to gunicorn, a harness running
        assert exits_within(pid, DEADLINE)
