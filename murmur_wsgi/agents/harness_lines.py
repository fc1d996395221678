"""The harness's lines that reach the agent API: artifacts, usage, and the two endings.

``artifact-add``, ``artifact-chunk``, ``usage``, ``complete`` and ``reject``
give a harness what ``ctx.artifacts``, ``ctx.usage``, ``Completed`` and
``TaskRejected`` give a Python agent (see ``docs/harness.md``). Each handler
takes ``(agent, ctx, proc, msg, line)`` like the others in ``harness.py``;
a line of the wrong shape raises ``HarnessFault``, which fails the task.
"""
from __future__ import annotations

import logging

from murmur_wsgi.agents.base import Completed, TaskRejected
from murmur_wsgi.agents.parts import read_part

logger = logging.getLogger(__name__)

USAGE_COUNTS = ("inputTokens", "outputTokens", "cachedTokens")


class HarnessFault(Exception):
    """The harness broke the protocol or ended badly; ``str()`` is the status message."""


def fault(msg: dict, line: int, what: str) -> HarnessFault:
    return HarnessFault(f"harness: line {line} ({msg['type']}): {what}")


def field(msg: dict, key: str, kind, what: str, line: int, *, required: bool = True):
    """``msg[key]``, which must be a ``kind``; absent is None when not ``required``."""
    value = msg.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise fault(msg, line, f"{key} must be {what}")
    return value


def _part(msg: dict, value, line: int, where: str):
    try:
        return read_part(value)
    except ValueError as ex:
        raise fault(msg, line, f"{where} {ex}") from None


def _extras(msg: dict, line: int) -> dict:
    return {"description": field(msg, "description", str, "a string", line, required=False),
            "metadata": field(msg, "metadata", dict, "an object", line, required=False)}


def on_artifact_add(agent, ctx, proc, msg, line):
    name = field(msg, "name", str, "a string", line)
    given = field(msg, "parts", list, "a non-empty array of parts", line)
    if not given:
        raise fault(msg, line, "parts must be a non-empty array of parts")
    parts = [_part(msg, part, line, f"parts[{i}]") for i, part in enumerate(given)]
    try:
        ctx.artifacts.add(name, parts, **_extras(msg, line))
    except ValueError as ex:
        raise fault(msg, line, str(ex)) from None


def on_artifact_chunk(agent, ctx, proc, msg, line):
    name = field(msg, "name", str, "a string", line)
    last = bool(field(msg, "last", bool, "a boolean", line, required=False))
    part = msg.get("part")
    if part is not None:
        part = _part(msg, part, line, "part")
    elif not last:
        raise fault(msg, line, "part is required unless last is true")
    out = ctx.artifacts.open(name)
    if out is None:
        try:
            out = ctx.artifacts.stream(name, **_extras(msg, line))
        except ValueError as ex:
            raise fault(msg, line, str(ex)) from None
    if part is None:
        out.close()
    else:
        out.write(part, last=last)


def on_usage(agent, ctx, proc, msg, line):
    counts = []
    for key in USAGE_COUNTS:
        value = msg.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fault(msg, line, f"{key} must be a non-negative integer")
        counts.append(value)
    model = field(msg, "model", str, "a non-empty string", line, required=False)
    if model == "":
        raise fault(msg, line, "model must be a non-empty string")
    ctx.usage(*counts, model=model)


def on_complete(agent, ctx, proc, msg, line):
    text = field(msg, "text", str, "a string", line, required=False)
    status = field(msg, "statusMessage", str, "a string", line, required=False)
    return Completed(text=text, status_message=status)


def on_reject(agent, ctx, proc, msg, line):
    message = field(msg, "message", str, "a string", line)
    raise TaskRejected(" ".join(message.split()) or "the harness rejected the task")


HANDLERS = {"artifact-add": on_artifact_add, "artifact-chunk": on_artifact_chunk,
            "usage": on_usage, "complete": on_complete, "reject": on_reject}
