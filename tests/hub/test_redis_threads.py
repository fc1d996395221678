"""The Redis store under real threads (the hub's ``--dev`` server, a threaded WSGI stack).

Each test makes its interleaving with events, in the thread that must wait, at the
moment that matters: deterministic, no timing.
"""
from __future__ import annotations

import threading

import pytest

from murmur_wsgi.hub.store import redis_stores
from murmur_wsgi.hub.store.redis_keys import runs_key
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


class _Pausing(list):
    """A list whose first clearing (the beat taking every run that ended) waits, on the
    thread that clears it, for ``resume``, once it has said so (``taking``)."""

    def __init__(self, items):
        super().__init__(items)
        self.taking, self.resume = threading.Event(), threading.Event()

    def _pause(self):
        if not self.taking.is_set():
            self.taking.set()
            self.resume.wait(10)

    def __setitem__(self, index, value):
        self._pause()
        super().__setitem__(index, value)

    def __delitem__(self, index):
        self._pause()
        super().__delitem__(index)


def test_a_run_that_ends_while_the_beat_takes_the_ended_ones_leaves_the_runs_too(replicas):
    """A run ends (its task's END written, the run left) on its own thread while the beat
    takes the runs that ended so far: it is taken at this beat or the next. Before, the beat
    emptied the list after copying it, and a run left between the two was dropped: it stayed
    in the replica's runs for as long as the replica lived."""
    mine, beat = replicas[0].tasks, replicas[0].replicas
    tasks = [HubTask(f"t-{n}", "ctx", "acme", "echo", f"m-{n}", {"messageId": f"m-{n}"})
             for n in range(2)]
    for task in tasks:
        mine.create(task, task.task_event())
    mine.end("t-0", FAILED, "ended", None, [], tenant="acme")
    mine._left = left = _Pausing(mine._left)
    beating = threading.Thread(target=beat.heartbeat)
    beating.start()
    try:
        assert left.taking.wait(10), "the beat did not take the runs"
        mine.end("t-1", FAILED, "ended", None, [], tenant="acme")       # meanwhile
    finally:
        left.resume.set()
        beating.join(10)
    beat.heartbeat()
    runs = mine._redis.zrange(runs_key(mine.replica), 0, -1)
    assert runs == [], runs
