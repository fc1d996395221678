"""CancelTask meeting a run's end: a run that ends as the cancel reads its task answers
its own end's state, never the state the cancel read before it ended."""
from __future__ import annotations

from murmur_wsgi.hub import create_hub

from tests.hub.agents import gate
from tests.hub.conftest import (FAST, HubClient, agent, close_hub, hub_config, not_cancelable,
                                wait_until)


def _hub(redis_server, name: str, ref: str):
    redis_server.flush()
    config = hub_config(store=redis_server.url, redis=dict(FAST))
    config["tenants"]["acme"]["agents"][name] = agent(ref)
    return create_hub(config)


def test_a_run_that_ends_as_its_cancel_reads_the_task_answers_its_end(redis_server):
    """The cancel reads the task WORKING, then the run completes (its end written, the run
    ended and still registered): -32002 naming COMPLETED. Before, the cancel saw the run
    ended and refused with the state it had read: `it is already TASK_STATE_WORKING`, a
    state that can be canceled."""
    hub = _hub(redis_server, "ends", "tests.hub.agents:ends_when_told")
    client = HubClient(hub, "ends")
    read = hub.store.get

    def read_then_end(tenant, agent_name, task_id):
        found = read(tenant, agent_name, task_id)
        gate("g-ends").set()                            # the run ends after this read
        assert gate("g-ends-ending").wait(5)
        return found

    try:
        task = client.send("g-ends", configuration={"returnImmediately": True})
        assert gate("g-ends-in").wait(5)                # its stop waker is set
        hub.store.get = read_then_end
        try:
            error = client.error("CancelTask", {"id": task["id"]})
        finally:
            del hub.store.get
        assert error == not_cancelable(task["id"], "TASK_STATE_COMPLETED")
        gate("g-ends-go").set()
        wait_until(lambda: hub.runs.get(task["id"]) is None)
        assert client.result("GetTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_COMPLETED"
    finally:
        close_hub(hub)
