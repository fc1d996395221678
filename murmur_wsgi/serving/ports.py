"""The listen address, checked before a server starts: a port in use is one line."""
from __future__ import annotations

import errno
import logging
import socket

logger = logging.getLogger(__name__)


def _family(host: str) -> int:
    """The address family gunicorn binds ``host`` in: IPv6 for an IPv6 address, else IPv4
    (a name included)."""
    try:
        socket.inet_pton(socket.AF_INET6, host)
    except (OSError, ValueError):
        return socket.AF_INET
    return socket.AF_INET6


def _bound(host: str, port: int) -> socket.socket:
    """A socket bound to ``(host, port)`` as gunicorn binds it (SO_REUSEADDR, the host as
    written): OSError as it would meet it; TypeError or ValueError for a host the socket
    cannot even read (a NUL, a label too long to encode).

    NOTE: as gunicorn does, not by what ``getaddrinfo`` answers: it takes ``*`` for the
    loopback addresses, where gunicorn's bind to ``*`` fails (Werkzeug, which looks the
    host up first, would listen on 127.0.0.1: ``--dev`` refuses ``*`` too, one rule)."""
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def free_port(host: str) -> int:
    """A port free on ``host`` now; one of ``UNBOUND`` when ``host`` cannot be listened on."""
    with _bound(host, 0) as sock:
        return sock.getsockname()[1]


# What a bind of a host raises when it cannot be listened on: OSError as the server would
# meet it (a name that does not resolve included); TypeError or ValueError for a host the
# socket cannot even read (a NUL, a label too long to encode).
UNBOUND = (OSError, TypeError, ValueError)


def why_not(ex: Exception) -> str:
    """What a failed bind (``UNBOUND``) says, in words."""
    return getattr(ex, "strerror", None) or str(ex)


def port_number(port: str) -> int | None:
    """A ``--listen`` port's text as its number, or None: ASCII digits only (``int()``
    reads any script's), at most 5 of them, at most 65535.

    NOTE: 5 characters, leading zeros included: ``int()`` counts them against its 4,300
    digits, and the text goes on as it is given (gunicorn's ``-b``, the card's URL)."""
    if not (port.isascii() and port.isdigit()) or len(port) > 5 or int(port) > 65535:
        return None
    return int(port)


def listen_refusal(listen: str) -> str | None:
    """Why ``HOST:PORT`` cannot be listened on now (one line), or None when it can.

    The address is bound and released at once, with SO_REUSEADDR as gunicorn and
    Werkzeug bind it, so only a listener already there makes it fail.
    """
    shown = listen if listen.isprintable() else repr(listen)      # one line, whatever it holds
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    # NOTE: getaddrinfo takes 99999 as 34463 (the port's low 16 bits), and int() reads
    # any script's digits: the server that binds it after would raise OverflowError.
    number = port_number(port)
    if number is None:
        return f"{shown}: cannot listen there: the port must be a number from 0 to 65535"
    try:
        _bound(host, number).close()
    except UNBOUND as ex:
        if getattr(ex, "errno", None) == errno.EADDRINUSE:
            return f"{shown} is in use; choose another with --listen"
        return f"{shown}: cannot listen there: {why_not(ex)}"
    return None
