"""A socket shut down at a deadline, unless disarmed first: every wait on it ends.

A socket's timeout bounds each wait on it, not a whole read or write: a peer that
sends (or takes) a byte at a time, each in time, holds a caller for as long as it
likes. Under gevent this reaches further than ``http.client``'s reads of a status
line: gevent's SSL socket bounds each wait of a handshake, a read or a write by the
timeout, where CPython's bounds the step. A ``Cut`` shuts the socket down when the
deadline comes, so whatever waits on it ends then. The client's answers
(``client/deadline.py``) and the hub's push attempts (``hub/push/egress.py``) use it.

Every cut is a timer of one ``Timers`` (timers.py: one thread for all), made again in
a forked child, where its parent's thread is not.

Concurrency: a cut fires on a thread of its own, ``disarm`` is the caller's; the cut's
lock makes one of them first: ``disarm`` returns after the socket was shut down, or
the socket never is, and says which.
"""
from __future__ import annotations

import os
import socket
import threading

from murmur_wsgi.timers import Timers

_timers: tuple[int, Timers] | None = None          # (the process id, its timers)


def timers() -> Timers:
    """This process's timers for the cuts (two threads that both make them at once: one
    is kept, the other's timers still fire)."""
    global _timers
    current = _timers
    if current is None or current[0] != os.getpid():
        current = _timers = (os.getpid(), Timers("murmur-wsgi-deadlines"))
    return current[1]


class Cut:
    """Shut ``sock`` down in ``seconds``, unless disarmed first."""

    def __init__(self, sock, seconds: float):
        self._sock = sock
        self._lock = threading.Lock()
        self._state = "armed"           # then "disarmed" or "fired", once
        self._timer = timers().after(seconds, self._fire)

    def _fire(self) -> None:
        with self._lock:
            if self._state != "armed":
                return
            self._state = "fired"
            try:
                self._sock.shutdown(socket.SHUT_RDWR)   # every wait on it ends
            except OSError:
                pass                    # closed already

    def disarm(self) -> bool:
        """True when disarmed in time; False when the socket was shut down."""
        self._timer.cancel()
        with self._lock:
            if self._state == "fired":
                return False
            self._state = "disarmed"
            return True
