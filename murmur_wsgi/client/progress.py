"""A one-line spinner for a terminal: the task's latest status while a command waits.

It draws only when its stream is a terminal; piped, it writes nothing at all. The
status a server wrote is shown ``printable``: its control characters escaped, and what
the stream's encoding cannot hold as backslash escapes.
"""
from __future__ import annotations

import logging
import shutil

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
