"""The drain ends a run still in flight FAILED (interrupted) before it stops its agent: an
agent told to stop first could end its task itself (CANCELED) before the drain's end."""
from __future__ import annotations

import os
import signal
import sys

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.runs import INTERRUPTED, Run
from tests.hub.conftest import KEY_A, HubClient, agent, hub_config, sha, wait_until


def test_the_drain_ends_a_run_before_it_stops_its_agent(store, monkeypatch):
    hub = create_hub(hub_config(store=store))
    rpc = HubClient(hub, "held")
    task = rpc.send("drain-order", configuration={"returnImmediately": True})
    wait_until(lambda: hub.runs.get(task["id"]) is not None
               and rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_WORKING")
    run = hub.runs.get(task["id"])
    ends = []
    finish = Run.finish

    def recorded_finish(self, state, text=None, **kwargs):
        ended = finish(self, state, text, **kwargs)
        if ended:
            ends.append((state, text))
        return ended

    request_stop = Run.request_stop

    def slow_stop(self, cancel):
        # The draining thread loses its turn right after the stop (a loaded machine): the
        # agent's thread, woken by it, runs to its end first.
        request_stop(self, cancel)
        wait_until(lambda: self.returned or self.ended)

    monkeypatch.setattr(Run, "finish", recorded_finish)
    monkeypatch.setattr(Run, "request_stop", slow_stop)
    assert hub.close(drain_timeout=0) == 1
    assert run.ended and ends == [("TASK_STATE_FAILED", INTERRUPTED)]


def test_close_returns_once_every_harness_process_is_gone():
    """An embedded hub's close ends its agents as the door's does: a harness that ignores
    SIGTERM is SIGKILLed after its grace, and close returns once it is reaped. Before, close
    returned at once and the harness lived on (3 s past it, measured, with its run ended
    FAILED)."""
    hub, pids, pid = _stubborn_harness(0.2)
    assert hub.close(drain_timeout=0) == 1
    assert pids() == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_close_writes_and_closes_its_stores_before_it_waits_for_harnesses(monkeypatch):
    """The hub's own end (the replica's unwritten ends, push, the stores) does not wait for
    a harness's grace: under gunicorn, drain_timeout_secs (20) + cancel_grace_secs (10)
    reaches graceful_timeout (30), whose SIGKILL would cut those writes."""
    hub, pids, pid = _stubborn_harness(1.0)
    live_at_store_close = []
    close_stores = hub.stores.close

    def recorded_close():
        live_at_store_close.append(pid in pids())
        close_stores()

    monkeypatch.setattr(type(hub.stores), "close", lambda self: recorded_close())
    assert hub.close(drain_timeout=0) == 1
    assert live_at_store_close == [True]           # within its grace, not yet SIGKILLed
    assert pids() == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _stubborn_harness(grace: float):
    """A memory hub running one task in a harness that ignores SIGTERM (its
    ``cancel_grace_secs`` ``grace``), once it does: ``(hub, its live pids, the harness's
    pid)``."""
    harness = {"process": [sys.executable, "tests/harness_faults.py", "ignore-term"],
               "cancel_grace_secs": grace}
    hub = create_hub(hub_config(store="memory", tenants={"acme": {
        "api_keys": [sha(KEY_A)], "agents": {"h": agent(harness)}}}))
    rpc = HubClient(hub, "h")
    task = rpc.send("stay", configuration={"returnImmediately": True})
    pids = hub.agents[("acme", "h")].live_pids
    wait_until(lambda: pids() and rpc.result("GetTask", {"id": task["id"]})["status"]["state"]
               == "TASK_STATE_WORKING")
    pid = pids()[0]
    wait_until(lambda: _ignores_sigterm(pid))       # a SIGTERM before would end it at once
    return hub, pids, pid


def _ignores_sigterm(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGTERM now (Linux: SigIgn in /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as status:
        mask = next(line for line in status if line.startswith("SigIgn:")).split()[1]
    return bool(int(mask, 16) & (1 << (signal.SIGTERM - 1)))
