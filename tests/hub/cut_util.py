"""A TCP relay in front of a real redis-server that closes a client's connection instead of
passing on the reply to a chosen command: Redis ran the command, the client never hears
its answer (what a network reset, a proxy or a Redis dropping the connection leaves).

``Cutter(port).start()`` listens on a free loopback port (``url``); ``cut(marker)`` arms it:
the first reply to a client write holding ``marker`` (bytes) is dropped with both sockets
(``times``: the first so many; ``before``: the write itself, Redis never gets it).
``cuts`` counts the replies (or writes) dropped. ``close()`` ends its every thread.
"""
from __future__ import annotations

import socket
import threading


class Cutter:
    def __init__(self, upstream_port: int):
        self.upstream = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._times = 0
        self._before = False
        self.cuts = 0
        self._sockets: list = []
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Cutter:
        self._thread(self._accept)
        return self

    def _thread(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, name="cutter", daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def cut(self, marker: bytes, times: int = 1, before: bool = False) -> None:
        with self._lock:
            self._marker, self._times, self._before = marker, times, before

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return                      # closed
            upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            doomed = threading.Event()      # this connection's next reply is dropped
            self._thread(self._up, client, upstream, doomed)
            self._thread(self._down, client, upstream, doomed)

    def _up(self, client, upstream, doomed) -> None:
        try:
            while data := client.recv(65536):
                with self._lock:
                    if self._times and self._marker in data:
                        self._times -= 1
                        if self._before:
                            self.cuts += 1
                            return
                        doomed.set()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def _down(self, client, upstream, doomed) -> None:
        try:
            while data := upstream.recv(65536):
                if doomed.is_set():
                    with self._lock:
                        self.cuts += 1
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def close(self) -> None:
        # NOTE: a close alone does not wake the thread blocked in accept(): the shutdown does.
        _close(self._listener)
        with self._lock:
            _close(*self._sockets)
            threads = list(self._threads)
        for thread in threads:
            thread.join(5)
        assert not any(t.is_alive() for t in threads), "a relay thread is still running"


def _close(*sockets) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
