"""A stream from the door, followed to its end across dropped connections.

``EventStream`` yields ``StreamEvent``s. When the connection drops before
the stream's end (a task stream's terminal status, or ``capsule-closed``),
it reconnects with ``Last-Event-ID``: a task stream through SubscribeToTask
(a SendStreamingMessage is never sent twice), a session stream through
murmur.WatchSession again. Numbered events it already handed over are
skipped; a ``gap`` the door reports is handed over and recorded in
``gaps``; on a session stream, numbers that jump with no gap or lagged frame
before them are reported as a synthetic ``gap`` event. A task that ended
while the stream was away is fetched with GetTask and handed over as a
synthetic ``task`` event, which ends the stream.

A connection counts as a failure toward ``max_reconnects`` unless it hands over news: a
numbered event not handed over before, or, from a server that numbers no event, an event
that is neither a snapshot (an unnumbered ``task``) nor a murmur frame, or unless it was
held ``EventStream.HELD_SECS`` (10 s). So a server that accepts every resume and drops it
after the snapshot ends the stream with ``StreamBroken``, while a stream that keeps making
progress, or a quiet one a proxy cuts now and then, reconnects as often as it drops: after
a pause that doubles with each drop in a row within ``HELD_SECS`` of its connection, news
or not, so a server that drops each connection at once is not resumed as fast as it answers.

Concurrency: one EventStream is read by one thread; ``close()`` may be
called from another, and makes the reader's next read fail and stop.
"""
from __future__ import annotations

import logging
import time

import requests

from murmur_wsgi.client.errors import (ConnectionFailed, ProtocolError, RpcError, StreamBroken,
                                       Timeout, UnsupportedOperation)
from murmur_wsgi.client.body import TooManyValues, chunks, loads
from murmur_wsgi.client.http import is_error_object, other_request
from murmur_wsgi.client.events import TERMINAL, StreamEvent, gap_event
from murmur_wsgi.client.sse import EventTooLarge, iter_events

logger = logging.getLogger(__name__)

WATCH = "murmur.WatchSession"
SUBSCRIBE = "SubscribeToTask"
MAX_GAPS = 1000                 # the gaps a stream keeps in ``gaps``: the latest


