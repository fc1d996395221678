"""An answer's status line and headers, whole within the read timeout: a timer cuts them.

``requests`` (``http.client`` under urllib3) reads an answer's status line and headers
before the client sees the response, and its read timeout bounds each read, not the
whole: a server writing them a byte at a time, each byte in time, holds a call for as
long as it likes. ``DeadlineAdapter``, mounted on the client's session, arms a ``Cut``
when a connection starts waiting for an answer (the request sent), for the call's read
timeout (None arms none: a held ``send`` waits for its task). If the headers are not
all there by then, the cut shuts the connection's socket down and the wait ends as a
read timeout, the one a silent server gets. The cut is disarmed before the
connection's answer is handed over, so it never touches a connection back in the pool.

Every cut is a timer of one ``Timers`` (timers.py: one thread for all), made again in
a forked child, where its parent's thread is not.

Concurrency: a cut fires on a thread of its own, ``disarm`` is the caller's; the cut's
lock makes one of them first: ``disarm`` returns after the socket was shut down, or
the socket never is, and says which.
"""
from __future__ import annotations

import logging
import os
import socket
import threading

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from murmur_wsgi.timers import Timers

logger = logging.getLogger(__name__)

_timers: tuple[int, Timers] | None = None          # (the process id, its timers)


def timers() -> Timers:
    """This process's timers for the client's deadlines (two threads that both make them
    at once: one is kept, the other's timers still fire)."""
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


class _HeadersDeadline:
    """A connection whose status line and headers arrive whole within its read timeout."""

    def getresponse(self):
        seconds = self.timeout          # the read timeout: urllib3 sets it before this call
        sock = self.sock
        if sock is None or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            return super().getresponse()
        cut = Cut(sock, seconds)
        try:
            response = super().getresponse()
        except BaseException as ex:
            if not cut.disarm():
                raise socket.timeout("the answer's headers were still arriving at the "
                                     "read timeout") from ex
            raise
        if not cut.disarm():            # cut as the headers ended: what they said may be cut
            response.close()
            raise socket.timeout("the answer's headers were still arriving at the read timeout")
        return response


class DeadlineHTTPConnection(_HeadersDeadline, HTTPConnection):
    pass


class DeadlineHTTPSConnection(_HeadersDeadline, HTTPSConnection):
    pass


class DeadlineHTTPPool(HTTPConnectionPool):
    ConnectionCls = DeadlineHTTPConnection


class DeadlineHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = DeadlineHTTPSConnection


POOLS = {"http": DeadlineHTTPPool, "https": DeadlineHTTPSPool}


class DeadlineAdapter(HTTPAdapter):
    """``requests``' adapter, its connections' headers bounded by their read timeout."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = POOLS

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = POOLS
        return manager


def new_session() -> requests.Session:
    """A ``requests.Session`` with ``DeadlineAdapter`` for http and https: the client's own."""
    session = requests.Session()
    adapter = DeadlineAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
