"""The long steps of one key take turns among themselves: ``keyed_turn``, ``STEP_KEY``.

``turn`` (``murmur_wsgi/turns.py``) gives the worker's other requests their turn every
``TURN_SECS`` of a long step; but a tenant with N such steps at once (N connections
listing pages of large tasks) had N slices in each round of gevent's loop, and another
tenant's request waited N slices at each round it needs: with 8 connections, another
tenant's GetTask had p50 0.2 s, p99 0.5-0.7 s. A step whose greenlet (or thread) is marked
with a key (``STEP_KEY``: the hub's tenant, once authenticated) computes its slice holding
its key's line; at its turn it frees the line and waits behind the key's steps waiting,
the oldest of which takes it at the next round: the key's N steps have one slice in each
round, as one step has, and every other request runs between them. A step of no key (the
door's, a sweep's) turns as before.

A holder is given ``TURN_SECS``: the line is free past it without a word from the holder
(a step that ended, failed, or whose client left mid-step, a thread waiting on something
else), so no step waits on another for good and nothing is given back in a ``finally``.
The first step waiting wakes when its time is up, the others when they come first; one
that leaves the line (served, or its greenlet killed) tells the next.

Concurrency: a line's state under its lock; ``STEP_KEY`` and the ticket a step holds are
``contextvars``, which gevent keeps per greenlet (a new greenlet or thread starts with
none: a run's thread is marked by the run). One line per key that ever took a turn (the
hub's tenants); a forked child starts with none.
"""
from __future__ import annotations

import collections
import contextvars
import itertools
import os
import threading
import time

STEP_KEY: contextvars.ContextVar = contextvars.ContextVar("murmur_wsgi_step_key",
                                                          default=None)
_HELD: contextvars.ContextVar = contextvars.ContextVar("murmur_wsgi_turn_held", default=None)
_TICKETS = itertools.count(1)
NOT_FIRST_SECS = 1.0    # a step not first in its line looks again this often (woken before)


class _Line:
    """One key's steps: the ticket of the one computing, until when, and those waiting."""

    __slots__ = ("lock", "ticket", "until", "queue")

    def __init__(self):
        self.lock = threading.Lock()
        self.ticket = 0             # the holder's (``_HELD``); 0: none
        self.until = 0.0            # the holder's time is up then: the line is free past it
        self.queue: collections.deque = collections.deque()     # an Event each, oldest first


_lines: dict = {}
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_lines.clear)


def keyed_turn(key, ends: float, secs: float, give_way) -> float:
    """``turn`` of a step marked ``key`` whose slice, which ended at ``ends`` (0.0: a step
    that begins), is over: it frees the line and waits behind the key's steps waiting,
    whose oldest takes it. Returns when its new slice ends. A step that begins takes a
    free line nobody waits for at once, and keeps its greenlet's slice that goes on
    (ListTasks' rendering after its parsing)."""
    line = _lines.get(key)
    if line is None:
        line = _lines.setdefault(key, _Line())
    held = _HELD.get()
    mine = held is not None and line.ticket == held
    if mine and not ends and time.monotonic() < line.until:
        return line.until
    with line.lock:
        if mine and line.ticket == held:
            line.ticket = 0
        now = time.monotonic()
        if not (ends or line.queue) and (not line.ticket or line.until <= now):
            return _hold(line, now + secs)
        me = threading.Event()
        line.queue.append(me)
    return _wait(line, me, secs, give_way)


def _wait(line: _Line, me, secs: float, give_way) -> float:
    """Wait in ``line`` (``me`` in its queue) until this step is first and the line free,
    then hold it ``secs``. The first takes it only after a timer, a round of the loop in
    which the sockets are polled (``give_way``, or its wait for the holder's time): its
    own slice just over, or woken by the one before it (``set``), it would run in the
    same round as that one's."""
    timed = False
    try:
        while True:
            with line.lock:
                now = time.monotonic()
                if line.queue[0] is not me:
                    wait = NOT_FIRST_SECS
                elif line.ticket and line.until > now:
                    wait = line.until - now
                elif timed:
                    return _hold(line, now + secs)
                else:
                    wait = 0.0
            if wait:
                timed = not me.wait(wait)
                me.clear()
            else:
                give_way()
                timed = True
    finally:
        with line.lock:
            line.queue.remove(me)
            if line.queue:
                line.queue[0].set()     # the next is first: it waits for the holder's time


def _hold(line: _Line, until: float) -> float:
    """Under ``line.lock``: this step holds the line until ``until``."""
    ticket = line.ticket = next(_TICKETS)
    line.until = until
    _HELD.set(ticket)
    return until
