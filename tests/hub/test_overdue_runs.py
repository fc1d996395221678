"""limits.concurrency bounds the agents executing: a run past its timeout keeps its slot."""
from __future__ import annotations

import logging
import sys
import time

import pytest
from werkzeug.test import Client

from murmur_wsgi.hub import create_hub
from tests.hub import overdue_agents
from tests.hub.conftest import (FAST, HubClient, agent, close_hub, hub_config, token,
                                wait_until)


NOW = {"returnImmediately": True}


@pytest.fixture
def hub(store):
    overdue_agents.reset()
    config = hub_config(store=store, metrics={"enabled": True})
    if store != "memory":
        config["redis"] = dict(FAST)        # leases of 0.6 s: they live only if renewed
    acme = config["tenants"]["acme"]
    acme["limits"] = {"concurrency": 2, "run_timeout_secs": 0.2, "rate_per_minute": 1000}
    acme["agents"]["overdue"] = agent("tests.hub.overdue_agents:overdue")
    h = create_hub(config)
    yield h
    overdue_agents.RELEASE.set()
    close_hub(h)


def _overdue_gauge(hub) -> float:
    page = Client(hub).get("/metrics", headers={
        "Authorization": f"Bearer {token(role='operator')}"}).get_data(as_text=True)
    (line,) = [line for line in page.splitlines()
               if line.startswith("murmur_hub_runs_overdue ")]
    return float(line.split()[1])


def test_a_concurrency_of_two_never_has_more_than_two_agents_executing(hub):
    rpc = HubClient(hub, "overdue")
    first = [rpc.send(f"run {i}", configuration=NOW) for i in range(2)]
    wait_until(lambda: all(rpc.result("GetTask", {"id": t["id"]})["status"]["state"]
                           == "TASK_STATE_FAILED" for t in first))
    wait_until(lambda: len(hub.runs.overdue()) == 2)
    assert overdue_agents.executing() == 2
    assert _overdue_gauge(hub) == 2
    # Past three lease lifetimes (on Redis): the overdue leases are renewed, not lost.
    lease_secs = 2 * FAST["liveness_secs"]
    until = time.monotonic() + 3 * lease_secs
    wait_until(lambda: time.monotonic() > until)        # wait-ok: leases outlive their expiry
    # Both tasks ended at their timeout, both agents execute: every slot is still taken.
    for i in range(4):
        task = rpc.send(f"more {i}", configuration=NOW)
        assert task["status"]["state"] == "TASK_STATE_REJECTED"
        assert "concurrency limit reached" in task["status"]["message"]["parts"][0]["text"]
    assert overdue_agents.STATE["most"] == 2 and overdue_agents.STATE["started"] == 2
    overdue_agents.RELEASE.set()
    wait_until(lambda: not hub.runs.overdue() and overdue_agents.executing() == 0)
    assert _overdue_gauge(hub) == 0
    wait_until(lambda: hub.admission.running("acme") == 0)
    overdue_agents.RELEASE.clear()
    again = rpc.send("after", configuration=NOW)
    assert again["status"]["state"] == "TASK_STATE_SUBMITTED"      # the slots came back
    assert overdue_agents.STATE["most"] == 2



def _redis_py_closing(tenant, member):
    """What redis-py raises when its pool is disconnected under a command (the hub closing
    while a run's agent still executes)."""
    raise AttributeError("'NoneType' object has no attribute 'sendall'")


def test_an_overdue_agent_whose_slot_cannot_be_released_ends_its_thread_logged(
        hub, monkeypatch, caplog):
    """The hub closing under an overdue run's last call: logged, never an exception its
    thread leaves unhandled (the slot goes with its lease)."""
    unhandled = []
    monkeypatch.setattr(sys, "unraisablehook", unhandled.append)
    rpc = HubClient(hub, "overdue")
    task = rpc.send("run", configuration=NOW)
    wait_until(lambda: rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_FAILED")
    wait_until(lambda: len(hub.runs.overdue()) == 1)
    monkeypatch.setattr(hub.runs.admission, "release", _redis_py_closing)
    with caplog.at_level(logging.ERROR, logger="murmur_wsgi.hub.runs"):
        overdue_agents.RELEASE.set()
        wait_until(lambda: overdue_agents.executing() == 0 and not hub.runs.in_flight()
                   and any("the run's thread failed" in r.getMessage() for r in caplog.records))
    assert unhandled == []
    assert not hub.runs.overdue()
