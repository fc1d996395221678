"""An agent's turns: a thread that writes without waiting gives way every ``TURN_SECS``.

Under gevent an agent's thread is a greenlet, which gives way only when it waits: an
agent writing without waiting (the demo's ``/stream``, a loop of ``ctx.progress`` or of
artifact chunks) held every other request of its worker until it ended. After each of
its writes the door and the hub call ``turn``: once ``TURN_SECS`` of writes have passed,
it sleeps a microsecond, a timer after which gevent's loop polls the sockets.
``sleep(0)`` is not enough: it runs only the greenlets already ready, and a request
still unread waited about 0.5 s. Without gevent, a thread switch. A long step of pure
Python does the same between its slices: a ListTasks page, a data part's rendering, the
nesting checks of a large request (wire/depth.py, wire/json_counts.py). The long steps
of one tenant (a key: ``STEP_KEY``) take turns among themselves (``keyed_turns.py``).
"""
from __future__ import annotations

import time

from murmur_wsgi.keyed_turns import STEP_KEY, in_slice, keyed_turn, waited_for

TURN_SECS = 0.01            # an agent that writes without waiting gives way this often


def turn(ends: float) -> float:
    """After one of the agent's writes: give way if its turn, which ends at ``ends``, is
    over. Returns when the turn now ends: ``ends``, or ``TURN_SECS`` from now. A turn
    begins at the first write (``ends`` 0.0: PERF, nothing for an agent that writes
    nothing, as most of a hub's inline runs). A step marked with a key waits, besides,
    for its key's other steps' slices (``keyed_turn``), and at once if its key's slice
    (another's that took the line while it waited on something else) is over."""
    now = time.monotonic()
    key = STEP_KEY.get()
    if now < ends and (key is None or in_slice(key, now)):
        return ends
    if key is not None:
        return keyed_turn(key, ends, TURN_SECS, _give_way)
    if ends:
        _give_way()
        now = time.monotonic()
    return now + TURN_SECS


def _give_way() -> None:
    time.sleep(1e-6)


def wait_turn() -> float:
    """Before a long step that does not give way inside (a page's records read off Redis
    whole): ``turn`` as if this step's slice were over when another step of its key waits
    or computes, so that the key's steps take such steps one at a time, the worker's other
    requests between them; at once, as a step that begins, when none does (a round of the
    loop for each page of a quiet tenant: 30 ms beside three busy ones). Returns when its
    new slice ends."""
    key = STEP_KEY.get()
    if key is not None and waited_for(key, time.monotonic()):
        return turn(_OVER)
    return turn(0.0)


_OVER = 1e-9                # the end of a slice long past
