"""The hub's SSE bodies: the run's own stream and SubscribeToTask's replay-then-live.

The framing, heartbeat, chunking and the waiting loop are the shared
``SseBody``'s (``murmur_wsgi/streams/sse.py``); the write deadline is the
shared ``Body`` the request path puts around it (``routes.py``), which sets
``stream.write_timeout_secs`` on the client's socket and restores its
timeout after.

Concurrency:
    The body waits in one place, ``source(timeout)``, with the time left to
    the next keep-alive (or the stream's end of life) as the timeout; the
    source wakes on its own condition. ``close()`` (the server's, when the
    body ended or a write failed) calls ``on_abort`` once when the stream had
    not finished: the run of a SendStreamingMessage whose client left is
    canceled.
"""
from __future__ import annotations

import logging
import time

from murmur_wsgi.errors import RpcError
from murmur_wsgi.serving.connection import peer_gone
from murmur_wsgi.streams.sse import SseBody

logger = logging.getLogger(__name__)


class HubStream(SseBody):
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
        self._opening = [(None, payload) for payload in opening]
        self._source = source
        self._on_abort = on_abort
        self._on_close = on_close
        self.write_timeout = write_timeout
        self._closed = False
        super().__init__(request_id, heartbeat_secs=keepalive, peer_gone=peer_gone(environ),
                         lifetime=lifetime, expired=expired, clock=clock)

    def first(self) -> tuple[list, bool]:
        opening, self._opening = self._opening, None
        batch, done = self.next(0)
        return opening + batch, done

    def next(self, timeout: float) -> tuple[list, bool]:
        try:
            payloads, done = self._source(timeout)
        except RpcError as ex:
            # NOTE: logged where it failed (the store, the held events); the client gets the
            # public message.
            return [self.error_event(ex.error_object())], True
        return [(None, payload) for payload in payloads], done

    def close(self) -> None:
        """Stop the body (the WSGI server calls this); abort the run when unfinished."""
        if self._closed:
            return
        self._closed = True
        super().close()
        try:
            if not self.finished and self._on_abort is not None:
                self._on_abort()
        finally:
            if self._on_close is not None:
                self._on_close()
