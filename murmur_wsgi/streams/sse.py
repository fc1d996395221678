"""An SSE response body over any event source: a WSGI iterable of ``text/event-stream`` bytes.

``SseBody`` writes JSON-RPC responses as ``data:`` events (``id: n`` before
a numbered one), a ``:heartbeat`` comment every ``heartbeat_secs`` from when
the stream opened, and, with a ``lifetime``, an error event at its end of
life. A subclass says where the events come from: ``first()`` (the opening,
written at once) and ``next(timeout)`` (the next batch, waiting at most
``timeout``), each ``(events, ended)`` with events ``(event_id or None,
payload)`` or bytes already framed; ``release()`` frees the source.

Concurrency:
    The body is a generator run by the server's thread (a greenlet under
    gevent's worker). It waits in one place only, the source's
    ``next(timeout)``, with the time left to the next heartbeat (or the end
    of life) as the timeout; the source wakes on its own condition.
    ``close()`` is the server's call when the body ended or a write failed
    (the client left): it closes the generator and releases the source, also
    when the generator never started.

Memory:
    Events are encoded as they are written, in chunks of less than half of
    ``pending_bytes``: a stream holds one such chunk, and the server its framed
    copy, while the server writes it, whatever the size of its events. The
    write deadline is the server's
    (``serving/writes.py``'s ``Body`` around this body): a client that does not
    take a chunk in time is cut, which closes the body; the socket's timeout
    is restored after.
"""
from __future__ import annotations

import logging
import time

from murmur_wsgi.wire import rpc as wire_rpc
from murmur_wsgi.wire.encode import compact_utf8

logger = logging.getLogger(__name__)

# NOTE: no Connection header: it is hop-by-hop, which PEP 3333 leaves to the server
# (wsgiref refuses it); gunicorn answers HTTP/1.1 with its own "Connection: keep-alive".
SSE_HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
               ("X-Accel-Buffering", "no"))
HEARTBEAT = b":heartbeat\n\n"
PENDING_BYTES = 256 * 1024      # the largest chunk rendered ahead of the server's write


# Characters JSON writes as they are but str.splitlines() breaks on (httpx's line decoder,
# and a2a-sdk's SSE reader on it): escaped, a data: line stays one line for every reader.
# Only a JSON string can hold one (JSON's whitespace is space, tab, LF and CR).
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def utf8(text: str) -> bytes:
    """Encode JSON text; a lone surrogate (legal in a JSON string) becomes its escape."""
    # NOTE: UTF-8 fails only on surrogates; backslashreplace writes one as
    # \udXXX, which is exactly its JSON escape.
    if not text.isascii() and ("\u2028" in text or "\u2029" in text or "\x85" in text):
        text = text.translate(_LINE_BREAKS)
    return text.encode("utf-8", "backslashreplace")


