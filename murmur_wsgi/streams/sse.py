"""An SSE response body: a WSGI iterable of ``text/event-stream`` bytes."""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

SSE_HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
               ("Connection", "keep-alive"), ("X-Accel-Buffering", "no"))


class EventStream:
    """The body of a stream: iterate for bytes; ``close()`` releases the reader."""

    headers = SSE_HEADERS

    def __init__(self, chunks, on_close=None):
        self._chunks = iter(chunks)
        self._on_close = on_close

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        if self._on_close is not None:
            self._on_close()
            self._on_close = None
