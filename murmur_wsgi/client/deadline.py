"""An answer's status line and headers, whole within the read timeout: a timer cuts them.

``requests`` (``http.client`` under urllib3) reads an answer's status line and headers
before the client sees the response, and its read timeout bounds each read, not the
whole: a server writing them a byte at a time, each byte in time, holds a call for as
long as it likes. ``DeadlineAdapter``, mounted on the client's session, arms a ``Cut``
when a connection starts waiting for an answer (the request sent), for the call's read
timeout (None arms none: a held ``send`` waits for its task), or for less where the
caller says so (``headers_within``: a stream's opening). If the headers are not
all there by then, the cut shuts the connection's socket down and the wait ends as a
read timeout, the one a silent server gets. The cut is disarmed before the
connection's answer is handed over, so it never touches a connection back in the pool.

The cut is ``cuts.py``'s (one home: the hub's push attempts use it too).
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import socket

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from murmur_wsgi.cuts import Cut

logger = logging.getLogger(__name__)


# ``headers_within``'s bound: a context variable, so each thread's and each greenlet's
# own (greenlet keeps a context per greenlet, whatever gevent patched or when: a
# ``threading.local`` made before gevent patched threading is one for all greenlets).
_opening: contextvars.ContextVar = contextvars.ContextVar("murmur_headers_within",
                                                         default=None)


@contextlib.contextmanager
def headers_within(seconds: float | None):
    """The answers to the calls made inside the block (by this thread, this greenlet) have
    their headers, and their redirects followed, within ``seconds`` (None: their read
    timeout), however long that read timeout is: a stream's, which bounds the silence
    between two of its bytes, not its opening."""
    token = _opening.set(seconds)
    try:
        yield
    finally:
        _opening.reset(token)


def within(read_timeout):
    """The time an answer's headers have: ``read_timeout``, or ``headers_within``'s bound
    when that is shorter."""
    bound = _opening.get()
    if _number(bound) and not (_number(read_timeout) and read_timeout <= bound):
        return bound
    return read_timeout


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _HeadersDeadline:
    """A connection whose status line and headers arrive whole within its read timeout
    (or ``headers_within``'s bound, when shorter)."""

    def getresponse(self):
        seconds = within(self.timeout)  # the read timeout: urllib3 sets it before this call
        sock = self.sock
        if sock is None or not _number(seconds):
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