class EventStream:
    """An iterator of ``StreamEvent``s that survives dropped connections.

    Attributes read while or after iterating: ``task_id`` (the task a task
    stream follows, once named), ``state`` (its latest state),
    ``last_event_id``, ``reconnects``, ``gaps`` (``(after_id,
    first_available_id)`` pairs, each a number or None, the latest ``MAX_GAPS``),
    ``heartbeats``, and ``ended`` (why it ended: ``terminal``, ``capsule-closed``,
    ``closed``).
    """

    # A connection held this long before it dropped is no failure, news or not: a task
    # waiting for input behind a proxy that cuts each connection after a while is followed
    # for good, while a server that drops each resume at once still ends the stream.
    HELD_SECS = 10.0

    # NOTE: ``door`` is the A2AClient that opened the stream (client/agent.py imports
    # this module, so it is not imported back).
    def __init__(self, door, method: str, params: dict, *, frames: bool = True,
                 last_event_id: int | None = None, max_reconnects: int | None = None,
                 reconnect_delay: float | None = None):
        self._door = door
        self.method = method
        self._params = params
        self._frames = frames or method == WATCH
        self.session_stream = method == WATCH
        self.task_id: str | None = params.get("id") if method == SUBSCRIBE else None
        self.state: str | None = None
        self.last_event_id = last_event_id
        self.max_reconnects = door.max_reconnects if max_reconnects is None else max_reconnects
        self.reconnect_delay = (door.reconnect_delay if reconnect_delay is None
                                else reconnect_delay)
        self.reconnects = 0
        self.gaps: list[tuple[int | None, int | None]] = []
        self.heartbeats = 0
        self.ended: str | None = None
        self._response = None
        self._closed = False
        self._gen = self._run()

    def __iter__(self):
        return self

    def __next__(self) -> StreamEvent:
        return next(self._gen)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Stop reading and release the connection; iteration ends."""
        self._closed = True
        if self.ended is None:
            self.ended = "closed"
        response = self._response
        if response is not None:
            response.close()
        try:
            self._gen.close()
        except ValueError:          # the generator is running in another thread
            pass

    # --- the loop ------------------------------------------------------------------------

    def _run(self):
        method, params, resuming, failures = self.method, self._params, False, 0
        drops = 0                   # connections in a row that dropped within HELD_SECS
        while not self._closed:
            try:
                response, request_id = self._door._open_stream(
                    method, params, frames=self._frames, last_event_id=self.last_event_id)
            except (ConnectionFailed, Timeout) as ex:
                if not resuming:
                    raise
                failures += 1
                if failures > self.max_reconnects:
                    raise StreamBroken(f"the stream from {self._where} dropped and "
                                       f"{failures - 1} reconnects failed: {ex}",
                                       url=self._door.url) from ex
                self._pause(failures)
                continue
            except UnsupportedOperation as ex:
                # NOTE: a text only: a server's list there made ``in`` raise TypeError.
                state = ex.metadata.get("state")
                if resuming and self.task_id and isinstance(state, str) and state in TERMINAL:
                    yield self._final_task()
                    return
                raise
            self._response = response
            opened = time.monotonic()
            try:
                for event in self._read(response, request_id):
                    if self._news(event):
                        failures = 0
                    yield event
                    if self._ends(event):
                        return
            except requests.RequestException as ex:
                logger.debug("stream from %s dropped: %s", self._door.url, ex)
            finally:
                self._response = None
                response.close()
            if self._closed:
                return
            # NOTE: the connection ended before the stream did: resume it. One that handed
            # over no news counts as a failure, the snapshot alone included, unless it was
            # held ``HELD_SECS``: a proxy's cut of a quiet stream, however often it comes.
            held = time.monotonic() - opened >= self.HELD_SECS
            failures, drops = (0, 0) if held else (failures, drops + 1)
            failures += 1
            if failures > self.max_reconnects:
                raise StreamBroken(f"the stream from {self._where} dropped "
                                   f"{failures} times without a new event between",
                                   url=self._door.url)
            method, params = self._resume_request()
            resuming = True
            self.reconnects += 1
            # NOTE: the pause grows with the quick drops too: a server that hands over one
            # new-looking event and drops, again and again, is resumed ever more slowly
            # (at most every 5 s), not as fast as it answers.
            self._pause(max(failures, drops))

    @property
    def _where(self) -> str:
        return f"{self._door.noun} at {self._door.url}"

    def _pause(self, failures: int) -> None:
        """Back off before a reconnect: nothing the first time, then doubling, at most 5 s
        (``failures``: the failed attempts, or the quick drops, in a row)."""
        if failures > 1 and self.reconnect_delay > 0:
            time.sleep(min(5.0, self.reconnect_delay * 2 ** (failures - 2)))

    def _resume_request(self) -> tuple[str, dict]:
        if self.session_stream:
            return WATCH, {}
        if self.task_id is None:
            raise StreamBroken(f"the stream from {self._where} dropped before "
                               "it named its task; ListTasks by the message's contextId finds "
                               "it", url=self._door.url)
        return SUBSCRIBE, {"id": self.task_id}

    def _final_task(self) -> StreamEvent:
        task = self._door.get(self.task_id)
        event = StreamEvent("task", task, synthetic=True)
        self.state = event.state
        self.ended = "terminal"
        return event

    def _news(self, event: StreamEvent) -> bool:
        """Whether ``event``, handed over, is progress: a numbered event (one handed over
        already is skipped before), or on a stream that numbered none, an event but a
        snapshot (an unnumbered ``task``) and a murmur frame (``connection-ack``, ``gap``)."""
        if event.id is not None:
            return True
        return self.last_event_id is None and event.kind != "task" and event.frame is None

    def _ends(self, event: StreamEvent) -> bool:
        if event.frame == "capsule-closed":
            self.ended = "capsule-closed"
            return True
        if not self.session_stream and event.task_id == self.task_id and event.terminal:
            self.ended = "terminal"
            return True
        return False

    # --- reading one connection ----------------------------------------------------------

    def _read(self, response, request_id: int):
        try:
            yield from self._events(response, request_id)
        except EventTooLarge as ex:
            raise ProtocolError(f"{self._where} wrote an event longer than "
                                f"{self._door.max_answer_bytes} bytes (max_answer_bytes)",
                                url=self._door.url) from ex

    def _events(self, response, request_id: int):
        after_marker = False        # the last event was a gap or lagged frame
        for sse in iter_events(chunks(response), self._door.max_answer_bytes):
            if sse.comment is not None:
                self.heartbeats += 1
                continue
            if not sse.data:
                continue
            event = self._parse(sse.data, sse.id, request_id)
            if event.id is not None:
                last = self.last_event_id
                if last is not None and event.id <= last:
                    continue                            # replayed: handed over already
                if (self.session_stream and last is not None and event.id > last + 1
                        and not after_marker):
                    self._gap(last, event.id)
                    yield gap_event(event.id, last)
                self.last_event_id = event.id
            if event.frame == "gap":
                self._gap(self.last_event_id, event.fields.get("firstAvailableId"))
            after_marker = event.frame in ("gap", "lagged")
            if self.task_id is None and not self.session_stream and event.task_id:
                self.task_id = event.task_id
            if event.state and (self.session_stream or event.task_id == self.task_id):
                self.state = event.state
            yield event

    def _gap(self, after_id, first_available_id) -> None:
        """Record a gap: its numbers (anything else a server wrote there as None).

        MEMORY: the latest ``MAX_GAPS`` are kept, however many gaps a stream reports.
        """
        self.gaps.append(tuple(n if isinstance(n, int) and not isinstance(n, bool) else None
                               for n in (after_id, first_available_id)))
        if len(self.gaps) > MAX_GAPS:
            del self.gaps[:len(self.gaps) - MAX_GAPS]

    def _parse(self, data: str, sse_id: str | None, request_id: int) -> StreamEvent:
        try:
            body = loads(data, self._door.max_answer_values)
        except TooManyValues as ex:
            raise ProtocolError(f"{self._where} wrote an event of {ex} (max_answer_values)",
                                url=self._door.url) from ex
        except ValueError as ex:
            raise ProtocolError(f"{self._where} wrote an event that is not "
                                f"JSON: {data[:80]!r}", url=self._door.url) from ex
        if not isinstance(body, dict):
            raise ProtocolError(f"{self._where} wrote an event that is not a "
                                "JSON-RPC response", url=self._door.url)
        other = other_request(body, request_id)
        if other:
            raise ProtocolError(f"{self._where} wrote an event with {other} on the stream of "
                                f"request {request_id}: an answer to another request",
                                url=self._door.url)
        if "error" in body and not is_error_object(body["error"]):
            raise ProtocolError(f"{self._where} wrote an error that is not a JSON-RPC error "
                                "object (an integer code and a text message)", url=self._door.url)
        if "error" in body:
            raise RpcError.from_error(body["error"], url=self._door.url)
        result = body.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(f"{self._where} wrote an event without a "
                                "result", url=self._door.url)
        # NOTE: ASCII digits only: int() reads '\u0663' (an Arabic 3), '1_0', ' 9' and '+9'
        # as numbers, and a later event numbered below one of them was skipped as replayed.
        try:
            event_id = int(sse_id) if sse_id and sse_id.isascii() and sse_id.isdigit() \
                else None
        except ValueError:              # more digits than int() reads
            event_id = None
        try:
            return StreamEvent.from_result(result, event_id)
        except ValueError as ex:
            raise ProtocolError(f"{self._where} wrote {ex}", url=self._door.url) from ex

