"""The listen address, checked before a server starts: a port in use is one line."""
from __future__ import annotations

import errno
import logging
import socket

logger = logging.getLogger(__name__)


def listen_refusal(listen: str) -> str | None:
    """Why ``HOST:PORT`` cannot be listened on now (one line), or None when it can.

    The address is bound and released at once, with SO_REUSEADDR as gunicorn and
    Werkzeug bind it, so only a listener already there makes it fail.
    """
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    # NOTE: getaddrinfo takes 99999 as 34463 (the port's low 16 bits), and int() reads
    # any script's digits: the server that binds it after would raise OverflowError.
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        return f"{listen}: cannot listen there: the port must be a number from 0 to 65535"
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (OSError, ValueError) as ex:
        return f"{listen}: cannot listen there: {getattr(ex, 'strerror', None) or ex}"
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as ex:
            if ex.errno == errno.EADDRINUSE:
                return f"{listen} is in use; choose another with --listen"
            return f"{listen}: cannot listen there: {ex.strerror}"
    return None
