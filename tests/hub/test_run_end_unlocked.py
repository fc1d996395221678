"""A run's end on Redis, written without the run's lock: whatever the write (or the read of
the end another writer wrote) raises, the run's lock is taken back, the end is not left
decided and unwritten, and a later end of the run is written."""
from __future__ import annotations

import json
import threading

import pytest

from murmur_wsgi.agents.endings import TaskCanceled
from murmur_wsgi.hub.task import FAILED

from tests.hub.agents import gate
from tests.hub.conftest import HubClient, close_hub, redis_hub, wait_until, whole_log


class Killed(BaseException):
    """What a greenlet killed (or a ``gevent.Timeout``) raises: no ``Exception``."""


def _killed(*args, **kwargs):
    raise Killed()


def _held(redis_server, name: str = "held", limits: dict | None = None, **overrides):
    """A hub on the (flushed) Redis of ``redis_server`` hosting ``name`` (tests/hub/agents.py;
    ``limits``: acme's), and its client."""
    hub = redis_hub(redis_server, {name: f"tests.hub.agents:{name}"}, limits=limits,
                    **overrides)
    return hub, HubClient(hub, name)


def _slow_end(end, writing, waited):
    """``store.end`` as ``end`` writes it, once it has set ``writing`` and ``waited()`` is
    true (a gate opened meanwhile)."""
    def slow_end(*args, **kwargs):
        writing.set()
        assert waited()
        return end(*args, **kwargs)
    return slow_end


def _running(hub, client, text: str):
    """The run of a task sent with ``text``, once registered."""
    task = client.send(text, configuration={"returnImmediately": True})
    wait_until(lambda: hub.runs.get(task["id"]) is not None)
    return task, hub.runs.get(task["id"])


@pytest.mark.parametrize("killed", ["end", "final_event"])
def test_a_run_whose_end_is_killed_can_end_again(redis_server, killed):
    """The run's end is killed as it is written (``end``), or as it reads the end written
    elsewhere (``store.end`` answers None, ``final_event``): the run raises ``Killed``
    itself, is not left ``ending``, and its next end is written (FAILED). Before, for
    ``final_event``, the run's lock, not held then, was released once more: RuntimeError
    instead, and the run stayed ``ending`` for good, refusing every later end (its
    CancelTask answered -32603 at each timeout)."""
    hub, client = _held(redis_server)
    try:
        task, run = _running(hub, client, f"g-end-killed-{killed}")
        hub.store.end = (lambda *args, **kwargs: None) if killed == "final_event" else _killed
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
        gate(f"g-end-killed-{killed}").set()
        close_hub(hub)


def test_the_drain_waits_for_a_run_end_being_written(redis_server):
    """The hub closes (drain timeout 1 s) as a run's own end is being written (Redis slow
    to answer it): the drain's end is refused (the run is ending), and the hub waits for the
    run's write before it closes its timers and its store. Before, the drain went on at
    once: the store was closed under the write (the run not ended as the hub closed)."""
    hub, client = _held(redis_server, drain_timeout_secs=1)
    _, run = _running(hub, client, "g-drain-end")
    writing, go = gate("g-drain-end-writing"), gate("g-drain-end-go")
    end, finish, close_timers = hub.store.end, run.finish, hub.runs.close
    seen = []

    def drains_finish(*args, **kwargs):
        ended = finish(*args, **kwargs)
        go.set()                                # the run's own write answers now
        return ended

    def closing_timers():
        seen.append(run.ended)
        close_timers()

    hub.store.end = _slow_end(end, writing, lambda: go.wait(10))
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


def test_what_comes_while_a_run_end_is_written_is_dropped(redis_server):
    """As a run's end (FAILED) is being written (Redis slow to answer it), the agent's
    progress is refused (TaskCanceled), a cancel's stop neither waits for the write nor
    marks the run canceled, and another replica's end does not close it: the task ends
    FAILED, its end the log's last event (no progress after it), the run ended once."""
    hub, client = _held(redis_server)
    try:
        task, run = _running(hub, client, "g-end-window")
        writing, go = gate("g-end-window-writing"), gate("g-end-window-go")
        end, left = hub.store.end, []
        hub.runs.ended = lambda ended, leave=hub.runs.ended: (left.append(ended),
                                                              leave(ended))

        hub.store.end = _slow_end(end, writing, lambda: go.wait(10))
        ender = threading.Thread(target=run.finish, args=(FAILED, "its own"), daemon=True)
        ender.start()
        try:
            assert writing.wait(5)
            with pytest.raises(TaskCanceled):
                run.progress("late")
            run.request_stop(cancel=True)
            run.ended_elsewhere()
            assert run.stopping and not run.cancel_requested and not run.ended
        finally:
            go.set()
            ender.join(10)
            del hub.store.end
        assert run.ended and left == [run]
        assert client.result("GetTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_FAILED"
        logged = [json.loads(payload) for payload in whole_log(hub.store, task["id"])]
        assert logged[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"
        assert "late" not in json.dumps(logged)
    finally:
        gate("g-end-window").set()
        close_hub(hub)


def test_a_stop_does_not_wait_for_the_end_of_a_run_past_its_output_limit(redis_server):
    """The agent writes past ``limits.max_output_bytes`` (100 kB) as Redis is slow to answer
    its end: a stop (as CancelTask's) made meanwhile does not wait for that write, and the
    task ends FAILED. Before, that end was written under the lock the agent's write held: the
    stop waited for it, a CancelTask past its timeout (here the write waited 5 s for the
    stop, in vain)."""
    hub, client = _held(redis_server, "floods",
                        limits={"run_timeout_secs": 30, "max_output_bytes": 100_000})
    writing, stopped, seen = gate("g-passed-writing"), gate("g-passed-stopped"), []
    end = hub.store.end

    # the stop comes during the write
    hub.store.end = _slow_end(end, writing, lambda: seen.append(stopped.wait(5)) or True)
    try:
        task = client.send("progress 1000 1000", configuration={"returnImmediately": True})
        assert writing.wait(5)
        hub.runs.get(task["id"]).request_stop(cancel=True)
        stopped.set()
        wait_until(lambda: hub.runs.get(task["id"]) is None)
        assert seen == [True]
        assert client.result("GetTask", {"id": task["id"]})["status"]["state"] == \
            "TASK_STATE_FAILED"
    finally:
        stopped.set()
        del hub.store.end
        close_hub(hub)
