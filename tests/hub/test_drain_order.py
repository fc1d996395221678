"""The drain ends a run still in flight FAILED (interrupted) before it stops its agent: an
agent told to stop first could end its task itself (CANCELED) before the drain's end."""
from __future__ import annotations

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.runs import INTERRUPTED, Run
from tests.hub.conftest import HubClient, hub_config, wait_until


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
