"""A Redis that loses writes it had acknowledged (restarted from an older snapshot, an
asynchronous replica promoted) under a running task: the run's next events leave the lost
ones' positions empty, and a stream meets the loss as a trimmed log's (the stored Task,
then on), never as a silent gap. The loss is made by restoring the task's keys as they
were (``DUMP``, ``RESTORE … REPLACE``) between two of the run's writes."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.store.redis_keys import events_key, task_key
from tests.hub.agents import gate
from tests.hub.conftest import HubClient, close_hub, redis_hub, sse_events, wait_until

pytestmark = pytest.mark.cluster


def _texts(events: list) -> list:
    """Each event of a stream as ``(kind, its status text or state)``."""
    said = []
    for event in events:
        (kind, value), = event["result"].items()
        status = value.get("status") or {}
        parts = (status.get("message") or {}).get("parts") or [{}]
        said.append((kind, parts[0].get("text") or status.get("state")))
    return said


def _logged(store, key: str, text: str) -> bool:
    """Whether the log at ``key`` holds an event saying ``text``."""
    return any(text in fields.get("p", "") for _, fields in store.xrange(key))


@pytest.mark.parametrize("steps", ["2 2 2", "2 2"], ids=["appended-after", "end-after"])
def test_events_a_redis_lost_are_a_trimmed_logs_gap_not_a_silent_one(redis_server, steps):
    """The writes of the run's second step lost; then a third step's events (written by
    APPEND) or at once the run's end (END). The replay of the finished task: its events up
    to the loss, then the stored Task, which ends the stream. Before, the events after the
    loss followed at once, the second step's silently missing."""
    hub = redis_hub(redis_server, {"steps": "tests.hub.agents:reports_in_steps"})
    client = HubClient(hub, "steps")
    store = redis_server.client()
    name = f"lost-{len(steps)}"
    try:
        task = client.send(f"{name} {steps}", configuration={"returnImmediately": True})
        keys = (task_key("acme", task["id"]), events_key("acme", task["id"]))
        assert gate(f"{name}-0").wait(10)
        wait_until(lambda: _logged(store, keys[1], "s0 p1"))
        snapshot = [(key, store.dump(key), store.pttl(key)) for key in keys]
        gate(f"{name}-go-0").set()
        assert gate(f"{name}-1").wait(10)
        wait_until(lambda: _logged(store, keys[1], "s1 p1"))
        for key, dumped, ttl in snapshot:            # the writes of step 1 lost
            store.restore(key, max(ttl, 0), dumped, replace=True)
        for i in range(1, len(steps.split())):
            gate(f"{name}-go-{i}").set()
        wait_until(lambda: client.result("GetTask", {"id": task["id"]})["status"]["state"]
                   == "TASK_STATE_COMPLETED")
        said = _texts(sse_events(client.call("SubscribeToTask", {"id": task["id"]})))
        step0 = said.index(("statusUpdate", "s0 p1"))
        assert said[step0 + 1:] == [("task", "TASK_STATE_COMPLETED")], said
        assert ("statusUpdate", "s1 p0") not in said
    finally:
        for i in range(3):
            gate(f"{name}-go-{i}").set()
        store.close()
        close_hub(hub)