class SseBody:
    """The body of one stream: what its source yields, framed, chunked, with heartbeats.

    Args:
        request_id: the JSON-RPC id every event's envelope echoes.
        heartbeat_secs: ``:heartbeat`` every this many seconds from when the
            stream opened; events do not reset it.
        peer_gone: ``peer_gone()`` is True once the client closed its end; asked
            at each heartbeat, so a closed client's stream ends at the first beat
            after it left rather than when a later write fails.
        pending_bytes: the largest chunk it renders before the server has
            written the previous one (an event larger than this is written in
            several chunks).
        lifetime: seconds after which the stream ends with ``expired``, an
            error object written as the last event; None: no end of life.
        clock: monotonic seconds; tests inject a fake one together with a fake
            source whose ``next(timeout)`` moves it.
    """

    def __init__(self, request_id, *, heartbeat_secs: float = 15.0, peer_gone=None,
                 pending_bytes: int = PENDING_BYTES, lifetime: float | None = None,
                 expired: dict | None = None, clock=time.monotonic):
        # MEMORY: the envelope's head as text, encoded as each event is written: its id is
        # the client's, as long as the body lets it be, and a stream lives for hours (two
        # encoded copies held 42 MB a stream for an id of 16 MB).
        self._head = wire_rpc.head(request_id, compact_utf8)
        self._interval = heartbeat_secs
        self._peer_gone = peer_gone
        self._budget = max(1, pending_bytes)
        self._lifetime = lifetime
        self._expired = expired
        self._clock = clock
        self.opened_at = clock()
        self.finished = False       # the source said it ended, or the stream's life did
        self._body = self._generate()

    # --- the source (a subclass's) ---------------------------------------

    def first(self) -> tuple[list, bool]:
        """The opening batch, written at once: ``(events, ended)``."""
        return [], True

    def next(self, timeout: float) -> tuple[list, bool]:
        """The next batch, waiting at most ``timeout`` seconds: ``(events, ended)``."""
        return [], True

    def release(self) -> None:
        """Free the source (called once the body ends or is closed)."""

    # --- the WSGI iterable -----------------------------------------------

    def __iter__(self):
        # MEMORY: the generator itself, so the server's loop resumes it directly: a
        # ``__next__`` of this class between them would keep one more level of C stack
        # (copied aside with every waiting stream's greenlet under gevent).
        return self._body

    def __next__(self) -> bytes:
        return next(self._body)

    def close(self) -> None:
        """Stop the body and release its source (the WSGI server calls this)."""
        try:
            self._body.close()
        except ValueError:
            # NOTE: the generator runs on another thread right now; releasing
            # the source below makes it end at its next wake-up.
            pass
        self.release()

    # --- writing ---------------------------------------------------------

    def event(self, event_id: int | None, payload: str | tuple) -> bytes:
        """One SSE event: ``id: n`` for a numbered event, then its ``data:`` line.

        ``payload`` is the result's JSON text, or a tuple of texts that make it
        (a task's opening quotes the task's cached wire form, never a copy).
        """
        return b"".join(self._pieces(event_id, payload))

    def error_event(self, error: dict) -> bytes:
        """An event whose response is the JSON-RPC error ``error``."""
        error_json = compact_utf8(error)
        return b"".join((b"data: ", *self._encoded((self._head, ',"error":', error_json)),
                         b"}\n\n"))

    def _pieces(self, event_id: int | None, payload: str | tuple):
        """One event's bytes, in pieces of at most a quarter of the budget, encoded as they
        are asked."""
        yield b"data: " if event_id is None else b"id: %d\ndata: " % event_id
        yield from self._encoded((self._head, ',"result":',
                                  *((payload,) if isinstance(payload, str) else payload)))
        yield b"}\n\n"

    def _encoded(self, parts):
        """``parts``' texts encoded in pieces of at most a quarter of the budget."""
        budget = max(1, self._budget // 4)
        for part in parts:
            # NOTE: an ASCII character is one byte, any other at most four.
            step = budget if part.isascii() else max(1, budget // 4)
            if len(part) <= step:
                yield utf8(part)
            else:
                for start in range(0, len(part), step):
                    yield utf8(part[start:start + step])

    def _chunks(self, events: list):
        """Write ``[(event_id, payload) or framed bytes, …]`` as chunks of less than half the
        budget, dropping each event once written.

        MEMORY: a chunk is written once it holds a quarter of the budget, before the next
        piece is encoded: while the client does not take it, the stream holds the chunk
        and the server's copy of it (gunicorn frames each chunk of a stream in a copy),
        within the budget together. Before, chunks of the whole budget, the next piece
        encoded ahead and the server's copy held three times the budget (788 KB a stream
        at 256 KiB: 10,200 streams that read nothing took 7 GB).
        """
        quarter = max(1, self._budget // 4)
        events.reverse()
        out: list = []
        size = 0
        while events:
            item = events.pop()
            pieces = (item,) if isinstance(item, bytes) else self._pieces(*item)
            for piece in pieces:
                out.append(piece)
                size += len(piece)
                if size >= quarter:
                    chunk = b"".join(out)
                    out.clear()
                    size = 0
                    del piece
                    yield chunk
                    del chunk
            del item, pieces
        if out:
            yield b"".join(out)

    def _generate(self):
        try:
            batch, ended = self.first()
            yield from self._chunks(batch)
            interval = self._interval
            due = self.opened_at + interval
            end_at = None if self._lifetime is None else self.opened_at + self._lifetime
            while not ended:
                now = self._clock()
                if end_at is not None and now >= end_at:
                    self.finished = True
                    yield self.error_event(self._expired)
                    return
                if now >= due:
                    if self._peer_gone is not None and self._peer_gone():
                        return                  # the client left: release the source now
                    # A write that blocked past several beats owes only one.
                    due += interval * ((now - due) // interval + 1)
                    yield HEARTBEAT
                    continue
                batch, ended = self.next((due if end_at is None else min(due, end_at)) - now)
                if batch:
                    yield from self._chunks(batch)
            self.finished = True
            # NOTE: under gevent, every stream woken with this one writes its last event
            # before this one's end (the server's close, the next request's wait) is done.
            time.sleep(0)
        finally:
            self.release()
