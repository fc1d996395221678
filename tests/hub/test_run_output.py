"""A run's output is bounded: past ``limits.max_output_bytes`` its task ends FAILED.

What a run's agent writes (streamed text, progress, named artifacts, the models its usage
names) the run keeps and the store's event log holds until the task ends and is read
whole by GetTask: without a bound one agent grows the worker's memory (or Redis) for as
long as its run lasts.
"""
from __future__ import annotations

import json
import sys

import pytest

from murmur_wsgi.hub import create_hub
from tests.hub.agents import FLOODED
from tests.hub.conftest import HubClient, agent, close_hub, hub_config, wait_until

LIMIT = 64 * 1024
PASSED = (f"the run wrote more than {LIMIT} bytes (limits.max_output_bytes) "
          "and was stopped")


def _hub(store, extra_agents=None):
    config = hub_config(store=store, limits={"run_timeout_secs": 30,
                                             "max_output_bytes": LIMIT})
    agents = config["tenants"]["acme"]["agents"]
    agents["floods"] = agent("tests.hub.agents:floods")
    agents.update(extra_agents or {})
    return create_hub(config)


@pytest.mark.parametrize("mode", ["text", "progress", "chunk", "names", "models"])
def test_an_agent_writing_past_max_output_bytes_fails_its_task_and_is_stopped(store, mode):
    FLOODED.clear()
    h = _hub(store)
    try:
        client = HubClient(h, "floods")
        task = client.send(f"{mode} 1000 1024")          # 1000 KiB, past 64 KiB
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"]["parts"][0]["text"] == PASSED
        # The agent was stopped: its next call was refused, and the one after.
        wait_until(lambda: FLOODED)
        assert FLOODED == [(mode, FLOODED[0][1], 2)]
        assert FLOODED[0][1] < LIMIT // 1024 + 2
        got = client.result("GetTask", {"id": task["id"]})
        stored = sum(len(json.dumps(a)) for a in got.get("artifacts", []))
        assert stored < 2 * LIMIT
    finally:
        close_hub(h)


def test_an_agent_writing_under_max_output_bytes_completes(store):
    FLOODED.clear()
    h = _hub(store)
    try:
        task = HubClient(h, "floods").send("text 50 1024")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert FLOODED == [("text", 50, 0)]
    finally:
        close_hub(h)


def test_a_harness_writing_past_max_output_bytes_fails_its_task(store):
    line = json.dumps({"type": "artifact-chunk", "name": "log", "part": {"text": "h" * 30_000}})
    script = agent({"process": [sys.executable, "tests/harness_script.py"] + [line] * 5})
    h = _hub(store, {"script": script})
    try:
        client = HubClient(h, "script")
        task = client.send("hi")
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"]["parts"][0]["text"] == PASSED
        # The third chunk passed the limit: the task keeps the two before it.
        got = client.result("GetTask", {"id": task["id"]})
        assert [(a["artifactId"], len(a["parts"])) for a in got["artifacts"]] == [("log", 2)]
    finally:
        close_hub(h)


def test_max_output_bytes_defaults_to_64_mib_and_a_tenant_overrides_it():
    config = hub_config(store="memory")
    config["tenants"]["acme"]["limits"] = {"max_output_bytes": "1Mi"}
    h = create_hub(config)
    try:
        assert h.limits("acme")["max_output_bytes"] == 1024 ** 2
        assert h.limits("globex")["max_output_bytes"] == 64 * 1024 ** 2
    finally:
        close_hub(h)
