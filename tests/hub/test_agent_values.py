"""The hub, on both stores: an agent's bad value ends its task FAILED at once."""
from __future__ import annotations

import json
import logging
import sys
import time

import pytest

from murmur_wsgi.agents import NOT_JSON
from murmur_wsgi.hub import create_hub
from tests.hub.conftest import HubClient, agent, close_hub, hub_config
from tests.shared import bad_values_agent
from tests.shared.json_util import strict_json


@pytest.fixture
def hub(store):
    config = hub_config(store=store)
    config["tenants"]["acme"]["agents"].update(
        bad=agent("tests.shared.bad_values_agent:bad"), mutates=agent("tests.hub.agents:mutates"))
    h = create_hub(config)
    yield h
    close_hub(h)


def _status_text(task: dict) -> str | None:
    message = task["status"].get("message")
    return message["parts"][0]["text"] if message else None


@pytest.mark.parametrize("ending", bad_values_agent.ENDINGS + bad_values_agent.HUB_ENDINGS)
@pytest.mark.timed
def test_a_bad_value_ends_the_task_failed_at_once(hub, ending, caplog):
    rpc = HubClient(hub, "bad")
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="murmur_wsgi.hub.runs"):
        task = rpc.send(ending)
    assert time.monotonic() - started < 1.0
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert _status_text(task) == NOT_JSON
    assert any("not JSON" in r.getMessage() for r in caplog.records)
    for method, params in (("GetTask", {"id": task["id"]}),
                           ("ListTasks", {"includeArtifacts": True})):
        body = strict_json(rpc.call(method, params).get_data(), doubles=True)
        assert "result" in body, body
    assert hub.runs.wait(lambda: not hub.runs.in_flight(), 1.0)          # the run left too


@pytest.mark.timed
def test_a_bad_token_ends_a_stream_failed_at_once(hub):
    rpc = HubClient(hub, "bad")
    started = time.monotonic()
    response = rpc.call("SendStreamingMessage", {"message": {
        "messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER",
        "parts": [{"text": "token"}]}})
    events = [strict_json(line[len(b"data: "):]) for line in response.get_data().split(b"\n")
              if line.startswith(b"data: ")]
    assert time.monotonic() - started < 1.0
    final = events[-1]["result"]["statusUpdate"]["status"]
    assert final["state"] == "TASK_STATE_FAILED"
    assert final["message"]["parts"][0]["text"] == NOT_JSON



def test_an_agent_changing_its_input_changes_nothing_stored(hub):
    rpc = HubClient(hub, "mutates")
    message = {"messageId": "m-own", "role": "ROLE_USER", "metadata": {"k": "v"},
               "parts": [{"text": "hi", "metadata": {"p": 1}}, {"data": {"n": 1}}]}
    task = rpc.result("SendMessage", {"message": message})["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    stored = dict(message, taskId=task["id"], contextId=task["contextId"])
    for got in (task, rpc.result("GetTask", {"id": task["id"]}),
                *rpc.result("ListTasks", {})["tasks"]):
        assert got["history"][0] == stored
    body = strict_json(rpc.call("ListTasks", {}).get_data(), doubles=True)
    assert body["result"]["totalSize"] == 1


def test_a_harness_artifact_holding_an_integer_no_double_holds_fails_its_task(store):
    line = json.dumps({"type": "artifact-add", "name": "table",
                       "parts": [{"data": {"n": 10 ** 400}}]})
    config = hub_config(store=store)
    config["tenants"]["acme"]["agents"]["script"] = agent(
        {"process": [sys.executable, "tests/harness_script.py", line]})
    h = create_hub(config)
    try:
        task = HubClient(h, "script").send("hi")
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert _status_text(task) == ("harness: line 1 (artifact-add): artifact 'table': "
                                      "an integer overflows a double")
        listed = strict_json(HubClient(h, "script").call(
            "ListTasks", {"includeArtifacts": True}).get_data(), doubles=True)
        assert listed["result"]["totalSize"] == 1
    finally:
        close_hub(h)
