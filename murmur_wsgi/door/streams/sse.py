"""The door's stream body: its opening, then a ring reader's events, with murmur's frames.

The framing, heartbeat, chunking and the waiting loop are the shared
``SseBody``'s (``murmur_wsgi/streams/sse.py``); this module says what the door's
streams read: a ring cursor (``tasks/ring.py``), whose lost events become
murmur's ``gap`` and ``lagged`` frames (with the extension), a task's stream
ending after its terminal event, ``capsule-closed`` when the ring closes.

Concurrency:
    The body waits in one place only, ``Reader.next(timeout)``, on the ring's
    condition; the ring's ``publish()`` and ``close()`` wake it. ``close()``
    releases the ring reader, also when the body never started.

Memory:
    The payloads it reads are the ring's (and the task's cached wire form),
    not copies, taken from the ring ``stream.pending_bytes`` of them at a time
    (``Reader.next``); the opening is dropped once written. The server's write
    deadline (``app.py``) cuts a client that does not take a chunk in time,
    which releases the reader.
"""
from __future__ import annotations

import logging
import time

from murmur_wsgi.door.tasks import frames
from murmur_wsgi.door.tasks.ring import Event, Gap, Lagged
from murmur_wsgi.streams.sse import HEARTBEAT, PENDING_BYTES, SSE_HEADERS, SseBody  # noqa: F401

logger = logging.getLogger(__name__)

# The murmur frame each reader marker is written as (only with the extension).
_MARKERS = {Gap: lambda item: frames.gap(item.first_available_id),
            Lagged: lambda item: frames.lagged(item.missed)}


class EventStream(SseBody):
    """The body of one stream: its opening events, then what its reader yields.

    Args:
        request_id: the JSON-RPC id every event's envelope echoes.
        opening: ``[(event_id or None, payload JSON or its parts), …]`` written at once, in
            the first chunk, followed there by the reader's first take (of its
            replay): the test client pulls that chunk before it returns.
        reader: the ring cursor to read after the opening; None ends the
            stream after it (a rejected task).
        follow_task: end after this task's terminal event (a task's stream);
            None reads until the ring closes (murmur.WatchSession).
        recover: for a task's stream, ``recover()`` returns the payloads of the
            task's end (the ended task, as GetTask answers it) once it has
            ended, else None: asked when the reader lost events, so a stream
            whose terminal event was dropped still ends with the task's end.
        closing: ``closing()`` is True once the door is closing: a task's stream
            that ends on its terminal status then (a queued task rejected as the
            session ends) still writes ``capsule-closed`` after it.
        heartbeat_secs, peer_gone, pending_bytes, clock: as ``SseBody``'s (a test's
            fake clock goes with a fake reader whose ``next(timeout)`` moves it).
    """

    headers = SSE_HEADERS

    def __init__(self, request_id, opening, reader=None, *, follow_task: str | None = None,
                 recover=None, peer_gone=None, closing=None, heartbeat_secs: float = 15.0,
                 pending_bytes: int = PENDING_BYTES, clock=time.monotonic):
        self._opening = list(opening)
        self._reader = reader
        self._follow = follow_task
        self._recover = recover
        self._closing = closing
        self._frames = reader is not None and reader.frames
        super().__init__(request_id, heartbeat_secs=heartbeat_secs, peer_gone=peer_gone,
                         pending_bytes=pending_bytes, clock=clock)

    def first(self) -> tuple[list, bool]:
        # The first chunk: the opening, then what the reader already holds
        # (the replay), so nothing can come between them.
        chunk, self._opening = self._opening, None
        reader = self._reader
        if reader is None:
            return chunk, True
        return chunk, self._render(chunk, *reader.next(0)) or not reader.open

    def next(self, timeout: float) -> tuple[list, bool]:
        chunk: list = []
        reader = self._reader
        if not reader.open:
            return chunk, True                  # released (closed by the server)
        return chunk, self._render(chunk, *reader.next(timeout)) or not reader.open

    def release(self) -> None:
        if self._reader is not None:
            self._reader.close()

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
