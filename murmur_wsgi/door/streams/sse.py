"""An SSE response body: a WSGI iterable of ``text/event-stream`` bytes.

Concurrency:
    The body is a generator run by the server's thread (a greenlet under
    gevent's worker). It waits in one place only, ``Reader.next(timeout)``,
    on the ring's condition, with the time left to the next heartbeat as the
    timeout; the ring's ``publish()`` and ``close()`` wake it. ``close()`` is
    the server's call when the body ended or a write failed (the client
    left): it closes the generator and releases the ring reader, also when
    the generator never started.

Memory:
    Events are encoded as they are written, in chunks of at most
    ``pending_bytes``: a stream holds one such chunk while the server writes
    it, whatever the size of its events. The payloads it reads are the
    ring's (and the task's cached wire form), not copies; the opening is
    dropped once written. The server's write deadline (``app.py``) cuts a
    client that does not take a chunk in time, which releases the reader.
"""
from __future__ import annotations

import logging
import time

from murmur_wsgi.door.tasks import frames
from murmur_wsgi.door.tasks.ring import Event, Gap, Lagged
from murmur_wsgi.wire import rpc as wire_rpc
from murmur_wsgi.wire.encode import compact_utf8

logger = logging.getLogger(__name__)

# NOTE: no Connection header: it is hop-by-hop, which PEP 3333 leaves to the server
# (wsgiref refuses it); gunicorn answers HTTP/1.1 with its own "Connection: keep-alive".
SSE_HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
               ("X-Accel-Buffering", "no"))
HEARTBEAT = b":heartbeat\n\n"
PENDING_BYTES = 256 * 1024      # stream.pending_bytes' default



def _utf8(text: str) -> bytes:
    """Encode JSON text; a lone surrogate (legal in a JSON string) becomes its escape."""
    # NOTE: UTF-8 fails only on surrogates; backslashreplace writes one as
    # \udXXX, which is exactly its JSON escape.
    return text.encode("utf-8", "backslashreplace")


# The murmur frame each reader marker is written as (only with the extension).
_MARKERS = {Gap: lambda item: frames.gap(item.first_available_id),
            Lagged: lambda item: frames.lagged(item.missed)}


