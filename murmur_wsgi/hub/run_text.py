"""A run's streamed text as the run keeps it (``Run.tokens``): the pieces it stored as the
events that carry them (``Carried``), the rest as its tokens (texts).

The run needs its whole text only now and then: its end, to tell whether the answer is
the text it streamed (``made_of``), or to keep what a CANCELED or FAILED run streamed; a
reader of its own stream that fell behind (hub/live.py). Each reads the stored pieces
back from their events (``joined``).

MEMORY: a stored piece is its event's text and where the piece's JSON string starts in
it, not a text of its own: the memory store's log holds that same event, and on Redis the
event is about the size of its text. Kept as texts, a long stream's text was one more copy
in the worker for as long as the run lasted (3.4 MB of 300,000 chunks of the demo's
``/stream``), beside the stored events.
"""
from __future__ import annotations

from json.decoder import scanstring

# Where a piece's text starts in its event: the answer's first part's JSON string. NOTE:
# found as written outside any string (a quote inside one is escaped), so never in the ids
# before it.
_TEXT = '"parts":[{"text":"'


class Carried:
    """A stored piece of a run's streamed text, read from its event (``artifact_update`` of
    one text part): ``len()`` its characters, ``text()`` the piece (decoded anew)."""

    __slots__ = ("payload", "at", "chars")

    def __init__(self, payload: str, chars: int):
        self.payload = payload
        self.at = payload.index(_TEXT) + len(_TEXT)
        self.chars = chars

    def __len__(self) -> int:
        return self.chars

    def text(self) -> str:
        return scanstring(self.payload, self.at)[0]


def text_of(part: str | Carried) -> str:
    return part if type(part) is str else part.text()


def joined(parts: list) -> str:
    """The run's streamed text whole."""
    return "".join(map(text_of, parts))


def made_of(parts: list, text: str) -> bool:
    """Whether ``parts`` joined are ``text``, compared without joining them."""
    if sum(map(len, parts)) != len(text):
        return False
    at = 0
    for part in parts:
        part = text_of(part)
        if not text.startswith(part, at):
            return False
        at += len(part)
    return True
