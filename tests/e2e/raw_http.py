"""HTTP/1.1 by hand on a socket, for the e2e tests of what a server reads and when it closes.

``answer_with_head`` reads one response with a Content-Length; ``Flood`` sends a
body without pause from a thread until the server closes the connection.
"""
from __future__ import annotations

import socket
import threading

PIECE = b" " * (1 << 20)


def answer(sock: socket.socket) -> tuple[str, bytes]:
    """Read one response with a Content-Length off ``sock``: (status line, body)."""
    head, body = answer_with_head(sock)
    return head[0], body


def answer_with_head(sock: socket.socket) -> tuple[list[str], bytes]:
    """Read one response with a Content-Length off ``sock``: (its head's lines, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines
                  if line.lower().startswith("content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, body
        body += chunk
    return lines, body[:length]


class Flood:
    """Send up to ``total`` bytes on ``sock`` from a thread, without pause, until the server
    closes the connection; ``sent`` counts what the kernel took, ``ended`` is set then.
    ``piece``: what is sent again and again (spaces by default)."""

    def __init__(self, sock: socket.socket, total: int, piece: bytes = PIECE):
        self.sent = 0
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._send, args=(sock, total, piece),
                                        daemon=True)
        self._thread.start()

    def _send(self, sock: socket.socket, total: int, piece: bytes) -> None:
        try:
            while self.sent < total:
                self.sent += sock.send(piece)
        except OSError:
            pass                            # reset: the server closed the connection
        self.ended.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
