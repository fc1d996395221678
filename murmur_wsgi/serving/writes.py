"""The write path: every response body as the server writes it, under a deadline.

``Body`` wraps what the door returns to the WSGI server. It hands the server
pieces of at most ``stream.pending_bytes`` (a larger item is cut), and, where
the server exposes the client's socket (gunicorn's ``environ["gunicorn.socket"]``),
sets that socket's timeout to ``stream.write_timeout_secs`` once the request
body has been read: every ``sendall`` of a piece then has that deadline (gevent's
and CPython's ``sendall`` count the timeout for the whole call). A client that
does not take a piece in time makes the write raise ``TimeoutError``; the server
closes the body, which releases a stream's reader, and the gunicorn worker
(``serving/worker.py``) counts the cut. ``close()`` restores the socket's timeout, so a
kept-alive connection waits for its next request as before.

Without that socket (Werkzeug's development server, a test client) the pieces
are still cut to the budget, with no deadline.

Concurrency: one ``Body`` belongs to the request's own thread (greenlet).
"""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

SOCKET_KEY = "gunicorn.socket"
_UNSET = object()


def headers_only(body, sock=None, timeout: float | None = None) -> list:
    """A HEAD request's answer: the headers the application started (its Content-Length
    too, as a GET would have it), the body closed unread. Every WSGI server drops a HEAD
    answer's body; gunicorn also logs a warning for each one it is handed, so a client
    sending HEADs would write a log line per request. The headers are written under the
    write deadline (``Timed``) when the server gives the client's socket (``sock``): a
    client pipelining HEADs and reading nothing held its connection for good."""
    close = getattr(body, "close", None)
    if close is not None:
        close()
    return [] if sock is None or not timeout else Timed([], sock, timeout)


def utf8_length(texts) -> int:
    """The UTF-8 bytes of ``texts`` joined. PERF: an ASCII text (the door's JSON) is not encoded."""
    return sum(len(text) if text.isascii() else len(text.encode()) for text in texts)


def encoded(texts, budget: int):
    """``texts`` as UTF-8, one piece of at most ``budget`` characters at a time."""
    for text in texts:
        for start in range(0, len(text), budget):
            yield text[start:start + budget].encode()


class Body:
    """The WSGI body, passed through in pieces; ``close()`` closes it, then calls ``done``."""

    __slots__ = ("_body", "_done", "_sock", "_timeout", "_budget", "_restore")

    def __init__(self, body, done, *, sock=None, timeout: float | None = None,
                 budget: int | None = None):
        self._body = body
        self._done = done
        self._sock = sock if timeout else None
        self._timeout = timeout
        self._budget = budget
        self._restore = _UNSET

    def __iter__(self):
        if self._sock is not None:
            self._restore = _timed(self._sock, self._timeout)
            if self._restore is _UNSET:
                self._sock = None               # not a socket we can time: no deadline
        budget = self._budget
        for item in self._body:
            if budget is None or len(item) <= budget:
                yield item
            else:
                view = memoryview(item)
                for start in range(0, len(view), budget):
                    yield bytes(view[start:start + budget])

    def close(self) -> None:
        done, self._done = self._done, None
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            sock, restore = self._sock, self._restore
            if sock is not None and restore is not _UNSET:
                self._restore = _UNSET
                _untimed(sock, restore)
            if done is not None:
                done()


class Timed(list):
    """A small answer, one item the server writes at once, under the write deadline: the
    client's socket has ``timeout`` from here until ``close()`` gives its own back.

    NOTE: a small answer fits an empty send buffer, not a full one: a client that
    pipelines requests and reads nothing fills it with their answers, and the next
    ``sendall`` waited for good (no socket timeout), holding the connection and its
    buffers without any credential. PERF: a list (gunicorn writes it as it is), none of
    ``Body``'s pieces.
    """

    __slots__ = ("_sock", "_restore")

    def __init__(self, body: list, sock, timeout: float):
        super().__init__(body)
        self._restore = _timed(sock, timeout)
        self._sock = None if self._restore is _UNSET else sock   # _UNSET: no deadline

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            _untimed(sock, self._restore)


def _timed(sock, timeout: float):
    """Give ``sock`` the write deadline ``timeout``; its own timeout, to give back
    (``_untimed``), or ``_UNSET`` for a socket that cannot be timed.

    PERF: a gevent socket's ``timeout`` is a plain attribute, set as one (its
    ``settimeout`` only checks the number: 2.5 against 1.0 µs a small answer, measured);
    another's is read-only, set by ``settimeout``."""
    try:
        before = sock.timeout
        sock.timeout = timeout
        return before
    except AttributeError:
        pass
    try:
        before = sock.gettimeout()
        sock.settimeout(timeout)
        return before
    except (OSError, AttributeError, ValueError):
        return _UNSET


def _untimed(sock, before) -> None:
    """Give ``sock`` back its own timeout, ``before`` (``_timed``'s)."""
    try:
        sock.timeout = before
        return
    except AttributeError:
        pass
    try:
        sock.settimeout(before)
    except OSError:
        pass                                    # closed meanwhile
