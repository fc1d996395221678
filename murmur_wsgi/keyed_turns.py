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

The first step waiting takes the line after a round of the loop, whoever holds it: under
gevent it runs only while no step computes, so a holder still holding has stopped (it
ended, failed, lost its client, or waits on a socket or its agent's model). No step
waits on another for good, nothing is given back in a ``finally``, and a step that waits
between short writes holds none of the others; one that comes back to its slice computes
on while the key's slice (whoever took it) is open, and once it is over waits in the line
at its next ``turn`` (``in_slice``). The others wake when they come first: one that
leaves the line (served, or its greenlet killed) tells the next. Under threads
(Werkzeug's dev server) the line orders the key's steps, but holds none back: a thread
is not known to compute.

Concurrency: a line's state under its lock; ``STEP_KEY`` and the ticket a step holds are
``contextvars``, which gevent keeps per greenlet (a new greenlet or thread starts with
none: a run's thread is marked by the run). A mark stays on a keep-alive connection's
greenlet after its request: the hub sets its own at each request's step 2, and the door
clears it at each of its requests (both mounted in one site). One line per key that ever
took a turn (the hub's tenants); a forked child starts with none.
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
        self.until = 0.0            # the holder's slice ends then
        self.queue: collections.deque = collections.deque()     # an Event each, oldest first


_lines: dict = {}
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_lines.clear)


def keyed_turn(key, ends: float, secs: float, give_way) -> float:
    """``turn`` of a step marked ``key`` whose slice, which ends at ``ends`` (0.0: a step
    that begins), is over, or the key's is (``in_slice``): it frees the line and waits
    behind the key's steps waiting, whose oldest takes it. Returns when its new slice
    ends. A step that begins takes the line at once when nobody waits, and keeps its
    greenlet's slice that goes on (ListTasks' rendering after its parsing)."""
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
        if not (ends or line.queue):
            return _hold(line, time.monotonic() + secs)
        me = threading.Event()
        line.queue.append(me)
    return _wait(line, me, secs, give_way)


def waited_for(key, now: float) -> bool:
    """Whether another step of ``key`` waits in its line, or computes in a slice still open
    at ``now``: a step about to take a long piece would compute beside it."""
    line = _lines.get(key)
    return line is not None and (bool(line.queue) or (
        line.ticket != 0 and line.ticket != _HELD.get() and now < line.until))


def in_slice(key, now: float) -> bool:
    """Whether ``key``'s slice (its holder's: this step's, or another's that took the line
    while this one waited on something else) is still open at ``now``: a step of the key
    back within its own slice computes on while it is, as the key's steps share the slice;
    once it is over, its next ``turn`` waits in the line instead of computing the rest of
    its own slice beside the new holder's.

    NOTE: not whether this step holds the line: a tenant's runs writing tokens a few ms
    apart each took the line at its first write, and each of the others' next writes
    found it taken and waited a round: 40 runs of 50 tokens 2 ms apart took 1.0-2.0 s,
    0.22 s unmarked (0.23 s now, with ``_wait``'s). The key's steps compute only while
    its slice is open, one at a time under gevent: one slice in each round between them
    all the same."""
    line = _lines.get(key)
    return line is None or now < line.until


def _wait(line: _Line, me, secs: float, give_way) -> float:
    """Wait in ``line`` (``me`` in its queue) until this step is first, then hold it
    ``secs``. The first takes it after a round of the loop (``give_way``: a timer, after
    which the sockets are polled): its own slice just over, or woken by the one before it
    (``set``), it would run in the same round as that one's. One that finds the key's
    slice still open once it waited computes in what is left of it: its holder stopped
    (under gevent none other computes while it runs); the runs of a tenant writing tokens
    a few ms apart, their own slices over, were served one a round (``in_slice``'s
    figures; 40 runs 20 ms apart: 1.7-1.9 s, 1.15 s unmarked).

    NOTE: whoever holds the line then: under gevent a step waiting runs only while none
    computes, so a holder still holding has stopped (it ended, it waits on a socket or its
    agent's model); waiting for its time to be up held every other step of the key: a
    tenant's runs writing tokens between their model's answers wrote one per TURN_SECS
    between them. The holder that comes back computes on within the new holder's slice
    only (``in_slice``)."""
    rounds = waited = False
    try:
        while True:
            with line.lock:
                first = line.queue[0] is me
                if first and waited and time.monotonic() < line.until:
                    return line.until   # the key's slice, which its holder left
                if first and rounds:
                    return _hold(line, time.monotonic() + secs)
            if first:
                give_way()
                rounds = True
            else:
                me.wait(NOT_FIRST_SECS)
                me.clear()
            waited = True
    finally:
        with line.lock:
            line.queue.remove(me)
            if line.queue:
                line.queue[0].set()     # the next is first: it takes the line a round on


def _hold(line: _Line, until: float) -> float:
    """Under ``line.lock``: this step holds the line until ``until``."""
    ticket = line.ticket = next(_TICKETS)
    line.until = until
    _HELD.set(ticket)
    return until