class EventStream:
    """The body of one stream: its opening events, then what its reader yields.

    Args:
        request_id: the JSON-RPC id every event's envelope echoes.
        opening: ``[(event_id or None, payload JSON or its parts), …]`` written at once, in
            the first chunk, followed there by what the reader already holds
            (its replay): the test client pulls that chunk before it returns.
        reader: the ring cursor to read after the opening; None ends the
            stream after it (a rejected task).
        follow_task: end after this task's terminal event (a task's stream);
            None reads until the ring closes (murmur.WatchSession).
        recover: for a task's stream, ``recover()`` returns the payloads of the
            task's end (the ended task, as GetTask answers it) once it has
            ended, else None: asked when the reader lost events, so a stream
            whose terminal event was dropped still ends with the task's end.
        heartbeat_secs: ``:heartbeat`` every this many seconds from when the
            stream opened; events do not reset it.
        closing: ``closing()`` is True once the door is closing: a task's stream
            that ends on its terminal status then (a queued task rejected as the
            session ends) still writes ``capsule-closed`` after it.
        peer_gone: ``peer_gone()`` is True once the client closed its end; asked
            at each heartbeat, so a closed client's stream ends at the first beat
            after it left rather than when a later write fails.
        pending_bytes: the largest chunk it renders before the server has
            written the previous one (an event larger than this is written in
            several chunks).
        clock: monotonic seconds; tests inject a fake one together with a fake
            reader whose ``next(timeout)`` moves it.
    """

    headers = SSE_HEADERS

    def __init__(self, request_id, opening, reader=None, *, follow_task: str | None = None,
                 recover=None, peer_gone=None, closing=None, heartbeat_secs: float = 15.0,
                 pending_bytes: int = PENDING_BYTES, clock=time.monotonic):
        self._prefix = _utf8(wire_rpc.head(request_id, compact_utf8) + ',"result":')
        self._opening = list(opening)
        self._reader = reader
        self._follow = follow_task
        self._recover = recover
        self._peer_gone = peer_gone
        self._closing = closing
        self._frames = reader is not None and reader.frames
        self._interval = heartbeat_secs
        self._budget = max(1, pending_bytes)
        self._clock = clock
        self.opened_at = clock()
        self._body = self._generate()

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        return next(self._body)

    def close(self) -> None:
        """Stop the body and release its reader (the WSGI server calls this)."""
        try:
            self._body.close()
        except ValueError:
            # NOTE: the generator runs on another thread right now; releasing
            # the reader below makes it end at its next wake-up.
            pass
        if self._reader is not None:
            self._reader.close()

    # --- writing ---------------------------------------------------------

    def event(self, event_id: int | None, payload: str | tuple) -> bytes:
        """One SSE event: ``id: n`` for a numbered event, then its ``data:`` line.

        ``payload`` is the result's JSON text, or a tuple of texts that make it
        (a task's opening quotes the task's cached wire form, never a copy).
        """
        return b"".join(self._pieces(event_id, payload))

    def _pieces(self, event_id: int | None, payload: str):
        """One event's bytes, in pieces of at most the budget, encoded as they are asked."""
        head = self._prefix if event_id is None else b"id: %d\n" % event_id
        budget = self._budget
        if event_id is None:
            yield b"data: "
        else:
            yield head + b"data: "
            head = self._prefix
        for start in range(0, len(head), budget):
            yield head[start:start + budget]
        for part in (payload,) if isinstance(payload, str) else payload:
            # NOTE: an ASCII character is one byte, any other at most four.
            step = budget if part.isascii() else max(1, budget // 4)
            if len(part) <= step:
                yield _utf8(part)
            else:
                for start in range(0, len(part), step):
                    yield _utf8(part[start:start + step])
        yield b"}\n\n"

    def _chunks(self, events: list):
        """Write ``[(event_id, payload), …]`` as chunks of at most the budget, dropping each."""
        budget = self._budget
        events.reverse()
        out: list = []
        size = 0
        while events:
            event_id, payload = events.pop()
            for piece in self._pieces(event_id, payload):
                if size + len(piece) > budget and out:
                    yield b"".join(out)
                    out, size = [], 0
                out.append(piece)
                size += len(piece)
            del payload
        if out:
            yield b"".join(out)

    def _generate(self):
        reader = self._reader
        try:
            # The first chunk: the opening, then what the reader already holds
            # (the replay), so nothing can come between them.
            chunk, self._opening = self._opening, None
            ended = reader is None or self._render(chunk, *reader.next(0))
            yield from self._chunks(chunk)
            interval = self._interval
            due = self.opened_at + interval
            while not ended and reader.open:
                now = self._clock()
                if now >= due:
                    if self._peer_gone is not None and self._peer_gone():
                        return                  # the client left: release the reader now
                    # A write that blocked past several beats owes only one.
                    due += interval * ((now - due) // interval + 1)
                    yield HEARTBEAT
                    continue
                chunk = []
                ended = self._render(chunk, *reader.next(due - now))
                if chunk:
                    yield from self._chunks(chunk)
        finally:
            if reader is not None:
                reader.close()

    def _render(self, out: list, items: list, closed: bool) -> bool:
        """Queue a batch's ``(event_id, payload)`` into ``out``; True when the stream ends with it.

        A task's stream ends after its terminal event; every stream ends when
        the ring closed, with ``capsule-closed`` when frames are on.
        """
        lost = False
        for item in items:
            if type(item) is Event:
                out.append((item.id, item.payload))
                if item.terminal and self._follow is not None and item.task_id == self._follow:
                    if self._frames and self._closing is not None and self._closing():
                        out.append((None, frames.capsule_closed()))
                    return True
            else:
                lost = True
                if self._frames:
                    out.append((None, _MARKERS[type(item)](item)))
        if lost and self._recover is not None:
            ending = self._recover()
            if ending is not None:
                # NOTE: the task's terminal event was among the lost: write its end
                # from the record, then end.
                out.extend((None, payload) for payload in ending)
                return True
        if closed and self._frames:
            out.append((None, frames.capsule_closed()))
        return closed
