"""A run's end on Redis, written without the run's lock: whatever the write (or the read of
the end another writer wrote) raises, the run's lock is taken back, the end is not left
decided and unwritten, and a later end of the run is written."""
from __future__ import annotations

import threading

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


def test_the_drain_waits_for_a_run_end_being_written(redis_server):
    """The hub closes (drain timeout 1 s) as a run's own end is being written (Redis slow
    to answer it): the drain's end is refused (the run is ending), and the hub waits for the
    run's write before it closes its timers and its store. Before, the drain went on at
    once: the store was closed under the write (the run not ended as the hub closed)."""
    redis_server.flush()
    config = hub_config(store=redis_server.url, redis=dict(FAST), drain_timeout_secs=1)
    config["tenants"]["acme"]["agents"]["held"] = agent("tests.hub.agents:held")
    hub = create_hub(config)
    client = HubClient(hub, "held")
    task = client.send("g-drain-end", configuration={"returnImmediately": True})
    wait_until(lambda: hub.runs.get(task["id"]) is not None)
    run = hub.runs.get(task["id"])
    writing, go = gate("g-drain-end-writing"), gate("g-drain-end-go")
    end, finish, close_timers = hub.store.end, run.finish, hub.runs.close
    seen = []

    def slow_end(*args, **kwargs):
        writing.set()
        assert go.wait(10)
        return end(*args, **kwargs)

    def drains_finish(*args, **kwargs):
        ended = finish(*args, **kwargs)
        go.set()                                # the run's own write answers now
        return ended

    def closing_timers():
        seen.append(run.ended)
        close_timers()

    hub.store.end = slow_end
    ender = threading.Thread(target=finish, args=(FAILED, "its own"), daemon=True)
    ender.start()
    assert writing.wait(5)
    run.finish, hub.runs.close = drains_finish, closing_timers
    try:
        hub.close()
    finally:
        go.set()
        ender.join(10)
        gate("g-drain-end").set()
    assert seen == [True]
    assert run.ended and not run.store_failed
