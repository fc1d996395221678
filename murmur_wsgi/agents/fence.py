"""The untrusted fence: how an untrusted task's text reaches its agent, and how it is unwrapped.

The door wraps everything an untrusted task's agent reads (``tasks/render.py``)
in ``<untrusted-content source=…>`` … ``</untrusted-content>``, the markers
inside neutralised so nothing in the content can close the fence; an agent
that wants the content alone calls ``strip_untrusted_fence(ctx.text)``.
"""
from __future__ import annotations

import logging
import re

logger = logging.getLogger(__name__)

FENCE_OPEN = "<untrusted-content source="
FENCE_CLOSE = "</untrusted-content>"
NEUTRALISED_INFIX = "!MURMUR-NEUTRALISED!"

# A marker is "<" then an optional "/" then the marker name, case-insensitive over ASCII.
_MARKER = re.compile(r"<(?=/?untrusted-content)", re.IGNORECASE | re.ASCII)


def neutralise_markers(content: str) -> str:
    """Insert the neutralised infix after the ``<`` of every fence marker."""
    if "<" not in content:
        return content
    return _MARKER.sub("<" + NEUTRALISED_INFIX, content)


def wrap_untrusted(source: str, content: str) -> str:
    """Wrap ``content`` in the untrusted fence naming ``source``."""
    name = neutralise_markers(source).replace(">", "_").replace("\n", " ").replace("\r", " ")
    return f"{FENCE_OPEN}{name}>\n{neutralise_markers(content)}\n{FENCE_CLOSE}"


def strip_untrusted_fence(text: str) -> str:
    """Return what an untrusted fence wraps (its first and last lines removed).

    Text without the fence is returned as it is. Markers inside stay neutralised.
    """
    if not (text.startswith(FENCE_OPEN) and text.endswith("\n" + FENCE_CLOSE)):
        return text
    first_break = text.find("\n")
    if text[first_break - 1] != ">":
        return text
    return text[first_break + 1:len(text) - len(FENCE_CLOSE) - 1]
