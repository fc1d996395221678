"""A one-line spinner for a terminal: the task's latest status while a command waits.

It draws only when its stream is a terminal; piped, it writes nothing at all. The
status a server wrote is shown ``printable``: its control characters escaped, and what
the stream's encoding cannot hold as backslash escapes.
"""
from __future__ import annotations

import logging
import shutil
import threading

from murmur_wsgi.client.render import printable, write

logger = logging.getLogger(__name__)

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
ASCII_FRAMES = "|/-\\"


class Spinner:
    """``update(text)`` sets the line, ``tick()`` turns the wheel, ``clear()`` erases it."""

    def __init__(self, stream, enabled: bool | None = None):
        self.stream = stream
        if enabled is None:
            isatty = getattr(stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        encoding = (getattr(stream, "encoding", None) or "ascii").lower()
        self.frames = FRAMES if "utf" in encoding else ASCII_FRAMES
        self.text = ""
        self._turn = 0
        self._drawn = False

    def update(self, text: str) -> None:
        self.text = printable(" ".join(text.split()))
        self.tick()

    def tick(self) -> None:
        if not self.enabled:
            return
        width = shutil.get_terminal_size((80, 24)).columns
        frame = self.frames[self._turn % len(self.frames)]
        self._turn += 1
        line = f"{frame} {self.text}"[: max(10, width - 1)]
        write(self.stream, "\r" + line + "\x1b[K")
        self._drawn = True

    def clear(self) -> None:
        if self.enabled and self._drawn:
            write(self.stream, "\r\x1b[K")
            self._drawn = False


EMPTY = object()                # what ``Latest.take`` returns when nothing came in time


class Latest:
    """One slot from a reader thread to the spinner: ``put`` replaces what was not taken
    yet, ``take`` returns it once, or ``EMPTY`` after its timeout.

    MEMORY: the spinner shows only the latest status, so a reader faster than the terminal
    holds one item, not every event it read.

    Concurrency: one thread puts, another takes; a ``threading.Condition`` guards the slot.
    """

    def __init__(self):
        self._ready = threading.Condition()
        self._item = EMPTY

    def put(self, item) -> None:
        with self._ready:
            self._item = item
            self._ready.notify()

    def take(self, timeout: float):
        with self._ready:
            self._ready.wait_for(lambda: self._item is not EMPTY, timeout)
            item, self._item = self._item, EMPTY
            return item
