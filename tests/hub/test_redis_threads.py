"""The Redis store under real threads (the hub's ``--dev`` server, a threaded WSGI stack).

Each test makes its interleaving with events, in the thread that must wait, at the
moment that matters: deterministic, no timing.
"""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.task import FAILED, HubTask

pytestmark = pytest.mark.one_store


@pytest.fixture
def replicas(redis_server):
    """The stores of two replicas, ``me`` and ``r2``, on one flushed redis-server."""
    redis_server.flush()
    found = [redis_stores(redis_server.url, replica_id=name) for name in ("me", "r2")]
    yield found
    for stores in found:
        stores.close()


def test_a_run_ended_elsewhere_is_known_by_id_alone_while_it_leaves_the_runs(replicas,
                                                                              monkeypatch):
    """Another replica's sweep ended a run of this one: the replica's check takes it out of
    the runs (``ended_elsewhere``) while the run, on its own thread, reads its final event
    by id alone (the end it could not write: it ended elsewhere). Between the task leaving
    the running ones and joining the ended ones, that read found no task: the sender's
    stream ended without its final event."""
    mine, other = replicas[0].tasks, replicas[1].tasks
    task = HubTask("t-1", "ctx", "acme", "echo", "m-1", {"messageId": "m-1"})
    mine.create(task, task.task_event())
    assert other.end(task.id, FAILED, "interrupted", None, [], tenant="acme") is not None
    moving, resume = threading.Event(), threading.Event()
    ended = mine._ended

    def slow_ended(task_id, names):
        if threading.current_thread() is checker:
            moving.set()
            resume.wait(10)
        ended(task_id, names)

    monkeypatch.setattr(mine, "_ended", slow_ended)
    checker = threading.Thread(target=mine.ended_elsewhere, args=("acme", task.id))
    checker.start()
    try:
        assert moving.wait(10), "the check did not take the run out"
        final = mine.final_event(task.id)           # the run's read, while it moves
    finally:
        resume.set()
        checker.join(10)
    assert final is not None and "TASK_STATE_FAILED" in final
    assert mine.final_event(task.id) == final       # and once it has moved
