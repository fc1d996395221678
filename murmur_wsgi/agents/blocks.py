"""The fenced blocks an agent's text is made of: a data part as a ```data fence.

Both applications render a message's data parts this way for the agent's
``ctx.text``: the value pretty-printed, in a fence labelled ``data`` (with its
media type and filename), which nothing in the value can close.
"""
from __future__ import annotations

import json
import logging
import re

from murmur_wsgi.turns import turn
from murmur_wsgi.wire.encode import utf8_bytes

logger = logging.getLogger(__name__)

_LABEL_UNSAFE = re.compile(r"[\s`=]")          # whitespace, backticks and = become _


def fence(label: str, content: str) -> str:
    """Fence ``content`` so that nothing in it can close the fence."""
    ticks = "`" * max(3, _longest_backticks(content) + 1)
    return f"{ticks}{label}\n{content}\n{ticks}"


def _longest_backticks(content: str) -> int:
    """The length of the longest run of backticks in ``content`` (0: none).

    PERF: a few substring searches (C, about 30 µs a MB), the run's length found by
    doubling then halving; a regex's findall over a data part's pretty-printed text (up to
    ``limits.data_text_bytes``) held the worker 20 ms a MB, and it gives no turns."""
    if "`" not in content:
        return 0
    found, missing = 1, 2               # a run of ``found`` is there, none of ``missing``
    while "`" * missing in content:
        found, missing = missing, missing * 2
    while missing - found > 1:
        middle = (found + missing) // 2
        if "`" * middle in content:
            found = middle
        else:
            missing = middle
    return found


def label_value(value: str) -> str:
    """Make a value safe for a fence's opening line: no whitespace, ` or =."""
    return _LABEL_UNSAFE.sub("_", value)


_PRETTY = json.JSONEncoder(indent=2, ensure_ascii=False)
TURN_CHUNKS = 1023          # the clock is read once every 1024 chunks (about 1 ms of them)


class OverBudget(Exception):
    """A rendering passed the bytes it was allowed (``index``: the part that passed them,
    when ``parts_text`` rendered it)."""

    def __init__(self, index: int | None = None):
        super().__init__(index)
        self.index = index


def pretty_json(value, budget: int | None = None) -> str:
    """``value`` as ``json.dumps(value, indent=2, ensure_ascii=False)`` writes it.

    With a ``budget``, stop as soon as the text passes that many UTF-8 bytes
    (``OverBudget``): indentation makes deep data grow up to ~60 times, and the
    pure-Python indenting encoder writes about 12-50 MiB a second, so it gives the
    worker's other requests their turn every 10 ms (``murmur_wsgi/turns.py``): a message of
    a 1 MB data part was 0.4 s of it, every other request of the worker waiting.
    """
    if budget is None:
        return _PRETTY.encode(value)
    chunks, used, ends = [], 0, 0.0
    for chunk in _PRETTY.iterencode(value):
        used += utf8_bytes(chunk)
        if used > budget:
            raise OverBudget()
        chunks.append(chunk)
        if not len(chunks) & TURN_CHUNKS:
            ends = turn(ends)
    return "".join(chunks)


def data_block(value, media_type: str | None, filename: str | None,
               budget: int | None = None) -> str:
    """Render a data part: its value pretty-printed in a fence labelled data."""
    label = "data"
    if media_type:
        label += f" media-type={label_value(media_type)}"
    if filename:
        label += f" filename={label_value(filename)}"
    return fence(label, pretty_json(value, budget))


def parts_text(parts, budget: int | None = None) -> str:
    """What an agent reads of a message's parts (``("text", text)`` and ``("data", value,
    media type, filename)``; others are left out): each text as it is, each data part in
    its fence, joined by newlines. The data parts' text makes at most ``budget`` UTF-8
    bytes (None: unbounded), else ``OverBudget`` naming the part that passed it."""
    pieces = []
    for i, part in enumerate(parts):
        if part[0] == "text":
            pieces.append(part[1])
        elif part[0] == "data":
            try:
                block = data_block(part[1], part[2], part[3], budget)
            except OverBudget:
                raise OverBudget(i) from None
            if budget is not None:
                budget -= utf8_bytes(block)
            pieces.append(block)
    return "\n".join(pieces)
