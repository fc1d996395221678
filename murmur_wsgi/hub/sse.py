"""The hub's SSE bodies: the run's own stream and SubscribeToTask's replay-then-live.

Concurrency:
    The body is a generator run by the server's thread. It waits in one
    place, ``source(timeout)``, with the time left to the next keep-alive (or
    the stream's end of life) as the timeout; the source wakes on its own
    condition. ``close()`` (the server's, when the body ended or a write
    failed) calls ``on_abort`` once when the stream had not finished: the run
    of a SendStreamingMessage whose client left is canceled. While the body
    runs, the client socket (gunicorn's) has ``write_timeout`` as its timeout,
    so a client that stops reading is cut at its next write.
"""
from __future__ import annotations

import logging
import time

from murmur_wsgi.errors import InternalError
from murmur_wsgi.hub.store import StoreError
from murmur_wsgi.door.methods.streams import peer_gone
from murmur_wsgi.door.streams.sse import HEARTBEAT
from murmur_wsgi.wire import rpc as wire_rpc
from murmur_wsgi.wire.encode import compact_utf8

logger = logging.getLogger(__name__)



class HubStream:
    """An SSE body: ``opening`` payloads, then what ``source`` yields until it says done.

    Args:
        request_id: the JSON-RPC id every event echoes.
        opening: payloads written in the first chunk.
        source: ``source(timeout) -> (payloads, done)``.
        keepalive: seconds between ``:heartbeat`` comments.
        write_timeout: the client socket's timeout while the stream is written.
        lifetime: seconds after which the stream ends with ``expired`` (an error event).
        expired: the error object written at the end of life.
        on_abort: called once if the stream is closed before ``source`` said done.
    """

    def __init__(self, request_id, opening: list, source, *, environ: dict, keepalive: float,
                 write_timeout: float, lifetime: float | None = None,
                 expired: dict | None = None, on_abort=None, on_close=None,
                 clock=time.monotonic):
        self._prefix = wire_rpc.head(request_id, compact_utf8)
        self._opening = list(opening)
        self._source = source
        self._keepalive = keepalive
        self._lifetime = lifetime
        self._expired = expired
        self._on_abort = on_abort
        self._on_close = on_close
        self._clock = clock
        self._peer_gone = peer_gone(environ)
        self._sock = environ.get("gunicorn.socket")
        self._write_timeout = write_timeout
        self.finished = False
        self._closed = False
        self._body = self._generate()

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        return next(self._body)

    def event(self, payload: str) -> bytes:
        return f"data: {self._prefix},\"result\":{payload}}}\n\n".encode("utf-8",
                                                                       "backslashreplace")

    def error_event(self, error: dict) -> bytes:
        return f"data: {self._prefix},\"error\":{compact_utf8(error)}}}\n\n".encode()

    def _generate(self):
        if self._sock is not None:
            try:
                self._sock.settimeout(self._write_timeout)
            except OSError:
                pass
        opened = self._clock()
        end_at = opened + self._lifetime if self._lifetime is not None else None
        try:
            payloads, done = self._source(0)
        except StoreError as ex:
            yield b"".join(self.event(p) for p in self._opening) + self._store_failed(ex)
            return
        yield b"".join(self.event(p) for p in self._opening + payloads)
        due = opened + self._keepalive
        while not done:
            now = self._clock()
            if end_at is not None and now >= end_at:
                self.finished = True
                yield self.error_event(self._expired)
                return
            if now >= due:
                if self._peer_gone is not None and self._peer_gone():
                    return                          # the client left: close() aborts
                due += self._keepalive * ((now - due) // self._keepalive + 1)
                yield HEARTBEAT
                continue
            wait = due - now if end_at is None else min(due, end_at) - now
            try:
                payloads, done = self._source(wait)
            except StoreError as ex:
                yield self._store_failed(ex)
                return
            if payloads:
                yield b"".join(self.event(p) for p in payloads)
        self.finished = True

    def _store_failed(self, ex: StoreError) -> bytes:
        """The stream's last event when the store fails: -32603 with its public message."""
        self.finished = True
        return self.error_event(InternalError(f"Internal error: {ex}").error_object())

    def close(self) -> None:
        """Stop the body (the WSGI server calls this); abort the run when unfinished."""
        if self._closed:
            return
        self._closed = True
        try:
            self._body.close()
        except ValueError:
            pass                    # running on another thread: it ends at its next wake-up
        if self._sock is not None:
            try:
                self._sock.settimeout(None)
            except OSError:
                pass
        try:
            if not self.finished and self._on_abort is not None:
                self._on_abort()
        finally:
            if self._on_close is not None:
                self._on_close()
