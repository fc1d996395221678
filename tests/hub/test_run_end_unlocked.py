"""A run's end on Redis, written without the run's lock: whatever the write (or the read of
the end another writer wrote) raises, the run's lock is taken back, the end is not left
decided and unwritten, and a later end of the run is written."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.task import FAILED

from tests.hub.agents import gate
from tests.hub.conftest import FAST, HubClient, agent, close_hub, hub_config, wait_until


class Killed(BaseException):
    """What a greenlet killed (or a ``gevent.Timeout``) raises: no ``Exception``."""


def _killed(*args, **kwargs):
    raise Killed()


def test_a_run_whose_end_read_elsewhere_is_killed_can_end_again(redis_server):
    """The run's end meets an end written elsewhere (``store.end`` answers None) and the
    read of that end is killed: the run raises ``Killed`` itself, is not left ``ending``,
    and its next end is written (FAILED). Before, the run's lock, not held then, was
    released once more: RuntimeError instead, and the run stayed ``ending`` for good,
    refusing every later end (its CancelTask answered -32603 at each timeout)."""
    redis_server.flush()
    config = hub_config(store=redis_server.url, redis=dict(FAST))
    config["tenants"]["acme"]["agents"]["held"] = agent("tests.hub.agents:held")
    hub = create_hub(config)
    client = HubClient(hub, "held")
    try:
        task = client.send("g-end-killed", configuration={"returnImmediately": True})
        wait_until(lambda: hub.runs.get(task["id"]) is not None)
        run = hub.runs.get(task["id"])
        hub.store.end = lambda *args, **kwargs: None
        hub.store.final_event = _killed
        try:
            with pytest.raises(Killed):
                run.finish(FAILED, "first")
        finally:
            del hub.store.end, hub.store.final_event
        assert not run.ending and not run.ended
        assert run.finish(FAILED, "again")
        assert client.result("GetTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_FAILED"
    finally:
        gate("g-end-killed").set()
        close_hub(hub)
