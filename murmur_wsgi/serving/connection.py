"""The client's connection, where the server exposes its socket (gunicorn's, Werkzeug's).

``peer_gone(environ)`` tells whether the client closed its end, without
blocking and without reading a byte: a stream asks it at each heartbeat and the
hub's held SendMessage every second (the door's held request waits for its
task). ``shut(sock)`` ends a connection so that its blocked read sees the end
of input and gunicorn closes it quietly: the worker's deadlines and the
stopping worker's idle connections use it.
"""
from __future__ import annotations

import logging
import select
import socket

from murmur_wsgi.serving.writes import SOCKET_KEY

logger = logging.getLogger(__name__)

# NOTE: Werkzeug's server (``--dev``, ``flask run``) gives the connection's socket as this
# key; read only here (the write deadline stays gunicorn's: writes.py).
WERKZEUG_SOCKET_KEY = "werkzeug.socket"

_TCP_CLOSE, _TCP_CLOSE_WAIT = 7, 8     # Linux's tcpi_state: reset, the peer's end closed


def peer_gone(environ: dict):
    """A check that the client closed its end, where the server exposes the socket."""
    sock = environ.get(SOCKET_KEY) or environ.get(WERKZEUG_SOCKET_KEY)
    if sock is None:
        return None

    def gone() -> bool:
        # NOTE: select with no wait, then a peek: never blocks, and reads nothing.
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return sock.recv(1, socket.MSG_PEEK) == b""
        except ValueError:
            # NOTE: a TLS socket refuses the peek's flag (a closed one, select's -1 too): a
            # client that sent more (its next request, pipelined) has not left.
            return _tcp_closed(sock)
        except OSError:
            return True
    return gone


def _tcp_closed(sock) -> bool:
    """Whether the client closed its end of ``sock``'s TCP connection (a reset included),
    read from the connection's state (Linux's ``TCP_INFO``), else from a peek at its raw
    bytes (under TLS: a client's close_notify before its end is seen on Linux only)."""
    try:
        if hasattr(socket, "TCP_INFO"):
            state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
            return state in (_TCP_CLOSE_WAIT, _TCP_CLOSE)
        twin = socket.socket(fileno=sock.fileno())
        try:
            return twin.recv(1, socket.MSG_PEEK) == b""
        finally:
            twin.detach()
    except (OSError, ValueError):
        return True


def shut(sock) -> None:
    """Shut a connection's socket so that its blocked read sees the end, and gunicorn closes it.

    Through a second socket object on the same descriptor: gevent's own
    ``shutdown()`` would cancel the reader's wait with EBADF, which gunicorn
    logs as a socket error; a plain end of input is a quiet close.
    """
    try:
        twin = socket.socket(fileno=sock.fileno())
    except OSError:
        return                              # closed meanwhile
    try:
        twin.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        twin.detach()
