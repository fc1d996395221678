"""Server-Sent Events, read: bytes in, ``SseEvent``s out (the W3C event-stream rules).

The parser is fed chunks as they arrive and never waits for more than the
line it is on, so an event is handed over as soon as its blank line arrives.
A ``:comment`` line (the door's ``:heartbeat``) is handed over too, as an
``SseEvent`` with ``comment`` set, so a reader can tell a quiet stream from
a dead one.

One event (its fields and the line being read) is at most ``max_bytes``: a
server writing a line or an event that never ends raises ``EventTooLarge``
once it passes that, instead of growing the buffer without bound. Each byte is
scanned for a line ending once, however the chunks are cut.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Iterator

logger = logging.getLogger(__name__)

MAX_RETRY_DIGITS = 18           # a longer ``retry:`` (milliseconds) is ignored


@dataclass
class SseEvent:
    """One event: ``data`` joined with newlines, ``id`` as sent (None when unnumbered)."""

    data: str = ""
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    comment: str | None = None


class EventTooLarge(ValueError):
    """An event (or one line) longer than the parser's ``max_bytes``."""


class SseParser:
    """An incremental parser: ``feed(chunk)`` yields each event the chunk completes."""

    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._scanned = 0              # bytes of the buffer known to hold no line ending
        self._pending_cr = False
        self._reset()

    def _reset(self) -> None:
        self._data: list[str] = []
        self._size = 0                 # the fields' bytes read so far
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._has_fields = False

    def feed(self, chunk: bytes) -> Iterator[SseEvent]:
        """Add ``chunk``; yield every event (and comment) it completes."""
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]          # the \n of a \r\n split across two chunks
        self._pending_cr = False
        self._buffer += chunk
        while True:
            cut = _line_end(self._buffer, self._scanned)
            if cut is None:
                self._scanned = len(self._buffer)
                self._check(len(self._buffer))
                return
            end, width = cut
            if width == 1 and self._buffer[end:end + 1] == b"\r" and end + 1 == len(self._buffer):
                self._pending_cr = True   # maybe the first half of \r\n
            self._check(end)
            line = self._buffer[:end].decode("utf-8", errors="replace")
            del self._buffer[:end + width]
            self._scanned = 0
            if not line.startswith(":"):
                self._size += end      # a comment is handed over at once, never held
            event = self._line(line)
            if event is not None:
                yield event

    def _check(self, pending: int) -> None:
        if self.max_bytes is not None and self._size + pending > self.max_bytes:
            raise EventTooLarge(f"an event longer than {self.max_bytes} bytes")

    def _line(self, line: str) -> SseEvent | None:
        if line == "":
            if not self._has_fields:
                self._size = 0
                return None
            event = SseEvent("\n".join(self._data), self._event or "message", self._id,
                             self._retry)
            self._reset()
            return event
        if line.startswith(":"):
            return SseEvent(event="comment", comment=line[1:].lstrip(" "))
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            # NOTE: ASCII digits only (str.isdigit takes '²', which int() refuses), and a
            # few of them: int() refuses more than 4300 digits.
            if value.isascii() and value.isdigit() and len(value) <= MAX_RETRY_DIGITS:
                self._retry = int(value)
        else:
            return None                 # an unknown field is ignored
        self._has_fields = True
        return None


def _line_end(buffer: bytearray, start: int = 0) -> tuple[int, int] | None:
    """Where the first line of ``buffer`` ends (\\r\\n, \\n or \\r), and the ending's width.

    ``start``: the bytes before it are known to hold no line ending.
    """
    lf = buffer.find(b"\n", start)
    cr = buffer.find(b"\r", start)
    if cr == -1 and lf == -1:
        return None
    if cr == -1 or (lf != -1 and lf < cr):
        return lf, 1
    if lf == cr + 1:
        return cr, 2
    return cr, 1


def iter_events(chunks: Iterable[bytes], max_bytes: int | None = None) -> Iterator[SseEvent]:
    """Every event (and comment) in ``chunks``; a trailing unterminated event is dropped."""
    parser = SseParser(max_bytes)
    for chunk in chunks:
        if chunk:
            yield from parser.feed(chunk)
