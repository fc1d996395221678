"""What a process forked from this one makes anew (gunicorn's workers with ``preload_app``,
``multiprocessing``'s fork, any ``os.fork``): ``anew_in_child(obj)`` calls ``obj.forked()``
in each child, at once, for as long as ``obj`` lives.

redis-py makes its pools anew in a child at their first call (``_checkpid``); the store's
own queue of waiters (``turns.Turns``) and connections (``redis_commands.Commands``) were
the parent's there: its waiters, whose threads the child has not, and its sockets; and so
were the locks of a cluster's client (``redis_cluster``), which a parent's thread may have
held (a make of the client that waits on a node).

Concurrency: ``forked`` runs in the child before anything else does (the forking thread
is its only one), so it takes no lock: one a parent's thread held is made anew.
"""
from __future__ import annotations

import os
import weakref

_LIVE: weakref.WeakSet = weakref.WeakSet()      # what a child makes anew


def anew_in_child(obj) -> None:
    """``obj.forked()`` in each process forked from this one."""
    _LIVE.add(obj)


def _forked() -> None:
    for obj in list(_LIVE):
        obj.forked()


os.register_at_fork(after_in_child=_forked)
