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


def peer_gone(environ: dict):
    """A check that the client closed its end, where the server exposes the socket."""
    sock = environ.get(SOCKET_KEY) or environ.get(WERKZEUG_SOCKET_KEY)
    if sock is None:
        return None

    def gone() -> bool:
        # NOTE: select with no wait, then a peek: never blocks, and reads nothing.
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True
    return gone


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
