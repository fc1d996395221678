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
from murmur_wsgi.hub.config import ConfigError, load_config
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


@pytest.mark.parametrize("where", ["limits", "tenant"])
def test_max_output_bytes_has_the_doors_floor(where):
    """Below 64Ki an ordinary answer fails its task: the hub refuses it at boot, as the door
    does its ``tasks.max_output_bytes``, at the top level and in a tenant's limits."""
    config = hub_config(store="memory")
    if where == "limits":
        config["limits"] = {"max_output_bytes": 65535}
        line = "limits.max_output_bytes: must be at least 64Ki (65536 bytes)"
    else:
        config["tenants"]["acme"]["limits"] = {"max_output_bytes": 65535}
        line = "tenants.acme.limits.max_output_bytes: must be at least 64Ki (65536 bytes)"
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert str(info.value) == line
    limits = config["limits"] if where == "limits" else config["tenants"]["acme"]["limits"]
    limits["max_output_bytes"] = "64Ki"
    assert load_config(config) is not None


MODELS_PASSED = "usage: more than 5 models in one run (limits.max_usage_models)"


def test_a_run_naming_more_models_than_max_usage_models_fails(store, caplog):
    # NOTE: before, the models a run named were bounded by their names' bytes only (a
    # million names of a few bytes each under 64 MiB), and each report summed every model
    # named so far, under the run's lock: 8,000 models took 1.9 s of the worker's CPU.
    FLOODED.clear()
    config = hub_config(store=store, limits={"max_usage_models": 5})
    config["tenants"]["acme"]["agents"]["floods"] = agent("tests.hub.agents:floods")
    h = create_hub(config)
    try:
        client = HubClient(h, "floods")
        done = client.send("models 5 1")
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        usage = done["artifacts"][-1]["parts"][-1]["data"]["usage"]
        assert (usage["input_tokens"], usage["models"]) == (5, 5)
        caplog.clear()
        failed = client.send("models 6 1")
        assert failed["status"]["state"] == "TASK_STATE_FAILED"
        assert MODELS_PASSED in caplog.text
        assert FLOODED == [("models", 5, 0)]            # the first run's; the second failed
        assert h.limits("acme")["max_usage_models"] == 5
    finally:
        close_hub(h)


def test_max_usage_models_defaults_to_1000():
    h = create_hub(hub_config(store="memory"))
    try:
        assert h.limits("globex")["max_usage_models"] == 1000
    finally:
        close_hub(h)


def _flooded_in(what: str, **limits) -> tuple[dict, float]:
    """The task of a ``floods`` run of ``what`` on a memory hub with ``limits``, and the
    CPU seconds its SendMessage took."""
    import time

    FLOODED.clear()
    config = hub_config(store="memory", limits=limits)
    config["tenants"]["acme"]["agents"]["floods"] = agent("tests.hub.agents:floods")
    h = create_hub(config)
    try:
        started = time.process_time()
        task = HubClient(h, "floods").send(what)
        return task, time.process_time() - started
    finally:
        close_hub(h)


@pytest.mark.timed
def test_a_run_publishing_many_named_artifacts_costs_linear_time():
    """20,000 named artifacts: each found by its id, not searched for among those before it
    (9.8 s of CPU before, under the run's lock, the worker serving nothing else)."""
    task, spent = _flooded_in("names 20000 1")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["artifactId"] for a in task["artifacts"][:2]] == ["a0", "a1"]
    assert len(task["artifacts"]) == 20_001                 # and the answer
    assert spent < 3.0, spent


@pytest.mark.timed
def test_a_fold_of_many_appended_chunks_costs_linear_time():
    """The stale sweep's fold of a task's log (hub/task.artifacts_of): each chunk extends
    its artifact's parts, never copies them (quadratic before: 50,000 chunks, a log that
    `redis.max_events_per_task` raised holds, took 5.1 s)."""
    import time

    from murmur_wsgi.hub.task import artifacts_of

    chunk = json.dumps({"artifactUpdate": {"append": True, "artifact": {
        "artifactId": "log", "parts": [{"text": "x"}]}}})
    started = time.process_time()
    folded = artifacts_of([chunk] * 50_000)
    spent = time.process_time() - started
    assert [(a["artifactId"], len(a["parts"])) for a in folded] == [("log", 50_000)]
    assert spent < 1.0, spent


@pytest.mark.timed
def test_a_run_naming_many_models_costs_linear_time():
    """20,000 models (a limit raised that far): each report adds to the totals kept, not a
    sum over every model named so far (about 11 s of CPU before, under the run's lock)."""
    task, spent = _flooded_in("models 20000 1", max_usage_models=100_000)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][-1]["parts"][-1]["data"]["usage"]["models"] == 20_000
    assert spent < 2.0, spent


@pytest.mark.timed
def test_events_kept_through_an_outage_are_written_in_linear_time():
    """The events a run kept while the store refused them (hub/run_events.KeptEvents) are
    written oldest first once it answers: each leaves the front of the queue at no cost
    (a list's ``del [0]`` moved every event behind it: 150,000 progress events, what
    max_output_bytes holds of them, took 1.2 s, 300,000 4.7 s; now 0.06 s)."""
    import time

    from murmur_wsgi.hub.run_events import KeptEvents
    from murmur_wsgi.hub.store import StoreError

    written = []

    class Store:
        refusing = True

        def append(self, task_id, payload, n):
            if self.refusing:
                raise StoreError("away")
            written.append((n, payload))
            return True

    store, kept, count = Store(), KeptEvents("tsk_1"), 300_000
    assert kept.add("e1")                   # the first is written at once: refused
    assert kept.write(store) and written == []
    for i in range(2, count + 1):
        assert not kept.add(f"e{i}")        # behind the one kept: kept too
    store.refusing = False
    started = time.process_time()
    assert kept.write(store)
    spent = time.process_time() - started
    assert written == [(i, f"e{i}") for i in range(1, count + 1)]
    assert kept.idle and kept.take() == []
    assert spent < 1.0, spent
